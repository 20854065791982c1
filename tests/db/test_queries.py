"""Queries on a real store (the asv fixture plus a synthetic history): shapes, order, errors, speed."""

from __future__ import annotations

import json
import math
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
from db.provenance import is_provenance
from db.synthetic import write_synthetic_results
from tests.db.conftest import bench_row, results_doc, write_results


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
    assert list(c.columns) == ["commit_id", "sha", "date", "message", "author", "parents", "branch", "generation",
                               "pos"]
    assert len(c) == 40 and c["date"].is_monotonic_increasing and list(c["pos"]) == list(range(40))
    assert c["commit_id"].dtype == "int64"
    assert len(queries.commits(s)) > 40
    with pytest.raises(queries.NotFound, match="no machine named 'nope'.*synth-h200"):
        queries.commits(s, "nope")
    info = queries.machine_info(s, "synth-h200")
    assert info["gpu_name"] == "NVIDIA H200" and info["gpu_cc"] == "9.0" and "id" not in info
    with pytest.raises(queries.NotFound, match="no machine named 'nope'"):
        queries.machine_info(s, "nope")
    shas = list(c["sha"].iloc[:2])
    assert queries.commit_messages(s, [*shas, None, "f" * 40]).keys() == set(shas)


KEY = '{"concurrency": "1", "impl": "\'simt\'", "topk": "128"}'


def test_series_and_history(s: Session) -> None:
    sr = queries.series(s, machine="synth-h200")
    assert list(sr.columns) == ["benchmark", "params_key", "machine", "unit", "type", "version", "param_names"]
    assert len(sr) == 60 and set(sr["unit"]) == {"seconds", "tokens/s"} and set(sr["machine"]) == {"synth-h200"}
    row = sr[(sr["benchmark"] == "bench_synth.Synth000.time_case") & (sr["params_key"] == KEY)].iloc[0]
    assert row["param_names"] == ["impl", "concurrency", "topk"] and row["type"] == "time"
    every = queries.series(s)
    assert len(every) > len(sr) and set(every["machine"]) == set(queries.machines(s)["name"])
    assert every[every["machine"] == "synth-h200"].reset_index(drop=True).equals(sr)
    # One series by its params dict, the same by its key, and two at once (the dashboard's way).
    hist = queries.history(s, row["benchmark"], {"concurrency": "1", "impl": "'simt'", "topk": "128"}, "synth-h200")
    assert list(hist.columns) == ["params_key", "commit_id", "sha", "value", "q_25", "q_75", "status", "runs",
                                  "run_date", "benchmark_version", "environment", "run_id"]
    assert len(hist) == 40 and (hist["status"] == "ok").all() and (hist["runs"] == 1).all()
    commits = queries.commits(s, "synth-h200")
    assert list(hist["sha"]) == list(commits["sha"]) and list(hist["commit_id"]) == list(commits["commit_id"])
    assert (hist["q_25"] <= hist["value"]).all() and (hist["value"] <= hist["q_75"]).all()
    # The step at commit 20 shows in the history (values x1.5).
    assert hist["value"].iloc[20:].median() / hist["value"].iloc[:20].median() == pytest.approx(1.5, rel=0.05)
    assert queries.history(s, row["benchmark"], KEY, "synth-h200").equals(hist)
    other = sr[sr["benchmark"] == row["benchmark"]]["params_key"].iloc[-1]
    both = queries.history(s, row["benchmark"], [other, KEY], "synth-h200")
    assert len(both) == 80 and list(both["params_key"]) == [min(KEY, other)] * 40 + [max(KEY, other)] * 40
    assert both[both["params_key"] == KEY].reset_index(drop=True).equals(hist)
    infos = queries.run_infos(s, [*hist["run_id"].iloc[:3], hist["run_id"].iloc[0]])
    assert len(infos) == 3 and all(i["gpu_name"] == "NVIDIA H200" for i in infos.values())
    assert queries.history(s, row["benchmark"], '{"nope": "1"}', "synth-h200").empty
    assert queries.history(s, row["benchmark"], [], "synth-h200").empty
    with pytest.raises(queries.NotFound, match="no benchmark named"):
        queries.history(s, "nope", "{}", "synth-h200")
    with pytest.raises(queries.NotFound, match="no machine named"):
        queries.history(s, row["benchmark"], KEY, "nope")


