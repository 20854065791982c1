"""The hosted jobs that hold a write token, against the fake GitHub API over real HTTP: the gate fails closed
(no reviewer, stale label), the poster edits only its own sticky comment and sets only the renderer's
status, and `scripts/check-repo-settings` names each unsafe setting. The gate and the poster run with
`python -S` (no site-packages): they need nothing installed, as on the GitHub-hosted runner."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scratch import ROOT, FakeGitHub

from regressions.report import MARKER
from settings.pr_contract import (
    BOT_LOGIN,
    COMMENT_DIGEST_ENV,
    CONTEXT,
    FORK_CONTEXT,
    RENDER_JOB,
    STATUS_DIGEST_ENV,
    repository_url,
    run_url,
    runner_image,
)

HEAD, BASE = "c" * 40, "d" * 40
Server = Callable[[dict[str, Any]], FakeGitHub]
API = "/repos/acme/kernels"
REVIEWERS = {"protection_rules": [{"type": "required_reviewers", "prevent_self_review": True,
                                   "reviewers": [{"type": "User", "reviewer": {"login": "maint"}}]}]}  # fmt: skip


def pull(fork: bool = True, labels: tuple[str, ...] = ("run-benchmarks",), **over: Any) -> dict[str, Any]:
    owner = "mallory" if fork else "acme"
    return {"number": 7, "draft": False, "labels": [{"name": n} for n in labels], "base": {"sha": BASE},
            "user": {"login": "mallory" if fork else "alice", "type": "User"},
            "head": {"sha": HEAD, "ref": "topic", "owner": owner, "repo": {"full_name": f"{owner}/kernels"}},
            **over}  # fmt: skip


def review(sha: str = HEAD, login: str = "maint", state: str = "APPROVED") -> dict[str, Any]:
    return {"user": {"login": login}, "commit_id": sha, "state": state, "submitted_at": "2026-12-01T10:04:00Z"}


def seed(pulls: list[dict[str, Any]], *, labelled: str = "2026-12-01T10:05:00Z", pushed: str = "2026-12-01T10:00:00Z",
         environment: dict[str, Any] | None = REVIEWERS, reviews: tuple[str, ...] = (HEAD,)
         ) -> dict[str, Any]:  # fmt: skip
    get: dict[str, Any] = {
        f"{API}/pulls/7/reviews": [review(sha) for sha in reviews],
        f"{API}/collaborators/maint/permission": {"permission": "write"},
        f"{API}/collaborators/mallory/permission": {"permission": "write"},  # a collaborator with a fork
        f"{API}/collaborators/reader/permission": {"permission": "read"},
        f"{API}/issues/7/events": [{"event": "labeled", "label": {"name": "run-benchmarks"}, "created_at": labelled}],
        f"{API}/actions/runs": {"workflow_runs": [
            {"head_sha": HEAD, "created_at": pushed}, {"head_sha": HEAD, "created_at": labelled},
            {"head_sha": "e" * 40, "created_at": "2026-11-01T00:00:00Z"}]},
    }  # fmt: skip
    if environment is not None:
        get[f"{API}/environments/gpu-benchmarks-fork"] = environment
    return {"pulls": pulls, "get": get}


def gate(tmp_path: Path, github: FakeGitHub, owner: str = "mallory", branch: str = "topic", args: tuple[str, ...] = (),
         extra: dict[str, str] | None = None) -> tuple[int, str, dict[str, str], str]:  # fmt: skip
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": HEAD, "head_branch": branch,
                                                  "head_repository": {"owner": {"login": owner}}}}))  # fmt: skip
    out, summary = tmp_path / "output", tmp_path / "summary.md"
    out.write_text("")
    summary.write_text("")
    env = {**os.environ, **github.env(), "GITHUB_EVENT_PATH": str(event), "GITHUB_OUTPUT": str(out),
           "GITHUB_STEP_SUMMARY": str(summary), **(extra or {})}  # fmt: skip
    proc = subprocess.run([sys.executable, "-S", "-m", "mlaperf.pr_gate", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    outputs = dict(line.split("=", 1) for line in out.read_text().splitlines())
    return proc.returncode, proc.stdout + proc.stderr, outputs, summary.read_text()


def test_fork_with_a_fresh_label_runs_and_shows_what_is_approved(tmp_path: Path, github_server: Server) -> None:
    github = github_server(seed([pull()]))
    rc, log, out, summary = gate(tmp_path, github)
    assert rc == 0, log
    assert out == {"run": "true", "number": "7", "base_sha": BASE, "head_sha": HEAD, "fork": "true",
                   "environment": "gpu-benchmarks-fork", "image": ""}  # fmt: skip
    assert "| pull request | #7 |" in summary and f"`{HEAD}`" in summary and "| fork | yes" in summary
    [status] = github.state()["statuses"]
    assert (status["sha"], status["state"], status["context"]) == (HEAD, "pending", FORK_CONTEXT)
    assert "unverified" in status["description"]
    # One label, one run: the gate took it, so the same head's next run (a re-push of it) waits for a new one.
    assert github.state()["pulls"][0]["labels"] == [] and "needs a new one" in log
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "false" and "comes from a fork" in log, log


def test_a_head_pushed_again_after_the_label_does_not_ride_on_it(tmp_path: Path, github_server: Server) -> None:
    """Push B (hostile), force-push A (benign), a maintainer labels A, force-push B again: B's first run is
    older than the label, but its latest push is not, so B does not run and the label goes."""
    bad, good = HEAD, "a" * 40
    runs = [{"head_sha": bad, "created_at": "2026-12-01T09:00:00Z"},  # B pushed, unlabelled
            {"head_sha": good, "created_at": "2026-12-01T10:00:00Z"},  # A force-pushed
            {"head_sha": good, "created_at": "2026-12-01T12:00:01Z"},  # the label's own run, on A
            {"head_sha": bad, "created_at": "2026-12-01T13:00:00Z"}]  # B force-pushed back  # fmt: skip
    state = seed([pull()], labelled="2026-12-01T12:00:00Z")
    state["get"][f"{API}/actions/runs"] = {"workflow_runs": runs[::-1]}  # newest first, as GitHub lists them
    github = github_server(state)
    rc, log, out, summary = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "false", log
    assert "older than the push" in log and "2026-12-01T13:00:00Z" in log and "it was removed" in summary
    assert github.state()["pulls"][0]["labels"] == [] and github.state()["statuses"] == []
    # Runs of another fork's branch of the same name do not move this head's push.
    other, mine = {"full_name": "x/kernels"}, {"full_name": "mallory/kernels"}
    runs = [{"head_sha": good, "created_at": "2026-12-01T11:00:00Z", "head_repository": other},
            {"head_sha": bad, "created_at": "2026-12-01T09:00:00Z", "head_repository": mine}]  # fmt: skip
    state["get"][f"{API}/actions/runs"] = {"workflow_runs": runs}
    github = github_server(state)
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "true", log


def test_a_head_back_after_a_push_without_a_run_does_not_ride_on_it(tmp_path: Path, github_server: Server) -> None:
    """As above, but A's message says ``[skip ci]``: A's push and its label start no run, so B's runs alone dated
    B's push from the first one, older than the label, and B ran on A's label (found by a security review). The
    force pushes in the pull request's events date it now."""
    bad = HEAD
    runs = [{"head_sha": bad, "created_at": "2026-12-01T13:00:02Z"},  # B force-pushed back
            {"head_sha": bad, "created_at": "2026-12-01T09:00:00Z"}]  # B pushed, unlabelled; newest first  # fmt: skip
    state = seed([pull()], labelled="2026-12-01T12:00:00Z")
    state["get"][f"{API}/actions/runs"] = {"workflow_runs": runs}
    state["get"][f"{API}/issues/7/events"] += [{"event": "head_ref_force_pushed", "created_at": "2026-12-01T10:00:00Z"},
                                               {"event": "head_ref_force_pushed", "created_at": "2026-12-01T13:00:00Z"}]
    github = github_server(state)
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "false" and "(2026-12-01T13:00:00Z)" in log, log  # the force push dates it
    assert github.state()["pulls"][0]["labels"] == []
    # A force push whose run came in the same second, then the label: B runs (the second is no reason to refuse).
    state["get"][f"{API}/actions/runs"] = {"workflow_runs": [{"head_sha": bad, "created_at": "2026-12-01T13:00:00Z"}]}
    state["get"][f"{API}/issues/7/events"] = [{"event": "head_ref_force_pushed", "created_at": "2026-12-01T13:00:00Z"},
                                              {"event": "labeled", "label": {"name": "run-benchmarks"},
                                               "created_at": "2026-12-01T13:05:00Z"}]  # fmt: skip
    rc, log, out, _ = gate(tmp_path, github_server(state))
    assert rc == 0 and out["run"] == "true", log
    # A force push before the label (B's last push older than it) leaves the label to B.
    state["get"][f"{API}/issues/7/events"] = [{"event": "head_ref_force_pushed", "created_at": "2026-12-01T08:59:00Z"},
                                              {"event": "labeled", "label": {"name": "run-benchmarks"},
                                               "created_at": "2026-12-01T12:00:00Z"}]  # fmt: skip
    state["get"][f"{API}/actions/runs"] = {"workflow_runs": runs[1:]}
    github = github_server(state)
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "true", log


