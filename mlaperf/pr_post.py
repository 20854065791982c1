"""``python -m mlaperf.pr_post COMMENT.md STATUS.json``: post the sticky PR comment and set the commit status.

The last job of ``.github/workflows/pr-benchmarks.yml``, on a GitHub-hosted runner with the default
branch's code and nothing installed (standard library only). Its inputs were written by
``regressions.pr_render`` (the default branch's renderer), never by the pull request's code; it checks
them once more (state from a fixed list, the one context ``FORK`` allows, sizes) before posting. The sticky
comment is the one that starts with the report's marker **and** was written by this workflow's own login
(``MLAPERF_BOT_LOGIN``, default ``github-actions[bot]``): another bot's or a person's comment that copies
the marker is never edited. Environment: ``PR_NUMBER``, ``HEAD_SHA`` (from the gate), ``GITHUB_*``.
The files are posted only when their sha256 is the render job's (``COMMENT_SHA256``, ``STATUS_SHA256``, its job
outputs): the benchmark job ran the pull request's code and may reach the artifact store, so the artifact is not
proof of who wrote it. When the render job left no files or no digests, only a fixed ``error`` status is set
(context by ``FORK``); when a file's digest differs, another fixed one; both linked to the render job's own log (the
run page shows what the pull request's job wrote into its summary), else to the pull request.
Exit status: 0 posted, 1 nothing posted from the files (error status set), 2 bad input, 3 GitHub API error.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

from mlaperf.github import GitHub, GitHubError
from settings import env, exits
from settings.pr_contract import (
    BOT_LOGIN,
    COMMENT_DIGEST_ENV,
    CONTEXT,
    FORK_CONTEXT,
    RENDER_JOB,
    SHA,
    STATES,
    STATUS_DIGEST_ENV,
    repository_url,
    run_url,
)

MAX_BODY = 65_536  # GitHub's limit for a comment
NO_RENDER = "no rendered report: see the render job's log"
CHANGED = "rendered report changed after rendering: not posted"
MARKER = re.compile(r"<!-- [a-z0-9-]{1,60} -->")
DIGEST = re.compile(r"[0-9a-f]{64}")  # sha256sum's


class PostError(ValueError):
    """The rendered comment or status is not what the renderer writes."""


class Changed(PostError):
    """A file's bytes are not those the render job hashed: someone else uploaded them."""


def context_for(fork: bool) -> str:
    """The one status context a pull request may get: a fork's figures never report under CONTEXT."""
    return FORK_CONTEXT if fork else CONTEXT


def read_verified(path: Path, digest: str) -> str:
    """The text of ``path`` if its bytes have the sha256 ``digest`` the render job wrote, else :class:`Changed`."""
    data = path.read_bytes()
    found = hashlib.sha256(data).hexdigest()
    if found != digest:
        raise Changed(f"{path}: sha256 {found}, the render job's was {digest}")
    return data.decode("utf-8")


def read_inputs(comment: Path, status: Path, fork: bool, digests: tuple[str, str]) -> tuple[str, dict[str, str]]:
    """The comment and the status, both checked against the render job's digests before either is parsed."""
    body, text = read_verified(comment, digests[0]), read_verified(status, digests[1])
    data = json.loads(text)
    if not isinstance(data, dict):
        raise PostError(f"{status}: not a JSON object")
    if data.get("state") not in STATES or data.get("context") != context_for(fork):
        raise PostError(f"{status}: state or context is not one the renderer writes for this pull request "
                        f"(fork: {str(fork).lower()})")  # fmt: skip
    description, marker = data.get("description"), data.get("marker")
    if not isinstance(description, str) or len(description) > 140:
        raise PostError(f"{status}: description must be a string of at most 140 characters")
    if not isinstance(marker, str) or not MARKER.fullmatch(marker) or not body.startswith(marker + "\n"):
        raise PostError(f"{comment}: does not start with the report's marker")
    if len(body.encode("utf-16-le")) // 2 > MAX_BODY:
        raise PostError(f"{comment}: over GitHub's {MAX_BODY:,} characters")
    return body, {k: str(data[k]) for k in ("state", "description", "context", "marker")}


