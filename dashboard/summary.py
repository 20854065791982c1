"""The summary grid: every series of a machine in one table, its newest value, a sparkline of its newest
values, its latest change and its last flagged regression, with a search over names (the Overview's top rows,
the All benchmarks page, and the static site's overview). Pure pandas: no Streamlit, no database.

Latest change, the one rule: the newest value over the median of up to ``CHANGE_WINDOW`` values before it of
the same asv version (a benchmark whose code changed measures something else: detection starts a new segment
there, and so does the change), oriented so that > 1 is worse (``change``: sorting and colouring), and shown as
the value's own relative change with worse or better from the direction (``change_text``,
``regressions.units.fmt_change``): a rate 4.4x up reads ``+336% better``, never the inverse factor's ``-77%
better``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dashboard import fmt, frames
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE

SPARK = 40  # newest commits drawn in a sparkline
LARGEST = 10  # rows of the Overview's "Failing and largest latest changes" (the dashboard's and the site's)
CHANGE_WINDOW = 5


def latest_changes(values: np.ndarray, up_is_worse: np.ndarray) -> np.ndarray:
    """:func:`latest_change` of every row of ``values`` (series x commits, oldest first, NaN where not
    measured) at once; ``up_is_worse``: per row. NaN where a row has fewer than two positive values."""
    a = np.asarray(values, dtype=float).reshape(len(up_is_worse), -1)
    known = np.isfinite(a) & (a > 0)
    # Each row's known values moved to its end in their order (a stable sort on the mask): the newest is
    # then the last column and the ones before it the columns just left of it.
    packed = np.take_along_axis(a, np.argsort(known, axis=1, kind="stable"), axis=1)
    count = known.sum(axis=1)
    n = a.shape[1]
    out = np.full(len(a), np.nan)
    ok = count >= 2
    if n < 2 or not ok.any():
        return out
    before = packed[:, max(0, n - 1 - CHANGE_WINDOW):n - 1].copy()
    cols = np.arange(max(0, n - 1 - CHANGE_WINDOW), n - 1)
    before[cols[None, :] < (n - count)[:, None]] = np.nan  # columns left of the row's known values
    with np.errstate(all="ignore"):
        ratio = packed[ok, -1] / np.nanmedian(before[ok], axis=1)
    out[ok] = np.where(np.asarray(up_is_worse, dtype=bool)[ok], ratio, 1.0 / ratio)
    return out


def latest_change(values: Sequence[float | None], direction: str) -> float | None:
    """The newest value over the median of up to ``CHANGE_WINDOW`` values before it, > 1 worse
    (``direction``: ``up_is_worse`` or ``down_is_worse``); None with fewer than two positive values."""
    row = np.array([[np.nan if v is None else float(v) for v in values]], dtype=float)
    change = latest_changes(row, np.array([direction == "up_is_worse"]))[0]
    return None if np.isnan(change) else float(change)


def matches(text: str, query: str) -> bool:
    """Every word of ``query`` occurs in ``text`` (case-insensitive): ``mma 64`` finds impl=mma, concurrency=64."""
    words = query.lower().split()
    low = text.lower()
    return all(w in low for w in words)


def grid(series: pd.DataFrame, values: pd.DataFrame, commit_ids: Sequence[int], regs: pd.DataFrame,
         direction: Callable[[str, Any], str]) -> pd.DataFrame:
    """One row per series of ``series`` (``db.queries.series``): benchmark, params_key, unit, latest (newest
    value), spark (values at ``commit_ids``, oldest first, NaN where not measured), change
    (:func:`latest_change`, NaN where there is none or the series is failing), failing (its newest results at
    ``commit_ids`` that failed in a row: a benchmark that broke keeps its last value as ``latest``, and
    :func:`latest_texts` says it failed since), flag (status and ratio of its newest flagged regression) and
    flag_status. ``values``: ``db.queries.recent_values`` at ``commit_ids``; ``regs``: the
    regression listing (newest first); change_text: the change as people read it (the module docstring).
    Rows in the order of ``series``: the dashboard's loader (``data.series``) and the site hand it in
    ``frames.series_sort`` order. Whole-frame operations: no loop over the series' values."""
    cols = ["benchmark", "params_key", "unit", "latest", "ran", "failing", "spark", "change", "change_text", "flag",
            "flag_status"]
    if series.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    out = series[["benchmark", "params_key", "unit"]].reset_index(drop=True)
    keys = pd.MultiIndex.from_frame(out[["benchmark", "params_key"]])
    ids = [int(c) for c in commit_ids]
    if values.empty or not ids:
        table = np.full((len(out), len(ids)), np.nan)
        status = np.full(table.shape, None, dtype=object)
    else:
        # One row per (series, commit) already (runs pooled): unstack, no aggregation.
        table = values.set_index(["benchmark", "params_key", "commit_id"])["value"].unstack("commit_id") \
            .reindex(index=keys, columns=ids).to_numpy(dtype=float)
        # Each result's status (without statuses, "failed" where it has no value): a series with no result at
        # the commits was not run there (a retired or renamed benchmark), which is not a failure.
        given = values["status"] if "status" in values else values["value"].isna().map({True: "failed", False: "ok"})
        status = values.assign(_s=given).set_index(["benchmark", "params_key", "commit_id"])["_s"] \
            .unstack("commit_id").reindex(index=keys, columns=ids).to_numpy(dtype=object)
    out["ran"] = pd.notna(status).any(axis=1)
    out["spark"] = list(table)
    measured = ~np.isnan(table)
    last = table.shape[1] - 1 - np.argmax(measured[:, ::-1], axis=1) if table.shape[1] else np.zeros(len(out), int)
    out["latest"] = np.where(measured.any(axis=1), table[np.arange(len(out)), last] if table.shape[1] else np.nan,
                             np.nan)
    # The failed results after the newest value: how many in a row the series failed last (a skipped one, asv's
    # "not run here", is no failure; without statuses a result without a value is one).
    after = np.arange(table.shape[1])[None, :] > np.where(measured.any(axis=1), last, -1)[:, None]
    out["failing"] = ((status == "failed") & after).sum(axis=1).astype(int)
    # The direction is the benchmark's (name and unit), asked once per benchmark, not per series.
    pairs = out[["benchmark", "unit"]].drop_duplicates()
    worse_up = {(b, u): direction(b, u) == "up_is_worse" for b, u in zip(pairs["benchmark"], pairs["unit"],
                                                                          strict=True)}
    up = np.array([worse_up[(b, u)] for b, u in zip(out["benchmark"], out["unit"], strict=True)], dtype=bool)
    # A failing series has no latest change: its newest value is older than its newest result.
    out["change"] = np.where(out["failing"] > 0, np.nan,
                             latest_changes(_newest_segment_only(values, keys, ids, table, last), up))
    out["change_text"] = [fmt.fmt_change(c, UP_IS_WORSE if u else DOWN_IS_WORSE) if c == c else ""
                          for c, u in zip(out["change"], up, strict=True)]  # fmt: skip
    newest = regs.drop_duplicates(["benchmark", "params_key"]) if not regs.empty else \
        pd.DataFrame(columns=["benchmark", "params_key", "status", "ratio", "sha"])
    flags = out[["benchmark", "params_key"]].merge(newest[["benchmark", "params_key", "status", "ratio", "sha"]],
                                                   on=["benchmark", "params_key"], how="left")
    flagged = flags["status"].notna().to_numpy()
    out["flag_status"] = flags["status"].where(flagged, "").astype(str).to_numpy()
    # Numbers through the one formatter (regressions.units, as the Regressions page and the reports).
    text = pd.Series("", index=out.index, dtype=object)
    if flagged.any():
        f = flags[flagged]
        text[flagged] = [f"{st} {fmt.fmt_ratio(r)} at {fmt.short_sha(sh)}"
                         for st, r, sh in zip(f["status"], f["ratio"], f["sha"], strict=True)]
    out["flag"] = text
    return out[cols]


