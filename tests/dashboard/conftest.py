"""Seeded stores for the dashboard tests: real asv files (OpenBLAS fixture + synthetic MLA suites written by
asv's own ``Results.save``) ingested through ``db.ingest``, plus flagged regressions."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).parent))
import asv_synth  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dashboard" / "app.py"
OPENBLAS = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"  # vendored, see its README
MLA_MACHINE = "h200-sxm"
N_COMMITS = 6
SLOW_FROM = 4  # the MMA decode kernel gets 30% slower from this commit on


@dataclass(frozen=True)
class Seeded:
    url: str
    path: Path
    shas: list[str]
    regression_ids: dict[str, int]


def _seed(tmp: Path, url: str | None = None) -> Seeded:
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths
    from db.models import Benchmark, Commit, Machine, Regression

    results = tmp / "results"
    shas = asv_synth.commit_shas(N_COMMITS)
    benches = asv_synth.mla_benchmarks(slow_from=SLOW_FROM)
    # One failed run: the step benchmark crashed on commit 2.
    asv_synth.write_results(results, MLA_MACHINE, benches, shas,
                            failed={(2, "bench_step.DecodeStep.time_step")})
    path = tmp / "store.sqlite"
    url = url or f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    paths = [results] + ([OPENBLAS] if OPENBLAS.exists() else [])
    summary = ingest_paths(engine, paths, progress=False)
    assert summary.ok, summary.failed

    ids: dict[str, int] = {}
    with Session(engine) as s:
        def one(model: type, **kw: object) -> int:
            return s.scalars(select(model.id).filter_by(**kw)).one()

        mla = Regression(
            benchmark_id=one(Benchmark, name="bench_decode.SparseDecode.time_decode"),
            params_key='{"concurrency": "64", "impl": "\'mma\'", "topk": "512"}',
            params={"concurrency": "64", "impl": "'mma'", "topk": "512"},
            machine_id=one(Machine, name=MLA_MACHINE), commit_id=one(Commit, sha=shas[SLOW_FROM]),
            before=175e-6, after=227.5e-6, ratio=1.3, direction="up_is_worse", status="new", p_value=1e-4,
        )
        s.add(mla)
        if OPENBLAS.exists():
            blas_commit = s.scalars(
                select(Commit.sha).order_by(Commit.date.desc()).where(Commit.sha.notin_(shas)).limit(1)
            ).one()
            s.add(Regression(
                benchmark_id=one(Benchmark, name="benchmarks.dot.time_dot"), params_key='{"size": "100"}',
                params={"size": "100"}, machine_id=one(Machine, name="gha-aws-graviton"),
                commit_id=one(Commit, sha=blas_commit), before=4.4e-7, after=5.0e-7, ratio=1.136,
                direction="up_is_worse", status="acknowledged",
            ))
        s.commit()
        ids["mla"] = mla.id
    engine.dispose()
    return Seeded(url, path, shas, ids)


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return _seed(tmp_path_factory.mktemp("dash_store"))


@pytest.fixture
def writable_copy(seeded: Seeded, tmp_path: Path) -> Iterator[Seeded]:
    """A private copy of the seeded store, for tests that write."""
    dst = tmp_path / "copy.sqlite"
    shutil.copy(seeded.path, dst)
    yield Seeded(f"sqlite:///{dst}", dst, seeded.shas, seeded.regression_ids)


@pytest.fixture
def pg_seeded(tmp_path: Path, pg_schema_url: Callable[[str], str]) -> Seeded:
    """The seeded store on PostgreSQL, in a fresh schema dropped afterwards (MLAPERF_TEST_PG_URL)."""
    return _seed(tmp_path, pg_schema_url("dash"))


@pytest.fixture
def empty_store(tmp_path: Path) -> str:
    from db.engine import upgrade

    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    upgrade(url)
    return url