def test_a_label_older_than_the_push_is_removed(tmp_path: Path, github_server: Server) -> None:
    github = github_server(seed([pull()], labelled="2026-12-01T09:00:00Z"))
    rc, log, out, summary = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "false", log
    assert github.state()["pulls"][0]["labels"] == [] and github.state()["statuses"] == []
    assert "older than the push" in log and "it was removed" in summary


def test_a_label_approves_only_the_commit_a_maintainer_approved(tmp_path: Path, github_server: Server) -> None:
    """Push B (hostile) so it gets a run, force-push A (benign, ``[skip ci]``: no run), a maintainer reads A and
    labels it, then B comes back by a plain push (a child of A: no event). B's push is dated by its first run, older
    than the label, so the times alone let B run on A's label (found by a security review); the label counts only
    with a review approving B itself."""
    bad, good = HEAD, "a" * 40
    state = seed([pull()], labelled="2026-12-01T12:00:00Z", reviews=(good,))
    state["get"][f"{API}/actions/runs"] = {"workflow_runs": [{"head_sha": bad, "created_at": "2026-12-01T13:00:00Z"},
                                                             {"head_sha": bad, "created_at": "2026-12-01T09:00:00Z"}]}
    state["get"][f"{API}/issues/7/events"] += [{"event": "head_ref_force_pushed", "created_at": "2026-12-01T10:00:00Z"}]
    github = github_server(state)
    rc, log, out, summary = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "false" and f"approved head {bad[:12]} in a review" in log, log
    assert github.state()["pulls"][0]["labels"] == [] and github.state()["statuses"] == []
    # Not by the author (a collaborator can review their own pull request), nor with read access, nor a comment.
    for reviews in ([review(login="mallory")], [review(login="reader")], [review(state="COMMENTED")],
                    [review(state="CHANGES_REQUESTED")], [review(login="stranger")]):
        state["get"][f"{API}/pulls/7/reviews"] = reviews
        rc, log, out, _ = gate(tmp_path, github_server(state))
        assert rc == 0 and out["run"] == "false" and "no one with write access" in log, (reviews, log)
    # An approval taken back by the same maintainer's later review of B (changes requested, or dismissed) is none.
    for later in ("CHANGES_REQUESTED", "DISMISSED"):
        state["get"][f"{API}/pulls/7/reviews"] = [review(), review(state=later)]
        rc, log, out, _ = gate(tmp_path, github_server(state))
        assert rc == 0 and out["run"] == "false" and "no one with write access" in log, (later, log)
    # A maintainer's approval of B (among others') lets B run, and the summary names who approved it.
    state["get"][f"{API}/pulls/7/reviews"] = [review(good), review(login="reader"), review()]
    rc, log, out, summary = gate(tmp_path, github_server(state))
    assert rc == 0 and out["run"] == "true" and "| head approved in a review by | maint |" in summary, log


