"""Every relative link in the repository's Markdown resolves: the file exists and, for a ``#anchor`` into a
Markdown file, a heading of that file has that anchor (GitHub's slug rule). Pages move; this is what notices."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _markdown_files() -> list[Path]:
    """The Markdown files git tracks (a fresh clone's), else every one under the root but virtualenvs."""
    try:
        out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
        return [ROOT / line for line in out.stdout.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in ROOT.rglob("*.md") if ".venv" not in p.parts and "node_modules" not in p.parts]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but hyphens, underscores and spaces dropped, spaces to
    hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of ``path`` outside code fences, the fence lines themselves left out."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield number, line


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of ``path``'s headings (outside code fences), repeats numbered as GitHub does; read once a file,
    however many links point into it."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in _prose(path):
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link in ``path`` outside code fences and inline code."""
    return [
        (number, target)
        for number, line in _prose(path)
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto: ...
    ]


def broken(path: Path, root: Path = ROOT) -> list[str]:
    """The links of ``path`` that do not resolve, as ``file:line: target (why)``, the file named from ``root``."""
    bad = []
    for number, target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = path if not file_part else (path.parent / file_part).resolve()
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where} (no heading with that anchor)")
    return bad


def test_slug_follows_github() -> None:
    assert slug(" Where issue 29's goals stand") == "where-issue-29s-goals-stand"
    assert slug("Quick start") == "quick-start"
    assert slug("`asv` and the sm_120 runner") == "asv-and-the-sm_120-runner"


def test_a_broken_link_is_named(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad](#nope)\n```\n[fenced](nowhere.md)\n```\n")
    assert broken(page, tmp_path) == ["page.md:3: missing.md (no such file)",
                                      "page.md:3: #nope (no heading with that anchor)"]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    bad = broken(path)
    assert not bad, "\n".join(bad)
