"""The dashboard's pure parts: number formatting, parameter order, alert groups, device ceilings."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dashboard import fmt, frames, suites, triage


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(19.5e-6, "19.5 us"), (194.27e-6, "194 us"), (1481e-6, "1,481 us"), (12.324e-3, "12.3 ms"),
     (0.25, "250 ms"), (3.0, "3.00 s"), (850e-9, "850 ns"), (None, "failed"), (math.nan, "failed")],
)
def test_times_in_us_and_ms(seconds: float | None, text: str) -> None:
    assert fmt.fmt_time(seconds) == text


def test_values_in_their_units() -> None:
    assert fmt.fmt_value(2_163_540.2, "tokens/s") == "2,163,540 tokens/s"
    assert fmt.fmt_value(931.4, "GB/s") == "931 GB/s"
    assert fmt.fmt_value(0.2216, "fraction") == "22.2%"
    assert fmt.fmt_value(None, "GB/s", missing="not run") == "not run"
    assert fmt.fmt_value(65e-6, "seconds") == "65.0 us"


@pytest.mark.parametrize(("p", "text"), [(3e-11, "3e-11"), (2.24e-167, "< 1e-12"), (1e-12, "< 1e-12"),
                                         (0.0, "< 1e-12"), (4e-4, "4e-4"),
                                         (0.0123, "0.01"), (0.5, "0.5"), (None, "-")])
def test_p_values(p: float | None, text: str) -> None:
    assert fmt.fmt_p(p) == text


def test_ratios_changes_sizes_and_commits() -> None:
    assert fmt.fmt_ratio(1.524) == "1.52x" and fmt.fmt_ratio(47.5) == "47.5x" and fmt.fmt_ratio(None) == "-"
    assert fmt.fmt_change(1.55) == "+55% worse" and fmt.fmt_change(0.82) == "-18% better"
    assert fmt.fmt_ram("135148564480") == "126 GiB"
    # asv's ram is free text: uxarray's machine.json says "32" (GB, read as 32 bytes before), others "16GB".
    assert fmt.fmt_ram("32") == "32" and fmt.fmt_ram("16GB") == "16GB"
    # Older asv writes /proc/meminfo's KiB: MuJoCo Warp's 32-core EPYC showed "62.8 MiB" (a review).
    assert fmt.fmt_ram("65836440") == "62.8 GiB" and fmt.fmt_ram("32757993472") == "30.5 GiB"
    assert fmt.short_labels(["3.10.1", "3.10.2"], drop_module=False) == ["3.10.1", "3.10.2"]  # values, not names
    assert fmt.fmt_ram("2113612345") == "1.97 TiB" and fmt.fmt_ram(str(900 * 2**20)) == "900 MiB"  # KiB; bytes
    # A parameter value a pill shows (uxarray's paths ran one pill off the page): cut in its middle, ends kept.
    path = "WindowsPath('C:/Users/philip/Documents/uxarray/test/meshfiles/mpas/QU/oQU480.231010.nc')"
    assert fmt.middle(path) == "WindowsPath('C:/Use…U/oQU480.231010.nc')" and len(fmt.middle(path)) == 40
    assert fmt.middle("'mma'") == "'mma'" and fmt.middle(64) == "64"
    label = fmt.commit_label("eee79092adc1", "tuning: fixed BLOCK_H=16\n\nbody", 60)
    assert label == "eee79092 tuning: fixed BLOCK_H=16"
    assert fmt.commit_range("9c7d0b231d7a", "eee79092adc1") == "9c7d0b23..eee79092"
    assert fmt.subject("x" * 100, 10) == "x" * 9 + "…"


def test_time_unit_follows_the_median() -> None:
    assert fmt.time_unit([19e-6, 190e-6]) == (1e6, "us")
    assert fmt.time_unit([0.012, 0.02]) == (1e3, "ms")
    # A 5 ms series reads 5,089 us in its points' text: its axis is in us too (it was ms, unlike the points).
    assert fmt.time_unit([5.089e-3, 5.2e-3]) == (1e6, "us") and fmt.fmt_value(5.089e-3, "seconds") == "5,089 us"


def test_parameter_values_in_numeric_order() -> None:
    assert frames.value_order([128, 16, 1, 2, 64]) == [1, 2, 16, 64, 128]
    assert frames.value_order(["mma", "simt", 4]) == [4, "mma", "simt"]
    key = '{"concurrency": "64", "impl": "\'mma\'", "topk": "512"}'
    assert frames.params_label(key, ["impl", "concurrency", "topk"]) == "impl=mma, concurrency=64, topk=512"
    assert frames.params_label(key, ["concurrency"], only=True) == "concurrency=64"
    out, cols = frames.expand_params(pd.DataFrame({"params_key": [key], "value": [1.0]}))
    assert cols == ["p:concurrency", "p:impl", "p:topk"] and out["p:concurrency"].item() == 64
    assert frames.param_names([key, {"impl": "mma", "seed": 1}]) == ["concurrency", "impl", "topk", "seed"]
    names = frames.series_label(pd.Series(["bench_decode.SparseDecode.time_decode", "b.C.time_x"]),
                                pd.Series([key, "{}"]), {"bench_decode.SparseDecode.time_decode": ["impl", "topk"]})
    assert list(names) == ["bench_decode.SparseDecode.time_decode [impl=mma, topk=512, concurrency=64]", "b.C.time_x"]


def test_dashboard_names_and_orders_series_as_the_cli() -> None:
    """One rule (``regressions.labels``): asv's param_names order, numeric-looking values numerically, the
    module name kept; what `mlaperf compare`, `detect` and the PR report print."""
    from regressions import labels

    keys = ['{"concurrency": "16", "impl": "\'mma\'"}', '{"concurrency": "2", "impl": "\'mma\'"}']
    benches = pd.Series(["bench_a.Decode.time_decode", "bench_b.Decode.time_decode"])
    names = {"bench_a.Decode.time_decode": ["impl", "concurrency"]}
    got = list(frames.series_label(benches, pd.Series(keys), names))
    assert got == [labels.series_label(b, json.loads(k), names.get(b)) for b, k in zip(benches, keys, strict=True)]
    assert got == ["bench_a.Decode.time_decode [impl=mma, concurrency=16]",
                   "bench_b.Decode.time_decode [concurrency=2, impl=mma]"]  # two modules, one class: both named
    assert frames.value_order(["16", "2", "mma", "128"]) == ["2", "16", "128", "mma"]  # as stored, numerically
    assert [frames.rank(v) for v in ("'64'", 64, "x")] == [labels.value_rank(v) for v in ("'64'", 64, "x")]


def _regs(rows: list[tuple[int, str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"id": i, "machine": m, "sha": sha, "status": st, "ratio": r, "direction": "up_is_worse",
                          "benchmark": "b.C.time_x", "date": None, "message": f"msg {sha}"}
                         for i, m, sha, st, r in rows])


def test_groups_from_machine_and_commit_when_the_detector_recorded_none() -> None:
    regs = triage.enrich(_regs([(1, "a", "s1", "new", 1.2), (2, "a", "s1", "fixed", 1.5), (3, "a", "s2", "fixed", 2.0),
                                (4, "b", "s1", "ignored", 1.1), (5, "a", "s3", "suspect", 1.3)]), {}, {})
    g = triage.groups(regs).set_index("group")
    assert len(g) == 4
    cats = dict(zip(g["sha"] + "@" + g["machine"], g["category"], strict=True))
    assert cats == {"s1@a": "open", "s2@a": "fixed", "s1@b": "closed", "s3@a": "suspect"}
    assert g.loc[g["sha"].eq("s1") & g["machine"].eq("a"), "worst"].item() == 1.5
    assert triage.counts(triage.groups(regs)) == {"open": 1, "suspect": 1, "fixed": 1, "closed": 1,
                                                  "machine_wide": 0}


def test_group_table_cells() -> None:
    """The cells both group tables show; "fixed at" is text in every row (a NaN in an unfixed group's row
    showed as "None" when another group in the table was fixed)."""
    regs = _regs([(1, "a", "s1", "fixed", 1.2), (2, "a", "s1", "acknowledged", 1.5), (3, "a", "s2", "new", 2.0),
                  (4, "a", "s3", "fixed", 1.1)])
    regs["fixed_sha"] = ["f" * 40, "e" * 40, None, "f" * 40]
    groups = triage.groups(triage.enrich(regs, {}, {}))
    out = triage.group_table(groups, statuses=True)
    assert list(out.columns) == ["group", "state", "series", "worst", "fixed at"]
    assert list(out["fixed at"]) == ["2 commits", "", "ffffffff"]
    assert list(out["state"]) == ["acknowledged (1 fixed, 1 acknowledged)", "new", "fixed"]
    assert list(triage.group_table(groups)["state"]) == ["acknowledged", "new", "fixed"]
    assert list(out["worst"]) == ["1.50x", "2.00x", "1.10x"]


def test_every_stored_status_has_a_category() -> None:
    """A status the store gains without a category here would show as 'closed' (hidden by default)."""
    from db.models import REGRESSION_STATUSES

    assert set(triage.CATEGORY_OF) == set(REGRESSION_STATUSES)
    assert set(triage.CATEGORY_OF.values()) == set(triage.CATEGORIES)
    assert set(triage.TRIAGE_ACTIONS.values()) <= set(REGRESSION_STATUSES)


def test_detector_groups_and_notes_are_kept() -> None:
    regs = _regs([(1, "a", "s1", "new", 1.2), (2, "a", "s1", "new", 0.5)])
    regs["group"] = [7, 7]
    regs["machine_wide"] = [True, True]
    regs.loc[1, "direction"] = "down_is_worse"
    out = triage.enrich(regs, {}, {2: [{"at": "t", "status": "acknowledged", "note": "known"}]})
    g = triage.groups(out)
    assert list(g["group"]) == [7] and bool(g["machine_wide"].item()) and g["worst"].item() == 2.0
    assert list(out["note"]) == ["", "known"]


def test_measured_ceilings_read_back_from_the_metrics() -> None:
    # Two memory-bound cases and one compute-bound one, as benchmarks/_roofline.py computes them.
    bw, rate = 4000.0, 700.0
    rows = []
    cases = {"a": (4e6, 1e8, 2e-6), "b": (8e6, 1e9, 3e-6), "c": (1e6, 7e9, 1.2e-5)}
    for key, (nbytes, flops, seconds) in cases.items():
        roof = max(nbytes / (bw * 1e9), flops / (rate * 1e12))
        for leaf, v in (("track_gbps", nbytes / seconds / 1e9), ("track_tflops", flops / seconds / 1e12),
                        ("track_roofline_fraction", roof / seconds)):
            rows.append({"benchmark": f"bench_decode.SparseDecodeMetrics.{leaf}", "params_key": key, "value": v})
    ceil = suites.measured_ceilings(pd.DataFrame(rows))
    assert ceil["copy_gbps"] == pytest.approx(bw) and ceil["matmul_tflops"] == pytest.approx(rate)
    memory_only = pd.DataFrame([r for r in rows if r["params_key"] != "c"])
    assert set(suites.measured_ceilings(memory_only)) == {"copy_gbps"}  # no compute-bound case: unknown


def test_versions_line() -> None:
    gpu = {"gpu_name": "NVIDIA H200", "gpu_cc": "9.0", "gpu_driver": "580.159.04", "cuda": "13.0",
           "torch": "2.11.0+cu130", "triton": "3.6.0", "arch_profile": "sm_120", "ram": "1"}  # fmt: skip
    assert fmt.versions(gpu) == ("GPU NVIDIA H200 (sm 9.0) · driver 580.159.04 · CUDA 13.0 · torch 2.11.0+cu130 · "
                                 "triton 3.6.0 · runner arch profile sm_120")
    cpu = {"gpu_name": "none", "gpu_cc": "none", "gpu_driver": "none", "cuda": "none", "torch": "2.13.0+cpu",
           "triton": "3.9.0"}  # fmt: skip
    assert fmt.versions(cpu) == "CPU (no GPU) · torch 2.13.0+cpu · triton 3.9.0"
    assert fmt.versions(None) == fmt.versions({}) == ""


def test_launch_config_line() -> None:
    step = {"indexer_block_t": 128.0, "num_stages": 2.0, "block_h": 64.0, "spill_bytes": 0.0, "num_splits": 2.0,
            "block_n": 32.0, "prefetch": 3.0, "num_warps": 8.0, "indexer_select_block": 1024.0}  # fmt: skip
    assert fmt.launch_config(step) == (
        "block_h=64 · block_n=32 · num_splits=2 · prefetch=3 · num_warps=8 · num_stages=2 · spill_bytes=0 · "
        "indexer_block_t=128 · indexer_select_block=1024"
    )
    assert fmt.launch_config({"block_n": 16.0, "num_warps": 4.0}) == "block_n=16 · num_warps=4"


def _history_points(n: int) -> pd.DataFrame:
    """One series over ``n`` commits, 10 us then 12 us from commit 15, a new benchmark version from commit 12,
    a failed run at commit 3."""
    return pd.DataFrame({
        "series": "s", "pos": range(n), "value": [10e-6 if i < 15 else 12e-6 for i in range(n)],
        "q_25": math.nan, "q_75": math.nan, "status": ["failed" if i == 3 else "ok" for i in range(n)],
        "benchmark_version": ["v1" if i < 12 else "v2" for i in range(n)], "sha": [f"{i:040x}" for i in range(n)],
        "subject": "", "date": "2026-01-01 00:00", "run_date": "2026-01-01 00:00", "runs": 1, "config": "",
        "versions": "",
    })


def test_history_from_a_start_commit() -> None:
    """Drawn from position 10 on: the x domain, points, markers and version lines start there, and the first
    band looks back at the five commits before it (the same band as the whole history draws)."""
    from dashboard import history_chart

    points = _history_points(30)
    commits = pd.DataFrame({"sha": points["sha"], "pos": points["pos"]})
    flagged = pd.DataFrame({"series": ["s", "s"], "pos": [5, 15], "fixed_pos": [8, math.nan],
                            "text": ["old", "new"], "change": ["", ""], "fixed_text": ["fixed", ""]})
    kw = {"title": "t", "unit": "seconds", "commits": commits, "threshold": 0.05, "flagged": flagged}
    whole = history_chart.history_spec(points, **kw)
    part = history_chart.history_spec(points, start=10, **kw)
    drawn = part["data"]["values"]
    assert list(drawn["pos"]) == list(range(10, 30))
    assert part["layer"][0]["encoding"]["x"]["scale"]["domain"] == [9.5, 29.5]
    band = whole["data"]["values"].set_index("pos")
    assert drawn.set_index("pos")[["lo", "hi"]].equals(band.loc[10:, ["lo", "hi"]])
    # Every point has a band but the first of the new version (the version line at 11.5): nothing before it there.
    assert drawn.loc[drawn["pos"] != 12, "lo"].notna().all() and drawn.loc[drawn["pos"] == 12, "lo"].isna().all()
    markers = next(pd.DataFrame(r["data"]["values"]) for r in part["layer"]
                   if r.get("data", {}).get("name") == "markers")
    assert list(zip(markers["kind"], markers["pos"], strict=True)) == [("flagged regression", 15)]
    rules = [r["data"]["values"] for r in part["layer"] if "values" in r.get("data", {}) and "name" not in r["data"]]
    assert rules[0] == [{"pos": 11.5, "series": "s", "label": "benchmark version changed"}]  # one series: no name
    assert "usermeta" not in part  # 20 points: SVG, as Streamlit draws small charts


def test_a_log_axis_fits_a_short_range() -> None:
    """History's log axis over 10-12 us: fitted to what is drawn (its band too) with ticks inside, as the site's;
    Vega's own "nice" log scale drew OpenBLAS's 38-50 us on 10-100 us, the step flattened (a review)."""
    from dashboard import history_chart
    from dashboard.charts import LOG_ROOM
    from mlaperf.publish_axes import value_axis

    points = _history_points(30)
    commits = pd.DataFrame({"sha": points["sha"], "pos": points["pos"]})
    spec = history_chart.history_spec(points, title="t", unit="seconds", commits=commits, threshold=0.05, log_y=True)
    y = spec["layer"][0]["encoding"]["y"]
    drawn = spec["data"]["values"][["y", "lo", "hi"]].to_numpy(float)
    lo, hi = np.nanmin(drawn), np.nanmax(drawn)
    assert y["scale"]["type"] == "log" and y["scale"]["nice"] is False
    assert y["scale"]["domain"] == pytest.approx([lo / LOG_ROOM, hi * LOG_ROOM])
    ticks = y["axis"]["values"]
    assert len(ticks) >= 3 and lo / LOG_ROOM <= min(ticks) and max(ticks) <= hi * LOG_ROOM, ticks
    # The site's log axis over the same values: the same ticks, in the same unit.
    site = value_axis([v * 1e-6 for v in (lo, hi)], "seconds", log=True)
    assert [t * 1e6 for t in site["ticks"]] == pytest.approx(ticks)


def test_md_table_keeps_cells_literal() -> None:
    """Commit subjects and labels are text, not Markdown: pipes, emphasis, code, tags, brackets and newlines
    escaped (a URL stays text: a Markdown link would open a new tab)."""
    from dashboard import fmt

    rows = pd.DataFrame({"subject": ["fix | *hot* path_a `x` <b>\nmore", None], "go": ["[x](compare?a=1)", ""]})
    assert fmt.md_table(rows).splitlines() == [
        "| subject | go |",
        "|---|---|",
        "| fix \\| \\*hot\\* path\\_a \\`x\\` \\<b\\> more | \\[x\\]\\(compare?a=1\\) |",
        "|  |  |",
    ]



def test_unitless_track_values_are_counts_and_bytes_scale() -> None:
    """A ``track_`` benchmark without a unit is a count wherever a stored value is shown (grid, site, Compare,
    Regressions, axes), never seconds; bytes in KiB/MiB/GiB."""
    from dashboard import compare_model, regressions_model, summary
    from mlaperf.publish_axes import value_axis
    from mlaperf.publish_model import grid_rows

    benches = ["m.C.track_spills", "m.C.peakmem_kv"]
    series = pd.DataFrame({"benchmark": benches, "params_key": ["{}"] * 2, "unit": [None, "bytes"]})
    values = pd.DataFrame({"benchmark": [b for b in benches for _ in (1, 2)], "params_key": "{}",
                           "commit_id": [1, 2, 1, 2], "value": [3.0, 12.0, 5.0e8, 512 * 1024.0**2]})
    grid = summary.grid(series, values, [1, 2], pd.DataFrame(), lambda b, u: "up_is_worse")
    assert [r["latest"] for r in grid_rows(grid, summary.names(grid), lambda b: 0.05)] == ["12.0", "512 MiB"]
    cmp = pd.DataFrame({"benchmark": benches, "params_key": "{}", "series_key": "{}", "unit": [None, "bytes"],
                        "status": "regressed",
                        "base": [3.0, 5.0e8], "head": [12.0, 2 * 1024.0**3], "base_status": "ok", "head_status": "ok",
                        "ratio": [4.0, 4.3], "slowdown": [4.0, 4.3], "direction": "up_is_worse", "p_value": 0.01,
                        "method": "m", "threshold": 0.05})
    table, _ = compare_model.table_rows(compare_model.with_labels(cmp, {}), ["regressed"], lambda b, k: "")
    assert sorted(zip(table["before"], table["after"], strict=True)) == [("3.00", "12.0"), ("477 MiB", "2.00 GiB")]
    regs = pd.DataFrame({"benchmark": benches, "unit": [None, "bytes"], "before": [3.0, 1024.0],
                         "after": [12.0, 2048.0]})
    assert regressions_model._before_after(regs) == ["3.00 → 12.0", "1.00 KiB → 2.00 KiB"]
    assert fmt.axis_unit([5.0e8, 6.0e8], "bytes") == (1024.0**-2, "MiB")
    axis = value_axis([3.0, 12.0], fmt.unit_of("m.C.track_spills", None))
    assert axis["title"] == "value" and axis["labels"][-1] == "12"
    assert fmt.fmt_ram("135291469824") == "126 GiB"
