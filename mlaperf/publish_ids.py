"""The static site's addresses: a machine's folder and a series' id, made from their names (a link shared
today opens the same page after the next publish, whatever was added or removed meanwhile)."""

from __future__ import annotations

import hashlib
import re

_FOLDER = re.compile(r"[A-Za-z0-9._-]+")


def series_id(benchmark: str, params_key: str) -> str:
    """A series' address on the site (its History page's file and link): from its name, so that a link
    shared today opens the same series after the next publish, whatever was added or removed meanwhile."""
    return hashlib.sha1(f"{benchmark}\n{params_key}".encode()).hexdigest()[:12]


def machine_folder(name: str) -> str:
    """A machine's folder and link segment: its name where that is a plain file name (machine names from
    `mlaperf run` are), else a digest of it; never its position in a list that the next publish can change."""
    return name if _FOLDER.fullmatch(name) and name not in (".", "..") else f"m-{series_id(name, '')}"
