"""Room on a filesystem: how much a command may still write where it writes, the line under which that counts as
a full disk, and sizes as messages show them. The store (``db.engine``) and the runner (``mlaperf.runner``) both
call these, so a full disk reads the same from ingest and from ``mlaperf run``."""

from __future__ import annotations

import os
from pathlib import Path

# Under this much free space a failed write is taken for a full disk: SQLite's next step needs a 32 KiB -shm region
# or a run of pages, asv's a results file of tens of KiB.
FULL_BELOW_BYTES = 1 << 20


def free_bytes(path: str | Path) -> int | None:
    """Bytes this process may still write on the filesystem holding ``path`` (its nearest existing folder when
    ``path`` does not exist yet); None where that cannot be looked at."""
    folder = Path(path).expanduser().absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        fs = os.statvfs(folder)
    except OSError:
        return None
    # f_bavail (df's "Avail") even for root: on the development machine f_bfree counts about 150 GiB more (df: 252
    # GiB size, 26 GiB used, 76 GiB available), blocks held back that a write cannot count on.
    return fs.f_bavail * fs.f_frsize


def describe_bytes(size: int) -> str:
    """1536 -> '1.5 KiB' (for messages)."""
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
