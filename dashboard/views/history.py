"""History: one series (benchmark x params on the machine) over commits, IQR bars, flagged regressions."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, frames, suites, widgets

ctx = widgets.context()
st.title("History")

series = data.series(ctx.url, ctx.machine)
if series.empty:
    st.info(f"No series on machine `{ctx.machine}`.")
    st.stop()

names = sorted(series["benchmark"].unique())
# Default to the MLA decode timing when present, else the first benchmark; ?benchmark= deep-links.
wanted = st.query_params.get("benchmark")
mla = [n for n in names if any(suites.matches(n, s.time_bench) for s in suites.SUITES)]
default = wanted if wanted in names else (mla[0] if mla else names[0])
c1, c2 = st.columns([2, 3])
bench = c1.selectbox("Benchmark", names, index=names.index(default), key="hist_bench")
keys = list(series[series["benchmark"] == bench]["params_key"])
wanted_params = st.query_params.get("params")
params_key = c2.selectbox(
    "Parameters", keys, index=keys.index(wanted_params) if wanted_params in keys else 0, key="hist_params",
    format_func=lambda k: frames.params_label(k) or "(no parameters)",
)

hist = data.history(ctx.url, bench, params_key, ctx.machine)
if hist.empty:
    st.info("No results for this series.")
    st.stop()
units = series[(series["benchmark"] == bench) & (series["params_key"] == params_key)].get("unit")
unit = units.iloc[0] if units is not None and len(units) and pd.notna(units.iloc[0]) else None

regs = data.regressions(ctx.url, ctx.machine)
flagged = regs[(regs["benchmark"] == bench) & (regs["params_key"] == params_key)] if not regs.empty else regs

log_y = st.toggle("Logarithmic value axis", value=False, key="hist_logy")
title = f"{bench} [{frames.params_label(params_key)}] · {ctx.machine}"
fig = charts.history_figure(hist, title=title, unit=unit, flagged=flagged, repo_url=ctx.repo_url)
if log_y:
    fig.update_yaxes(type="log")
st.plotly_chart(fig, width="stretch", key="hist_chart")
up = frames.higher_is_better(bench, unit)
st.caption(
    f"{len(hist)} commits in commit order; bars span the interquartile range (q_25..q_75); "
    f"{'higher' if up else 'lower'} is better. Triangles mark flagged regressions ({len(flagged)})."
)

if not flagged.empty:
    st.subheader("Flagged regressions of this series")
    wanted = ("sha", "date", "before", "after", "ratio", "status", "p_value")
    cols = [c for c in wanted if c in flagged.columns]
    st.dataframe(flagged[cols], hide_index=True)

st.subheader("Commits")
table = hist.iloc[::-1][[c for c in ("sha", "date", "value", "q_25", "q_75", "author", "message")
                         if c in hist.columns]].copy()
if "message" in table:
    table["message"] = table["message"].fillna("").astype(str).str.split("\n").str[0]
table.insert(1, "flagged", table["sha"].isin(set(flagged["sha"]) if not flagged.empty else set()))
config: dict[str, object] = {}
if ctx.repo_url:
    table.insert(1, "link", ctx.repo_url + "/commit/" + table["sha"].astype(str))
    config["link"] = st.column_config.LinkColumn("commit", display_text="open")
else:
    st.caption("Set a repository URL in the sidebar (or env MLAPERF_REPO_URL) to link commits.")
st.dataframe(table, hide_index=True, column_config=config)
