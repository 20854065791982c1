"""Efficiency: fraction of the device's roofline, achieved GB/s and TFLOP/s per kernel and concurrency, with
the device's ceilings (measured, as the benchmarks used them) and datasheet peaks as reference lines. The
page's widgets over ``dashboard.efficiency_model``."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, fmt, frames, suites, widgets
from dashboard import efficiency_model as model
from settings.gpu import gpu_spec


def main() -> None:
    ctx = widgets.context()
    st.title("Efficiency")
    commits = data.commits(ctx.url, ctx.machine)
    if commits.empty:
        st.info(f"No commits with results on machine `{ctx.machine}`.")
        widgets.stop()
    fullest, why = widgets.fullest_commit(ctx, commits)  # Throughput's commit: a partial run drew two points
    c1, c2 = st.columns([3, 1])
    with c1:
        sha = widgets.commit_select("Commit", commits, key="eff_commit", default=fullest)
    with c2:
        log_y = widgets.url_toggle("Logarithmic value axes", key="eff_logy", default=True)
    widgets.opened_on(sha, fullest, why)
    results = data.results_at_commit(ctx.url, sha, ctx.machine)
    present = model.metric_suites(list(results["benchmark"].unique()) if not results.empty else [])
    if not present:
        st.info(
            "No efficiency metrics at this commit. They come from the `track_roofline_fraction`, `track_gbps` "
            "and `track_tflops` benchmarks of the sparse-MLA suites (`bench_decode.SparseDecodeMetrics`, "
            "`bench_indexer.IndexerMetrics`, `bench_step.DecodeStepMetrics`); other asv projects have none."
        )
        widgets.stop()
    info = data.machine_info(ctx.url, ctx.machine)
    gpu = info.get("gpu_name")
    ceil = suites.measured_ceilings(results)
    sheet = gpu_spec(str(gpu)) if gpu else None
    st.caption(model.device_caption(info, ceil, sheet))

    by_key = {s.key: s for s in present}
    suite = by_key[widgets.url_selectbox("Suite", list(by_key), key="eff_suite",
                                         format_func=lambda k: by_key[k].title)]
    eff = suites.efficiency_frame(results, suite)
    values = frames.value_order(eff["filter"].dropna())
    if values:
        pick = widgets.url_radio(suite.filter_param, values, key=f"eff_{suite.key}_filter",
                                 default=suites.default_filter(suite, values), horizontal=True)
        eff = eff[eff["filter"] == pick]
    shown = [m for m in model.METRICS if m[0] in set(eff["metric"])]
    st.markdown(f"**{suite.title} · {ctx.machine} · {fmt.short_sha(sha)}**")
    specs = charts.efficiency_specs(eff, panels=shown, line_label=suite.line_param, peaks=model.peaks(ceil, sheet),
                                    log_y=log_y)
    if not specs:
        st.caption("No efficiency metric of this suite at this setting.")
        widgets.stop()
    # One chart per column, each as wide as it: the panels fill the page at any window width.
    for i, (col, spec) in enumerate(zip(st.columns(len(specs)), specs, strict=True)):
        col.vega_lite_chart(spec, width="stretch", key=f"eff_{suite.key}_chart_{i}")
    best = model.best_caption(eff, suite.line_param)
    if best:
        st.caption(best)


if __name__ == "__main__":
    main()
