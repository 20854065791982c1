"""Compare two commits on the machine: exactly what `mlaperf compare BASE HEAD --machine M` reports (both call
``regressions.compare.compare_commits``), every series in one of seven statuses."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, fmt, frames, widgets

STATUS_TITLES = {
    "regressed": "Regressed", "missing": "Missing at head", "improved": "Improved", "failed": "Failed",
    "new": "Not measured at base",
    "removed": "Not measured at head", "not_run": "Not run", "unchanged": "Unchanged",
}
# Listed only when asked: a suite not run at one side is no change of the code under test.
HIDDEN_BY_DEFAULT = ("unchanged", "not_run", "new", "removed")
STATUS_HELP = {
    "regressed": "Worse by more than the threshold, and significant",
    "improved": "Better by more than the threshold, and significant",
    "missing": "Measured at base, gone or skipped at head while its suite ran, and the pull request declares no "
    "removal (an asv version bump or a [tool.mlaperf] removed pattern): fails the check",
    "failed": "The case ran and failed on a side (asv null)",
    "new": "Only at head: the base's run has no such case (its suite, or this case, was not run there)",
    "removed": "Only at base: the head's run has no such case (its suite, or this case, was not run there)",
    "not_run": "Not selected on a side (asv NaN), or the machine has no run at that commit",
    "unchanged": "Within the threshold, or not significant",
}

ctx = widgets.context()
st.title("Compare commits")

commits = data.commits(ctx.url, ctx.machine)
if len(commits) < 2:
    st.info(f"Machine `{ctx.machine}` needs results for at least two commits to compare.")
    st.stop()

# Flagged commits and their parents stay pickable however old they are.
regs = data.regressions(ctx.url, ctx.machine)
flagged = [*regs["sha"], *regs["parent_sha"].dropna()] if not regs.empty else []
c1, c2, c3 = st.columns([3, 3, 2])
with c2:
    head = widgets.commit_select("Head (after)", commits, key="cmp_head", default=commits["sha"].iloc[-1],
                                 extra=flagged)
# Default base: the commit measured just before the head on this machine.
pos = dict(zip(commits["sha"], commits["pos"], strict=True))
before = commits["sha"].iloc[max(0, pos[head] - 1)] if pos[head] > 0 else commits["sha"].iloc[0]
with c1:
    base = widgets.commit_select("Base (before)", commits, key="cmp_base", default=before, extra=flagged)
with c3:
    override = widgets.url_number("Threshold override (%)", key="cmp_threshold", min_value=0.1, max_value=900.0,
                                  step=1.0, value=None, placeholder="configured",
                                  help="Empty: the configured thresholds (per benchmark pattern, default 5%), "
                                  "like `mlaperf compare` without --threshold")
if base == head:
    st.caption("Base and head are the same commit: every series measured there is unchanged, as `mlaperf compare` "
               "says for the same pair.")

cmp = data.compare(ctx.url, ctx.machine, base, head, None if override is None else override / 100.0)
if cmp.empty:
    st.info("Neither commit has results on this machine.")
    st.stop()
names = data.param_names(ctx.url)
cmp = cmp.assign(label=[frames.params_label(k, names.get(b)) for b, k in zip(cmp["benchmark"], cmp["params_key"],
                                                                               strict=True)])

counts = cmp["status"].value_counts()
# Every status with its count, each a pill that shows or hides its rows in the table below (counts of zero
# included: the line is the whole summary). Unchanged and not run are hidden by default, also when nothing else
# is there (most nights): the table then stays empty until a pill asks for them.
default_show = [s for s in STATUS_TITLES if counts.get(s, 0) and s not in HIDDEN_BY_DEFAULT]
show = widgets.url_pills(
    "Series by status (click to show or hide them in the table)", list(STATUS_TITLES), key="cmp_show",
    default=default_show, format_func=lambda s: f"{STATUS_TITLES[s]} {int(counts.get(s, 0)):,}",
    help="  \n".join(f"**{STATUS_TITLES[s]}**: {STATUS_HELP[s]}" for s in STATUS_TITLES))
limit = "the threshold you set" if override is not None else "the configured threshold (default 5%)"
st.caption(
    f"{len(cmp):,} series of `{ctx.machine}`, head `{fmt.short_sha(head)}` against base `{fmt.short_sha(base)}`: "
    f"the same statuses and numbers as `mlaperf compare {fmt.short_sha(base)} {fmt.short_sha(head)} --machine "
    f"{ctx.machine}`. Ratio = head / base.",
    help=f"A regression is worse by more than {limit} and significant: Mann-Whitney U on the samples and, with 10+ "
    "earlier commits, the series' run-to-run noise on this machine (column `method`). Ratio = head / base of the "
    "two commits' results (each the median of that commit's runs), in the benchmark's unit; the Regressions page's "
    "ratio is the detector's step (level after / level before) and differs slightly.",
)

changed = cmp[cmp["slowdown"].notna() & (cmp["status"] != "not_run")]
if not changed.empty:
    st.vega_lite_chart(charts.compare_spec(
        changed, title=f"Largest changes: {fmt.short_sha(head)} vs {fmt.short_sha(base)} · {ctx.machine}"),
        width="stretch", key="cmp_chart")

view = cmp[cmp["status"].isin(show)]
if view.empty:
    st.info("No series with the statuses picked above; click a status to list its series.")
    st.stop()
order = {s: i for i, s in enumerate(STATUS_TITLES)}
view = view.assign(_o=view["status"].map(order), _w=-view["slowdown"].fillna(0)).sort_values(["_o", "_w"])
table = pd.DataFrame({
    "status": view["status"].map(lambda s: STATUS_TITLES[s].lower()),
    "series": frames.series_label(view["benchmark"], view["label"]),
    # The link next to the name: at 1,280 px the last columns scroll out of view.
    "history": [widgets.history_link(ctx.machine, b, k) for b, k in zip(view["benchmark"], view["params_key"],
                                                                        strict=True)],
    "before": [fmt.fmt_value(v, u, missing=side) for v, u, side in
               zip(view["base"], view["unit"], view["base_status"].map(lambda s: s.replace("_", " ")), strict=True)],
    "after": [fmt.fmt_value(v, u, missing=side) for v, u, side in
              zip(view["head"], view["unit"], view["head_status"].map(lambda s: s.replace("_", " ")), strict=True)],
    "ratio": view["ratio"].map(fmt.fmt_ratio),
    "change": view["slowdown"].map(fmt.fmt_change),
    "p": view["p_value"].map(fmt.fmt_p),
    "method": view["method"],
    "threshold": view["threshold"].map(lambda t: f"{t:.0%}"),
})
if table["threshold"].nunique() == 1:  # one threshold for every row: said once below
    threshold_note = f" Threshold {table['threshold'].iloc[0]} for every series shown."
    table = table.drop(columns="threshold")
else:
    threshold_note = ""
st.dataframe(table, hide_index=True, width="stretch", column_config={
    "status": st.column_config.TextColumn(width=85),
    "series": st.column_config.TextColumn(width=330),
    "before": st.column_config.TextColumn(width=80),
    "after": st.column_config.TextColumn(width=80),
    "ratio": st.column_config.TextColumn(width=55),
    "change": st.column_config.TextColumn(width=95),
    "p": st.column_config.TextColumn(width=50),
    "method": st.column_config.TextColumn(width=150),
    "history": st.column_config.LinkColumn("history", display_text="plot", width=50),
})
st.caption("change: direction-aware (worse means slower, or lower throughput)." + threshold_note)
