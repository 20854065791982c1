"""Overview: what the store holds for the chosen machine, and which pages have data."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, suites, widgets

ctx = widgets.context()
st.title("mlaperf: sparse-MLA decode performance")

commits = data.commits(ctx.url, ctx.machine)
series = data.series(ctx.url, ctx.machine)
regs = data.regressions(ctx.url, ctx.machine)
open_regs = regs[regs["status"] == "new"] if not regs.empty else regs

c1, c2, c3, c4 = st.columns(4)
c1.metric("Commits", len(commits))
c2.metric("Series", len(series))
c3.metric("Benchmarks", series["benchmark"].nunique() if not series.empty else 0)
c4.metric("Open regressions", len(open_regs))

present = suites.present_suites(series["benchmark"].unique() if not series.empty else [])
if present:
    st.success("Sparse-MLA suites on this machine: " + ", ".join(s.title for s in present))
else:
    st.info(
        "No sparse-MLA suites (`bench_decode`, `bench_indexer`, `bench_step`) on this machine: the "
        "throughput and efficiency pages fall back to a generic parameter sweep; history, regressions and "
        "compare work for any asv benchmark."
    )

machines = data.machines(ctx.url)
row = machines[machines["name"] == ctx.machine]
if not row.empty:
    info = row.iloc[0].drop(labels=[c for c in ("id", "info") if c in row.columns]).dropna()
    st.subheader("Machine")
    shown = [f"{v:g}" if isinstance(v, float) else str(v) for v in info.values]
    st.dataframe(pd.DataFrame({"field": info.index, "value": shown}),
                 hide_index=True, width="content")

if not commits.empty:
    st.subheader("Latest commits")
    latest = commits.iloc[::-1].head(10).copy()
    cols = [c for c in ("sha", "date", "author", "message") if c in latest.columns]
    latest = latest[cols]
    if "message" in latest:
        latest["message"] = latest["message"].fillna("").astype(str).str.split("\n").str[0]
    config = {}
    if ctx.repo_url:
        latest["link"] = ctx.repo_url + "/commit/" + latest["sha"].astype(str)
        config["link"] = st.column_config.LinkColumn("link", display_text="open")
    st.dataframe(latest, hide_index=True, column_config=config)
