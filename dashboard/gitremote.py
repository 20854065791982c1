"""The repository's web URL for commit links, from its git remote: ``git@github.com:org/repo.git`` and
``ssh://git@host/org/repo`` become ``https://github.com/org/repo``. The one rule of the dashboard's and the
static site's default (``MLAPERF_REPO_URL`` wins over it)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from settings import env

_SCP = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>(?!/).+)$")  # git@github.com:org/repo.git


def https_url(remote: str) -> str:
    """The web URL of a git remote URL, or "" for one that has none (a local path, a file:// URL)."""
    remote = remote.strip()
    if not remote or remote.startswith(("/", ".", "file:")):
        return ""
    m = re.match(r"^(?:ssh|git|https?)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/(?P<path>.+)$", remote) \
        or _SCP.match(remote)
    if m is None:
        return ""
    path = m.group("path").rstrip("/").removesuffix(".git")
    return f"https://{m.group('host')}/{path}"


def default_repo_url(cwd: Path | None = None) -> str:
    """``MLAPERF_REPO_URL`` (set and empty: no links), else the web URL of the git remote ``origin`` of ``cwd``,
    else ""."""
    chosen = env.repo_url()
    if chosen is not None:
        return chosen
    try:
        out = subprocess.run(["git", "remote", "get-url", "origin"], cwd=cwd or Path.cwd(), capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return https_url(out.stdout) if out.returncode == 0 else ""


def tags(cwd: Path | None = None) -> dict[str, list[str]]:
    """{commit sha: its tags} of the git repository at ``cwd`` (annotated tags by the commit they point at);
    empty without git or a repository. Event markers on History."""
    fmt = "%(objectname) %(*objectname) %(refname:short)"
    try:
        out = subprocess.run(["git", "for-each-ref", f"--format={fmt}", "refs/tags"], cwd=cwd or Path.cwd(),
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, list[str]] = {}
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        parts = line.split()
        if len(parts) == 3:
            sha, name = parts[1], parts[2]
        elif len(parts) == 2:
            sha, name = parts[0], parts[1]
        else:
            continue
        found.setdefault(sha, []).append(name)
    return found
