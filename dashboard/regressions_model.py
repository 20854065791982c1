"""The Regressions page's model: the listing filtered by text and assignee, the alert-group table, the
regression rows, the closed steps' rows and what the triage controls act on. Pure pandas over the frames of
``dashboard.data`` (``dashboard/views/regressions.py`` is the page); links come in as functions (the pages'
``links.history`` and ``links.compare``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from dashboard import fmt, frames, triage
from db.regression_queries import issue_link_problem
from regressions import report

HistoryLink = Callable[[str, str, str], str]  # machine, benchmark, params_key -> URL
CompareLink = Callable[[str, str | None, str], str]  # machine, base sha, head sha -> URL


def _labels(benchmarks: pd.Series, keys: pd.Series, names: Mapping[str, Sequence[str]]) -> list[str]:
    return [frames.params_label(k, names.get(b)) for b, k in zip(benchmarks, keys, strict=True)]


def with_names(regs: pd.DataFrame, names: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """``regs`` with ``label`` (its parameters, in asv's order of ``names``) and ``series_name``."""
    regs = regs.assign(label=_labels(regs["benchmark"], regs["params_key"], names))
    return regs.assign(series_name=frames.series_label(regs["benchmark"], regs["params_key"], names))


def filtered(regs: pd.DataFrame, text: str | None, assignee: str | None) -> pd.DataFrame:
    """The regressions whose benchmark or parameters contain ``text`` and whose assignee contains
    ``assignee`` (``nobody``: unassigned), both case-insensitive; empty filters keep everything."""
    if text:
        needle = text.lower()
        regs = regs[(regs["benchmark"].str.lower().str.contains(needle, regex=False))
                    | (regs["label"].str.lower().str.contains(needle, regex=False))]
    if assignee:
        people = regs["assignee"].fillna("").astype(str).str.lower()
        regs = regs[people.eq("") if assignee.strip().lower() == "nobody"
                    else people.str.contains(assignee.strip().lower(), regex=False)]
    return regs


def in_group(view: pd.DataFrame, group_frame: pd.DataFrame, group: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The regressions and groups of one alert ``group`` ("all": every one)."""
    if group == "all":
        return view, group_frame
    return view[view["group"].astype(str) == group], group_frame[group_frame["group"].astype(str) == group]


def group_rows(group_frame: pd.DataFrame, *, all_machines: bool, compare_link: CompareLink) -> pd.DataFrame:
    """The alert-group table: ``triage.group_table`` with the good parent, the first bad commit, a Compare link
    and (over all machines) the machine."""
    table = triage.group_table(group_frame, statuses=True)
    table.insert(2, "parent (good)", [fmt.commit_label(s, m, 34) if isinstance(s, str) else "(first measured)"
                                      for s, m in zip(group_frame["parent_sha"], group_frame["parent_message"],
                                                      strict=True)])
    table.insert(3, "commit (first bad)", [fmt.commit_label(s, m, 34) for s, m in
                                           zip(group_frame["sha"], group_frame["message"], strict=True)])
    table["compare"] = [compare_link(m, p, s) for m, p, s in
                        zip(group_frame["machine"], group_frame["parent_sha"], group_frame["sha"], strict=True)]
    if all_machines:
        table.insert(2, "machine", group_frame["machine"].to_numpy())
    return table


def _before_after(frame: pd.DataFrame) -> list[str]:
    units = frame["unit"] if "unit" in frame else pd.Series([None] * len(frame), index=frame.index)
    return [fmt.fmt_before_after(b, a, u, benchmark=n)
            for b, a, u, n in zip(frame["before"], frame["after"], units, frame["benchmark"], strict=True)]


def _commits(view: pd.DataFrame) -> list[str]:
    """The culprit range; a gradual regression's (steps too small alone that add up) says so: it spans the drift."""
    labels = view["labels"] if "labels" in view else pd.Series([()] * len(view), index=view.index)
    return [fmt.commit_range(p, s) + report.gradual_note(ls)
            for p, s, ls in zip(view["parent_sha"], view["sha"], labels, strict=True)]


def regression_rows(view: pd.DataFrame, *, all_machines: bool, history_link: HistoryLink,
                    compare_link: CompareLink) -> pd.DataFrame:
    """One row per regression; triage columns only when some row has them, "now" after the ratio only when some
    row is partly recovered (where its series stands now; the ratio stays the step's), and the group, status and
    fixed-at columns left out when every row says the same (the group table says it)."""
    rows = pd.DataFrame({
        "group": view["group"].astype(str),
        "status": view["status"],
        "series": view["series_name"],
        "commits": _commits(view),
        "before → after": _before_after(view),
        "ratio": view["ratio"].astype(float),  # numbers, drawn as fmt.SHOWN_AS says
        "p": view["p_value"].astype(float),
        "fixed at": view["fixed_sha"].map(lambda s: fmt.short_sha(s) if isinstance(s, str) else ""),
        "history": [history_link(m, b, k) for m, b, k in
                    zip(view["machine"], view["benchmark"], view["params_key"], strict=True)],
        "compare": [compare_link(m, p, s) for m, p, s in
                    zip(view["machine"], view["parent_sha"], view["sha"], strict=True)],
    })
    if view["note"].astype(bool).any():
        rows.insert(8, "note", view["note"].to_numpy())
    if view["assignee"].notna().any() or view["issue_url"].notna().any():
        rows.insert(2, "assignee", view["assignee"].fillna("").to_numpy())
        rows.insert(3, "issue", view["issue_url"].fillna("").to_numpy())
    if all_machines:
        rows.insert(2, "machine", view["machine"].to_numpy())
    # A listing not built by regressions_frame may lack the column: no row is partly recovered then.
    partly = view["partly_recovered"].eq(True) if "partly_recovered" in view else None
    if partly is not None and partly.any():
        now = [report.now_text(bool(p), r) for r, p in zip(view["now_ratio"], partly, strict=True)]
        rows.insert(rows.columns.get_loc("ratio") + 1, "now", now)
    for column in ("group", "status", "fixed at"):
        if rows[column].nunique() <= 1:
            rows = rows.drop(columns=column)
    return rows


def closed_rows(shown: pd.DataFrame, names: Mapping[str, Sequence[str]], *, all_machines: bool,
                history_link: HistoryLink) -> pd.DataFrame:
    """The closed steps' table (``closed.closed_steps`` rows): status, series, commits, values, why."""
    out = pd.DataFrame({
        "status": shown["status"],
        "series": frames.series_label(shown["benchmark"], shown["params_key"], names),
        "commits": [fmt.commit_range(p, s) for p, s in zip(shown["parent_sha"], shown["sha"], strict=True)],
        "before → after": _before_after(shown),
        "ratio": shown["ratio"].astype(float),
        "reason": shown["reason"],
        "history": [history_link(m, b, k) for m, b, k in
                    zip(shown["machine"], shown["benchmark"], shown["params_key"], strict=True)],
    })
    if all_machines:
        out.insert(1, "machine", shown["machine"].to_numpy())
    return out


def triage_choices(view: pd.DataFrame, group_frame: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """What the triage picker offers (each group, then each regression) and each one's label."""
    options = [f"group {g}" for g in group_frame["group"]] + [f"#{i}" for i in view["id"]]
    labels = {f"#{r.id}": f"#{r.id} {r.series_name} @ {fmt.short_sha(r.sha)} ({r.status})"
              for r in view.itertuples()}
    for g in group_frame.itertuples():
        labels[f"group {g.group}"] = f"group {g.group}: {g.series} series at {fmt.commit_label(g.sha, g.message, 40)}"
    return options, labels


def picked_ids(pick: str, view: pd.DataFrame) -> list[int]:
    """The regression ids a pick of :func:`triage_choices` names."""
    if pick.startswith("group "):
        return [int(i) for i in view.loc[view["group"].astype(str) == pick.removeprefix("group "), "id"]]
    return [int(pick.removeprefix("#"))]


def current_triage(view: pd.DataFrame, ids: Sequence[int]) -> tuple[str, str]:
    """The assignee and issue link already on the picked regressions (the first set of each), else ""."""
    current = view[view["id"].isin(ids)]
    person = str(current["assignee"].dropna().iloc[0]) if current["assignee"].notna().any() else ""
    issue = str(current["issue_url"].dropna().iloc[0]) if current["issue_url"].notna().any() else ""
    return person, issue


def issue_problem(issue: str) -> str | None:
    """Why ``issue`` cannot be stored as a tracking-issue link, or None (empty clears it): the store's rule."""
    problem = issue_link_problem(issue)
    return None if problem is None else problem[0].upper() + problem[1:] + "."
