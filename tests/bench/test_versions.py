"""The suites' explicit asv versions keep the bundled H200 history's series.

asv versions a benchmark by hashing its source unless it has a ``version`` attribute; a new version starts
a new segment. The suites now share one skeleton (``benchmarks/_suite.py``) and carry explicit versions set
to what asv computed for the bundled results. Proof: asv's own discovery of the current suites gives the
bundled names, versions, units and parameter values; and the bundled history ingested with the
``benchmarks.json`` asv writes for the current suites gives the same store (benchmark rows, versions,
series ids) as ingested with the one asv wrote for the 15 benchmarks of the older runs
(``tests/fixtures/h200_benchmarks_15.json``, the bundled file before the history was extended).
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from benchtools import ROOT, discover
from sqlalchemy import select
from sqlalchemy.orm import Session

HISTORY = ROOT / "history" / "results"
OLD_BENCHMARKS = ROOT / "tests" / "fixtures" / "h200_benchmarks_15.json"


def bundled() -> dict[str, dict[str, Any]]:
    """The benchmarks.json asv wrote for the older bundled runs (15 benchmarks)."""
    data = json.loads(OLD_BENCHMARKS.read_text())
    return {k: v for k, v in data.items() if k != "version"}


def bundled_results() -> list[tuple[str, str, str, list[list[str]]]]:
    """(file, benchmark, version, params) of every result in the bundled H200 files."""
    out = []
    for f in sorted((HISTORY / "h200").glob("*-existing-*.json")):
        data = json.loads(f.read_text())
        cols = data["result_columns"]
        for name, row in data["results"].items():
            entry = dict(zip(cols, row, strict=False))
            out.append((f.name, name, entry["version"], entry["params"]))
    return out


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


def test_every_bundled_result_has_the_current_version(current: dict[str, dict[str, Any]]) -> None:
    """Each result carries the version it was measured under: all of them, old runs and new, are the
    current suites' versions and parameter values (one segment per series, no restart)."""
    rows = bundled_results()
    assert {name for _, name, _, _ in rows} == set(current)  # the newest run measured every benchmark
    for file, name, version, params in rows:
        assert version == current[name]["version"], f"{file}: {name} version {version}"
        for was, isnow in zip(params, current[name]["params"], strict=True):
            assert set(was) <= set(isnow), f"{file}: {name} values {set(was) - set(isnow)}"


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

    old_dir = tmp_path / "old"
    shutil.copytree(HISTORY, old_dir)
    shutil.copy(OLD_BENCHMARKS, old_dir / "benchmarks.json")
    before = _store(old_dir, tmp_path / "before.sqlite")
    after_dir = tmp_path / "results"
    shutil.copytree(HISTORY, after_dir)
    # What `asv run` writes for the current suites: asv's Benchmarks.save() of its discovery records.
    util.write_json(str(after_dir / "benchmarks.json"), current, api_version=2)
    after = _store(after_dir, tmp_path / "after.sqlite")
    assert before["benchmarks"], "nothing ingested"
    # The 15 benchmarks the old file describes: same ids, names, versions, units, and the same series
    # (benchmark id, params_key, machine, version); the newest run's other benchmarks it cannot describe.
    described = {b[0] for b in before["benchmarks"] if b[1] in bundled()}
    assert len(described) == 15
    for key in ("benchmarks", "series"):
        assert [r for r in after[key] if r[0] in described] == [r for r in before[key] if r[0] in described]
    combos = {(name, values) for _, name, _, params in bundled_results() for values in itertools.product(*params)}
    assert len(after["series"]) == len(combos)  # every bundled series, none split by a version
