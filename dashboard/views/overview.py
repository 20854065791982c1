"""Overview: the alert groups that need a look (open, suspect, fixed, machine-wide), what the store holds
for the chosen machine, and the machine itself."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, fmt, suites, triage, widgets

ctx = widgets.context()
st.title("mlaperf: sparse-MLA decode performance")

commits = data.commits(ctx.url, ctx.machine)
series = data.series(ctx.url, ctx.machine)
regs = data.regressions(ctx.url, ctx.machine)
groups = triage.groups(regs)
count = triage.counts(groups)

c = st.columns(6)
c[0].metric("Open alert groups", count["open"], help="Confirmed regressions (new or acknowledged), not fixed")
c[1].metric("Suspect", count["suspect"], help="Seen only in the newest run; the next run confirms or refutes")
c[2].metric("Fixed", count["fixed"], help="Every regression of the group came back at a later commit")
c[3].metric("Machine-wide", count["machine_wide"], help="Groups spanning most of this machine's series")
c[4].metric("Commits", f"{len(commits):,}")
c[5].metric("Series", f"{len(series):,}")

st.subheader("Alert groups")
if groups.empty:
    st.success(f"No regression has been flagged on `{ctx.machine}`. `mlaperf detect` flags them after each ingest.")
else:
    shown = groups[groups["category"] != "closed"].head(12)
    table = triage.group_table(shown)
    table.insert(2, "commits", [fmt.commit_range(p, s) for p, s in zip(shown["parent_sha"], shown["sha"],
                                                                       strict=True)])
    # The whole commit message: the grid shows its first line and all of it on hover.
    table.insert(3, "culprit", shown["message"].map(lambda m: "" if fmt.is_missing(m) else str(m).strip()))
    table["triage"] = [widgets.page_link("regressions", machine=ctx.machine, reg_group=g) for g in shown["group"]]
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "group": st.column_config.TextColumn(width=50),
        "series": st.column_config.NumberColumn(width=50),
        "worst": st.column_config.TextColumn(width=60),
        "culprit": st.column_config.TextColumn(width="large"),
        "triage": st.column_config.LinkColumn("triage", display_text="view group", width=80),
    })
    st.caption("worst: the largest slowdown in the group, the detector's level after / level before the step "
               "(direction-aware, > 1 is worse). Closed groups (ignored, transient, retired) are on the "
               "Regressions page.")

st.subheader("Largest latest changes")
widgets.summary_grid(ctx, key="ov_q", limit=10, by_change=True, window=20)  # a short window: a quicker page
st.page_link("views/summary.py", label="Every benchmark →")

present = suites.present_suites(series["benchmark"].unique() if not series.empty else [])
if not present:
    st.info(
        "No sparse-MLA suites (`bench_decode`, `bench_indexer`, `bench_step`) on this machine: the "
        "throughput and efficiency pages fall back to a generic parameter sweep; history, regressions and "
        "compare work for any asv benchmark."
    )

left, right = st.columns([3, 2])
with left:
    st.subheader("Latest commits")
    latest = commits.iloc[::-1].head(8)
    table = pd.DataFrame({
        "commit": latest["sha"].map(fmt.short_sha),
        "date": pd.to_datetime(latest["date"]).dt.strftime("%Y-%m-%d %H:%M"),
        "message": latest["message"].map(lambda m: "" if fmt.is_missing(m) else str(m).strip()),
    })
    config: dict[str, object] = {}
    if ctx.repo_url:
        table["link"] = [widgets.commit_url(ctx.repo_url, s) for s in latest["sha"]]
        config["link"] = st.column_config.LinkColumn("link", display_text="open")
    st.dataframe(table, hide_index=True, width="stretch", column_config=config)
with right:
    st.subheader("Machine")
    info = data.machine_info(ctx.url, ctx.machine)
    names = {"gpu_name": "GPU", "gpu_cc": "compute capability", "gpu_sm_count": "SMs", "gpu_memory_gb": "GPU memory",
             "gpu_driver": "driver", "cuda": "CUDA", "torch": "torch", "triton": "triton", "cpu": "CPU",
             "num_cpu": "CPU cores", "ram": "RAM", "os": "OS", "arch": "arch"}
    shown_info = {label: info.get(k) for k, label in names.items() if info.get(k) not in (None, "", "none")}
    if "GPU memory" in shown_info:
        shown_info["GPU memory"] = f"{fmt.sig(float(shown_info['GPU memory']))} GB"
    if "RAM" in shown_info:
        shown_info["RAM"] = fmt.fmt_bytes(shown_info["RAM"])
    profile = info.get("arch_profile")
    if profile:
        shown_info["kernel arch profile"] = profile
    st.table(pd.DataFrame({"value": [str(v) for v in shown_info.values()]}, index=list(shown_info)))
    st.caption("As the newest ingested run recorded it (asv machine info, GPU identity added by the runner).")