def test_a_list_past_the_page_cap_fails_closed(tmp_path: Path, github_server: Server) -> None:
    """2,100 events (the author can add them: title edits) would hide the newest from a listing cut at 2,000, where
    GitHub lists the oldest first: the gate decides on the whole list or not at all."""
    state = seed([pull()])
    state["get"][f"{API}/issues/7/events"] = [{"event": "renamed", "created_at": "2026-12-01T10:06:00Z"}] * 2100
    github = github_server(state)
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 3 and "more than 2,000 items" in log and out == {}, log
    assert github.state()["statuses"] == []
    # GitHub lists at most 1,000 runs of a filtered /actions/runs, the rest silently left out: its total_count says.
    state = seed([pull()])
    state["get"][f"{API}/actions/runs"]["total_count"] = 1_500
    rc, log, out, _ = gate(tmp_path, github_server(state))
    assert rc == 3 and "1500 items, 3 listed" in log and out == {}, log


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        (None, "environment gpu-benchmarks-fork does not exist"),
        ({"protection_rules": []}, "environment gpu-benchmarks-fork has no required reviewer"),
        ({"protection_rules": [{"type": "required_reviewers", "reviewers": []}]}, "has no required reviewer"),
    ],
)
def test_fork_environment_without_a_reviewer_stops_the_gate(
    tmp_path: Path, github_server: Server, environment: dict[str, Any] | None, message: str
) -> None:
    github = github_server(seed([pull()], environment=environment))
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 1 and message in log and "Settings > Environments > gpu-benchmarks-fork" in log, log
    assert out == {} and github.state()["statuses"] == []


