"""The History page's model without a browser: the benchmark and series it opens on, the window of commits
drawn, the hover columns and the tables (``dashboard.history_model``)."""

from __future__ import annotations

import json
import math

import pandas as pd

from dashboard import history_model as model


def _key(impl: str, concurrency: int) -> str:
    return json.dumps({"impl": repr(impl), "concurrency": str(concurrency)}, sort_keys=True)


def _commits(n: int) -> pd.DataFrame:
    return pd.DataFrame({"commit_id": range(100, 100 + n), "pos": range(n), "sha": [f"{i:040x}" for i in range(n)],
                         "message": [f"commit {i}\n\nbody" for i in range(n)],
                         "date": pd.date_range("2026-01-01", periods=n, freq="h")})


def _regs(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    """(benchmark, params_key, sha, category) rows, newest first, as ``data.regressions`` lists them."""
    return pd.DataFrame(rows, columns=["benchmark", "params_key", "sha", "category"])


def test_default_benchmark() -> None:
    names = ["a.time_x", "bench_decode.SparseDecode.time_decode", "z.time_y"]
    assert model.default_benchmark(names, pd.DataFrame()) == "bench_decode.SparseDecode.time_decode"
    assert model.default_benchmark(["a.time_x", "b"], pd.DataFrame()) == "a.time_x"
    regs = _regs([("z.time_y", "{}", "s1", "fixed"), ("a.time_x", "{}", "s2", "suspect"),
                  ("gone.time_w", "{}", "s3", "open")])
    # open first (but only a benchmark still listed), then suspect, then any
    assert model.default_benchmark(names, regs) == "a.time_x"
    assert model.default_benchmark(names, regs[regs["category"] == "fixed"]) == "z.time_y"


def test_default_picks_spread_over_the_flagged_sweep() -> None:
    """The newest flagged commit's series: the other parameters fixed, four of six flagged concurrencies
    (first and last included); nothing flagged: the first parameter's every value, others' first."""
    at = [("b", _key("mma", c), "new", "open") for c in (1, 2, 4, 8, 16, 32)]
    mine = _regs([*at, ("b", _key("ref", 1), "old", "open")])
    assert model.default_picks(mine, ["impl", "concurrency"]) == {"impl": ["mma"], "concurrency": [1, 4, 8, 32]}
    assert model.default_picks(mine.iloc[:0], ["impl", "concurrency"]) == {}
    assert model.pill_default({}, "impl", 0, ["mma", "ref"], 2) == ["mma", "ref"]
    assert model.pill_default({}, "concurrency", 1, [1, 64], 2) == [1]
    assert model.pill_default({"concurrency": [64]}, "concurrency", 1, [1, 64], 2) == [64]


def test_select_series_caps_in_numeric_order_and_labels_what_varies() -> None:
    keys = [_key(i, c) for i in ("mma", "ref") for c in (1, 128, 16, 64, 2, 4, 8)]
    rows = pd.DataFrame({"params_key": keys, "param_names": [["impl", "concurrency"]] * len(keys)})
    params = model.benchmark_params(rows)
    assert params.names == ["impl", "concurrency"]
    assert params.values("concurrency") == [1, 2, 4, 8, 16, 64, 128]
    sel = model.select_series(params, {"impl": ["mma", "ref"], "concurrency": params.values("concurrency")})
    assert sel.picked == 14 and len(sel.wanted) == model.MAX_SERIES
    # the two dropped are the numerically last of the last impl (in text order "16" would go, "8" stay)
    assert set(keys) - set(sel.wanted) == {_key("ref", 64), _key("ref", 128)}
    assert sel.label_of[_key("ref", 16)] == "impl=ref, concurrency=16"
    one = model.select_series(params, {"impl": ["mma"], "concurrency": [64, 2]})
    assert one.varying == ["concurrency"]
    assert [one.label_of[k] for k in one.wanted] == ["concurrency=2", "concurrency=64"]
    assert model.chart_title("b", "m", params, one) == "b · m · impl=mma"
    assert model.select_series(params, {"impl": [], "concurrency": [1]}).wanted == []
    # A benchmark without parameters: its name, not "value" (Jaxion's, a review).
    plain = model.benchmark_params(pd.DataFrame({"params_key": ["{}"], "param_names": [[]]}))
    sel = model.select_series(plain, {}, "benchmarks.DarkMatterBenchmarks.time_simulation")
    assert sel.label_of == {"{}": "DarkMatterBenchmarks.time_simulation"}


def test_window_start() -> None:
    commits = _commits(1000)
    none = _regs([])
    assert model.window_start(commits, none, whole=True) == 0
    assert model.window_start(commits, none, whole=False) == 1000 - model.WINDOW
    flag = _regs([("b", "{}", commits["sha"][500], "open"), ("b", "{}", commits["sha"][100], "fixed")])
    assert model.window_start(commits, flag, whole=False) == 490  # the open one with ten before it
    assert model.window_start(_commits(40), none, whole=False) == 0
    assert model.commit_ids_from(commits, 0) is None
    assert model.commit_ids_from(commits, 998) == (1098, 1099)


def _points(commits: pd.DataFrame) -> pd.DataFrame:
    hist = pd.DataFrame({"params_key": ["k"] * 4, "commit_id": commits["commit_id"].iloc[:4],
                         "value": [1e-6, 2e-6, math.nan, 3e-6], "status": ["ok", "ok", "failed", "ok"],
                         "run_id": [7, 7, 8, 9], "run_date": ["2026-02-01T10:00:00"] * 4})
    return model.points_of(hist, commits, {"k": "s"})


def test_points_configs_and_versions_blank_before_the_start() -> None:
    commits = _commits(6)
    points = _points(commits)
    assert list(points["pos"]) == [0, 1, 2, 3] and points["subject"].iloc[0] == "commit 0"
    assert list(model.with_configs(points, pd.DataFrame(), 2)["config"]) == ["", "", model.UNRECORDED_SUITE,
                                                                            model.UNRECORDED_SUITE]
    launch = pd.DataFrame({"params_key": ["k", "k"], "commit_id": [102, 103], "key": ["num_warps"] * 2,
                           "value": [4.0, 8.0]})
    config = model.with_configs(points, launch, 1)["config"]
    assert list(config) == ["", "not recorded", "num_warps=4", "num_warps=8"]
    assert model.drawn_run_ids(points, 1) == (7, 8, 9)
    versions = model.with_versions(points, {9: {"torch": "2.11.0"}}, {"gpu_name": "none"}, 1)["versions"]
    assert versions.iloc[0] == "" and versions.iloc[1].startswith("CPU (no GPU) (the machine's") \
        and versions.iloc[3] == "torch 2.11.0"


def test_overlay_keeps_shared_commits_only() -> None:
    commits = _commits(6)
    points = model.with_versions(model.with_configs(_points(commits), pd.DataFrame(), 0), {}, {}, 0)
    theirs = pd.DataFrame({"params_key": ["k", "k"], "commit_id": [101, 999], "sha": [commits["sha"][1], "f" * 40],
                           "value": [5e-6, 6e-6], "status": ["ok", "ok"], "run_id": [1, 2],
                           "run_date": ["2026-02-01T10:00:00"] * 2})
    both = model.overlay(points, theirs, commits, {"k": "s"}, "other", 0)
    assert both is not None
    added = both[both["series"] == "s · other"]
    assert list(added["pos"]) == [1] and added["versions"].iloc[0] == "machine other"
    assert model.overlay(points, theirs, commits, {"k": "s"}, "other", 2) is None


def test_markers_events_and_tables() -> None:
    commits = _commits(6)
    flag = pd.DataFrame({"id": [3], "params_key": ["k"], "status": ["fixed"], "sha": [commits["sha"][2]],
                         "parent_sha": [commits["sha"][1]], "message": ["slow"], "fixed_sha": [commits["sha"][4]],
                         "fixed_message": ["fast"], "before": [1e-6], "after": [2e-6], "ratio": [2.0],
                         "p_value": [0.001], "category": ["fixed"]})
    marks = model.flagged_markers(flag, commits, {"k": "s"}, "seconds")
    assert marks is not None and list(marks[["pos", "fixed_pos"]].iloc[0]) == [2, 4]
    assert marks["text"].iloc[0].startswith("regression #3 (fixed) at ")
    assert model.flagged_markers(flag.iloc[:0], commits, {"k": "s"}, "seconds") is None
    table = model.flagged_table(flag, {"k": "s"}, "seconds")
    assert table["fixed at"].iloc[0].startswith(commits["sha"][4][:8]) and "compare" not in table
    assert model.compare_pairs(pd.concat([flag, flag])) == [(commits["sha"][1], commits["sha"][2])]
    tag_at, marked = commits["sha"][3], commits["sha"][5]
    assert model.events({tag_at: ["v1", "v1.1"], "f" * 40: ["elsewhere"]}, commits, marked) \
        == [(3, "v1, v1.1"), (5, marked[:8])]
    values = model.values_table(_points(commits), commits.iloc[1:], ["s"], "seconds")
    assert list(values.index) == [1, 2, 3, 4, 5]
    assert list(values["s"]) == ["2.00 us", "failed", "3.00 us", "not run", "not run"]

def test_caption_names_window_and_direction() -> None:
    commits = _commits(300)
    text = model.caption(commits, 50, "h200", lower_is_better=True, threshold=0.05, environments=["b", "a"])
    assert text.startswith("The newest 250 of 300 commits measured on `h200`")
    assert "Lower is better" in text and "±5%" in text and text.endswith("`a`, `b`.")
    assert "Higher is better" in model.caption(commits, 0, "h200", lower_is_better=False, threshold=0.1,
                                               environments=[])
    # The machine's commits are the axis; the series' own runs are counted apart (Jaxion: 33 values, 18 failures
    # read "51 commits measured", a review).
    points = _points(commits)
    assert model.ran_at(points, 0) == (3, 1) and model.ran_at(points, 2) == (1, 1)
    # The chart starts at the series' first result (not the machine's first commit), or a marked commit before it.
    late = points.assign(pos=points["pos"] + 20)
    assert model.first_drawn(late, 0) == (20, False) and model.first_drawn(late, 0, marked=12) == (12, False)
    assert model.first_drawn(late, 30) == (30, True) and model.first_drawn(late, 30, marked=12) == (30, True)
    text = model.caption(commits, 0, "h200", lower_is_better=True, threshold=0.05, environments=[],
                         ran=model.ran_at(points, 0))
    assert text.startswith("300 commits measured on `h200`, in history order; the series drawn ran at 3 and failed "
                           "at 1 more. Lower is better"), text
