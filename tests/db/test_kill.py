"""Faults during writes: an ingest killed with SIGKILL (a real subprocess) leaves every run whole, the
next ingest completes the store, and a reader polling the store meanwhile never sees an error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.orm import Session

from db import queries
from db.engine import make_engine, upgrade
from db.models import Result, Run
from db.synthetic import write_synthetic_results
from tests.db.conftest import REPO_ROOT

FILES, SERIES = 100, 60  # about a second of ingest on a busy 2-core machine
KILLS = 2


def _ingest(url: str, root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mlaperf.cli", "ingest", "--quiet", "--db", url, str(root)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _state(reader: sa.Engine) -> tuple[int, list[int]]:
    """Runs stored, and each run's result count (a reader's view: the dashboard's read-only engine)."""
    with Session(reader) as s:
        queries.machines(s)  # the queries a reader runs must not fail mid-ingest either
        per_run = (
            sa.select(sa.func.count(Result.id))
            .select_from(Run)
            .outerjoin(Result, Result.run_id == Run.id)
            .group_by(Run.id)
        )
        counts = s.execute(per_run).scalars().all()
    return len(counts), list(counts)


def test_sigkill_mid_ingest_leaves_whole_runs_and_the_next_ingest_completes(db_url: str, tmp_path: Path) -> None:
    hist = write_synthetic_results(tmp_path / "results", commits=FILES, series=SERIES)
    per_file = hist.results_per_file
    upgrade(db_url)
    reader = make_engine(db_url, readonly=True)
    seen_partial = []
    for kill in range(KILLS):
        before = _state(reader)[0]
        proc = _ingest(db_url, hist.root)
        deadline = time.monotonic() + 120
        # Kill once this ingest has committed something (so it is mid-way, not before its first write).
        while True:
            runs, counts = _state(reader)
            assert all(c == per_file for c in counts), f"a reader saw a partial run: {sorted(set(counts))}"
            if runs > before or proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        time.sleep(0.02 * kill)  # a different point of the next transaction each time
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        runs, counts = _state(reader)
        assert all(c == per_file for c in counts), f"killed ingest left a partial run: {sorted(set(counts))}"
        seen_partial.append((before, runs))
    assert any(0 < runs < FILES for _, runs in seen_partial), f"no kill landed mid-ingest: {seen_partial}"

    if db_url.startswith("sqlite"):
        with make_engine(db_url).connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    done = _ingest(db_url, hist.root)
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    runs, counts = _state(reader)
    assert runs == FILES and sum(counts) == hist.total_results
    with Session(reader) as s:
        assert len(queries.commits(s)) == FILES
    reader.dispose()
