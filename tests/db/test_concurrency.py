"""Two ingests at once into one store (separate processes) lose and duplicate nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from db.engine import make_engine, upgrade
from tests.db.conftest import REPO_ROOT

MACHINES = ["gha-aws-graviton", "gha-aws-skylake", "gha-ubuntu-noble"]


# Both processes import everything, say they are ready, then wait for one "go": the ingests start together
# (a process that started a second later could find every file already stored, and nothing would overlap).
_START_TOGETHER = """
import sys, time
from pathlib import Path
import mlaperf.cli
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
while not go.exists():
    time.sleep(0.01)
sys.exit(mlaperf.cli.main(sys.argv[3:]))
"""


def _ingest(url: str, paths: list[Path], ready: Path, go: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", _START_TOGETHER, str(ready), str(go), "ingest", "--db", url, *map(str, paths)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_concurrent_ingests(db_url: str, openblas: Path, tmp_path: Path) -> None:
    upgrade(db_url)
    # Same files, opposite orders: every lookup row and most files are contended.
    go = tmp_path / "go"
    a = _ingest(db_url, [openblas / m for m in MACHINES], tmp_path / "a", go)
    b = _ingest(db_url, [openblas / m for m in reversed(MACHINES)], tmp_path / "b", go)
    deadline = time.monotonic() + 120
    while not ((tmp_path / "a").exists() and (tmp_path / "b").exists()):
        assert a.poll() is None and b.poll() is None, "an ingest process ended before it was ready"
        assert time.monotonic() < deadline, "the ingest processes did not start"
        time.sleep(0.01)
    go.touch()
    outs = [p.communicate(timeout=300) for p in (a, b)]
    for proc, (out, err) in zip((a, b), outs, strict=True):
        assert proc.returncode == 0, f"stdout: {out}\nstderr: {err}"
    ingested = [int(out.split()[1]) for out, _ in outs]
    assert sum(ingested) == 269, outs  # each file stored by exactly one of them
    assert min(ingested) > 0, f"the ingests did not overlap: {ingested}"

    shas = {json.loads(p.read_text())["commit_hash"] for p in openblas.glob("*/[0-9a-f]*.json")}
    engine = make_engine(db_url)
    with engine.connect() as conn:
        count = lambda t: conn.execute(sa.text(f'SELECT count(*) FROM "{t}"')).scalar_one()  # noqa: E731
        assert count("run") == 269
        assert count("result") == 37454
        assert count("machine") == 3
        assert count("commit") == len(shas)
        assert count("environment") == 1
        dupes = conn.execute(
            sa.text("SELECT count(*) FROM (SELECT name FROM benchmark GROUP BY name HAVING count(*) > 1) d")
        ).scalar_one()
        assert dupes == 0
    engine.dispose()
