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
