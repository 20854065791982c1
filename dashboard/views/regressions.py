"""Regressions: alert groups and their rows (commit range, ratio, significance, status, fixed-at), links to
History and Compare; acknowledge or ignore with a note when the dashboard was started with --writable."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import auth, closed, data, fmt, frames, triage, widgets

ctx = widgets.context()
st.title("Regressions")


def closed_section(regs: pd.DataFrame) -> None:
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
    shown_rows = closed.filter_closed(rows, statuses, kinds)
    names = data.param_names(ctx.url)
    units = shown_rows["unit"] if "unit" in shown_rows else pd.Series([None] * len(shown_rows))
    out = pd.DataFrame({
        "status": shown_rows["status"],
        "series": frames.series_label(shown_rows["benchmark"], pd.Series(
            [frames.params_label(k, names.get(b)) for b, k in zip(shown_rows["benchmark"], shown_rows["params_key"],
                                                                  strict=True)], index=shown_rows.index)),
        "commits": [fmt.commit_range(p, s) for p, s in zip(shown_rows["parent_sha"], shown_rows["sha"], strict=True)],
        "before → after": [f"{fmt.fmt_value(b, u)} → {fmt.fmt_value(a, u)}"
                           for b, a, u in zip(shown_rows["before"], shown_rows["after"], units, strict=True)],
        "ratio": shown_rows["ratio"].map(fmt.fmt_ratio),
        "reason": shown_rows["reason"],
        "history": [widgets.history_link(m, b, k) for m, b, k in
                    zip(shown_rows["machine"], shown_rows["benchmark"], shown_rows["params_key"], strict=True)],
    })
    if all_machines:
        out.insert(1, "machine", shown_rows["machine"].to_numpy())
    st.dataframe(out, hide_index=True, width="stretch", column_config={
        "status": st.column_config.TextColumn(width=80),
        "series": st.column_config.TextColumn(width="large"),
        "ratio": st.column_config.TextColumn(width=55),
        "reason": st.column_config.TextColumn(width="large"),
        "history": st.column_config.LinkColumn("history", display_text="plot", width=55),
    })


c1, c2, c3, c5, c4 = st.columns([3, 2, 3, 2, 2])
with c1:
    shown = widgets.url_pills("Show", list(triage.CATEGORIES), key="reg_show", default=["open", "suspect", "fixed"],
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
    st.stop()

names = data.param_names(ctx.url)
regs = regs.assign(label=[frames.params_label(k, names.get(b)) for b, k in zip(regs["benchmark"], regs["params_key"],
                                                                                strict=True)])
regs = regs.assign(series_name=frames.series_label(regs["benchmark"], regs["label"]))
if text:
    needle = text.lower()
    regs = regs[(regs["benchmark"].str.lower().str.contains(needle, regex=False))
                | (regs["label"].str.lower().str.contains(needle, regex=False))]
if assignee:
    people = regs["assignee"].fillna("").astype(str).str.lower()
    regs = regs[people.eq("") if assignee.strip().lower() == "nobody"
                else people.str.contains(assignee.strip().lower(), regex=False)]
view = regs[regs["category"].isin(shown)] if shown else regs
group_frame = triage.groups(view)
with c2:
    group = widgets.url_selectbox("Group", ["all", *[str(g) for g in group_frame["group"]]], key="reg_group",
                                  format_func=lambda g: "all groups" if g == "all" else f"group {g}")
if group != "all":
    view = view[view["group"].astype(str) == group]
    group_frame = group_frame[group_frame["group"].astype(str) == group]

st.subheader(f"Alert groups ({len(group_frame)})")
st.caption("Regressions found together on one machine at one commit form one group. The step happened after "
           "the parent (the last commit before it that ran the series) and at or before the commit.")
if group_frame.empty:
    st.info("No group matches the filters.")
    closed_section(regs)
    st.stop()
gtable = triage.group_table(group_frame, statuses=True)
gtable.insert(2, "parent (good)", [fmt.commit_label(s, m, 34) if isinstance(s, str) else "(first measured)"
                                   for s, m in zip(group_frame["parent_sha"], group_frame["parent_message"],
                                                   strict=True)])
gtable.insert(3, "commit (first bad)", [fmt.commit_label(s, m, 34) for s, m in
                                        zip(group_frame["sha"], group_frame["message"], strict=True)])
gtable["compare"] = [widgets.compare_link(m, p, s) for m, p, s in
                     zip(group_frame["machine"], group_frame["parent_sha"], group_frame["sha"], strict=True)]
if all_machines:
    gtable.insert(2, "machine", group_frame["machine"].to_numpy())
st.dataframe(gtable, hide_index=True, width="stretch", column_config={
    "group": st.column_config.TextColumn(width=50),
    "parent (good)": st.column_config.TextColumn(width=230),
    "commit (first bad)": st.column_config.TextColumn(width=230),
    "series": st.column_config.NumberColumn(width=50),
    "worst": st.column_config.TextColumn(width=60),
    "fixed at": st.column_config.TextColumn(width=80),
    "compare": st.column_config.LinkColumn("compare", display_text="parent..commit", width=110),
})

st.subheader(f"Regressions ({len(view)})")
units = view["unit"] if "unit" in view else pd.Series([None] * len(view), index=view.index)
rows = pd.DataFrame({
    "group": view["group"].astype(str),
    "status": view["status"],
    "series": view["series_name"],
    "commits": [fmt.commit_range(p, s) for p, s in zip(view["parent_sha"], view["sha"], strict=True)],
    "before → after": [f"{fmt.fmt_value(b, u)} → {fmt.fmt_value(a, u)}"
                       for b, a, u in zip(view["before"], view["after"], units, strict=True)],
    "ratio": view["ratio"].map(fmt.fmt_ratio),
    "p": view["p_value"].map(fmt.fmt_p),
    "fixed at": view["fixed_sha"].map(lambda s: fmt.short_sha(s) if isinstance(s, str) else ""),
    "history": [widgets.history_link(m, b, k) for m, b, k in
                zip(view["machine"], view["benchmark"], view["params_key"], strict=True)],
    "compare": [widgets.compare_link(m, p, s) for m, p, s in
                zip(view["machine"], view["parent_sha"], view["sha"], strict=True)],
})
if view["note"].astype(bool).any():
    rows.insert(8, "note", view["note"].to_numpy())
if view["assignee"].notna().any() or view["issue_url"].notna().any():
    rows.insert(2, "assignee", view["assignee"].fillna("").to_numpy())
    rows.insert(3, "issue", view["issue_url"].fillna("").to_numpy())
if all_machines:
    rows.insert(2, "machine", view["machine"].to_numpy())
# Columns the group table already says for every row are left out, so the series names fit.
for column in ("group", "status", "fixed at"):
    if rows[column].nunique() <= 1:
        rows = rows.drop(columns=column)
st.dataframe(rows, hide_index=True, width="stretch", column_config={
    "group": st.column_config.TextColumn(width=50),
    "status": st.column_config.TextColumn(width=80),
    "series": st.column_config.TextColumn(width="large"),
    "ratio": st.column_config.TextColumn(width=55),
    "p": st.column_config.TextColumn(width=55),
    "fixed at": st.column_config.TextColumn(width=75),
    "history": st.column_config.LinkColumn("history", display_text="plot", width=55),
    "compare": st.column_config.LinkColumn("compare", display_text="parent..commit", width=110),
    "note": st.column_config.TextColumn("triage note", width="medium"),
    "assignee": st.column_config.TextColumn(width=90),
    "issue": st.column_config.LinkColumn("issue", display_text="issue", width=55),
})
st.caption(
    "ratio: the detector's step, level after / level before in the benchmark's unit, each level the median "
    "of several commits of the series (so it is steadier than one pair of runs). Compare's ratio is a "
    "different quantity: head / base of the two commits' results (each the median of that commit's runs); "
    "for the same step the two differ by the noise of those two runs. p: Mann-Whitney U on the samples "
    "either side of the step, where the detector had them. Fixed at: the commit where the series came back."
)

closed_section(regs)

if not ctx.writable:
    st.caption("Read-only: start with `mlaperf dashboard --writable` to acknowledge or ignore regressions.")
    st.stop()

st.subheader("Triage")
who = auth.writer()
if not who.can_write:
    st.info(who.problem)
    st.stop()
scope_options = [f"group {g}" for g in group_frame["group"]] + [f"#{i}" for i in view["id"]]
labels = {f"#{r.id}": f"#{r.id} {r.series_name} @ {fmt.short_sha(r.sha)} ({r.status})"
          for r in view.itertuples()}
for g in group_frame.itertuples():
    labels[f"group {g.group}"] = f"group {g.group}: {g.series} series at {fmt.commit_label(g.sha, g.message, 40)}"
pick = st.selectbox("Regressions to triage", scope_options, format_func=lambda k: labels[k], key="reg_pick")
note = st.text_input("Note (required: why)", key="reg_note", placeholder="e.g. expected: BLOCK_H=16 was deliberate")
if pick.startswith("group "):
    ids = [int(i) for i in view.loc[view["group"].astype(str) == pick.removeprefix("group "), "id"]]
else:
    ids = [int(pick.removeprefix("#"))]
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
current = view[view["id"].isin(ids)]
person = a1.text_input("Assign to", key="reg_assign_to",
                       value=str(current["assignee"].dropna().iloc[0]) if current["assignee"].notna().any() else "")
issue = a2.text_input("Tracking issue (URL)", key="reg_issue", placeholder="https://github.com/org/repo/issues/123",
                      value=str(current["issue_url"].dropna().iloc[0]) if current["issue_url"].notna().any() else "")
if a3.button("Save", key="reg_save_triage", help="Store the assignee and issue link on the regressions picked above"):
    if issue.strip() and not issue.strip().startswith(("https://", "http://")):
        st.warning("The issue link must start with https:// (or http://).")
    else:
        data.set_triage(ctx.url, ids, person.strip(), issue.strip(), by=who.name)
        st.toast(f"{len(ids)} regression(s) assigned to {person.strip() or 'nobody'}")
        st.rerun()