def test_same_repository_and_unlabelled_and_gone(tmp_path: Path, github_server: Server) -> None:
    github = github_server(seed([pull(fork=False, labels=())], environment=None))
    rc, log, out, _ = gate(tmp_path, github, owner="acme")
    assert rc == 0 and out["run"] == "true" and out["environment"] == "gpu-benchmarks" and out["fork"] == "false"
    assert github.state()["statuses"][0]["context"] == CONTEXT
    github = github_server(seed([pull(labels=())]))
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "false" and "comes from a fork" in log
    github = github_server(seed([pull(head={"sha": "f" * 40, "ref": "topic", "owner": "mallory", "repo": None})]))
    rc, log, out, _ = gate(tmp_path, github)
    assert rc == 0 and out["run"] == "false" and "no open pull request" in log


def test_a_bots_branch_in_this_repository_is_gated_as_a_forks(tmp_path: Path, github_server: Server) -> None:
    """Dependabot's or Renovate's pull request runs upstream packages' new code: a label and a reviewer first,
    and its figures report under the fork's context."""
    bot = {"login": "dependabot[bot]", "type": "Bot"}
    github = github_server(seed([pull(fork=False, labels=(), user=bot)]))
    rc, log, out, _ = gate(tmp_path, github, owner="acme")
    assert rc == 0 and out["run"] == "false" and "comes from a bot (dependabot[bot])" in log
    github = github_server(seed([pull(fork=False, user=bot)]))
    rc, log, out, _ = gate(tmp_path, github, owner="acme")
    assert rc == 0 and out["run"] == "true" and out["fork"] == "true" and out["environment"] == "gpu-benchmarks-fork"
    assert github.state()["statuses"][0]["context"] == FORK_CONTEXT
    person = {"login": "maint", "type": "User"}
    github = github_server(seed([pull(fork=False, labels=(), user=person)], environment=None))
    rc, log, out, _ = gate(tmp_path, github, owner="acme")
    assert rc == 0 and out["run"] == "true" and out["fork"] == "false"


def test_container_switch_names_the_image_of_the_default_branch_commit(tmp_path: Path, github_server: Server) -> None:
    """--container: the benchmark job's image, tagged with this workflow's commit and in lower case (GHCR)."""
    github = github_server(seed([pull()]))
    rc, log, out, _ = gate(tmp_path, github, args=("--container",), extra={"GITHUB_SHA": BASE})
    assert rc == 0 and out["image"] == f"ghcr.io/acme/kernels/mlaperf-runner:{BASE}", log
    assert runner_image("Acme/Kernels", BASE) == f"ghcr.io/acme/kernels/mlaperf-runner:{BASE}"
    rc, log, out, _ = gate(tmp_path, github, args=("--container",), extra={"GITHUB_SHA": "main"})
    assert rc == 2 and "GITHUB_SHA is not a commit hash" in log and out == {}
    rc, log, out, _ = gate(tmp_path, github, args=("--containers",))
    assert rc == 2 and out == {}


