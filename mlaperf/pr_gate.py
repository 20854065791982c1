"""``python -m mlaperf.pr_gate``: may this pull request's head run on the GPU runner? (standard library only)

The ``gate`` job of ``.github/workflows/pr-benchmarks.yml`` runs it from the default branch on a
GitHub-hosted runner, before any pull-request code runs anywhere. It fails closed:

- the pull request is found through the API from the ``workflow_run`` payload and matched on the head SHA;
- a fork's head goes on only when a maintainer (write access, not the pull request's author) approved **that
  commit** in a review (GitHub records the commit a review was submitted on) and the label (``run-benchmarks``)
  was added after the head was last pushed (the first workflow run for that SHA since the branch last showed
  another SHA: a head pushed, replaced and pushed again counts from its latest push); the review binds the
  approval to the SHA, which push times alone cannot (a head that comes back by a plain push leaves no event);
  a label without such a review, or older than the push, is removed, with the reason;
- a bot's pull request from a branch of this repository (Dependabot, Renovate) is gated as a fork's: the new
  code it runs is upstream packages' that nobody here has read;
- one label approves one run: the gate removes the label when it lets a fork's head run (a removal GitHub
  refuses means another run took it: this one does not run), so each new head needs a new label;
- a fork's environment (``gpu-benchmarks-fork``) must exist with at least one required reviewer: GitHub
  creates a missing environment without protection, so the gate stops with an error naming the setting;
- the job summary shows the pull request, head SHA, base SHA and fork: what the reviewer approves.

``--container``: the benchmark job runs in a fresh container of the image ``runner-image.yml`` built from
this default-branch commit (``settings.pr_contract.runner_image``); without it, on the runner itself.

Writes ``run``, ``number``, ``base_sha``, ``head_sha``, ``fork``, ``environment`` and ``image`` (the
container's image, "" on the runner) to ``$GITHUB_OUTPUT`` and sets the pending status. Exit status: 0
decided (run or not), 1 a setting is unsafe (error printed), 2 bad input (the event payload), 3 a GitHub API
error.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlaperf.github import GitHub, GitHubError
from settings import exits
from settings.pr_contract import (
    CONTEXT,
    FORK_CONTEXT,
    FORK_ENVIRONMENT,
    LABEL,
    SAME_ENVIRONMENT,
    SHA,
    run_url,
    runner_image,
)


class GateError(Exception):
    """A setting or an input makes running unsafe: the message names it."""


@dataclass
class Decision:
    run: bool
    reason: str
    number: int = 0
    base_sha: str = ""
    head_sha: str = ""
    fork: bool = False
    label_removed: bool = False
    approver: str = ""  # the maintainer whose review approved a fork's head

    @property
    def environment(self) -> str:
        return FORK_ENVIRONMENT if self.fork else SAME_ENVIRONMENT


def required_reviewers(client: GitHub, name: str) -> int:
    """How many required reviewers environment ``name`` has; GateError when it is missing or has none."""
    setting = f"Settings > Environments > {name} > Required reviewers"
    reviewers = client.environment_reviewers(name)
    if reviewers is None:
        raise GateError(f"environment {name} does not exist; GitHub would create it without protection. "
                        f"Create it with at least one reviewer ({setting})")  # fmt: skip
    if not reviewers.count:
        raise GateError(f"environment {name} has no required reviewer, so a fork's run would start unapproved: "
                        f"add maintainers in {setting}")  # fmt: skip
    return reviewers.count


# The pull request's events that move its head without a commit of its own: a head that comes back after one was
# pushed again, whether or not that push started a workflow run.
HEAD_MOVED = ("head_ref_force_pushed", "head_ref_deleted", "head_ref_restored")


def label_added_at(events: list[dict[str, Any]], label: str) -> str | None:
    """When ``label`` was last added, among a pull request's issue events (ISO time), None if never."""
    times = [e.get("created_at") or "" for e in events
             if e.get("event") == "labeled" and (e.get("label") or {}).get("name") == label]  # fmt: skip
    return max(times) if times else None


def head_moved_at(events: list[dict[str, Any]]) -> str:
    """When the head last moved by a force push or the branch's deletion or restoring ("" never)."""
    return max((e.get("created_at") or "" for e in events if e.get("event") in HEAD_MOVED), default="")


