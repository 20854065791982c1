"""Regressions flagged by the detector, newest first; acknowledge/ignore when started with --writable."""

from __future__ import annotations

from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from dashboard import data, frames, widgets

STATUSES = ["new", "acknowledged", "fixed", "ignored"]

ctx = widgets.context()
st.title("Regressions")

c1, c2, c3 = st.columns([2, 3, 2])
statuses = c1.multiselect("Status", STATUSES, default=["new", "acknowledged"], key="reg_status")
text = c2.text_input("Benchmark contains", key="reg_text", placeholder="e.g. time_decode")
all_machines = c3.toggle("All machines", value=False, key="reg_all")

regs = data.regressions(ctx.url, None if all_machines else ctx.machine)
if regs.empty:
    st.info("No regressions flagged" + ("" if all_machines else f" on `{ctx.machine}`")
            + ". The detector (`mlaperf detect`) writes them after each ingest.")
    st.stop()

view = regs[regs["status"].isin(statuses)] if statuses else regs
if text:
    view = view[view["benchmark"].str.contains(text, case=False, regex=False)]
# db.queries.regressions already gives newest commit first in history order (git generation, then
# date); re-sorting by date here would scramble commits that share one asv timestamp.
st.caption(f"{len(view)} of {len(regs)} regressions; newest commit first. Ratio > 1 means worse.")

table = pd.DataFrame(
    {
        "id": view["id"],
        "benchmark": view["benchmark"],
        "params": view["params_key"].map(frames.params_label),
        "machine": view["machine"],
        "commit": view["sha"].astype(str),
        "date": view.get("date"),
        "before → after": [
            f"{frames.format_value(b, u)} → {frames.format_value(a, u)}"
            for b, a, u in zip(view["before"], view["after"],
                               view["unit"] if "unit" in view else [None] * len(view), strict=True)
        ],
        "ratio": view["ratio"],
        "status": view["status"],
    }
)
# Deep link into the History page for the series (opens in a new tab with the same machine).
table["history"] = [
    "history?" + urlencode({"machine": m, "benchmark": b, "params": k})
    for m, b, k in zip(view["machine"], view["benchmark"], view["params_key"], strict=True)
]
config: dict[str, object] = {
    "ratio": st.column_config.NumberColumn(format="%.3f"),
    "history": st.column_config.LinkColumn("history", display_text="plot"),
}
if ctx.repo_url:
    table["commit"] = ctx.repo_url + "/commit/" + table["commit"]
    config["commit"] = st.column_config.LinkColumn("commit", display_text=r"/commit/([0-9a-f]{8})")
else:
    table["commit"] = table["commit"].str.slice(0, 8)
st.dataframe(table, hide_index=True, column_config=config)

if not ctx.writable:
    st.caption("Read-only: start with `mlaperf dashboard --writable` to acknowledge or ignore regressions.")
    st.stop()

st.subheader("Triage")
ids = list(view["id"])
if not ids:
    st.stop()
labels = {
    int(r.id): f"#{r.id} {r.benchmark} [{frames.params_label(r.params_key)}] @ {str(r.sha)[:8]} ({r.status})"
    for r in view.itertuples()
}
pick = st.selectbox("Regression", ids, format_func=lambda i: labels[int(i)], key="reg_pick")
b1, b2, b3 = st.columns(3)
for col, label, new_status in ((b1, "Acknowledge", "acknowledged"), (b2, "Ignore", "ignored"),
                               (b3, "Reopen", "new")):
    if col.button(label, key=f"reg_{new_status}"):
        data.set_regression_status(ctx.url, int(pick), new_status)
        st.toast(f"Regression #{pick} marked {new_status}")
        st.rerun()