def test_links_name_the_run_or_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """One rule for the run's link (gate, poster, renderer, nightly issues): none outside a workflow run."""
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example/")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/kernels")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    assert (repository_url(), run_url()) == ("https://github.example/acme/kernels",
                                             "https://github.example/acme/kernels/actions/runs/42")  # fmt: skip
    monkeypatch.delenv("GITHUB_RUN_ID")
    assert (repository_url(), run_url()) == ("https://github.example/acme/kernels", "")
    monkeypatch.delenv("GITHUB_REPOSITORY")
    assert (repository_url(), run_url()) == ("", "")


# --- the poster --------------------------------------------------------------------------------------


def post(tmp_path: Path, github: FakeGitHub, status: dict[str, Any], body: str, fork: str = "false") -> tuple[int, str]:
    """The poster over these files, with the digests the render job would have given them
    (tests/ops/test_pr_digest.py: files that are not the render job's bytes)."""
    (tmp_path / "comment.md").write_text(body)
    (tmp_path / "status.json").write_text(json.dumps(status))
    digests = {name: hashlib.sha256((tmp_path / file).read_bytes()).hexdigest()
               for name, file in ((COMMENT_DIGEST_ENV, "comment.md"), (STATUS_DIGEST_ENV, "status.json"))}  # fmt: skip
    env = {**os.environ, **github.env(), "PR_NUMBER": "7", "HEAD_SHA": HEAD, "FORK": fork, **digests}
    proc = subprocess.run([sys.executable, "-S", "-m", "mlaperf.pr_post", str(tmp_path / "comment.md"),
                           str(tmp_path / "status.json")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def test_poster_edits_only_its_own_sticky_comment(tmp_path: Path, github_server: Server) -> None:
    forged = {"issue": 7, "id": 1, "user": "someone-else[bot]", "body": f"{MARKER}\nforged report"}
    github = github_server({"comments": [forged]})
    status = {"state": "success", "description": "no regression (3 series)", "context": CONTEXT, "marker": MARKER}
    rc, log = post(tmp_path, github, status, f"{MARKER}\nfirst report\n")
    assert rc == 0, log
    comments = github.state()["comments"]
    assert comments[0] == forged and comments[1]["user"] == BOT_LOGIN
    assert comments[1]["body"] == f"{MARKER}\nfirst report\n"
    rc, log = post(tmp_path, github, status, f"{MARKER}\nsecond report\n")
    assert rc == 0 and "updated comment" in log
    assert [c["body"] for c in github.state()["comments"]] == [forged["body"], f"{MARKER}\nsecond report\n"]
    statuses = github.state()["statuses"]
    assert [(s["sha"], s["state"], s["context"]) for s in statuses] == [(HEAD, "success", CONTEXT)] * 2
    # Linked to the renderer's comment, not the run page (where the pull request's own job writes a summary).
    assert [s["target_url"] for s in statuses] == ["https://github.example/acme/kernels/pull/7#issuecomment-1001"] * 2


@pytest.mark.parametrize(
    "status",
    [
        {"state": "__proto__", "description": "x", "context": CONTEXT, "marker": MARKER},
        {"state": "success", "description": "x", "context": "ci/other", "marker": MARKER},
        {"state": "success", "description": "x" * 141, "context": CONTEXT, "marker": MARKER},
        {"state": "success", "description": "x", "context": CONTEXT, "marker": "<!-- other -->"},
        ["success"],
    ],
)
def test_poster_refuses_what_the_renderer_never_writes(tmp_path: Path, github_server: Server, status: Any) -> None:
    github = github_server({})
    rc, log = post(tmp_path, github, status, f"{MARKER}\nreport\n")
    assert rc == 2 and "pr_post: error" in log
    assert github.state().get("comments", []) == [] and github.state().get("statuses", []) == []


@pytest.mark.parametrize(("fork", "context"), [("true", CONTEXT), ("false", FORK_CONTEXT), ("", FORK_CONTEXT)])
def test_poster_takes_only_the_context_of_the_fork_flag(tmp_path: Path, github_server: Server, fork: str,
                                                         context: str) -> None:  # fmt: skip
    """A fork's run never reports under the context a branch protection may require, whatever status.json says."""
    github = github_server({})
    status = {"state": "success", "description": "no regression", "context": context, "marker": MARKER}
    rc, log = post(tmp_path, github, status, f"{MARKER}\nreport\n", fork=fork)
    assert rc == 2 and "fork:" in log, log
    assert github.state().get("comments", []) == [] and github.state().get("statuses", []) == []
    status["context"] = FORK_CONTEXT if fork == "true" else CONTEXT
    rc, log = post(tmp_path, github, status, f"{MARKER}\nreport\n", fork=fork)
    assert rc == 0 and github.state()["statuses"][0]["context"] == status["context"], log


# --- scripts/check-repo-settings ---------------------------------------------------------------------


def good_settings() -> dict[str, Any]:
    def group(gid: int, name: str, file: str) -> dict[str, Any]:
        return {"id": gid, "name": name, "restricted_to_workflows": True,
                "selected_workflows": [f"acme/kernels/.github/workflows/{file}@refs/heads/main"]}  # fmt: skip

    get = {
        API: {"default_branch": "main"},
        f"{API}/environments/gpu-benchmarks-fork": REVIEWERS,
        f"{API}/environments/gpu-benchmarks": {"protection_rules": []},
        f"{API}/environments/mlaperf-store": {"deployment_branch_policy": {"protected_branches": False,
                                                                             "custom_branch_policies": True}},
        f"{API}/environments/mlaperf-store/deployment-branch-policies": {"branch_policies": [{"name": "main"}]},
        f"{API}/environments/mlaperf-store/secrets/MLAPERF_DB": {"name": "MLAPERF_DB"},
        f"{API}/actions/permissions/workflow": {"default_workflow_permissions": "read",
                                                "can_approve_pull_request_reviews": False},
        f"{API}/actions/permissions/fork-pr-contributor-approval": {"approval_policy": "all_external_contributors"},
        f"{API}/labels/run-benchmarks": {"name": "run-benchmarks"},
        f"{API}/branches/main/protection": {"required_pull_request_reviews": {"require_code_owner_reviews": True}},
        "/orgs/acme/actions/runner-groups": {"runner_groups": [
            group(1, "gpu-pr", "pr-benchmarks.yml"), group(2, "gpu-nightly", "nightly.yml")]},
        "/orgs/acme/actions/runner-groups/1/runners": {"runners": [{"labels": [{"name": "gpu"}, {"name": "pr"}]}]},
        "/orgs/acme/actions/runner-groups/2/runners": {"runners": [{"labels": [{"name": "gpu"}, {"name": "nightly"}]}]},
    }  # fmt: skip
    return {"get": get}


def check_settings(github: FakeGitHub, token: str = "admin-token") -> tuple[int, str]:
    env = {**os.environ, **github.env(), "GITHUB_TOKEN": token}
    proc = subprocess.run([sys.executable, "-S", str(ROOT / "scripts" / "check-repo-settings")], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def test_check_repo_settings_passes_a_safe_repository(github_server: Server) -> None:
    rc, out = check_settings(github_server(good_settings()))
    assert rc == 0 and "8 of 8 checks passed for acme/kernels (main)" in out, out
    assert "FAIL" not in out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: g.pop(f"{API}/environments/gpu-benchmarks-fork"), "create gpu-benchmarks-fork with required"),
        (lambda g: g.__setitem__(f"{API}/environments/gpu-benchmarks-fork", {"protection_rules": []}),
         "gpu-benchmarks-fork: no required reviewer"),
        (lambda g: g.__setitem__(f"{API}/environments/gpu-benchmarks-fork", {"protection_rules": [
            {"type": "required_reviewers", "prevent_self_review": False, "reviewers": [{"type": "User"}]}]}),
         "gpu-benchmarks-fork: turn on 'Prevent self-review'"),
        (lambda g: g.__setitem__(f"{API}/actions/secrets/MLAPERF_DB", {"name": "MLAPERF_DB"}),
         "MLAPERF_DB is a repository secret"),
        (lambda g: g.__setitem__(f"{API}/environments/mlaperf-store", {"deployment_branch_policy": None}),
         "mlaperf-store: limit 'Deployment branches' to main"),
        (lambda g: g[f"{API}/actions/permissions/workflow"].update(default_workflow_permissions="write"),
         "Workflow permissions: 'Read repository contents'"),
        (lambda g: g.__setitem__(f"{API}/actions/permissions/fork-pr-contributor-approval",
                                 {"approval_policy": "first_time_contributors"}), "all external contributors"),
        (lambda g: g["/orgs/acme/actions/runner-groups"]["runner_groups"][0].update(restricted_to_workflows=False),
         "runner group 'gpu-pr' (pr): allow only acme/kernels/.github/workflows/pr-benchmarks.yml@refs/heads/main"),
        (lambda g: g["/orgs/acme/actions/runner-groups/1/runners"]["runners"][0]["labels"].append({"name": "nightly"}),
         "share a runner group"),
        (lambda g: g.pop("/orgs/acme/actions/runner-groups"), "personal repository"),
        (lambda g: g.__setitem__(f"{API}/actions/runners", {"runners": [
            {"name": "spare-gpu", "labels": [{"name": "self-hosted"}, {"name": "gpu"}, {"name": "pr"}]}]}),
         "runner 'spare-gpu' (pr) is registered to the repository, where no group limits it"),
        (lambda g: g.pop(f"{API}/branches/main/protection"), "main is not protected"),
    ],
)
def test_check_repo_settings_names_each_unsafe_setting(github_server: Server, change: Any, message: str) -> None:
    settings = good_settings()
    change(settings["get"])
    rc, out = check_settings(github_server(settings))
    assert rc == 1 and message in out and "7 of 8 checks passed" in out, out


