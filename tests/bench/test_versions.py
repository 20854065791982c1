"""The suites' explicit asv versions keep the bundled H200 history's series.

asv versions a benchmark by hashing its source unless it has a ``version`` attribute; a new version starts
a new segment. The suites now share one skeleton (``benchmarks/_suite.py``) and carry explicit versions set
to what asv computed for the bundled results. Proof: asv's own discovery of the current suites gives the
bundled names, versions, units and parameter values; and the bundled history ingested with the
``benchmarks.json`` asv writes for the current suites gives the same store (benchmark rows, versions,
series ids) as ingested with the bundled one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from benchtools import ROOT, discover
from sqlalchemy import select
from sqlalchemy.orm import Session

HISTORY = ROOT / "history" / "results"


def bundled() -> dict[str, dict[str, Any]]:
    data = json.loads((HISTORY / "benchmarks.json").read_text())
    return {k: v for k, v in data.items() if k != "version"}


@pytest.fixture(scope="module")
def current() -> dict[str, dict[str, Any]]:
    """asv's discovery records of the current suites, GPU grid (the bundled history's tier)."""
    return discover("gpu")


def test_discovery_keeps_every_bundled_benchmark(current: dict[str, dict[str, Any]]) -> None:
    old = bundled()
    assert len(old) == 15
    for name, entry in old.items():
        assert name in current, f"{name} disappeared"
        now = current[name]
        assert now["version"] == entry["version"], f"{name}: version {now['version']} != {entry['version']}"
        assert (now["param_names"], now["unit"], now["type"]) == (entry["param_names"], entry["unit"], entry["type"])
        for dim, (was, isnow) in enumerate(zip(entry["params"], now["params"], strict=True)):
            assert set(was) <= set(isnow), f"{name}: parameter {entry['param_names'][dim]} lost {set(was) - set(isnow)}"


def test_cpu_tier_carries_the_same_versions(current: dict[str, dict[str, Any]]) -> None:
    cpu = discover("cpu")
    assert {n: b["version"] for n, b in cpu.items()} == {n: b["version"] for n, b in current.items()}


def _store(results: Path, db_file: Path) -> dict[str, Any]:
    """Ingest ``results``; return benchmark rows and series ids as plain data."""
    from db.engine import ensure_schema, make_engine
    from db.ingest import ingest_paths
    from db.models import Benchmark, Machine, Result, Run

    engine = make_engine(f"sqlite:///{db_file}")
    ensure_schema(engine)
    summary = ingest_paths(engine, [results], progress=False, repo=None)
    assert not getattr(summary, "failed", []), summary
    with Session(engine) as s:
        benches = sorted(s.execute(select(Benchmark.id, Benchmark.name, Benchmark.version, Benchmark.unit)).all())
        series = sorted(
            s.execute(
                select(Result.benchmark_id, Result.params_key, Machine.name, Result.benchmark_version)
                .join(Run, Run.id == Result.run_id)
                .join(Machine, Machine.id == Run.machine_id)
                .distinct()
            ).all()
        )
    engine.dispose()
    return {"benchmarks": [tuple(r) for r in benches], "series": [tuple(r) for r in series]}


def test_history_ingests_to_the_same_series(tmp_path: Path, current: dict[str, dict[str, Any]]) -> None:
    from asv import util

    before = _store(HISTORY, tmp_path / "before.sqlite")
    after_dir = tmp_path / "results"
    shutil.copytree(HISTORY, after_dir)
    # What `asv run` writes for the current suites: asv's Benchmarks.save() of its discovery records.
    util.write_json(str(after_dir / "benchmarks.json"), current, api_version=2)
    after = _store(after_dir, tmp_path / "after.sqlite")
    assert before["benchmarks"], "nothing ingested"
    assert after["benchmarks"] == before["benchmarks"]  # same ids, names, versions, units
    assert after["series"] == before["series"]  # same (benchmark id, params_key, machine, version)
    assert len(before["series"]) == 5 * 48 + 5 * 48 + 5 * 72  # decode, indexer, step: every bundled series
