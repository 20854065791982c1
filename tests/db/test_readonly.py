"""Readers of a store they may not write: a SQLite store (WAL mode) in a folder without write permission,
and on a read-only mount. `db current` and the read-only engine the dashboard and `compare` use work there,
or say exactly which permission is missing. Readers run in subprocesses that obey file modes (root's
override dropped, see tests/db/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from db.engine import StoreError, make_engine
from db.ingest import ingest_paths
from db.models import REGRESSION_STATUSES
from db.synthetic import write_synthetic_results
from regressions.store import detect_store, regressions_frame
from tests.db.conftest import (
    REPO_ROOT,
    bench_row,
    results_doc,
    run_unprivileged,
    unprivileged_prefix,
    write_results,
)

# What the dashboard and `compare` do: read-only engine, schema check, queries.
READER = """
import sys
from sqlalchemy.orm import Session
from db import queries
from db.engine import check_schema, make_engine
engine = make_engine(sys.argv[1], readonly=True)
check_schema(engine)
with Session(engine) as s:
    print(len(queries.commits(s)), int(queries.machines(s)["runs"].sum()))
"""


def _results(root: Path, first: int, count: int) -> Path:
    for i in range(first, first + count):
        write_results(root, results_doc({"s.time_a": bench_row([1.0 + i], [])}, commit=f"{i + 1:08x}" + "0" * 32))
    return root


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "store"
    path.mkdir()
    yield path
    path.chmod(0o755)


def _ingest(url: str, root: Path) -> None:
    engine = make_engine(url)
    assert ingest_paths(engine, [root], progress=False).exit_status == 0
    engine.dispose()


def _read(url: str) -> subprocess.CompletedProcess[str]:
    return run_unprivileged(["-c", READER, url])


def _current(url: str) -> subprocess.CompletedProcess[str]:
    return run_unprivileged(["-m", "mlaperf.cli", "db", "current", "--db", url])


def test_closed_store_in_a_read_only_folder(folder: Path, tmp_path: Path) -> None:
    store = folder / "mlaperf.sqlite"
    url = f"sqlite:///{store}"
    _ingest(url, _results(tmp_path / "results", 0, 3))
    assert sorted(p.name for p in folder.iterdir()) == ["mlaperf.sqlite"]  # WAL folded in on close
    folder.chmod(0o555)
    read = _read(url)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["3", "3"]
    current = _current(url)
    assert current.returncode == 0 and "(up to date)" in current.stdout, current.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["mlaperf.sqlite"]


def test_live_store_with_pending_log_in_a_read_only_folder(folder: Path, tmp_path: Path) -> None:
    """A writer still holds the store open: its changes are in the -wal file, which readers must see."""
    store = folder / "mlaperf.sqlite"
    url = f"sqlite:///{store}"
    _ingest(url, _results(tmp_path / "results", 0, 2))
    keeper = sqlite3.connect(store)  # keeps -wal/-shm alive, as a running ingest or dashboard would
    try:
        keeper.execute("PRAGMA wal_autocheckpoint = 0")
        keeper.execute("SELECT count(*) FROM run").fetchone()
        _ingest(url, _results(tmp_path / "more", 2, 2))
        assert Path(f"{store}-wal").stat().st_size > 0
        folder.chmod(0o555)
        read = _read(url)
        assert read.returncode == 0, read.stderr
        assert read.stdout.split() == ["4", "4"]  # the two runs only in the log are visible
    finally:
        keeper.close()


def test_copied_store_with_a_log_but_no_shm_names_the_permission(folder: Path, tmp_path: Path) -> None:
    live = tmp_path / "live" / "mlaperf.sqlite"
    _ingest(f"sqlite:///{live}", _results(tmp_path / "results", 0, 2))
    keeper = sqlite3.connect(live)
    try:
        keeper.execute("PRAGMA wal_autocheckpoint = 0")
        keeper.execute("SELECT count(*) FROM run").fetchone()
        _ingest(f"sqlite:///{live}", _results(tmp_path / "more", 2, 1))
        # A backup tool copied the database and its log, but not the shared-memory file.
        shutil.copy(live, folder / "mlaperf.sqlite")
        shutil.copy(f"{live}-wal", folder / "mlaperf.sqlite-wal")
    finally:
        keeper.close()
    folder.chmod(0o555)
    url = f"sqlite:///{folder / 'mlaperf.sqlite'}"
    current = _current(url)
    assert current.returncode == 2
    line = current.stderr.strip()
    assert line.count("\n") == 0 and line.startswith(f"mlaperf: error: cannot read database {url}: "), line
    assert "mlaperf.sqlite-wal holds changes" in line and f"write permission on {folder}" in line
    if not unprivileged_prefix():  # as the test process itself (not root): the same StoreError
        with pytest.raises(StoreError, match="holds changes not yet in the database"):
            make_engine(url, readonly=True)
    # An empty log (nothing pending) is no obstacle: the file alone is the store.
    folder.chmod(0o755)
    Path(f"{folder / 'mlaperf.sqlite'}-wal").write_bytes(b"")
    folder.chmod(0o555)
    assert _current(url).returncode == 0


def test_detect_lists_a_store_it_may_not_write(folder: Path, tmp_path: Path) -> None:
    """`mlaperf detect` must write (it stores what it finds) and says so, naming `--list`; `detect --list`
    lists the stored regressions through a read-only engine, as `detect` would, and writes nothing."""
    store = folder / "mlaperf.sqlite"
    url = f"sqlite:///{store}"
    write_synthetic_results(tmp_path / "results", commits=30, series=4, steps={20: 1.2}, seed=5, machine="m")
    _ingest(url, tmp_path / "results")
    engine = make_engine(url)
    with Session(engine) as s, s.begin():
        detect_store(s, full=True)
    with Session(engine) as s:
        stored = regressions_frame(s, statuses=REGRESSION_STATUSES)
    engine.dispose()
    assert len(stored) > 0
    folder.chmod(0o555)
    detect = run_unprivileged(["-m", "mlaperf.cli", "detect", "--json", "--db", url])
    assert detect.returncode == 2 and detect.stdout == "", detect.stderr
    line = detect.stderr.strip()
    assert "\n" not in line and f"write permission on the folder {folder}" in line, line
    assert "`mlaperf detect --list` lists the stored regressions without writing" in line
    listed = run_unprivileged(["-m", "mlaperf.cli", "detect", "--list", "--all", "--json", "--db", url])
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)["regressions"]
    assert [(r["id"], r["status"], r["commit"]) for r in records] == list(
        zip(stored["id"], stored["status"], stored["sha"], strict=True)
    )
    assert all(r["new"] is False and r["event"] is None for r in records)
    table = run_unprivileged(["-m", "mlaperf.cli", "detect", "--list", "--db", url])
    assert table.returncode == 0 and "nothing re-examined" in table.stdout, table.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["mlaperf.sqlite"]  # nothing written, no log left


def need_mount_namespace(probe: tuple[str, ...] = ("unshare", "-m", "true")) -> None:
    """Skip where ``unshare -m`` cannot make a mount namespace (not root, or a container without
    CAP_SYS_ADMIN), unless ``MLAPERF_REQUIRE_MOUNT_NS=1`` (CI, which runs as root: scripts/test.sh) fails."""
    try:
        ok = subprocess.run(list(probe), capture_output=True, timeout=60).returncode == 0
    except OSError:  # no unshare at all
        ok = False
    if ok:
        return
    msg = f"no mount namespace here ({' '.join(probe)} failed; it needs root with CAP_SYS_ADMIN)"
    if os.environ.get("MLAPERF_REQUIRE_MOUNT_NS") == "1":
        pytest.fail(f"MLAPERF_REQUIRE_MOUNT_NS=1 but {msg}")
    pytest.skip(msg)


def in_mount_namespace(script: str, *args: str, timeout: float = 600, **kwargs: Any) -> subprocess.CompletedProcess:
    """Run the bash ``script`` (``args`` as its $1...) in a private mount namespace, where it may mount tmpfs or bind
    mounts that nothing outside sees and that go when it ends; skips as :func:`need_mount_namespace` does."""
    need_mount_namespace()
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script, "_", *args],
                          capture_output=True, text=True, timeout=timeout, **kwargs)  # fmt: skip


def test_missing_mount_namespace_skips_or_fails_by_the_require_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLAPERF_REQUIRE_MOUNT_NS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no mount namespace here"):
        need_mount_namespace(("false",))
    monkeypatch.setenv("MLAPERF_REQUIRE_MOUNT_NS", "1")
    with pytest.raises(pytest.fail.Exception, match="MLAPERF_REQUIRE_MOUNT_NS=1 but no mount namespace"):
        need_mount_namespace(("false",))
    need_mount_namespace(("true",))  # a working probe neither skips nor fails


def test_store_on_a_read_only_mount(folder: Path, tmp_path: Path) -> None:
    """A real read-only bind mount (needs a mount namespace: root with CAP_SYS_ADMIN)."""
    store = folder / "mlaperf.sqlite"
    url = f"sqlite:///{store}"
    _ingest(url, _results(tmp_path / "results", 0, 2))
    script = (
        f'mount --bind "{folder}" "{folder}" && mount -o remount,ro,bind "{folder}" && '
        f'touch "{folder}/probe" 2>/dev/null && exit 9; '
        f'exec "{sys.executable}" -m mlaperf.cli db current --db "{url}"'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = in_mount_namespace(script, env=env, cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(up to date)" in proc.stdout