def pushed_at(client: GitHub, head_sha: str, branch: str, fork_repo: str) -> str | None:
    """When the head was last pushed (server time): its first workflow run after the branch's latest run of
    another SHA. Not its first run ever: push B, force-push A, label, push B again must count B from the
    last push (where A's push started no run, ``[skip ci]``, the force pushes date it: ``head_moved_at``)."""
    query = urllib.parse.urlencode({"branch": branch, "event": "pull_request"})
    runs = [r for r in client.pages(f"/actions/runs?{query}", key="workflow_runs", whole=True)
            if ((r.get("head_repository") or {}).get("full_name") or fork_repo) == fork_repo]  # fmt: skip
    others = [r.get("created_at") or "" for r in runs if r.get("head_sha") != head_sha]
    since = max(others, default="")
    times = [t for r in runs if r.get("head_sha") == head_sha and (t := r.get("created_at") or "") > since]
    return min(times) if times else None


WRITERS = ("admin", "write")  # the collaborator permissions that may approve a fork's head (maintain reads "write")


def approved_by(client: GitHub, number: int, head_sha: str, author: str) -> str | None:
    """A maintainer who approved exactly ``head_sha`` in a review of pull request ``number``: a review of state
    APPROVED submitted on that commit by someone with write access other than the author (who can leave a review
    on their own pull request, and may be a collaborator), and not taken back by a later review of theirs on it
    (changes requested; a dismissed approval reads DISMISSED). None when nobody did."""
    latest: dict[str, str] = {}  # each reviewer's last verdict on this commit (GitHub lists reviews oldest first)
    for r in client.pages(f"/pulls/{number}/reviews", whole=True):
        if r.get("commit_id") == head_sha and r.get("state") in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED"):
            latest[str((r.get("user") or {}).get("login") or "")] = str(r["state"])
    return next((who for who, state in latest.items()
                 if state == "APPROVED" and who and who != author and client.permission(who) in WRITERS), None)


def take_label(client: GitHub, number: int, label: str) -> bool:
    """Remove the approval label; False when GitHub says it is gone already (another run took it)."""
    try:
        client.remove_label(number, label)
    except GitHubError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def untrusted_origin(pr: dict[str, Any], head_repo: str, repository: str) -> str | None:
    """Why a pull request's code is run as a fork's (label, reviewer, the fork's status context), or None.

    A fork's, and also a bot's branch in this repository (Dependabot, Renovate): its new code is upstream
    packages' that nobody here has read, so it waits for a maintainer as a stranger's does."""
    if head_repo != repository:
        return "a fork"
    user = pr.get("user") or {}
    if user.get("type") == "Bot":
        return f"a bot ({user.get('login') or 'unknown'})"
    return None


def decide(client: GitHub, payload: dict[str, Any], label: str = LABEL) -> Decision:
    """The gate's decision for a ``workflow_run`` event payload."""
    run = payload.get("workflow_run") or {}
    head_sha = str(run.get("head_sha") or "")
    if not SHA.fullmatch(head_sha):
        raise ValueError("workflow_run.head_sha is not a commit hash")
    owner = ((run.get("head_repository") or {}).get("owner") or {}).get("login") or ""
    branch = run.get("head_branch") or ""
    head = urllib.parse.quote(f"{owner}:{branch}", safe="")  # a fork names its branch: never raw in a query
    pulls = client.pages(f"/pulls?state=open&head={head}")
    pr = next((p for p in pulls if (p.get("head") or {}).get("sha") == head_sha), None)
    if pr is None:
        return Decision(False, f"no open pull request has head {head_sha} any more; nothing to benchmark")
    number, base_sha = int(pr["number"]), str(pr["base"]["sha"])
    fork_repo = str((pr["head"].get("repo") or {}).get("full_name") or "")
    origin = untrusted_origin(pr, fork_repo, client.repository)
    fork = origin is not None
    decision = Decision(False, "", number, base_sha, head_sha, fork)
    if pr.get("draft"):
        decision.reason = f"#{number} is a draft; benchmarks start when it is ready for review"
        return decision
    if fork:
        required_reviewers(client, FORK_ENVIRONMENT)
        if not any(x.get("name") == label for x in pr.get("labels") or []):
            decision.reason = (f"#{number} comes from {origin}: a maintainer approves head {head_sha[:12]} in a "
                               f"review, adds the label {label!r}, then approves the run of environment "
                               f"{FORK_ENVIRONMENT}")  # fmt: skip
            return decision
        author = str((pr.get("user") or {}).get("login") or "")
        approver = approved_by(client, number, head_sha, author)
        if approver is None:
            decision.label_removed = take_label(client, number, label)
            decision.reason = (f"#{number}: no one with write access approved head {head_sha[:12]} in a review "
                               f"(a review of another commit, or the author's, does not count), so label {label!r} "
                               "was removed: a maintainer reads this head, approves it in a review, then adds the "
                               "label again")  # fmt: skip
            return decision
        events = client.pages(f"/issues/{number}/events", whole=True)
        labelled = label_added_at(events, label)
        # The head's last push: its runs', or a force push or branch event after them (a push with no run).
        pushed = pushed_at(client, head_sha, branch, fork_repo)
        pushed = pushed and max(pushed, head_moved_at(events))
        if labelled is None or pushed is None or labelled <= pushed:
            decision.label_removed = take_label(client, number, label)
            decision.reason = (f"#{number}: label {label!r} (added {labelled or 'at an unknown time'}) is older than "
                               f"the push of head {head_sha[:12]} ({pushed or 'unknown'}), so it approved an earlier "
                               "commit; it was removed: a maintainer reviews this head and adds it again")  # fmt: skip
            return decision
        # One label, one run: taken now, so a later push (even of a SHA seen before) needs a new label.
        if not take_label(client, number, label):
            decision.reason = f"#{number}: label {label!r} was already taken by another run; add it again to rerun"
            return decision
        decision.label_removed = True
        decision.approver = approver
    decision.run = True
    decision.reason = f"#{number} head {head_sha[:12]}: benchmarking" + (
        f" after approval (label {label!r} taken: the next head needs a new one)" if fork else "")
    return decision