def test_kernel_config_records_are_not_series(tmp_path: Path) -> None:
    """track_launch_* results (db.provenance.is_provenance) describe a case: no series of their own, read by
    launch_config per case and commit (median over the commit's runs with a value)."""
    from db.models import Environment, Result, Run

    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    h = write_synthetic_results(tmp_path / "r", commits=2, series=6, machine="m", seed=3)
    engine = make_engine(url)
    assert ingest_paths(engine, [h.root], progress=False).ok
    with Session(engine) as s, s.begin():
        timed = queries.series(s, "m").iloc[0]
        module = timed["benchmark"].split(".", 1)[0]
        block_h = Benchmark(name=f"{module}.SynthMetrics.track_launch_block_h", type="track", unit="config",
                            param_names=[], params=[], version="1")
        s.add(block_h)
        s.flush()
        runs = s.scalars(select(Run).order_by(Run.id)).all()
        env = s.scalars(select(Environment)).first()
        # A second run of the first commit: the config is the median over the runs with a value.
        rerun = Run(commit_id=runs[0].commit_id, machine_id=runs[0].machine_id, environment_id=env.id,
                    started_at=runs[0].started_at, source_path="rerun.json", content_hash="x" * 64)
        s.add(rerun)
        s.flush()
        for run, value in ((runs[0], 16.0), (rerun, 32.0), (runs[1], None)):
            s.add(Result(run_id=run.id, benchmark_id=block_h.id, params_key=timed["params_key"],
                         params=json.loads(timed["params_key"]), value=value, status="ok" if value else "skipped"))
        s.flush()
        assert is_provenance(block_h.name) and not is_provenance(timed["benchmark"])
        assert block_h.name not in set(queries.series(s, "m")["benchmark"]) | set(queries.series(s)["benchmark"])
        config = queries.launch_config(s, timed["benchmark"], [timed["params_key"], "{}"], "m")
        assert config.to_dict("records") == [
            {"params_key": timed["params_key"], "commit_id": runs[0].commit_id, "key": "block_h", "value": 24.0}
        ]
        assert queries.launch_config(s, "other_module.X.time_y", [timed["params_key"]], "m").empty
        # Only at the commits asked for (History reads the configs of the commits it draws).
        at = queries.launch_config(s, timed["benchmark"], [timed["params_key"]], "m", [runs[0].commit_id])
        assert at.to_dict("records") == config.to_dict("records")
        assert queries.launch_config(s, timed["benchmark"], [timed["params_key"]], "m", [runs[1].commit_id]).empty
        # The re-run of the first commit pools with its first run in the timed series' history too.
        before = queries.history(s, timed["benchmark"], timed["params_key"], "m")
        s.add(Result(run_id=rerun.id, benchmark_id=queries._benchmark_id(s, timed["benchmark"]),
                     params_key=timed["params_key"], params=json.loads(timed["params_key"]),
                     value=3 * before["value"].iloc[0], status="ok"))
        s.flush()
        after = queries.history(s, timed["benchmark"], timed["params_key"], "m")
        assert list(after["commit_id"]) == list(before["commit_id"]) == [r.commit_id for r in runs]
        assert list(after["runs"]) == [2, 1] and after["value"].iloc[0] == pytest.approx(2 * before["value"].iloc[0])
        assert after["run_id"].iloc[0] == rerun.id and after["value"].iloc[1] == before["value"].iloc[1]
        # Only at the commits asked for (History reads the commits it draws): the same pooled rows.
        second = queries.history(s, timed["benchmark"], timed["params_key"], "m", [runs[1].commit_id])
        assert second.to_dict("records") == after.iloc[1:].reset_index(drop=True).to_dict("records")
        assert queries.history(s, timed["benchmark"], timed["params_key"], "m", []).empty
    engine.dispose()


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


