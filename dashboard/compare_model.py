"""The Compare page's model: the statuses a comparison sorts series into, the default base, which statuses
are listed by default, and the table's rows. Pure pandas over ``data.compare``'s frame (the same
``regressions.compare.compare_commits`` `mlaperf compare` prints); ``dashboard/views/compare.py`` is the
page."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from dashboard import fmt, frames
from regressions.compare import MIN_HISTORY_RUNS, SIDE_WORDS, change_text
from regressions.renames import Rename, renames

STATUS_TITLES = {
    "regressed": "Regressed", "missing": "Missing at head", "improved": "Improved", "failed": "Failed",
    "repaired": "Repaired at head", "changed": "Benchmark changed", "untested": "Untested",
    "new": "Not measured at base",
    "removed": "Not measured at head", "not_run": "Not run", "unchanged": "Unchanged",
}
# Listed only when asked: a suite not run at one side is no change of the code under test, nor is a change nothing
# could test (one value a side).
HIDDEN_BY_DEFAULT = ("unchanged", "untested", "not_run", "new", "removed")
STATUS_HELP = {
    "regressed": "Worse by more than the threshold, and significant",
    "improved": "Better by more than the threshold, and significant",
    "missing": "Measured at base, gone or skipped at head while its suite ran, and the pull request declares no "
    "removal (an asv version bump or a [tool.mlaperf] removed pattern): fails the check",
    "failed": "The case ran and failed on a side (asv null), and has no value at head: fails the check, on both "
    "sides too (a pull request's run measures both with the head's suite)",
    "repaired": "Failed at base (asv null), measured at head: the change makes a broken case run; never fails the "
    "check",
    "new": "Only at head: the base's run has no such case (its suite, or this case, was not run there)",
    "removed": "Only at base: the head's run has no such case (its suite, or this case, was not run there)",
    "not_run": "Not selected on a side (asv NaN), or the machine has no run at that commit",
    "unchanged": "Within the threshold, or not significant",
    "changed": "The benchmark's asv version at head shares none with base's (its code changed): not compared, the "
    "ratio is for reference",
    "untested": f"Beyond the threshold with one value a side and fewer than {MIN_HISTORY_RUNS} earlier commits of the "
    "series (not a memory benchmark): nothing tells the change from noise, so it is listed and never fails the check",
}


def flagged_shas(regs: pd.DataFrame) -> list[str]:
    """Flagged commits and their parents: they stay pickable however old they are."""
    return [*regs["sha"], *regs["parent_sha"].dropna()] if not regs.empty else []


def default_base(commits: pd.DataFrame, head: str) -> str:
    """The commit measured just before ``head`` on this machine (the first one for the first)."""
    pos = dict(zip(commits["sha"], commits["pos"], strict=True))
    return str(commits["sha"].iloc[max(0, pos[head] - 1)] if pos[head] > 0 else commits["sha"].iloc[0])


def default_statuses(counts: Mapping[str, int]) -> list[str]:
    """The statuses listed by default: those with series, but not the ones ``HIDDEN_BY_DEFAULT``."""
    return [s for s in STATUS_TITLES if counts.get(s, 0) and s not in HIDDEN_BY_DEFAULT]


def status_help() -> str:
    return "  \n".join(f"**{STATUS_TITLES[s]}**: {STATUS_HELP[s]}" for s in STATUS_TITLES)


def changed(cmp: pd.DataFrame) -> pd.DataFrame:
    """The series the "largest changes" chart can draw: a change measured on both sides (none where base and
    head are one commit: a chart of zero-length bars says nothing), of the same benchmark code (not ``changed``)."""
    return cmp[cmp["slowdown"].notna() & (cmp["slowdown"] != 1.0) & ~cmp["status"].isin(["not_run", "changed"])]


def with_labels(cmp: pd.DataFrame, names: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """``cmp`` with each series' parameters as ``label`` and its name as ``series`` (in asv's order of
    ``names``)."""
    return cmp.assign(label=[frames.params_label(k, names.get(b))
                             for b, k in zip(cmp["benchmark"], cmp["params_key"], strict=True)],
                      series=frames.series_label(cmp["benchmark"], cmp["params_key"], names))


def _values(view: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Base and head values read side by side in their unit (``fmt.fmt_pair``: one scale for both; a unitless
    track_ as a count), a side's status where it has none."""
    status = [view[f"{side}_status"].map(lambda s: SIDE_WORDS.get(s, s)) for side in ("base", "head")]
    pairs = [fmt.fmt_pair(b, h, u, (mb, mh), benchmark=n) for b, h, u, mb, mh, n in
             zip(view["base"], view["head"], view["unit"], *status, view["benchmark"], strict=True)]  # fmt: skip
    return [p[0] for p in pairs], [p[1] for p in pairs]


def renamed(cmp: pd.DataFrame, machine: str) -> list[Rename]:
    """The page's series that look renamed (``regressions.renames``: the pairing of `mlaperf compare`'s report), each
    side a row of ``cmp`` (its ``Index`` the frame's)."""
    return renames(cmp.assign(machine=machine).itertuples())


def renamed_cells(found: Sequence[Rename]) -> dict[Any, str]:
    """Frame index -> the method cell of a renamed pair's rows, as the PR report's test cell says it."""
    cells = {r.old.Index: f"renamed? {r.new.benchmark}" for r in found}  # type: ignore[attr-defined]
    return cells | {r.new.Index: f"renamed? from {r.old.benchmark}" for r in found}  # type: ignore[attr-defined]


def table_rows(cmp: pd.DataFrame, shown: Sequence[str], history_link: Callable[[str, str], str],
               renamed: Mapping[Any, str] | None = None) -> tuple[pd.DataFrame, str]:
    """The rows (of :func:`with_labels`' frame) of the statuses ``shown``, by status then worst change first,
    and a note naming the threshold when every row has the same (its column then left out); ratio and p are
    numbers (``fmt.SHOWN_AS`` draws them as `mlaperf compare` prints them). ``history_link``: benchmark, series
    key (``data.compare``'s ``series_key``) -> URL; ``renamed``: :func:`renamed_cells`."""
    view = cmp[cmp["status"].isin(shown)]
    order = {s: i for i, s in enumerate(STATUS_TITLES)}
    view = view.assign(_o=view["status"].map(order), _w=-view["slowdown"].fillna(0)).sort_values(["_o", "_w"])
    before, after = _values(view)
    table = pd.DataFrame({
        "status": view["status"].map(lambda s: STATUS_TITLES[s].lower()),
        "series": view["series"],
        # The link next to the name: at 1,280 px the last columns scroll out of view.
        "history": [history_link(b, k) for b, k in zip(view["benchmark"], view["series_key"], strict=True)],
        "before": before,
        "after": after,
        "ratio": view["ratio"],  # numbers, drawn as fmt.SHOWN_AS says: sorted by number, not as text
        # The value's own relative change (a rate 4,174 -> 18,780 reads +350% better), not the slowdown's.
        # A changed benchmark (new asv version) measured other code at each side: not judged worse or better.
        "change": [change_text(st, b, h, d)
                   for st, b, h, d in zip(view["status"], view["base"], view["head"], view["direction"], strict=True)],
        "p": view["p_value"],
        "method": [(renamed or {}).get(i, m) for i, m in zip(view.index, view["method"], strict=True)],
        "threshold": view["threshold"].map(fmt.fmt_percent),
    })
    if table["threshold"].nunique() == 1:  # one threshold for every row: said once below
        return table.drop(columns="threshold"), f" Threshold {table['threshold'].iloc[0]} for every series shown."
    return table, ""