def _newest_segment_only(values: pd.DataFrame, keys: pd.MultiIndex, ids: list[int], table: np.ndarray,
                         last: np.ndarray) -> np.ndarray:  # fmt: skip
    """``table`` with NaN up to each row's last value of another asv version than its newest value's (``last``:
    that value's column): the newest version segment, as detection's (a version measured again after another,
    a reverted benchmark, starts a segment of its own)."""
    if "benchmark_version" not in values or values.empty or not ids:
        return table
    codes, _ = pd.factorize(values["benchmark_version"].to_numpy(dtype=object), use_na_sentinel=True)
    version = values.assign(_v=codes).set_index(["benchmark", "params_key", "commit_id"])["_v"] \
        .unstack("commit_id").reindex(index=keys, columns=ids).to_numpy(dtype=float, copy=True)
    version[np.isnan(table) | (version < 0)] = np.nan  # the version of measured values only; -1 unknown
    newest = version[np.arange(len(table)), last]
    other = ~np.isnan(version) & ~np.isnan(newest)[:, None] & (version != newest[:, None])
    cols = np.arange(table.shape[1])
    before = np.where(other, cols[None, :], -1).max(axis=1)  # each row's last column of another version
    return np.where(cols[None, :] <= before[:, None], np.nan, table)


def latest_texts(table: pd.DataFrame) -> list[str]:
    """The grid's latest values as shown: in their units; ``failed ×3 (was 2.00 us)`` where its newest three
    results failed after that value, ``failed ×3`` where every result at the grid's commits failed, ``skipped``
    where asv skipped every one, ``not run`` where it has no result there at all."""
    out = []
    for v, u, b, ran, failing in zip(table["latest"], table["unit"], table["benchmark"], table["ran"],
                                     table["failing"], strict=True):
        value = fmt.fmt_value(v, u, "", benchmark=b)
        if failing:
            out.append(f"failed ×{failing:,}" + (f" (was {value})" if value else ""))
        else:
            out.append(value or ("skipped" if ran else "not run"))
    return out


