"""Kernel-config records (``track_launch_*``) are provenance, not performance: detection never flags them and
does not count them in an alert group's series base, and `mlaperf compare` leaves them out. One rule,
``db.provenance.is_provenance``, which names what the asv suites write."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from benchmarks import _suite
from db.models import AlertGroup, Benchmark, Commit, Regression
from db.provenance import PROVENANCE_PREFIX, is_provenance
from regressions.compare import REGRESSED, compare_commits, exit_status
from regressions.config import Settings
from regressions.store import detect_store

Ingest = Callable[[Engine, list[Path]], None]
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_q_25", "stats_q_75", "samples"]
COMMITS, STEP_AT = 14, 7
TIMED = [f"bench_x.Suite.time_case_{i}" for i in range(3)]  # all three step 2x at STEP_AT
LAUNCH = "bench_x.SuiteMetrics.track_launch_block_h"  # steps 16 -> 64 at STEP_AT
PARAMS = [["'mma'"]]


def test_the_rule_matches_what_the_suites_write() -> None:
    assert PROVENANCE_PREFIX == _suite.LAUNCH_PREFIX
    assert is_provenance("bench_decode.SparseDecodeMetrics.track_launch_block_h")
    assert is_provenance("benchmarks.bench_step.DecodeStepMetrics.track_launch_indexer_block_t")
    for name in ("bench_decode.SparseDecodeMetrics.track_gbps", "bench_decode.SparseDecode.time_decode",
                 "bench_x.track_launches.time_launch", "track_launch_in_the_module.Suite.time_x"):
        assert not is_provenance(name), name


def _history(root: Path) -> list[str]:
    """asv results of COMMITS commits: the timed cases step 2x slower at STEP_AT, the BLOCK_H record 4x."""
    rng = random.Random(0)
    shas = [f"{i + 1:02d}" + "c" * 38 for i in range(COMMITS)]
    entries = {name: {"name": name, "type": "time", "unit": "seconds", "param_names": ["impl"], "params": PARAMS,
                      "version": "1"} for name in TIMED}  # fmt: skip
    entries[LAUNCH] = {"name": LAUNCH, "type": "track", "unit": "config", "param_names": ["impl"],
                       "params": PARAMS, "version": "1"}  # fmt: skip
    (root / "m").mkdir(parents=True)
    (root / "benchmarks.json").write_text(json.dumps({**entries, "version": 2}))
    (root / "m" / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for i, sha in enumerate(shas):
        ms = int((start + dt.timedelta(hours=i)).timestamp() * 1000)
        results: dict[str, list[Any]] = {}
        for name in TIMED:
            level = 1e-4 * (2.0 if i >= STEP_AT else 1.0)
            samples = [level * (1 + rng.gauss(0, 0.003)) for _ in range(10)]
            mid = sorted(samples)[5]
            results[name] = [[mid], PARAMS, "1", ms, 1.0, [min(samples)], [max(samples)], [samples]]
        results[LAUNCH] = [[64.0 if i >= STEP_AT else 16.0], PARAMS, "1", ms, 0.1, [None], [None], [None]]
        doc = {"commit_hash": sha, "env_name": "existing-py3.11", "date": ms, "params": {"machine": "m"},
               "python": "3.11", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
               "results": results, "durations": {}, "version": 2}  # fmt: skip
        (root / "m" / f"{sha[:8]}-existing-py3.11.json").write_text(json.dumps(doc))
    return shas


def test_detection_never_flags_or_counts_kernel_configs(engine: Engine, ingest: Ingest, tmp_path: Path) -> None:
    _history(tmp_path / "results")
    ingest(engine, [tmp_path / "results"])
    with Session(engine) as s, s.begin():
        summary = detect_store(s, Settings())
    with Session(engine) as s:
        names = dict(s.execute(select(Benchmark.id, Benchmark.name)).all())
        flagged = [names[r.benchmark_id] for r in s.execute(select(Regression)).scalars()]
        groups = list(s.execute(select(AlertGroup)).scalars())
    assert sorted(flagged) == sorted(TIMED), "the timed steps are flagged, the BLOCK_H change is not"
    assert summary.series_examined == len(TIMED)
    (group,) = groups
    # Three members out of the three performance series measured there: machine-wide (with the config
    # record counted it would be three of four).
    assert (group.series, group.machine_wide) == (len(TIMED), True)


def test_compare_leaves_kernel_configs_out(engine: Engine, ingest: Ingest, tmp_path: Path) -> None:
    shas = _history(tmp_path / "results")
    ingest(engine, [tmp_path / "results"])
    with Session(engine) as s:
        commit = {c.sha: c for c in s.execute(select(Commit)).scalars()}
        rows = compare_commits(s, commit[shas[STEP_AT - 1]], commit[shas[STEP_AT]])
    assert sorted(r.benchmark for r in rows) == sorted(TIMED)
    assert {r.status for r in rows} == {REGRESSED} and exit_status(rows) == 1
    with Session(engine) as s:  # base and head with the same config: nothing at all is listed for it
        rows = compare_commits(s, commit[shas[0]], commit[shas[1]])
    assert LAUNCH not in {r.benchmark for r in rows} and exit_status(rows) == 0