def test_check_repo_settings_bad_token(github_server: Server) -> None:
    rc, out = check_settings(github_server(good_settings()), token="wrong")
    assert rc == 3 and "HTTP 401" in out


@pytest.mark.parametrize("jobs", [True, False], ids=["render-job-log", "jobs-unreadable"])
def test_poster_without_a_rendered_comment_sets_the_fixed_error(tmp_path: Path, github_server: Server,
                                                                 jobs: bool) -> None:  # fmt: skip
    log = "https://github.example/acme/kernels/actions/runs/42/job/9001"
    listed = [{"name": "Benchmark the pull request (PR runner)", "html_url": log[:-4] + "8999"},
              {"name": RENDER_JOB, "html_url": log}]  # fmt: skip
    github = github_server({"get": {f"{API}/actions/runs/42/jobs": {"total_count": 2, "jobs": listed}} if jobs else {}})
    env = {**os.environ, **github.env(), "PR_NUMBER": "7", "HEAD_SHA": HEAD, "FORK": "true"}
    proc = subprocess.run([sys.executable, "-S", "-m", "mlaperf.pr_post", str(tmp_path / "none.md"),
                           str(tmp_path / "none.json")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert github.state().get("comments", []) == []
    [status] = github.state()["statuses"]
    assert (status["state"], status["context"], status["description"]) == (
        "error", FORK_CONTEXT, "no rendered report: see the render job's log")
    # Never the run page: the pull request's own job writes its summary there.
    assert status["target_url"] == (log if jobs else "https://github.example/acme/kernels/pull/7"), status
    assert jobs or "cannot read this run's jobs" in proc.stderr


def test_poster_outside_a_workflow_run_links_no_run(tmp_path: Path, github_server: Server) -> None:
    github = github_server({})
    env = {**os.environ, **github.env(), "PR_NUMBER": "7", "HEAD_SHA": HEAD, "FORK": "false"}
    del env["GITHUB_RUN_ID"]
    proc = subprocess.run([sys.executable, "-S", "-m", "mlaperf.pr_post", str(tmp_path / "none.md"),
                           str(tmp_path / "none.json")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    [status] = github.state()["statuses"]
    assert status["context"] == CONTEXT and "target_url" not in status, status


def test_a_hostile_branch_name_stays_one_query_value(tmp_path: Path, github_server: Server) -> None:
    branch = "x&state=closed&head=acme:main#1"
    pr = pull()
    pr["head"]["ref"] = branch
    github = github_server(seed([pr]))
    rc, log, out, _ = gate(tmp_path, github, branch=branch)
    assert rc == 0 and out["run"] == "true" and out["number"] == "7", log
