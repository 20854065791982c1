"""Commit metadata (parents, message, author, branch, generation) from a local git repository.

asv results give only a commit's sha and date; when the benchmarked repository is at hand, ingestion
fills in the rest with a few batched git calls (not one per commit).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_FIELD = "\x1f"
_RECORD = "\x1e"
_PREFERRED_BRANCHES = ("main", "master", "trunk", "develop")


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: list[str]
    author: str
    message: str
    branch: str | None


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",  # a message in another encoding must not stop an ingest
        check=True,
    ).stdout


def find_repo(start: str | Path | None = None) -> Path | None:
    """The top of the git work tree containing ``start`` (default: cwd), or None."""
    try:
        out = _git(Path(start or "."), "rev-parse", "--show-toplevel")
    except (OSError, subprocess.CalledProcessError):
        return None
    return Path(out.strip())


def _existing(repo: Path, shas: Iterable[str]) -> list[str]:
    """Those of ``shas`` (deduplicated) that are commits of ``repo``."""
    shas = sorted(set(shas))
    if not shas:
        return []
    out = _git(repo, "cat-file", "--batch-check", stdin="".join(f"{s}\n" for s in shas))
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] == "commit":
            found.append(parts[0])
    return found


def _branches(repo: Path) -> list[str]:
    names = _git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    preferred = [b for b in _PREFERRED_BRANCHES if b in names]
    return preferred + sorted(b for b in names if b not in preferred)


def commit_info(repo: str | Path, shas: Iterable[str]) -> dict[str, CommitInfo]:
    """Metadata of those ``shas`` that exist in ``repo``; the others are left out.

    ``branch`` is the first local branch containing the commit, preferring main/master. Any git failure
    (not a repository, git missing) gives an empty dict: metadata is a nicety, never a reason to fail.
    """
    path = Path(repo)
    try:
        found = _existing(path, shas)
        if not found:
            return {}
        fmt = _FIELD.join(["%H", "%P", "%an <%ae>", "%B"]) + _RECORD
        out = _git(path, "log", "--no-walk=unsorted", "--stdin", f"--format={fmt}", stdin="\n".join(found) + "\n")
        branch_of: dict[str, str] = {}
        remaining = set(found)
        for branch in _branches(path):
            if not remaining:
                break
            members = set(_git(path, "rev-list", branch).split())
            for sha in remaining & members:
                branch_of[sha] = branch
            remaining -= members
    except (OSError, subprocess.CalledProcessError):
        return {}
    infos: dict[str, CommitInfo] = {}
    for record in out.split(_RECORD):
        record = record.strip("\n")
        if not record:
            continue
        sha, parents, author, message = record.split(_FIELD, 3)
        infos[sha] = CommitInfo(sha, parents.split(), author, message.strip(), branch_of.get(sha))
    return infos


def generations(repo: str | Path, shas: Iterable[str]) -> dict[str, int]:
    """Generation numbers (``git rev-list --count SHA``: ancestors including itself) of those ``shas``
    that exist in ``repo``; the others are left out, and any git failure gives an empty dict.

    One ``rev-list --parents`` walk, oldest first: a commit with one parent is its parent's generation
    plus one; only a merge costs one more call (``rev-list --count ^first-parent merge``, the commits it
    brings in), since its ancestors are the first parent's plus those.
    """
    path = Path(repo)
    try:
        found = _existing(path, shas)
        if not found:
            return {}
        walk = _git(
            path, "rev-list", "--topo-order", "--reverse", "--parents", "--stdin", stdin="\n".join(found) + "\n"
        )
        gen: dict[str, int] = {}
        for line in walk.splitlines():
            sha, *parents = line.split()
            if not parents:  # a root (or the boundary of a shallow clone, as rev-list --count sees it)
                gen[sha] = 1
            elif len(parents) == 1:
                gen[sha] = gen[parents[0]] + 1
            else:
                brought = int(_git(path, "rev-list", "--count", f"^{parents[0]}", sha).strip())
                gen[sha] = gen[parents[0]] + brought
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError):
        return {}
    return {sha: gen[sha] for sha in found if sha in gen}
