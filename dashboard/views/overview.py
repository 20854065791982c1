"""Overview: the alert groups that need a look (open, suspect, fixed, machine-wide), what the store holds
for the chosen machine, and the machine itself. The page's widgets over ``dashboard.overview_model``."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, links, suites, summary, triage, widgets
from dashboard import overview_model as model


def _counts(groups: pd.DataFrame, commits: pd.DataFrame, series: pd.DataFrame, failing: int) -> None:
    count = triage.counts(groups)
    # One row that wraps, each count as wide as its label: six equal columns cut the labels at 900 px ("Ope…").
    with st.container(horizontal=True, gap="large"):
        st.metric("Open alert groups", count["open"], width="content",
                  help="Confirmed regressions (new or acknowledged), not fixed")
        # Groups, as `mlaperf detect` heads them; its alerts' own statuses (a suspect alert in a confirmed group)
        # are on the Regressions page. "Suspect 0" over a group holding suspect alerts read as a contradiction.
        st.metric("Suspect groups", count["suspect"], width="content",
                  help="Groups seen only in the newest run; the next run confirms or refutes")
        st.metric("Fixed groups", count["fixed"], width="content",
                  help="Every regression of the group came back at a later commit")
        st.metric("Machine-wide groups", count["machine_wide"], width="content",
                  help="Groups spanning most of this machine's series")
        # A benchmark that broke keeps no value to step from: detection cannot flag it, this count does.
        st.metric("Failing series", f"{failing:,}", width="content",
                  help=f"Series whose newest results failed (of the newest {summary.SPARK} commits): listed first")
        st.metric("Commits", f"{len(commits):,}", width="content")
        st.metric("Series", f"{len(series):,}", width="content")


def _alert_groups(ctx: widgets.Context, groups: pd.DataFrame) -> None:
    st.subheader("Alert groups")
    if groups.empty:
        st.success(f"No regression has been flagged on `{ctx.machine}`. `mlaperf detect` flags them after each "
                   "ingest.")
        return
    table = model.alert_rows(groups, lambda g: links.to("regressions", machine=ctx.machine, reg_group=g))
    links.grid(table, key="ov_groups", links={"triage": "view group"},
               # A state with its kind ("fixed, event across benchmarks") sized to its text pushed the triage links
               # out of view: the state and the culprit share the room (the whole of each on hover).
               widths={"group": 50, "state": 150, "worst": 60, "culprit": "medium", "triage": 100},
               column_config={"series": st.column_config.NumberColumn(width=50)})
    st.caption("worst: the largest slowdown in the group, the detector's level after / level before the step "
               "(direction-aware, > 1 is worse). Closed groups (ignored, transient, retired) are on the "
               "Regressions page.")


def _commits_and_machine(ctx: widgets.Context, commits: pd.DataFrame) -> None:
    left, right = st.columns([3, 2])
    with left:
        st.subheader("Latest commits")
        table = model.latest_commits(commits, (lambda s: links.commit_url(ctx.repo_url, s)) if ctx.repo_url
                                     else None)
        config: dict[str, object] = {}
        if ctx.repo_url:
            config["link"] = st.column_config.LinkColumn("link", display_text="open")
        st.dataframe(table, hide_index=True, width="stretch", column_config=config)
    with right:
        st.subheader("Machine")
        rows = model.machine_rows(data.machine_info(ctx.url, ctx.machine))
        if rows.empty:  # a table of nothing reads "empty"
            st.caption(f"`{ctx.machine}`'s runs recorded no machine description (asv's machine.json: CPU, OS, RAM; "
                       "the runner adds the GPU).")
        else:
            st.table(rows)
            st.caption("As the newest ingested run recorded it (asv machine info, GPU identity added by the runner).")


def main() -> None:
    ctx = widgets.context()
    commits = data.commits(ctx.url, ctx.machine)
    series = data.series(ctx.url, ctx.machine)
    mla = suites.present_suites(series["benchmark"].unique() if not series.empty else [])
    # Another project's asv results are not sparse-MLA decode performance (a review on MuJoCo Warp's).
    st.title("mlaperf: sparse-MLA decode performance" if mla else f"mlaperf: `{ctx.machine}`")
    groups = triage.groups(data.regressions(ctx.url, ctx.machine))
    # The All benchmarks page's and the site's window: one count of failing series, "failed ×N" alike everywhere.
    grid = widgets.summary_table(ctx, window=summary.SPARK)
    _counts(groups, commits, series, int((grid[0]["failing"] > 0).sum()))
    _alert_groups(ctx, groups)
    st.subheader("Failing and largest latest changes")
    widgets.summary_grid(ctx, key="ov_q", limit=summary.LARGEST, by_change=True, grid=grid)
    st.page_link("views/summary.py", label="Every benchmark →")
    if not mla:
        st.info(
            "No sparse-MLA suites (`bench_decode`, `bench_indexer`, `bench_step`) on this machine: the "
            "throughput page falls back to a generic parameter sweep and the efficiency page has nothing to show "
            "(its metrics come from those suites); history, regressions and compare work for any asv benchmark."
        )
    _commits_and_machine(ctx, commits)


if __name__ == "__main__":
    main()
