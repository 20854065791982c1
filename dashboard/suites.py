"""The sparse-MLA asv suites (names from docs/CONTRACTS.md) and the frames the MLA pages plot.

Benchmark names are matched by suffix so a benchmark_dir that is a package (``benchmarks.bench_decode...``)
works as well as a flat one (``bench_decode...``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dashboard.frames import expand_params, sort_key


@dataclass(frozen=True)
class Suite:
    key: str
    title: str
    time_bench: str  # the timed benchmark (asv time_, seconds)
    metrics_class: str  # class with track_tokens_per_s / track_gbps / track_tflops / track_roofline_fraction
    line_param: str  # one line per value: the implementation or step variant
    filter_param: str  # the other sweep axis, picked in a filter (top-k or context)
    reference_line: str  # the baseline implementation speed-ups are measured against


SUITES: tuple[Suite, ...] = (
    Suite("decode", "Sparse MLA decode: SIMT vs MMA", "bench_decode.SparseDecode.time_decode",
          "bench_decode.SparseDecodeMetrics", "impl", "topk", "simt"),
    Suite("indexer", "Indexer + top-k: fp32 over max_context vs bf16", "bench_indexer.Indexer.time_indexer",
          "bench_indexer.IndexerMetrics", "impl", "context", "fp32_maxctx"),
    Suite("step", "Whole decode step: variants", "bench_step.DecodeStep.time_step",
          "bench_step.DecodeStepMetrics", "variant", "context", "baseline"),
)

METRICS: dict[str, str] = {
    "track_tokens_per_s": "tokens/s",
    "track_gbps": "GB/s",
    "track_tflops": "TFLOP/s",
    "track_roofline_fraction": "fraction",
}
# The efficiency metrics in the Efficiency page's panel order, with the panel titles (units: ``METRICS``).
EFFICIENCY: dict[str, str] = {
    "track_roofline_fraction": "roofline",
    "track_gbps": "achieved bandwidth",
    "track_tflops": "achieved compute",
}


def matches(name: str, target: str) -> bool:
    """``name`` is ``target`` or ends with ``.target`` (benchmark_dir may be a package)."""
    return name == target or name.endswith("." + target)


def present_suites(benchmark_names: list[str] | pd.Series) -> list[Suite]:
    """Suites whose timed benchmark or any metric exists among ``benchmark_names``."""
    names = list(benchmark_names)
    found = []
    for suite in SUITES:
        targets = [suite.time_bench] + [f"{suite.metrics_class}.{m}" for m in METRICS]
        if any(matches(n, t) for n in names for t in targets):
            found.append(suite)
    return found


def default_filter(suite: Suite, values: list[object]) -> object:
    """The filter value a page opens on: top-k 512 (the decode's production setting) where offered, else the
    largest value."""
    return 512 if 512 in values and suite.filter_param == "topk" else values[-1]


def _suite_rows(results: pd.DataFrame, suite: Suite, leaf: str) -> pd.DataFrame:
    target = suite.time_bench if leaf == "time" else f"{suite.metrics_class}.{leaf}"
    mask = results["benchmark"].map(lambda n: matches(str(n), target))
    return results[mask]


def _sweep(rows: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """Rows with parsed ``line``, ``concurrency`` and ``filter`` columns (others dropped)."""
    df, _ = expand_params(rows)
    need = [f"p:{suite.line_param}", "p:concurrency"]
    if df.empty or any(c not in df.columns for c in need):
        return pd.DataFrame(columns=["line", "concurrency", "filter", "value", "params_key"])
    out = pd.DataFrame(
        {
            "line": df[f"p:{suite.line_param}"].astype(str),
            "concurrency": pd.to_numeric(df["p:concurrency"], errors="coerce"),
            "filter": df.get(f"p:{suite.filter_param}", pd.Series([None] * len(df), index=df.index)),
            "value": pd.to_numeric(df["value"], errors="coerce"),
            "params_key": df["params_key"],
        }
    )
    return out.dropna(subset=["concurrency"])


def throughput_frame(results: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """Tokens/s per (line, concurrency, filter) at one commit.

    ``track_tokens_per_s`` is used where it exists; otherwise tokens/s = concurrency / time (one new token
    per request per step). Columns: line, concurrency, filter, tokens_per_s, time_s, source.
    """
    cols = ["line", "concurrency", "filter", "tokens_per_s", "time_s", "source"]
    if results.empty:
        return pd.DataFrame(columns=cols)
    timed = _sweep(_suite_rows(results, suite, "time"), suite).rename(columns={"value": "time_s"})
    tracked = _sweep(_suite_rows(results, suite, "track_tokens_per_s"), suite).rename(
        columns={"value": "tracked"}
    )
    keys = ["line", "concurrency", "filter"]
    for df in (timed, tracked):
        df["filter"] = df["filter"].astype(object)
    merged = timed.drop(columns="params_key").merge(
        tracked.drop(columns="params_key"), on=keys, how="outer"
    )
    if merged.empty:
        return pd.DataFrame(columns=cols)
    derived = merged["concurrency"] / merged["time_s"].where(merged["time_s"] > 0)
    has_track = merged["tracked"].notna()
    merged["tokens_per_s"] = merged["tracked"].where(has_track, derived)
    merged["source"] = np.where(has_track, "track_tokens_per_s", "concurrency / time")
    merged = merged.dropna(subset=["tokens_per_s"])
    return merged[cols].sort_values(["line", "filter", "concurrency"], key=sort_key).reset_index(drop=True)


def speedup_table(current: pd.DataFrame, reference_line: str) -> pd.DataFrame:
    """Speed-up of every line over ``reference_line`` at the same commit: wide table by concurrency."""
    if current.empty or reference_line not in set(current["line"]):
        return pd.DataFrame()
    ref = current[current["line"] == reference_line][["concurrency", "filter", "tokens_per_s"]]
    m = current.merge(ref, on=["concurrency", "filter"], suffixes=("", "_ref"))
    m = m[m["line"] != reference_line]
    if m.empty:
        return pd.DataFrame()
    m["speedup"] = m["tokens_per_s"] / m["tokens_per_s_ref"]
    wide = m.pivot_table(index=["line", "filter"], columns="concurrency", values="speedup", aggfunc="first")
    wide.columns = [f"c={int(c)}" for c in wide.columns]
    return wide.reset_index()


def baseline_ratios(current: pd.DataFrame, baseline: pd.DataFrame) -> pd.DataFrame:
    """tokens/s at the chosen commit over tokens/s at the baseline commit, per line and concurrency."""
    if current.empty or baseline.empty:
        return pd.DataFrame(columns=["line", "concurrency", "filter", "tokens_per_s", "baseline", "speedup"])
    keys = ["line", "concurrency", "filter"]
    m = current[keys + ["tokens_per_s"]].merge(
        baseline[keys + ["tokens_per_s"]].rename(columns={"tokens_per_s": "baseline"}), on=keys
    )
    m["speedup"] = m["tokens_per_s"] / m["baseline"]
    return m.sort_values(keys, key=sort_key).reset_index(drop=True)


def efficiency_frame(results: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """Long frame of the efficiency metrics (roofline fraction, GB/s, TFLOP/s) for one suite at one commit.

    Columns: metric, unit, line, concurrency, filter, value.
    """
    parts = []
    for leaf in EFFICIENCY:
        df = _sweep(_suite_rows(results, suite, leaf), suite) if not results.empty else pd.DataFrame()
        if df.empty:
            continue
        df = df.drop(columns="params_key")
        df.insert(0, "unit", METRICS[leaf])
        df.insert(0, "metric", leaf)
        parts.append(df.dropna(subset=["value"]))
    if not parts:
        return pd.DataFrame(columns=["metric", "unit", "line", "concurrency", "filter", "value"])
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["metric", "line", "filter", "concurrency"], key=sort_key).reset_index(drop=True)


def measured_ceilings(results: pd.DataFrame) -> dict[str, float]:
    """The device ceilings the benchmarks computed their roofline fraction with, recovered from the
    stored metrics: roofline seconds = max(bytes / copy bandwidth, flops / matmul rate), so for every case
    GB/s / fraction = bytes / roofline seconds, which equals the copy bandwidth exactly for the
    memory-bound cases (the largest value) and is below it for compute-bound ones, whose
    TFLOP/s / fraction is then the matmul rate. Returns ``copy_gbps`` and, when some case is compute-bound,
    ``matmul_tflops``; empty without the metrics."""
    if results.empty:
        return {}
    leaf = results["benchmark"].str.rsplit(".", n=1).str[-1]
    cls = results["benchmark"].str.rsplit(".", n=1).str[0]
    frame = results.assign(_leaf=leaf, _cls=cls)
    wide = frame[frame["_leaf"].isin(list(EFFICIENCY))].pivot_table(
        index=["_cls", "params_key"], columns="_leaf", values="value", aggfunc="first"
    )
    if not {"track_gbps", "track_roofline_fraction"} <= set(wide.columns):
        return {}
    frac = wide["track_roofline_fraction"].where(wide["track_roofline_fraction"] > 0)
    bw = (wide["track_gbps"] / frac).dropna()
    if bw.empty:
        return {}
    out = {"copy_gbps": float(bw.max())}
    if "track_tflops" in wide.columns:
        compute_bound = bw.index[bw < 0.99 * out["copy_gbps"]]
        rate = (wide.loc[compute_bound, "track_tflops"] / frac.loc[compute_bound]).dropna()
        if not rate.empty:
            out["matmul_tflops"] = float(rate.max())
    return out
