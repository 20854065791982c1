"""Queries on a real store (the asv fixture plus a synthetic history): shapes, order, errors, speed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from db import queries
from db.engine import make_engine
from db.ingest import ingest_paths
from db.models import Benchmark, Commit, Machine, Regression, params_key
from db.synthetic import write_synthetic_results


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, openblas: Path) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("queries")
    synth = write_synthetic_results(
        tmp / "synth",
        commits=40,
        series=60,
        machine="synth-h200",
        steps={20: 1.5},
        machine_params={"gpu_name": "NVIDIA H200", "gpu_cc": "9.0"},
    )
    url = f"sqlite:///{tmp / 'store.sqlite'}"
    engine = make_engine(url)
    summary = ingest_paths(engine, [openblas, synth.root], progress=False)
    assert summary.ok and summary.results == 37454 + synth.total_results
    engine.dispose()
    yield url


@pytest.fixture
def s(store: str) -> Iterator[Session]:
    engine = make_engine(store, readonly=True)  # the dashboard's way in
    with Session(engine) as session:
        yield session
    engine.dispose()


def test_machines_and_commits(s: Session) -> None:
    m = queries.machines(s).set_index("name")
    assert list(m.index) == ["gha-aws-graviton", "gha-aws-skylake", "gha-ubuntu-noble", "synth-h200"]
    assert m.loc["synth-h200", "gpu_name"] == "NVIDIA H200" and m.loc["synth-h200", "runs"] == 40
    c = queries.commits(s, "synth-h200")
    assert len(c) == 40 and c["date"].is_monotonic_increasing
    assert len(queries.commits(s)) > 40
    with pytest.raises(queries.NotFound, match="no machine named 'nope'.*synth-h200"):
        queries.commits(s, "nope")


def test_series_and_history(s: Session) -> None:
    sr = queries.series(s, machine="synth-h200")
    assert len(sr) == 60 and set(sr["unit"]) == {"seconds", "tokens/s"}
    key = '{"concurrency": "1", "impl": "\'simt\'", "topk": "128"}'
    row = sr[(sr["benchmark"] == "bench_synth.Synth000.time_case") & (sr["params_key"] == key)].iloc[0]
    assert row["params"] == {"concurrency": "1", "impl": "'simt'", "topk": "128"} and row["points"] == 40
    hist = queries.history(s, row["benchmark"], row["params"], "synth-h200")
    assert list(hist.columns[:11]) == [
        "sha",
        "date",
        "message",
        "author",
        "value",
        "q_25",
        "q_75",
        "ci_99_a",
        "ci_99_b",
        "samples",
        "status",
    ]
    assert len(hist) == 40 and hist["date"].is_monotonic_increasing
    assert len(hist["samples"].iloc[0]) == 10
    # The step at commit 20 shows in the history (values x1.5).
    assert hist["value"].iloc[20:].median() / hist["value"].iloc[:20].median() == pytest.approx(1.5, rel=0.05)
    assert queries.history(s, row["benchmark"], '{"nope": "1"}', "synth-h200").empty
    with pytest.raises(queries.NotFound, match="no benchmark named"):
        queries.history(s, "nope", "{}", "synth-h200")


def test_results_at_commit_expands_params(s: Session) -> None:
    sha = queries.commits(s, "synth-h200")["sha"].iloc[-1]
    assert sha is not None
    frame = queries.results_at_commit(s, sha[:10], "synth-h200", benchmark_prefix="bench_synth.Synth001")
    assert len(frame) == 30 and set(frame["benchmark"]) == {"bench_synth.Synth001.track_case"}
    assert frame["impl"].isin(["simt", "mma"]).all()
    assert sorted(frame["concurrency"].unique()) == [1, 4, 16, 64, 128]
    assert (frame["sha"] == sha).all()
    assert queries.results_at_commit(s, sha, "synth-h200", benchmark_prefix="bench_synth.Synth0%").empty


def test_commit_lookup_errors(s: Session) -> None:
    with pytest.raises(queries.CommitNotFound, match="no stored commit matches 'zzzz'"):
        queries.results_at_commit(s, "zzzz", "synth-h200")
    with pytest.raises(queries.CommitNotFound, match="ambiguous"):
        queries.results_at_commit(s, "0", "gha-aws-skylake")
    sha = queries.commits(s, "gha-aws-skylake")["sha"].iloc[-1]
    assert (queries.results_at_commit(s, sha[:12], "gha-aws-skylake")["sha"] == sha).all()


def test_regressions_listing_and_status(store: str) -> None:
    engine = make_engine(store)
    with Session(engine) as s:
        sha = queries.commits(s, "synth-h200")["sha"].iloc[20]
        ids = {
            "benchmark_id": s.execute(select(Benchmark.id).where(Benchmark.name == "bench_synth.Synth000.time_case")),
            "machine_id": s.execute(select(Machine.id).where(Machine.name == "synth-h200")),
            "commit_id": s.execute(select(Commit.id).where(Commit.sha == sha)),
        }
        params = {"concurrency": "1", "impl": "'simt'", "topk": "128"}
        s.add(
            Regression(
                **{k: v.scalar_one() for k, v in ids.items()},
                params_key=params_key(params),
                params=params,
                before=1.0,
                after=1.5,
                ratio=1.5,
                direction="up_is_worse",
                status="new",
                p_value=1e-4,
            )
        )
        s.flush()
        reg = queries.regressions(s)
        assert len(reg) == 1 and reg.iloc[0]["status"] == "new" and reg.iloc[0]["sha"] == sha
        assert reg.iloc[0]["params"] == params and reg.iloc[0]["unit"] == "seconds"
        queries.set_regression_status(s, int(reg.iloc[0]["id"]), "acknowledged")
        reg = queries.regressions(s, status="acknowledged", machine="synth-h200")
        assert len(reg) == 1 and reg.iloc[0]["ratio"] == 1.5
        assert queries.regressions(s, status=["new", "fixed"]).empty
        with pytest.raises(ValueError, match="status must be one of"):
            queries.set_regression_status(s, int(reg.iloc[0]["id"]), "solved")
        with pytest.raises(queries.NotFound):
            queries.set_regression_status(s, 10**6, "fixed")
        s.rollback()  # caller-owned transaction: nothing was committed
        assert queries.regressions(s).empty
    engine.dispose()


def test_queries_are_fast(s: Session) -> None:
    start = time.perf_counter()
    queries.series(s)
    queries.history(
        s,
        "bench_synth.Synth000.time_case",
        {"concurrency": "1", "impl": "'simt'", "topk": "128"},
        "synth-h200",
    )
    queries.results_at_commit(s, queries.commits(s, "synth-h200")["sha"].iloc[-1], "synth-h200")
    assert time.perf_counter() - start < 5.0


def test_pool_runs_is_the_median_of_the_runs_with_a_value() -> None:
    """A commit's result from its runs: median over runs with a value; failed/skipped runs do not count,
    and give the status only when no run has a value; unpooled columns from the latest run with a value."""
    import pandas as pd

    nan = float("nan")
    runs = pd.DataFrame(
        {
            "key": ["a", "a", "a", "a", "b", "b", "c", "d"],
            "value": [1.0, 2.0, 10.0, nan, nan, nan, 5.0, nan],
            "status": ["ok", "ok", "ok", "failed", "failed", "skipped", "ok", "skipped"],
            "samples": [[1.0], [2.0], [10.0], None, None, None, [5.0], None],
            "ci_99_a": [0.9, 1.9, 9.0, nan, nan, nan, 4.0, nan],
            "ci_99_b": [1.1, 2.1, 11.0, nan, nan, nan, 6.0, nan],
            "q_25": [0.95, 1.95, 9.5, nan, nan, nan, 4.5, nan],
            "run_id": [1, 2, 3, 4, 5, 6, 7, 8],
            "run_started_at": pd.to_datetime(["2025-01-01"] * 3 + ["2025-01-02"] + ["2025-01-01"] * 4),
        }
    )
    out = queries.pool_runs(runs, ["key"]).set_index("key").sort_index()
    assert out.loc["a", "value"] == 2.0 and out.loc["a", "status"] == "ok" and out.loc["a", "runs"] == 4
    assert sorted(out.loc["a", "samples"]) == [1.0, 2.0, 10.0]
    assert (out.loc["a", "ci_99_a"], out.loc["a", "ci_99_b"]) == (0.9, 11.0)
    assert out.loc["a", "run_id"] == 3 and out.loc["a", "q_25"] == 9.5  # latest run with a value, not run 4
    assert out.loc["b", "status"] == "failed" and pd.isna(out.loc["b", "value"]) and out.loc["b", "runs"] == 2
    assert out.loc["c", "value"] == 5.0 and out.loc["c", "runs"] == 1
    assert out.loc["d", "status"] == "skipped"
    assert queries.pool_runs(runs.iloc[:0], ["key"]).empty
