"""Compare two commits side by side, like ``asv compare``: ratios and significance per series."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, data, frames, widgets

ctx = widgets.context()
st.title("Compare commits")

commits = data.commits(ctx.url, ctx.machine)
if len(commits) < 2:
    st.info(f"Machine `{ctx.machine}` needs results for at least two commits to compare.")
    st.stop()

c1, c2, c3 = st.columns([3, 3, 2])
with c1:
    base = widgets.commit_select("Base (before)", commits, key="cmp_base", default=-2)
with c2:
    head = widgets.commit_select("Head (after)", commits, key="cmp_head", default=-1)
threshold = c3.number_input("Threshold (%)", min_value=0.0, max_value=500.0, value=5.0, step=1.0,
                            key="cmp_threshold") / 100.0

cmp = data.compare(ctx.url, base, head, ctx.machine, threshold)
if cmp.empty:
    st.info("Neither commit has results on this machine.")
    st.stop()

worse, better = (cmp["change"] == "+").sum(), (cmp["change"] == "-").sum()
failed = (cmp["change"] == "x").sum()
m1, m2, m3, m4 = st.columns(4)
m1.metric("Series compared", len(cmp))
m2.metric("Slower (significant)", int(worse))
m3.metric("Faster (significant)", int(better))
m4.metric("Failed on one side", int(failed))
st.caption(
    f"`+` worse, `-` better by more than {threshold:.0%} and significant; `x` failed on one side. "
    "Significance follows the detector (`regressions.compare`): Mann-Whitney U on the samples when both "
    "commits have them, else non-overlapping 99% confidence intervals (column `method`). "
    "Ratio = head / base in the benchmark's unit."
)

st.plotly_chart(
    charts.compare_figure(
        cmp, title=f"Largest changes: {frames.short_sha(head)} vs {frames.short_sha(base)} · {ctx.machine}"
    ),
    width="stretch", key="cmp_chart",
)
only_changed = st.toggle("Only changed", value=True, key="cmp_only")
view = cmp[cmp["change"] != ""] if only_changed else cmp
if view.empty:
    st.success("No significant change beyond the threshold.")
    st.stop()
table = view.assign(
    before=[frames.format_value(v, u) for v, u in zip(view["base"], view["unit"], strict=True)],
    after=[frames.format_value(v, u) for v, u in zip(view["head"], view["unit"], strict=True)],
)[["change", "before", "after", "ratio", "p_value", "method", "benchmark", "params"]]
st.dataframe(
    table, hide_index=True,
    column_config={"ratio": st.column_config.NumberColumn(format="%.3f"),
                   "p_value": st.column_config.NumberColumn("p", format="%.2g")},
)
