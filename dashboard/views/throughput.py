"""Throughput vs concurrency: one line per implementation at a commit, optional dashed baseline commit."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, frames, suites, widgets

ctx = widgets.context()
st.title("Throughput vs concurrency")

commits = data.commits(ctx.url, ctx.machine)
if commits.empty:
    st.info(f"No commits with results on machine `{ctx.machine}`.")
    st.stop()

c1, c2 = st.columns(2)
with c1:
    sha = widgets.commit_select("Commit", commits, key="tp_commit")
with c2:
    base_sha = widgets.commit_select(
        "Baseline commit (dashed, optional)", commits, key="tp_base", allow_none=True,
        help="Overlay another commit's curves and show the speed-up of the chosen commit over it.",
    )
results = data.results_at_commit(ctx.url, sha, ctx.machine)
present = suites.present_suites(results["benchmark"].unique() if not results.empty else [])
if not present:
    widgets.no_suites_note("throughput curve")
    widgets.sweep_section(results, key="tp_sweep", title_suffix=f" @ {frames.short_sha(sha)}")
    st.stop()

baseline = data.results_at_commit(ctx.url, base_sha, ctx.machine) if base_sha else None
log_y = st.toggle("Logarithmic throughput axis", value=True, key="tp_logy")

for suite in present:
    st.subheader(suite.title)
    cur = suites.throughput_frame(results, suite)
    if cur.empty:
        st.caption(f"No `{suite.time_bench}` or tokens/s results at this commit.")
        continue
    values = sorted(cur["filter"].dropna().unique(), key=lambda v: (isinstance(v, str), v))
    cur_f, base_f, pick = cur, None, None
    if values:
        default = 512 if 512 in values and suite.filter_param == "topk" else values[-1]
        pick = st.radio(suite.filter_param, values, index=values.index(default), horizontal=True,
                        key=f"tp_{suite.key}_filter")
        cur_f = cur[cur["filter"] == pick]
    if baseline is not None:
        base_all = suites.throughput_frame(baseline, suite)
        base_f = base_all[base_all["filter"] == pick] if pick is not None else base_all
    title = f"{suite.title} · {ctx.machine}" + (f" · {suite.filter_param}={pick}" if pick is not None else "")
    fig = charts.throughput_figure(
        cur_f, title=title, line_label=suite.line_param, commit_label=frames.short_sha(sha),
        baseline=base_f, baseline_label=frames.short_sha(base_sha) if base_sha else "", log_y=log_y,
    )
    st.plotly_chart(fig, width="stretch", key=f"tp_{suite.key}_chart")
    sources = sorted(set(cur_f["source"]))
    st.caption("tokens/s from " + " and ".join(f"`{s}`" for s in sources)
               + " (one token per request per step).")

    speedups = suites.speedup_table(cur_f, suite.reference_line)
    if not speedups.empty:
        st.markdown(f"Speed-up over **{suite.reference_line}** at this commit")
        st.dataframe(speedups.drop(columns="filter"), hide_index=True,
                     column_config={c: st.column_config.NumberColumn(format="%.2fx") for c in speedups.columns
                                    if c.startswith("c=")})
    if base_f is not None:
        ratios = suites.baseline_ratios(cur_f, base_f)
        if ratios.empty:
            st.caption("The baseline commit has no results for this suite.")
        else:
            st.markdown(f"Speed-up of `{frames.short_sha(sha)}` over baseline `{frames.short_sha(base_sha)}`")
            st.dataframe(
                ratios.rename(columns={"line": suite.line_param, "filter": suite.filter_param}),
                hide_index=True,
                column_config={
                    "tokens_per_s": st.column_config.NumberColumn("tokens/s", format="%.4g"),
                    "baseline": st.column_config.NumberColumn("baseline tokens/s", format="%.4g"),
                    "speedup": st.column_config.NumberColumn("speed-up", format="%.2fx"),
                },
            )
