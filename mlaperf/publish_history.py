"""The static site's History pages: one series over the machine's commits, each point's value as the dashboard
writes it (``regressions.units`` through ``dashboard.fmt``), its axes (``mlaperf.publish_axes``), the markers
and table of its flagged regressions (``dashboard.history_model``'s) and the line under the chart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import pandas as pd
from sqlalchemy.orm import Session

from dashboard import fmt, history_model
from db import queries
from regressions.config import Settings
from regressions.direction import direction_for
from regressions.results import version_changed

from .publish_axes import position_axis, value_axis
from .publish_ids import series_id
from .publish_tables import table


class CommitLinks(Protocol):
    """Links into the repository (``publish_model.Links``): a commit, and a culprit range as a compare view."""

    def commit(self, sha: object, text: str) -> str | dict[str, str]: ...

    def range(self, parent: object, sha: object, text: str) -> str | dict[str, str]: ...


# Drawn values, not read ones (the hover text has the value as formatted): five significant digits.
DRAWN_DIGITS = 5
LEGEND = ("Triangles: flagged regressions (the first bad commit); stars: the commit that fixed them; dotted "
          "lines: the benchmark's asv version changed; ✕: failed runs. Hover a point for its commit.")


def _drawn(value: float) -> float | None:
    return float(f"{value:.{DRAWN_DIGITS}g}") if math.isfinite(value) else None


def _markers(marks: pd.DataFrame) -> list[dict[str, Any]]:
    """A flagged regression's marker (``y`` set on its series' page: :func:`_on_points`)."""
    out = []
    for m in marks.itertuples():
        fixed = m.fixed_pos if isinstance(m.fixed_pos, (int, float)) and math.isfinite(m.fixed_pos) else None
        out.append({"pos": int(m.pos), "text": f"{m.text}\n{m.change}", "fixed_pos": None if fixed is None else
                    int(fixed), "fixed_text": m.fixed_text})
    return out


def _on_points(page: dict[str, Any]) -> None:
    """Each marker on its series' point at its commit, as the dashboard draws them (``history_chart``): the first
    bad commit's value and the fixing commit's, not the detector's levels (a first bad run above its level drew
    the triangle off the line); none where that run failed."""
    at = dict(zip(page["pos"], page["value"], strict=True))
    for m in page["markers"]:
        m["y"] = at.get(m["pos"])
        m["fixed_y"] = at.get(m["fixed_pos"]) if m["fixed_pos"] is not None else None


def flagged(regs: pd.DataFrame, commits: pd.DataFrame, link: CommitLinks) -> dict[tuple[str, str], Any]:
    """(benchmark, params_key) -> its regressions: chart markers (first bad commit, the fix) with their hover
    text, and the table under the chart (``history_model``'s, for every
    flagged series of a unit at once)."""
    out: dict[tuple[str, str], Any] = {}
    if regs.empty:
        return out
    # By the unit values are shown in: a unitless track_ is a count, never grouped with (or read as) seconds.
    units = pd.Series([fmt.unit_of(str(b), u if isinstance(u, str) else None) or "" for b, u in
                       zip(regs["benchmark"], regs["unit"], strict=True)], index=regs.index)
    for unit, flag in regs.groupby(units, sort=False):
        u = str(unit) or None
        marks = history_model.flagged_markers(flag, commits, {}, u)
        rows = history_model.flagged_table(flag, {}, u).drop(columns=["series"])
        # A culprit range opens the repository's compare view of it (every commit in it), not its last commit.
        rows["commits"] = [link.range(p, s, text) for p, s, text in zip(flag["parent_sha"], flag["sha"],
                                                                          rows["commits"], strict=True)]
        rows["fixed at"] = [link.commit(s, text) if isinstance(s, str) else text
                            for s, text in zip(flag["fixed_sha"], rows["fixed at"], strict=True)]
        for key, one in flag.groupby(["benchmark", "params_key"], sort=False):
            mine = marks[marks.index.isin(one.index)] if marks is not None else None
            out[(str(key[0]), str(key[1]))] = {
                "markers": _markers(mine) if mine is not None else [],
                "table": table(rows.loc[one.index].reset_index(drop=True))}
    return out


def _failed_words(hist: pd.DataFrame) -> str:
    """', 2 more failed' after the count of commits measured: a series whose runs only failed read '0 commits
    measured' over the failed runs' marks."""
    failed = int((hist["status"] == "failed").sum())
    return f", {failed:,} more failed" if failed else ""


def series_history(hist: pd.DataFrame, pos_of: dict[int, int], *, label: str, subtitle: str, unit: str | None,
                   direction: str, short: Sequence[str]) -> dict[str, Any]:
    """One series' page (without its regressions): points, hover values, failed runs, version changes, axes
    and the caption."""
    values = hist["value"].to_numpy(dtype=float)
    ok = (hist["status"] == "ok").to_numpy()
    pos = [pos_of[int(c)] for c in hist["commit_id"]]
    versions = list(hist["benchmark_version"])
    drawn = [_drawn(v) if good else None for v, good in zip(values, ok, strict=True)]
    n = int(ok.sum())
    better = "Lower" if direction == "up_is_worse" else "Higher"
    return {
        "title": label, "subtitle": subtitle, "pos": pos, "value": drawn,
        "text": [fmt.fmt_value(v, unit) if good else "failed" for v, good in zip(values, ok, strict=True)],
        "failed": [p for p, st in zip(pos, hist["status"], strict=True) if st == "failed"],
        # Where the benchmark's asv version changed (a new segment), not the version of every point.
        "versions": [p for p, changed in zip(pos, version_changed(versions), strict=True) if changed],
        "y": value_axis([v for v, good in zip(values, ok, strict=True) if good], unit),
        "x": {**position_axis(pos, short), "title": "commit (history order)"},
        "caption": f"{fmt.plural(n, 'commit')} measured{_failed_words(hist)}; {better.lower()} is better. {LEGEND}",
        "markers": [], "table": None,
        "elsewhere": [],  # the other machines' folders with this series (``mlaperf.publish.build``)
    }


def histories(s: Session, machine: str, series: pd.DataFrame, commits: pd.DataFrame, regs: pd.DataFrame,
              settings: Settings, labels: Sequence[str], short: Sequence[str], link: CommitLinks
              ) -> dict[str, dict[str, Any]]:
    """``series_id`` -> its History page, for every series with a result (``labels``: one per row of
    ``series``)."""
    pos_of = dict(zip(commits["commit_id"].astype(int), commits["pos"].astype(int), strict=True))
    flags = flagged(regs, commits, link)
    out: dict[str, dict[str, Any]] = {}
    indexed = series.assign(_row=range(len(series)))
    for bench, rows in indexed.groupby("benchmark", sort=False):
        hist = queries.history(s, str(bench), list(rows["params_key"]), machine)
        row_of = dict(zip(rows["params_key"], rows["_row"], strict=True))
        stored_unit = dict(zip(rows["params_key"], rows["unit"], strict=True))
        for key, h in hist.groupby("params_key", sort=False):
            stored = stored_unit[key] if isinstance(stored_unit[key], str) else None
            page = series_history(h, pos_of, label=labels[int(row_of[key])], subtitle=f"{bench} · {machine}",
                                  unit=fmt.unit_of(str(bench), stored),
                                  direction=direction_for(str(bench), stored, settings), short=short)
            page.update(flags.get((str(bench), str(key)), {}))
            _on_points(page)
            out[series_id(str(bench), str(key))] = page
    return out