def live_first(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`grid` that ran at its commits first, each part in its order: a retired or renamed series
    ("not run") after the live ones (OpenBLAS's grid opened on 60 rows of renamed benchmarks, a review)."""
    return table.iloc[np.argsort(~table["ran"].to_numpy(bool), kind="stable")]


def names(table: pd.DataFrame, param_names: dict[str, list[str]] | None = None) -> pd.Series:
    """``SparseDecode.time_decode [impl=mma, concurrency=64]`` for the rows of :func:`grid` (only for the rows
    shown: parsing every series' parameters is the grid's largest cost)."""
    return frames.series_label(table["benchmark"].astype(str), table["params_key"], param_names)


def search_text(table: pd.DataFrame) -> pd.Series:
    """What :func:`search` matches per row: the benchmark name and its parameters as ``impl=mma``."""
    return table["benchmark"].astype(str) + " " + table["params_key"].astype(str).str.replace(
        r'"(\w+)": "\'?([^"\']*)\'?"', r"\1=\2", regex=True)


def largest_first(table: pd.DataFrame) -> pd.DataFrame:
    """Rows of :func:`grid` failing first (the longest failing first: a benchmark that broke is the largest change
    of all), then by the size of their latest change, largest first, none last. The size is ``|log change|``: a
    time halving and a rate doubling (``-50% better``, ``+100% better``) are as large."""
    with np.errstate(all="ignore"):
        size = np.abs(np.log(table["change"].astype(float)))
    return table.assign(_f=table["failing"], _w=size).sort_values(["_f", "_w"], ascending=False,
                                                                   na_position="last").drop(columns=["_f", "_w"])


def search(table: pd.DataFrame, query: str) -> pd.DataFrame:
    """Rows whose benchmark name or parameters (``impl=mma``, ``mma``, ``64``) hold every word of ``query``."""
    if not query.strip():
        return table
    return table[[matches(t, query) for t in search_text(table)]]