def test_a_benchmark_without_unit_has_none_not_nan(tmp_path: Path) -> None:
    """Results ingested without benchmarks.json carry no unit: every reader gets None (a NaN there crashed the
    summary grid and `mlaperf publish` on a track_ benchmark)."""
    from tests.db.conftest import bench_row, results_doc, write_results

    doc = results_doc({"b.S.track_count": bench_row([3.0], []), "b.S.time_x": bench_row([1e-4], [])})
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    engine = make_engine(url)
    assert ingest_paths(engine, [write_results(tmp_path / "results", doc)], progress=False).ok
    with Session(engine) as s:
        frame = queries.series(s)
    units = dict(zip(frame["benchmark"], frame["unit"], strict=True))
    assert units == {"b.S.time_x": "seconds", "b.S.track_count": None}
    assert not any(isinstance(v, float) for col in ("unit", "type", "version") for v in frame[col])
    engine.dispose()


def test_the_version_measured_last_is_the_same_whichever_series_are_read(tmp_path: Path, db_url: str) -> None:
    """One commit, run 1 at version v1 (a 1.0, b 2.0) and a later run 2 at v2 (a 1.5, b failed): v2 was measured
    last, so b has no value there. History read b alone decided from b's rows only and showed v1's 2.0, while
    History of a and b, the grid, commit results and detection said failed; a detection scoped to b kept 2.0."""
    from db.query_base import last_version_only
    from regressions.results import load_values

    bench, params = "bench.B.time_x", [["'a'", "'b'"]]

    def doc(env: str, version: str, values: list[float | None], started: int) -> dict:
        return results_doc({bench: bench_row(values, params, version=version, started_at=started, duration=1)},
                           machine="m", env_name=env, commit="c" * 40)

    write_results(tmp_path, doc("e1", "v1", [1.0, 2.0], 1_700_000_000_000))
    write_results(tmp_path, doc("e2", "v2", [1.5, None], 1_700_000_100_000))
    (tmp_path / "benchmarks.json").write_text(json.dumps({"version": 2, bench: {
        "name": bench, "type": "time", "unit": "seconds", "param_names": ["p"], "params": params, "version": "v2"}}))
    engine = make_engine(db_url)
    assert ingest_paths(engine, [tmp_path], progress=False).ok
    ka, kb = '{"p": "\'a\'"}', '{"p": "\'b\'"}'
    with Session(engine) as s:
        alone = queries.history(s, bench, [kb], "m")
        both = queries.history(s, bench, [ka, kb], "m")
        cid = int(queries.commits(s, "m")["commit_id"].iloc[-1])
        recent = queries.recent_values(s, "m", [cid])
        at = queries.commit_results(s, cid, "m")
        runs = load_values(s, machine_ids=None, series=None, windows=None)
        bid, mid = int(runs["benchmark_id"].iloc[0]), int(runs["machine_id"].iloc[0])
        scoped = load_values(s, machine_ids=None, series={(bid, kb, mid)}, windows=None)
        scoped = last_version_only(s, scoped[scoped["params_key"] == kb], "version", complete=False)
        everything = last_version_only(s, runs, "version")
    engine.dispose()
    b_alone = alone.iloc[0]
    b_both = both[both["params_key"] == kb].iloc[0]
    assert (b_alone["status"], b_alone["benchmark_version"]) == (b_both["status"], b_both["benchmark_version"]) \
        == ("failed", "v2"), (b_alone, b_both)
    assert math.isnan(recent.loc[recent["params_key"] == kb, "value"].iloc[0])
    assert at.loc[at["params_key"] == kb, "status"].iloc[0] == "failed"
    assert scoped.empty and (everything["params_key"] == kb).sum() == 0
    assert everything.loc[everything["params_key"] == ka, "value"].tolist() == [1.5]