def summary(decision: Decision, repository: str) -> str:
    """The job summary: what a reviewer approves when the environment asks."""
    rows = [("pull request", f"#{decision.number}" if decision.number else "-"),
            ("head SHA (what runs)", f"`{decision.head_sha}`" if decision.head_sha else "-"),
            ("base SHA", f"`{decision.base_sha}`" if decision.base_sha else "-"),
            ("fork", "yes: approve only after reading this head's diff" if decision.fork else f"no ({repository})"),
            ("head approved in a review by", decision.approver or "-"),
            ("runs on the GPU runner", "yes" if decision.run else "no")]  # fmt: skip
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return f"### mlaperf PR gate\n\n| | |\n| --- | --- |\n{table}\n\n{decision.reason}\n"


def _append(var: str, text: str) -> None:
    if os.environ.get(var):
        with open(os.environ[var], "a", encoding="utf-8") as out:
            out.write(text)


def _default_branch_sha() -> str:
    """The commit this workflow file came from (``GITHUB_SHA`` of a ``workflow_run``): the image's tag."""
    sha = os.environ.get("GITHUB_SHA", "")
    if not SHA.fullmatch(sha):
        raise ValueError("GITHUB_SHA is not a commit hash (the container's image is tagged with it)")
    return sha


def main() -> int:
    args = sys.argv[1:]
    if args not in ([], ["--container"]):
        print(__doc__)
        return exits.OK if args[0] in ("-h", "--help") else exits.USAGE
    try:
        client = GitHub.from_env()
        payload = json.loads(Path(os.environ["GITHUB_EVENT_PATH"]).read_text())
        image = runner_image(client.repository, _default_branch_sha()) if args else ""
        decision = decide(client, payload, os.environ.get("LABEL") or LABEL)
    except (ValueError, KeyError, OSError) as exc:
        print(f"::error::pr_gate: bad input: {exc}")
        return exits.USAGE
    except GateError as exc:
        print(f"::error::pr_gate: {exc}")
        return exits.FOUND
    except GitHubError as exc:
        print(f"::error::pr_gate: GitHub API: {exc}")
        return exits.INTERNAL
    _append("GITHUB_STEP_SUMMARY", summary(decision, client.repository))
    outputs = {"run": str(decision.run).lower(), "number": str(decision.number), "base_sha": decision.base_sha,
               "head_sha": decision.head_sha, "fork": str(decision.fork).lower(), "environment": decision.environment,
               "image": image}
    _append("GITHUB_OUTPUT", "".join(f"{k}={v}\n" for k, v in outputs.items()))
    print(("::notice::" if not decision.run else "") + decision.reason)
    if decision.run:
        try:
            client.create_status(decision.head_sha, "pending",
                                 "fork code, unverified: waiting for approval" if decision.fork else "benchmarking",
                                 FORK_CONTEXT if decision.fork else CONTEXT, run_url())  # fmt: skip
        except GitHubError as exc:
            print(f"::error::pr_gate: GitHub API: {exc}")
            return exits.INTERNAL
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
