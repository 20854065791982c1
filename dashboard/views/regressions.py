"""Regressions: alert groups and their rows (commit range, ratio, significance, status, fixed-at), links to
History and Compare; acknowledge or ignore with a note when the dashboard was started with --writable. The
page's widgets over ``dashboard.regressions_model``."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import auth, closed, data, fmt, links, triage, widgets
from dashboard import regressions_model as model


def _closed_section(ctx: widgets.Context, regs: pd.DataFrame, all_machines: bool) -> None:
    """Steps flagged and then closed, with why, filterable by status and reason (both in the URL)."""
    rows = closed.closed_steps(regs)
    st.subheader(f"Closed steps ({len(rows)})")
    st.caption("Flagged, then closed by the detector or a person: fixed, transient (refuted by the next runs), "
               "retired (the series or its benchmark version stopped running), ignored. Listed here so a "
               "short-lived regression stays visible.")
    if rows.empty:
        st.info("No step has been closed" + ("" if all_machines else f" on `{ctx.machine}`") + ".")
        return
    f1, f2 = st.columns(2)
    with f1:
        statuses = widgets.url_pills("Closed as", sorted(rows["status"].astype(str).unique()), key="reg_closed_status",
                                     format_func=lambda s: f"{s} {int((rows['status'] == s).sum())}")
    with f2:
        kinds = widgets.url_pills("Reason", sorted(rows["reason_kind"].astype(str).unique()), key="reg_reason")
    out = model.closed_rows(closed.filter_closed(rows, statuses, kinds), data.param_names(ctx.url),
                            all_machines=all_machines, history_link=links.history)
    links.grid(out, key="reg_closed_table", links={"history": "plot"}, widths={
        "status": 80, "series": links.FIT, "ratio": 55, "reason": 170, "history": 60}, shown_as=fmt.SHOWN_AS)


def _groups_table(group_frame: pd.DataFrame, all_machines: bool) -> None:
    st.subheader(f"Alert groups ({len(group_frame)})")
    st.caption("Regressions found together on one machine at one commit form one group. The step happened after "
               "the parent (the last commit before it that ran the series) and at or before the commit.")
    if group_frame.empty:
        st.info("No group matches the filters.")
        return
    rows = model.group_rows(group_frame, all_machines=all_machines, compare_link=links.compare)
    # "fixed at" as wide as its text ("2 of 31: 1c6b3169" was cut at 80 px), the commits' labels narrower for it.
    links.grid(rows, key="reg_groups_table", links={"compare": "parent..commit"},
               widths={"group": 50, "parent (good)": 215, "commit (first bad)": 215, "worst": 60,
                       "fixed at": links.fit_width(rows["fixed at"], (80, 160)), "compare": 120},
               column_config={"series": st.column_config.NumberColumn(width=50)})


def _regressions_table(view: pd.DataFrame, all_machines: bool) -> None:
    st.subheader(f"Regressions ({len(view)})")
    rows = model.regression_rows(view, all_machines=all_machines, history_link=links.history,
                                 compare_link=links.compare)
    links.grid(rows, key="reg_table", links={"history": "plot", "compare": "parent..commit"},
               widths={"group": 50, "status": 80, "series": links.FIT, "ratio": 55, "p": 55, "fixed at": 75,
                       "history": 60, "compare": 120, "assignee": 90},
               column_config={"note": st.column_config.TextColumn("triage note", width="medium"),
                              "issue": st.column_config.LinkColumn("issue", display_text="issue", width=55)},
               shown_as=fmt.SHOWN_AS)
    st.caption(
        "ratio: the detector's step, level after / level before in the benchmark's unit, each level the median "
        "of several commits of the series (so it is steadier than one pair of runs). Compare's ratio is a "
        "different quantity: head / base of the two commits' results (each the median of that commit's runs); "
        "for the same step the two differ by the noise of those two runs. p: how likely a step this large is from the "
        "series' own run-to-run noise (a normal model: the step over the standard error of the two levels' medians; "
        "below 1e-12 it says nothing finer). Fixed at: the commit where the series came back."
    )


def _triage(ctx: widgets.Context, view: pd.DataFrame, group_frame: pd.DataFrame) -> None:
    """Status (with a required note), assignee and issue link of the picked group or regression."""
    st.subheader("Triage")
    who = auth.writer()
    if not who.can_write:
        st.info(who.problem)
        widgets.stop()
    options, labels = model.triage_choices(view, group_frame)
    pick = st.selectbox("Regressions to triage", options, format_func=lambda k: labels[k], key="reg_pick")
    note = st.text_input("Note (required: why)", key="reg_note",
                         placeholder="e.g. expected: BLOCK_H=16 was deliberate")
    ids = model.picked_ids(pick, view)
    cols = st.columns(len(triage.TRIAGE_ACTIONS))
    for col, (label, new_status) in zip(cols, triage.TRIAGE_ACTIONS.items(), strict=True):
        if col.button(label, key=f"reg_{new_status}"):
            if not note.strip():
                st.warning("Write a note first: it is stored with the status so others know why.")
            else:
                data.set_status(ctx.url, ids, new_status, note.strip(), by=who.name)
                st.toast(f"{len(ids)} regression(s) marked {new_status} by {who.name}")
                st.rerun()
    a1, a2, a3 = st.columns([2, 4, 1])
    current_person, current_issue = model.current_triage(view, ids)
    person = a1.text_input("Assign to", key="reg_assign_to", value=current_person)
    issue = a2.text_input("Tracking issue (URL)", key="reg_issue", placeholder="https://github.com/org/repo/issues/123",
                          value=current_issue)
    if a3.button("Save", key="reg_save_triage",
                 help="Store the assignee and issue link on the regressions picked above"):
        if (problem := model.issue_problem(issue)) is not None:
            st.warning(problem)
        else:
            data.set_triage(ctx.url, ids, person.strip(), issue.strip(), by=who.name)
            st.toast(f"{len(ids)} regression(s) assigned to {person.strip() or 'nobody'}")
            st.rerun()


def main() -> None:
    ctx = widgets.context()
    st.title("Regressions")
    # The status pills get two thirds of a row: in a quarter of it their last pill was cut off at 1400 px.
    c1, c4 = st.columns([2, 1])
    c2, c3, c5 = st.columns([2, 3, 2])
    with c1:
        shown = widgets.url_pills("Show", list(triage.CATEGORIES), key="reg_show",
                                  default=["open", "suspect", "fixed"],
                                  help="open: new or acknowledged · suspect: seen in the newest run only · "
                                  "fixed: came back later · closed: ignored, transient or retired")
    with c3:
        text = widgets.url_text("Benchmark or parameters contain", key="reg_text", placeholder="e.g. impl=mma")
    with c5:
        assignee = widgets.url_text("Assigned to", key="reg_assignee", placeholder="name, or 'nobody'")
    with c4:
        all_machines = widgets.url_toggle("All machines", key="reg_all")
    regs = data.regressions(ctx.url, None if all_machines else ctx.machine)
    if regs.empty:
        st.info("No regressions flagged" + ("" if all_machines else f" on `{ctx.machine}`")
                + ". The detector (`mlaperf detect`) writes them after each ingest.")
        widgets.stop()
    regs = model.filtered(model.with_names(regs, data.param_names(ctx.url)), text, assignee)
    view = regs[regs["category"].isin(shown)] if shown else regs
    group_frame = triage.groups(view)
    with c2:
        group = widgets.url_selectbox("Group", ["all", *[str(g) for g in group_frame["group"]]], key="reg_group",
                                      format_func=lambda g: "all groups" if g == "all" else f"group {g}")
    view, group_frame = model.in_group(view, group_frame, group)
    _groups_table(group_frame, all_machines)
    if group_frame.empty:
        _closed_section(ctx, regs, all_machines)
        widgets.stop()
    _regressions_table(view, all_machines)
    _closed_section(ctx, regs, all_machines)
    if not ctx.writable:
        st.caption("Read-only: start with `mlaperf dashboard --writable` to acknowledge or ignore regressions.")
        widgets.stop()
    _triage(ctx, view, group_frame)


if __name__ == "__main__":
    main()
