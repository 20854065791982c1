"""Efficiency: fraction of the device's roofline (and achieved GB/s, TFLOP/s) per kernel and concurrency."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, frames, suites, widgets

LABELS = {
    "track_roofline_fraction": "roofline (fraction)",
    "track_gbps": "achieved bandwidth (GB/s)",
    "track_tflops": "achieved compute (TFLOP/s)",
}

ctx = widgets.context()
st.title("Efficiency")

commits = data.commits(ctx.url, ctx.machine)
if commits.empty:
    st.info(f"No commits with results on machine `{ctx.machine}`.")
    st.stop()
sha = widgets.commit_select("Commit", commits, key="eff_commit")
machines = data.machines(ctx.url)
gpu = machines.loc[machines["name"] == ctx.machine].iloc[0] if "gpu_name" in machines else None
if gpu is not None and pd.notna(gpu["gpu_name"]) and str(gpu["gpu_name"]) != "none":
    st.caption(f"Device: {gpu['gpu_name']} (sm {gpu.get('gpu_cc', '?')}); each benchmark computes its "
               "roofline from this device's peak bandwidth and tensor-core throughput.")
results = data.results_at_commit(ctx.url, sha, ctx.machine)

shown = 0
for suite in suites.present_suites(results["benchmark"].unique() if not results.empty else []):
    eff = suites.efficiency_frame(results, suite)
    if eff.empty:
        continue
    st.subheader(suite.title)
    values = sorted(eff["filter"].dropna().unique(), key=lambda v: (isinstance(v, str), v))
    if values:
        default = 512 if 512 in values and suite.filter_param == "topk" else values[-1]
        pick = st.radio(suite.filter_param, values, index=values.index(default), horizontal=True,
                        key=f"eff_{suite.key}_filter")
        eff = eff[eff["filter"] == pick]
    metrics = [m for m in LABELS if m in set(eff["metric"])]
    for col, metric in zip(st.columns(len(metrics)), metrics, strict=True):
        df = eff[eff["metric"] == metric]
        fig = charts.efficiency_figure(
            df, title=f"{LABELS[metric].split(' (')[0]} · {frames.short_sha(sha)}",
            metric_title=LABELS[metric], line_label=suite.line_param,
        )
        col.plotly_chart(fig, width="stretch", key=f"eff_{suite.key}_{metric}")
        shown += 1
    roof = eff[eff["metric"] == "track_roofline_fraction"]
    if not roof.empty:
        best = roof.loc[roof["value"].idxmax()]
        st.caption(f"Best: {suite.line_param}={best['line']} at concurrency {int(best['concurrency'])} "
                   f"reaches {best['value']:.1%} of the device's roofline.")

if not shown:
    st.info(
        "No efficiency metrics at this commit. They come from the `track_roofline_fraction`, `track_gbps` "
        "and `track_tflops` benchmarks of the sparse-MLA suites (`bench_decode.SparseDecodeMetrics`, "
        "`bench_indexer.IndexerMetrics`, `bench_step.DecodeStepMetrics`); other asv projects have none."
    )
