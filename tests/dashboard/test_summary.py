"""The summary grid (issue 28 item 2): every series with its newest value, sparkline, latest change and last
flag, searchable by words kept in the URL, on its own page and (largest changes first) on the Overview."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import MLA_MACHINE, N_COMMITS, NEW_VERSION, Seeded
from test_pages import app, goto, vega

from dashboard import fmt, summary
from regressions import units


def test_grid_rules() -> None:
    series = pd.DataFrame({"benchmark": ["m.C.time_a", "m.C.track_rate"], "params_key": ['{"n": "1"}'] * 2,
                           "unit": ["seconds", "tokens/s"]})
    values = pd.DataFrame({"benchmark": ["m.C.time_a"] * 3 + ["m.C.track_rate"] * 3,
                           "params_key": ['{"n": "1"}'] * 6, "commit_id": [1, 2, 3] * 2,
                           "value": [1.0, 1.0, 2.0, 10.0, 10.0, 5.0]})
    regs = pd.DataFrame({"benchmark": ["m.C.time_a"], "params_key": ['{"n": "1"}'], "status": ["new"],
                         "ratio": [2.0], "sha": ["a" * 40]})
    grid = summary.grid(series, values, [1, 2, 3], regs,
                        lambda b, u: "up_is_worse" if "time" in b else "down_is_worse")
    assert list(grid["latest"]) == [2.0, 5.0]
    assert grid["change"].tolist() == pytest.approx([2.0, 2.0])  # both twice as bad, whatever the direction
    assert grid["flag"].iloc[0] == f"new {units.fmt_ratio(2.0)} at {fmt.short_sha('a' * 40)}"
    assert grid["flag"].iloc[1] == ""
    big = summary.grid(series, values, [1, 2, 3], regs.assign(ratio=[123.4]), lambda b, u: "up_is_worse")
    assert big["flag"].iloc[0] == f"new {units.fmt_ratio(123.4)} at aaaaaaaa" != "new 123.40x at aaaaaaaa"
    assert summary.names(grid).iloc[0] == "m.C.time_a [n=1]"
    assert list(summary.search(grid, "RATE n=1")["benchmark"]) == ["m.C.track_rate"]
    assert summary.search(grid, "time rate").empty  # every word must match
    assert summary.latest_change([None, 3.0], "up_is_worse") is None


def test_a_series_not_run_lately_is_not_called_failed() -> None:
    # OpenBLAS's renamed benchmarks have no result among the grid's commits: 140 of 362 series per machine read
    # "failed" although none ever failed. A series whose results there all failed still reads "failed".
    keys = ['{"n": "1"}', '{"n": "2"}', '{"n": "3"}']
    series = pd.DataFrame({"benchmark": "m.C.time_a", "params_key": keys, "unit": "seconds"})
    values = pd.DataFrame({"benchmark": "m.C.time_a", "params_key": [keys[0], keys[0], keys[1]],
                           "commit_id": [1, 2, 2], "value": [1e-6, 2e-6, math.nan]})
    grid = summary.grid(series, values, [1, 2], pd.DataFrame(), lambda b, u: "up_is_worse")
    assert grid["ran"].tolist() == [True, True, False]
    assert summary.latest_texts(grid) == ["2.00 us", "failed ×1", "not run"]
    # Live series first, on the dashboard and the site alike (OpenBLAS's grid opened on 60 renamed series).
    back = summary.grid(series.iloc[::-1], values, [1, 2], pd.DataFrame(), lambda b, u: "up_is_worse")
    assert summary.latest_texts(summary.live_first(back)) == ["failed ×1", "2.00 us", "not run"]
    from mlaperf.publish_model import grid_rows

    rows = grid_rows(back, summary.names(back), lambda b: 0.05)
    assert [(r["name"], r["latest"]) for r in rows] == [("m.C.time_a [n=2]", "failed ×1"),
                                                        ("m.C.time_a [n=1]", "2.00 us"),
                                                        ("m.C.time_a [n=3]", "not run")]


def test_a_series_that_broke_reads_failed_since_not_its_old_value() -> None:
    # Jaxion's real history: 6 of 8 benchmarks failed at the 11 newest commits, and the grid showed each one's
    # value from 11 commits before as "latest" with its stale change ("-4.3% better"); nothing said it failed.
    keys = ['{"n": "1"}', '{"n": "2"}', '{"n": "3"}']
    series = pd.DataFrame({"benchmark": "m.C.time_a", "params_key": keys, "unit": "seconds"})
    values = pd.DataFrame({"benchmark": "m.C.time_a", "params_key": [keys[0]] * 4 + [keys[1]] * 4 + [keys[2]] * 2,
                           "commit_id": [1, 2, 3, 4] * 2 + [1, 3],
                           "value": [1e-6, 1e-6, 2e-6, math.nan, 1e-6, 1e-6, math.nan, math.nan, 1e-6, 2e-6]})
    grid = summary.grid(series, values, [1, 2, 3, 4], pd.DataFrame(), lambda b, u: "up_is_worse")
    assert grid["failing"].tolist() == [1, 2, 0]
    assert summary.latest_texts(grid) == ["failed ×1 (was 2.00 us)", "failed ×2 (was 1.00 us)", "2.00 us"]
    assert grid["change_text"].tolist() == ["", "", "+100% worse"]  # no change from a value older than a failure
    # The Overview's order: failing first (the longest first), then the largest change.
    assert summary.largest_first(grid)["params_key"].tolist() == [keys[1], keys[0], keys[2]]
    # A skipped result (asv's "not run here") is no failure: with statuses, as the store reads them.
    status = ["ok", "ok", "ok", "skipped", "ok", "ok", "failed", "skipped", "skipped", "skipped"]
    values = values.assign(status=status, value=[*values["value"][:8], math.nan, math.nan])
    skipped = summary.grid(series, values, [1, 2, 3, 4], pd.DataFrame(), lambda b, u: "up_is_worse")
    assert skipped["failing"].tolist() == [0, 1, 0]
    assert summary.latest_texts(skipped) == ["2.00 us", "failed ×1 (was 1.00 us)", "skipped"]
    from mlaperf.publish_model import grid_rows  # the site's grid: the same text, the failing ones in colour

    rows = grid_rows(grid, summary.names(grid), lambda b: 0.05)
    assert [(r["latest"], r["failing"]) for r in rows] == list(zip(summary.latest_texts(grid), [True, True, False],
                                                                   strict=True))


RATE = "m.C.track_tokens_per_s"


def _rate_grid() -> pd.DataFrame:
    """One tokens/s series going 4,174 -> 18,780 (4.5x better) and one time doubling."""
    series = pd.DataFrame({"benchmark": [RATE, "m.C.time_a"], "params_key": ['{"n": "1"}'] * 2,
                           "unit": ["tokens/s", "seconds"]})
    values = pd.DataFrame({"benchmark": [RATE] * 2 + ["m.C.time_a"] * 2, "params_key": ['{"n": "1"}'] * 4,
                           "commit_id": [1, 2] * 2, "value": [4174.0, 18780.0, 1.0, 2.0]})
    return summary.grid(series, values, [1, 2], pd.DataFrame(),
                        lambda b, u: "down_is_worse" if u == "tokens/s" else "up_is_worse")


def test_a_rate_going_up_reads_better_by_its_own_change_on_the_site() -> None:
    from mlaperf.publish_model import grid_rows

    grid = _rate_grid()
    assert list(grid["change_text"]) == ["+350% better", "+100% worse"]
    rows = grid_rows(grid, summary.names(grid), lambda b: 0.05)
    assert [r["change"] for r in rows] == ["+350% better", "+100% worse"]  # never the inverse's "-78% better"
    assert [r["tone"] for r in rows] == ["better", "worse"]


def test_rates_going_up_read_better_on_the_page(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    # The MMA kernels were fixed (tokens/s back up) after the five commits before the newest were slow.
    at = goto(app(monkeypatch, seeded.url, query={"sum_q": "track_tokens_per_s mma"}), "summary")
    changes = at.dataframe[0].value["latest change"]
    assert len(changes) > 0 and changes.str.fullmatch(r"\+\d+% better").all(), list(changes)


def test_page_searches_through_the_url(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url, query={"sum_q": "time_decode mma 64"}), "summary")
    df = at.dataframe[0].value
    assert len(df) > 0 and df["series"].str.contains("time_decode").all()
    assert df["series"].str.contains("impl=mma").all() and df["series"].str.contains("64").all()
    assert df["newest values"].map(len).min() == N_COMMITS  # a value per commit
    # Measured values only: the grid's line chart shows a list with a gap as text.
    assert df["newest values"].map(lambda s: all(isinstance(v, float) and v == v for v in s)).all()
    assert df["last flagged"].str.startswith("fixed").all()
    at.text_input(key="sum_q").input("").run()
    assert len(at.dataframe[0].value) > len(df)


def test_overview_lists_the_largest_latest_changes(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = app(monkeypatch, seeded.url)
    grid = next(d.value for d in at.dataframe if "latest change" in d.value.columns)
    assert 0 < len(grid) <= 10
    pct = grid["latest change"].str.extract(r"([+-]?[\d.]+)%")[0].astype(float)
    # As large as their ratio: a time -23% better (1.3x faster) is as large as a rate +30% better.
    size = [abs(math.log(1.0 + p / 100)) for p in pct]
    assert all(a >= b - 0.01 for a, b in zip(size, size[1:], strict=False)), list(pct)  # 0.01: the shown 2 digits


def test_overview_counts_and_lists_failing_series_first(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded,
                                                       tmp_path) -> None:  # noqa: ANN001
    """A benchmark that broke at the newest commit: the Overview counts its series and lists them first, each
    reading failed since its last value (Jaxion's real history showed six broken benchmarks' old values)."""
    import datetime as dt

    import asv_synth

    from db.engine import make_engine
    from db.ingest import ingest_paths

    broken = "bench_step.DecodeStep.time_step"
    benches = asv_synth.mla_benchmarks()
    asv_synth.write_results(tmp_path / "results", MLA_MACHINE, benches, ["e" * 40], failed={(0, broken)},
                            new_version_from={NEW_VERSION[1]: 0}, start=dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    engine = make_engine(writable_copy.url)
    assert ingest_paths(engine, [tmp_path / "results"], progress=False).ok
    engine.dispose()
    n_broken = len(next(b for b in benches if b.name == broken).combos())
    at = app(monkeypatch, writable_copy.url)
    assert {m.label: m.value for m in at.metric}["Failing series"] == str(n_broken)
    grid = next(d.value for d in at.dataframe if "latest change" in d.value.columns)
    top = grid.head(n_broken)
    assert top["series"].str.contains("DecodeStep").all(), top
    assert top["latest"].str.fullmatch(r"failed ×1 \(was [\d,.]+ [um]s\)").all() and (top["latest change"] == "").all()


def test_git_tags_by_commit(tmp_path) -> None:  # noqa: ANN001
    import subprocess

    from dashboard.gitremote import tags

    def git(*argv: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *argv], cwd=tmp_path,
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "one")
    first = git("rev-parse", "HEAD")
    git("tag", "v0.1")
    git("commit", "-q", "--allow-empty", "-m", "two")
    git("tag", "-a", "v0.2", "-m", "release")
    assert tags(tmp_path) == {first: ["v0.1"], git("rev-parse", "HEAD"): ["v0.2"]}
    assert tags(tmp_path / "nowhere") == {}


def test_history_marks_a_chosen_commit(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    import json

    sha = seeded.shas[4]
    at = goto(app(monkeypatch, seeded.url, query={"hist_at": sha[:10]}), "history")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    events = [layer for layer in spec["layer"] if layer.get("mark", {}).get("strokeDash") == [6, 3]]
    assert len(events) == 1
    assert events and events[0]["data"]["values"] == [{"pos": 4, "label": sha[:8]}]
    at = goto(app(monkeypatch, seeded.url, query={"hist_at": "0badc0de"}), "history")
    assert "0badc0de" in at.error[0].value


def test_another_machine_overlaid_on_history_and_throughput(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded,
                                                            tmp_path) -> None:  # noqa: ANN001
    import json

    import asv_synth

    from db.engine import make_engine
    from db.ingest import ingest_paths

    other, third = "rtx-pro-6000", "h100-sxm"
    benches = asv_synth.mla_benchmarks(concurrency=(1, 64), topk=(512,), context=(4096,))
    asv_synth.write_results(tmp_path / "results", other, benches, writable_copy.shas[-4:],
                            gpu={**asv_synth.GPU_PARAMS, "gpu_name": "NVIDIA RTX PRO 6000", "gpu_cc": "12.0"})
    asv_synth.write_results(tmp_path / "results", third, benches, writable_copy.shas[-3:],
                            gpu={**asv_synth.GPU_PARAMS, "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_cc": "9.0"})
    engine = make_engine(writable_copy.url)
    assert ingest_paths(engine, [tmp_path / "results"], progress=False).ok
    engine.dispose()

    query = {"hist_bench": "bench_decode.SparseDecode.time_decode", "hp_impl": "mma", "hp_concurrency": "64",
             "hp_topk": "512"}
    at = goto(app(monkeypatch, writable_copy.url, query={**query, "hist_vs": other}), "history")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    names = set(spec["layer"][2]["encoding"]["color"]["scale"]["domain"])
    assert any(n.endswith(f"· {other}") for n in names) and len(names) == 2, names
    # Every machine at once, as asv's graphs draw them: one line per machine picked, this machine's first.
    at = goto(app(monkeypatch, writable_copy.url, query={**query, "hist_vs": [third, other]}), "history")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    domain = spec["layer"][2]["encoding"]["color"]["scale"]["domain"]
    assert len(domain) == 3 and "·" not in domain[0], domain
    assert {d.split(" · ")[-1] for d in domain[1:]} == {other, third}, domain

    at = goto(app(monkeypatch, writable_copy.url, query={"tp_vs": other}), "throughput")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert f"{other} @ {writable_copy.shas[-1][:8]}" in json.dumps(spec)


def test_an_overlaid_machine_is_drawn_at_its_own_commits(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded,
                                                         tmp_path) -> None:  # noqa: ANN001
    """A machine that measured a commit this one did not (Parcels' two machines, one commit each: "claymation
    measured none of these series at the commits drawn", a review): the axis holds both machines' commits, each
    drawn at its own."""
    import datetime as dt

    import asv_synth

    from db.engine import make_engine
    from db.ingest import ingest_paths

    other, later = "rtx-pro-6000", "f" * 40
    benches = asv_synth.mla_benchmarks(concurrency=(64,), topk=(512,), context=(4096,))
    asv_synth.write_results(tmp_path / "results", other, benches, [later], start=dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
                            gpu={**asv_synth.GPU_PARAMS, "gpu_name": "NVIDIA RTX PRO 6000", "gpu_cc": "12.0"})
    engine = make_engine(writable_copy.url)
    assert ingest_paths(engine, [tmp_path / "results"], progress=False).ok
    engine.dispose()
    query = {"hist_bench": "bench_decode.SparseDecode.time_decode", "hp_impl": "mma", "hp_concurrency": "64",
             "hp_topk": "512", "hist_vs": other, "machine": MLA_MACHINE, "hist_values": "1"}
    at = goto(app(monkeypatch, writable_copy.url, query=query), "history")
    assert not [c.value for c in at.caption if "measured none" in c.value]
    spec, frames = vega(at)[0]
    drawn = frames["data"]
    theirs = drawn[drawn["series"].astype(str).str.endswith(f"· {other}")]
    assert list(theirs["pos"]) == [N_COMMITS] and drawn["pos"].max() == N_COMMITS, drawn[["series", "pos"]]
    shas = next(p["value"] for p in spec["params"] if p["name"] == "commit_sha")
    assert shas[-1] == later[:8] and len(shas) == N_COMMITS + 1
    # The caption names both machines; the values per commit are this machine's (the other's is not "not run").
    captions = [c.value for c in at.caption]
    assert any(f"measured on `{MLA_MACHINE}` or `{other}`" in c for c in captions), captions
    (values,) = [d.value for d in at.dataframe if "commit" in d.value.columns]
    assert len(values) == N_COMMITS and later[:8] not in set(values["commit"])


def test_latest_changes_of_every_row_at_once_follow_the_rule() -> None:
    """The grid's whole-table computation against the rule written out for one row: the newest positive value
    over the median of up to five positive values before it, > 1 worse; None with fewer than two."""
    import random

    import numpy as np

    def by_hand(values: list[float | None], up_is_worse: bool) -> float | None:
        known = [v for v in values if v is not None and np.isfinite(v) and v > 0]
        if len(known) < 2:
            return None
        ratio = known[-1] / float(np.median(known[-6:-1]))
        return ratio if up_is_worse else 1.0 / ratio

    rng = random.Random(7)
    rows = [[rng.choice([None, float("nan"), 0.0, -1.0, rng.uniform(0.1, 5.0)]) for _ in range(9)]
            for _ in range(400)]
    up = np.array([rng.random() < 0.5 for _ in rows])
    table = np.array([[np.nan if v is None else v for v in r] for r in rows])
    got = summary.latest_changes(table, up)
    for row, u, g in zip(rows, up, got, strict=True):
        want = by_hand(row, bool(u))
        assert (want is None and np.isnan(g)) or g == pytest.approx(want), (row, u, g, want)
    assert summary.latest_change([1.0, None, 2.0], "down_is_worse") == pytest.approx(0.5)


def test_series_of_each_machine_whichever_way_they_are_read(writable_copy: Seeded) -> None:
    """``db.queries.series`` reads a machine with most of the runs by walking the series index and a smaller
    one by its own results: both give what a plain DISTINCT over the machine's results gives."""
    from sqlalchemy import delete, select
    from sqlalchemy.orm import Session

    from db import queries
    from db.engine import make_engine
    from db.models import Benchmark, Machine, Result, Run
    from db.provenance import is_provenance

    engine = make_engine(writable_copy.url)
    with Session(engine) as s, s.begin():
        machines = list(s.scalars(select(Machine.name).order_by(Machine.name)))
        if len(machines) > 2:  # keep two machines, one of them with most of the runs
            gone = select(Run.id).join(Machine).where(Machine.name.in_(machines[1:-1]))
            s.execute(delete(Result).where(Result.run_id.in_(gone)))
            s.execute(delete(Run).where(Run.id.in_(gone.scalar_subquery())))
    with Session(engine) as s:
        runs = {m: len(s.scalars(select(Run.id).join(Machine).where(Machine.name == m)).all()) for m in machines}
        runs = {m: n for m, n in runs.items() if n}
        for m in runs:
            got = queries.series(s, m)
            plain = {(b, k) for b, k in s.execute(
                select(Benchmark.name, Result.params_key).join(Result.benchmark).join(Run, Run.id == Result.run_id)
                .join(Machine).where(Machine.name == m).distinct()).all() if not is_provenance(b)}
            assert set(zip(got["benchmark"], got["params_key"], strict=True)) == plain, m
    engine.dispose()
    if len(runs) == 2:  # both ways taken
        assert max(runs.values()) * 2 >= sum(runs.values()) > min(runs.values()) * 2, runs


def test_latest_change_stays_in_the_newest_version_segment() -> None:
    """Versions v1 x4, v2 x2, then v1 again (a reverted benchmark), values 1, 1, 1, 1, 2, 2, 1.5, 1.5: the change
    compared the newest 1.5 with v1's old 1s (+50% worse); detection starts a segment at every version change, and
    so does the grid: the newest stretch of v1 alone, 1.5 against 1.5."""
    versions = ["v1"] * 4 + ["v2"] * 2 + ["v1"] * 2
    values = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 1.5, 1.5]
    series = pd.DataFrame({"benchmark": ["b.B.time_x"], "params_key": ["{}"], "unit": ["seconds"]})
    recent = pd.DataFrame({"benchmark": "b.B.time_x", "params_key": "{}", "commit_id": range(8), "value": values,
                           "benchmark_version": versions})
    table = summary.grid(series, recent, list(range(8)), pd.DataFrame(), lambda _b, _u: "up_is_worse")
    assert table["change"].iloc[0] == pytest.approx(1.0)
