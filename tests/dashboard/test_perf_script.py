"""``benchmarks/scripts/dashboard_perf.py``'s seeding: a failing detector stops it (the pages would otherwise
be timed on a store without the seeded alerts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.scripts import dashboard_perf


def test_a_failing_detect_stops_the_seeding(tmp_path: Path) -> None:
    bad = tmp_path / "store.sqlite"
    bad.write_text("not a database")
    with pytest.raises(RuntimeError, match=r"mlaperf detect --full exited 2: mlaperf: error: .*not a SQLite"):
        dashboard_perf._detect(f"sqlite:///{bad}")


def test_publish_perf_help_and_bad_usage() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "benchmarks.scripts.publish_perf", "--help"], cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "60 s" in done.stdout and "50 MB" in done.stdout
    done = subprocess.run([sys.executable, "-m", "benchmarks.scripts.publish_perf", "--no-seed"], cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--no-seed needs --db" in done.stderr
