"""The commits ``mlaperf run`` measures: RANGE arguments resolved with git (a commit, ``A..B`` along first
parents, or ``NEW``: the recent first-parent history), and :class:`RunError`, the run's user-facing error."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from settings.exits import BadInput


class RunError(BadInput):
    """A user-facing error (bad argument, missing file, git or asv failure): bad input, exit status 2 through
    ``settings.exits.dispatch`` like every command's."""


@dataclass
class Commit:
    sha: str
    subject: str


def run_git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RunError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def repo_root(start: Path | None = None) -> Path:
    try:
        out = run_git(start or Path.cwd(), "rev-parse", "--show-toplevel")
    except (RunError, FileNotFoundError) as exc:
        raise RunError(f"not inside a git repository ({exc})") from None
    return Path(out.strip())


NEW_WINDOW = 50  # how far back RANGE=NEW looks for commits without results


def _refuse_reversed(root: Path, spec: str) -> None:
    """An empty ``A..B`` whose reverse is not empty is almost surely written backwards: say so."""
    start, _, end = spec.partition("..")
    back = subprocess.run(["git", "rev-list", "--count", "--first-parent", f"{end or 'HEAD'}..{start or 'HEAD'}", "--"],
                          cwd=root, capture_output=True, text=True)  # fmt: skip
    count = back.stdout.strip()
    if back.returncode == 0 and count.isdigit() and int(count) > 0:
        raise RunError(f"RANGE {spec!r} has no commits: its ends look reversed ({end}..{start} has {count}); "
                       "write OLD..NEW")  # fmt: skip


def resolve_specs(root: Path, specs: list[str]) -> list[Commit]:
    """The commits of several RANGE arguments, in order, each commit once."""
    seen: dict[str, Commit] = {}
    for spec in specs or ["HEAD"]:
        for c in resolve_commits(root, spec):
            seen.setdefault(c.sha, c)
    return list(seen.values())


def resolve_commits(root: Path, spec: str) -> list[Commit]:
    """The commits of RANGE, oldest first: one commit, or ``git rev-list --first-parent A..B``."""
    if not spec or spec.startswith("-"):
        raise RunError(f"RANGE {spec!r} is not a commit or a range")
    if spec == "NEW":  # the nightly's range: recent first-parent history; measured commits are skipped later
        proc = subprocess.run(
            ["git", "rev-list", "--reverse", "--first-parent", f"--max-count={NEW_WINDOW}", "HEAD", "--"],
            cwd=root, capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RunError(f"cannot list recent commits: {proc.stderr.strip()}")
        shas = proc.stdout.split()
    elif ".." in spec:
        proc = subprocess.run(
            ["git", "rev-list", "--reverse", "--first-parent", spec, "--"],
            cwd=root, capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RunError(f"RANGE {spec!r} is not a valid git range: {proc.stderr.strip()}")
        shas = proc.stdout.split()
        if not shas and "..." not in spec:
            _refuse_reversed(root, spec)
    else:
        proc = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}"],
            cwd=root, capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RunError(f"RANGE {spec!r} is not a commit of the repository at {root}")
        shas = [proc.stdout.strip()]
    commits = []
    for sha in shas:
        subject = run_git(root, "show", "-s", "--format=%s", sha).strip()
        commits.append(Commit(sha, subject))
    return commits
