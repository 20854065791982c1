"""Compare two commits on the machine: exactly what `mlaperf compare BASE HEAD --machine M` reports (both call
``regressions.compare.compare_commits``), every series in one of the statuses of
``regressions.compare.STATUSES``. The page's widgets over
``dashboard.compare_model``."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, data, fmt, links, widgets
from dashboard import compare_model as model
from regressions.compare import MISSING, REMOVED
from regressions.renames import removal_lines, renamed_note
from regressions.report import environments_note, reversed_note


def _pick_pair(ctx: widgets.Context, commits: pd.DataFrame) -> tuple[str, str, float | None]:
    """Base, head (flagged commits and parents pickable however old) and the threshold override (%). The head
    opens on the newest commit with the most results (a partial newest run read as "missing at head 180")."""
    flagged = model.flagged_shas(data.regressions(ctx.url, ctx.machine))
    fullest, why = widgets.fullest_commit(ctx, commits, grid=False)
    c1, c2, c3 = st.columns([3, 3, 2])
    with c2:
        head = widgets.commit_select("Head (after)", commits, key="cmp_head",
                                     default=fullest or commits["sha"].iloc[-1], extra=flagged)
    with c1:
        base = widgets.commit_select("Base (before)", commits, key="cmp_base",
                                     default=model.default_base(commits, head), extra=flagged)
    with c3:
        override = widgets.url_number("Threshold override (%)", key="cmp_threshold", min_value=0.1, max_value=900.0,
                                      step=1.0, value=None, placeholder="configured",
                                      help="Empty: the configured thresholds (per benchmark pattern, default 5%), "
                                      "like `mlaperf compare` without --threshold")
    widgets.opened_on(head, fullest, why)
    return base, head, override


def _summary(ctx: widgets.Context, cmp: pd.DataFrame, base: str, head: str, override: float | None) -> list[str]:
    """Every status with its count as a pill (shows or hides its rows below), the caption, and the chart;
    returns the statuses picked."""
    counts = cmp["status"].value_counts()
    # Counts of zero included: the line is the whole summary. Unchanged and not run are hidden by default, also
    # when nothing else is there (most nights): the table then stays empty until a pill asks for them.
    show = widgets.url_pills(
        "Series by status (click to show or hide them in the table)", list(model.STATUS_TITLES), key="cmp_show",
        default=model.default_statuses(counts),
        format_func=lambda s: f"{model.STATUS_TITLES[s]} {int(counts.get(s, 0)):,}", help=model.status_help())
    limit = "the threshold you set" if override is not None else "the configured threshold (default 5%)"
    st.caption(
        f"{len(cmp):,} series of `{ctx.machine}`, head `{fmt.short_sha(head)}` against base "
        f"`{fmt.short_sha(base)}`: the same statuses and numbers as `mlaperf compare {fmt.short_sha(base)} "
        f"{fmt.short_sha(head)} --machine {ctx.machine}`. Ratio = head / base.",
        help=f"A regression is worse by more than {limit} and significant: Mann-Whitney U on the samples and, with "
        "10+ earlier commits, the series' run-to-run noise on this machine (column `method`). Ratio = head / base "
        "of the two commits' results (each the median of that commit's runs), in the benchmark's unit; the "
        "Regressions page's ratio is the detector's step (level after / level before) and differs slightly.",
    )
    changed = model.changed(cmp)
    if not changed.empty:
        st.vega_lite_chart(charts.compare_spec(
            changed, title=f"Largest changes: {fmt.short_sha(head)} vs {fmt.short_sha(base)} · {ctx.machine}"),
            width="stretch", key="cmp_chart")
    return show


def main() -> None:
    ctx = widgets.context()
    st.title("Compare commits")
    commits = data.commits(ctx.url, ctx.machine)
    if len(commits) < 2:
        st.info(f"Machine `{ctx.machine}` needs results for at least two commits to compare.")
        widgets.stop()
    base, head, override = _pick_pair(ctx, commits)
    pos = dict(zip(commits["sha"], commits["pos"], strict=True))
    if base in pos and head in pos and pos[base] > pos[head]:  # compared as given, as `mlaperf compare` does
        st.warning(reversed_note(base, head))
    if base == head:
        st.caption("Base and head are the same commit: every series measured there is unchanged, as "
                   "`mlaperf compare` says for the same pair.")
    cmp = data.compare(ctx.url, ctx.machine, base, head, None if override is None else override / 100.0)
    if apart := data.environments_apart(ctx.url, ctx.machine, base, head):
        st.warning(environments_note(ctx.machine, apart))
    if cmp.empty:
        st.info("Neither commit has results on this machine.")
        widgets.stop()
    cmp = model.with_labels(cmp, data.param_names(ctx.url))
    show = _summary(ctx, cmp, base, head, override)
    if not cmp["status"].isin(show).any():
        st.info("No series with the statuses picked above; click a status to list its series.")
        widgets.stop()
    found = model.renamed(cmp, ctx.machine)
    table, threshold_note = model.table_rows(cmp, show, lambda b, k: links.history(ctx.machine, b, k),
                                             model.renamed_cells(found))
    # Widths that fit the content column of a 1,280 px window with the sidebar open (about 820 px): the
    # series name and the method are cut there, whole on hover.
    links.grid(table, key="cmp_table", links={"history": "plot"}, widths={
        "status": 75,
        "series": 255,
        "history": 50,
        "before": 75,
        "after": 75,
        "ratio": 50,
        "change": 90,
        "p": 45,
        "method": 100,
    }, shown_as=fmt.SHOWN_AS)
    st.caption("change: direction-aware (worse means slower, or lower throughput)." + threshold_note)
    rows = list(cmp.itertuples())
    for status in (MISSING, REMOVED):  # what `mlaperf compare` says of them, in its words
        if status in show and any(r.old.status == status for r in found):
            st.caption(renamed_note(found, rows, lambda t: f"`{t}`", status=status,
                                    of=f"the {model.STATUS_TITLES[status].lower()}"))
            if status == MISSING:
                st.code("\n".join(removal_lines(found, rows)), language="toml")


if __name__ == "__main__":
    main()
