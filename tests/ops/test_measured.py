""""Already measured" from the store: a run covers the suite when it holds every benchmark at its version;
provenance records (track_launch_*) are never asked for, so adding them does not re-open history."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from db.engine import make_engine, upgrade
from db.models import Benchmark, Commit, Environment, Machine, Result, Run
from mlaperf.measured import covering_runs


def _store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    upgrade(url)
    with Session(make_engine(url)) as s, s.begin():
        run = Run(machine=Machine(name="gpu"), commit=Commit(sha="a" * 40), environment=Environment(name="e"),
                  source_path="r.json", content_hash="h")  # fmt: skip
        s.add(Result(run=run, benchmark=Benchmark(name="bench_decode.SparseDecode.time_decode"),
                     benchmark_version="v1", params={}, params_key="()", status="ok", value=1e-5))  # fmt: skip
    return url


def test_a_run_covers_the_suite_whatever_provenance_records_it_lacks(tmp_path: Path) -> None:
    url = _store(tmp_path)
    suite = {"bench_decode.SparseDecode.time_decode": "v1"}
    with Session(make_engine(url)) as s:
        assert covering_runs(s, "gpu", ["a" * 40], suite) == {"a" * 40: 1}
        with_launch = {**suite, "bench_decode.SparseDecodeMetrics.track_launch_block_h": "1"}
        assert covering_runs(s, "gpu", ["a" * 40], with_launch) == {"a" * 40: 1}
        new_version = {"bench_decode.SparseDecode.time_decode": "v2"}  # the benchmark changed: measure again
        assert covering_runs(s, "gpu", ["a" * 40], new_version) == {}
