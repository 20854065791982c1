"""Efficiency: fraction of the device's roofline, achieved GB/s and TFLOP/s per kernel and concurrency, with
the device's ceilings (measured, as the benchmarks used them) and datasheet peaks as reference lines."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, fmt, frames, suites, widgets
from settings.gpu import gpu_spec

METRICS = tuple((leaf, title, suites.METRICS[leaf]) for leaf, title in suites.EFFICIENCY.items())  # panels

ctx = widgets.context()
st.title("Efficiency")

commits = data.commits(ctx.url, ctx.machine)
if commits.empty:
    st.info(f"No commits with results on machine `{ctx.machine}`.")
    st.stop()
c1, c2 = st.columns([3, 1])
with c1:
    sha = widgets.commit_select("Commit", commits, key="eff_commit")
with c2:
    log_y = widgets.url_toggle("Logarithmic value axes", key="eff_logy", default=True)
results = data.results_at_commit(ctx.url, sha, ctx.machine)
names = list(results["benchmark"].unique()) if not results.empty else []
present = [s for s in suites.present_suites(names)
           if any(suites.matches(n, f"{s.metrics_class}.{m}") for n in names for m, _, _ in METRICS)]
if not present:
    st.info(
        "No efficiency metrics at this commit. They come from the `track_roofline_fraction`, `track_gbps` "
        "and `track_tflops` benchmarks of the sparse-MLA suites (`bench_decode.SparseDecodeMetrics`, "
        "`bench_indexer.IndexerMetrics`, `bench_step.DecodeStepMetrics`); other asv projects have none."
    )
    st.stop()

info = data.machine_info(ctx.url, ctx.machine)
gpu = info.get("gpu_name")
ceil = suites.measured_ceilings(results)
sheet = gpu_spec(str(gpu)) if gpu else None
peaks: dict[str, list[tuple[str, float]]] = {"track_roofline_fraction": [("roofline", 1.0)],
                                              "track_gbps": [], "track_tflops": []}
if "copy_gbps" in ceil:
    peaks["track_gbps"].append(("measured copy", ceil["copy_gbps"]))
if "matmul_tflops" in ceil:
    peaks["track_tflops"].append(("measured bf16 matmul", ceil["matmul_tflops"]))
if sheet:
    peaks["track_gbps"].append(("datasheet", sheet.bandwidth_gbps))
    peaks["track_tflops"].append(("datasheet bf16 dense", sheet.bf16_tflops))
parts = []
if gpu and gpu != "none":
    parts.append(f"Device: {gpu} (sm {info.get('gpu_cc') or '?'}).")
if ceil:
    parts.append("Ceilings the benchmarks measured on it and computed the roofline with: copy "
                 f"{fmt.fmt_value(ceil['copy_gbps'], 'GB/s')}"
                 + (f", bf16 matmul {fmt.fmt_value(ceil['matmul_tflops'], 'TFLOP/s')}" if "matmul_tflops" in ceil
                    else " (no case is compute-bound, so the matmul ceiling cannot be read back from the results)")
                 + ". Roofline time = max(bytes / copy bandwidth, flops / matmul rate).")
if sheet:
    parts.append(f"Datasheet peaks ({sheet.name}): {fmt.fmt_value(sheet.bandwidth_gbps, 'GB/s')}, bf16 dense "
                 f"{fmt.fmt_value(sheet.bf16_tflops, 'TFLOP/s')}.")
st.caption(" ".join(parts))

by_key = {s.key: s for s in present}
suite = by_key[widgets.url_selectbox("Suite", list(by_key), key="eff_suite", format_func=lambda k: by_key[k].title)]
eff = suites.efficiency_frame(results, suite)
values = frames.value_order(eff["filter"].dropna())
if values:
    default = 512 if 512 in values and suite.filter_param == "topk" else values[-1]
    pick = widgets.url_radio(suite.filter_param, values, key=f"eff_{suite.key}_filter", default=default,
                             horizontal=True)
    eff = eff[eff["filter"] == pick]
shown = [m for m in METRICS if m[0] in set(eff["metric"])]
spec = charts.efficiency_spec(
    eff, title=f"{suite.title} · {ctx.machine} · {fmt.short_sha(sha)}", panels=shown,
    line_label=suite.line_param, peaks=peaks, log_y=log_y,
)
st.vega_lite_chart(spec, key=f"eff_{suite.key}_chart")
roof = eff[eff["metric"] == "track_roofline_fraction"]
if not roof.empty:
    best = roof.loc[roof["value"].idxmax()]
    st.caption(f"Best: {suite.line_param}={best['line']} at concurrency {int(best['concurrency'])} reaches "
               f"{fmt.fmt_value(best['value'], 'fraction')} of the device's roofline "
               f"({fmt.fmt_ratio(1 / best['value'])} off it).")