def post(client: GitHub, number: int, head_sha: str, body: str, status: dict[str, str], run_url: str,
         bot_login: str = BOT_LOGIN) -> str:  # fmt: skip
    """Update this login's sticky comment (else create one), then set the status, linked to that comment: the
    renderer's words, where the run page (the status's link otherwise) also shows what the pull request's own
    job wrote into its summary. What was done."""
    mine = [
        c
        for c in client.comments(number)
        if (c.get("user") or {}).get("login") == bot_login and (c.get("body") or "").startswith(status["marker"])
    ]
    if mine:
        comment = client.update_comment(int(mine[0]["id"]), body)
        done = f"updated comment {mine[0]['id']}"
    else:
        comment = client.create_comment(number, body)
        done = f"created comment {comment.get('id')}"
    link = str(comment.get("html_url") or "")
    target = link if link.startswith(f"{repository_url()}/pull/{number}#") and repository_url() else run_url
    client.create_status(head_sha, status["state"], status["description"], status["context"], target)
    return f"{done}; status {status['state']} ({status['context']}: {status['description']})"


def render_job_url(client: GitHub, number: int) -> str:
    """The render job's log page in this run (``actions: read``), where a render failure is explained in the default
    branch's words; the pull request's page when the run or the job cannot be read; "" outside a workflow run."""
    run = run_url()  # the one place a run's page is built from GITHUB_*
    run_id = run.rsplit("/", 1)[-1]
    if not run_id.isdigit():
        return ""
    try:
        jobs = client.pages(f"/actions/runs/{run_id}/jobs", key="jobs", limit=3)
    except GitHubError as exc:
        print(f"pr_post: cannot read this run's jobs ({exc}); the status links to the pull request", file=sys.stderr)
        jobs = []
    links = [str(j.get("html_url") or "") for j in jobs if isinstance(j, dict) and j.get("name") == RENDER_JOB]
    mine = [u for u in links if u.startswith(f"{run}/job")]
    return mine[0] if mine else f"{repository_url()}/pull/{number}"


def renderer_failed(client: GitHub, number: int, head_sha: str, fork: bool, description: str = NO_RENDER) -> int:
    """Nothing to post from the files (the render job failed, or they are not its bytes): a fixed error status,
    no comment; exit 1."""
    try:
        client.create_status(head_sha, "error", description, context_for(fork), render_job_url(client, number))
    except GitHubError as exc:
        print(f"pr_post: GitHub API: {exc}", file=sys.stderr)
        return exits.INTERNAL
    print(f"pr_post: nothing posted from the files; status error ({description})", file=sys.stderr)
    return exits.FOUND


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return exits.OK
    if len(args) != 2:
        print("usage: python -m mlaperf.pr_post COMMENT.md STATUS.json (try --help)", file=sys.stderr)
        return exits.USAGE
    try:
        number, head_sha = int(os.environ.get("PR_NUMBER", "")), os.environ.get("HEAD_SHA", "")
        if number < 1 or not SHA.fullmatch(head_sha):
            raise PostError("PR_NUMBER must be a pull request number and HEAD_SHA a full commit hash")
        client = GitHub.from_env()
        fork = os.environ.get("FORK") == "true"
        if not (Path(args[0]).is_file() and Path(args[1]).is_file()):
            return renderer_failed(client, number, head_sha, fork)
        digests = (os.environ.get(COMMENT_DIGEST_ENV, ""), os.environ.get(STATUS_DIGEST_ENV, ""))
        if not all(DIGEST.fullmatch(d) for d in digests):
            print(f"pr_post: no digest from the render job ({COMMENT_DIGEST_ENV}, {STATUS_DIGEST_ENV}): files not "
                  "posted", file=sys.stderr)  # fmt: skip
            return renderer_failed(client, number, head_sha, fork)
        try:
            body, status = read_inputs(Path(args[0]), Path(args[1]), fork, digests)
        except Changed as exc:
            print(f"pr_post: {exc}", file=sys.stderr)
            return renderer_failed(client, number, head_sha, fork, CHANGED)
    except (PostError, ValueError, OSError) as exc:
        print(f"pr_post: error: {exc}", file=sys.stderr)
        return exits.USAGE
    try:
        print("pr_post: " + post(client, number, head_sha, body, status, run_url(),
                                 env.bot_login()))  # fmt: skip
    except GitHubError as exc:
        print(f"pr_post: GitHub API: {exc}", file=sys.stderr)
        return exits.INTERNAL
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
