"""The summary grid: every series of a machine in one table, its newest value, a sparkline of its newest
values, its latest change and its last flagged regression, with a search over names (the Overview's top rows,
the All benchmarks page, and the static site's overview). Pure pandas: no Streamlit, no database.

Latest change, the one rule: the newest value over the median of up to ``CHANGE_WINDOW`` values before it,
oriented so that > 1 is worse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dashboard import fmt, frames

SPARK = 40  # newest commits drawn in a sparkline
CHANGE_WINDOW = 5


def latest_change(values: Sequence[float | None], direction: str) -> float | None:
    """The newest value over the median of up to ``CHANGE_WINDOW`` values before it, > 1 worse
    (``direction``: ``up_is_worse`` or ``down_is_worse``); None with fewer than two positive values."""
    known = [float(v) for v in values if v is not None and np.isfinite(v) and v > 0]
    if len(known) < 2:
        return None
    ratio = known[-1] / float(np.median(known[-1 - CHANGE_WINDOW:-1]))
    return ratio if direction == "up_is_worse" else 1.0 / ratio


def matches(text: str, query: str) -> bool:
    """Every word of ``query`` occurs in ``text`` (case-insensitive): ``mma 64`` finds impl=mma, concurrency=64."""
    words = query.lower().split()
    low = text.lower()
    return all(w in low for w in words)


def grid(series: pd.DataFrame, values: pd.DataFrame, commit_ids: Sequence[int], regs: pd.DataFrame,
         direction: Callable[[str, Any], str]) -> pd.DataFrame:
    """One row per series of ``series`` (``db.queries.series``): benchmark, params_key, unit, latest (newest
    value), spark (values at ``commit_ids``, oldest first, None where not
    measured), change (:func:`latest_change`), flag (status and ratio of its newest flagged regression) and
    flag_status. ``values``: ``db.queries.recent_values`` at ``commit_ids``; ``regs``: the regression listing
    (newest first)."""
    cols = ["benchmark", "params_key", "unit", "latest", "spark", "change", "flag", "flag_status"]
    if series.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    wide: dict[tuple[str, str], list[float | None]] = {}
    if not values.empty:
        # One row per (series, commit) already (runs pooled): unstack, no aggregation.
        table = values.set_index(["benchmark", "params_key", "commit_id"])["value"].unstack("commit_id") \
            .reindex(columns=[int(c) for c in commit_ids])
        for key, row in zip(table.index, table.to_numpy(dtype=float), strict=True):
            wide[key] = [None if np.isnan(v) else float(v) for v in row]
    newest: dict[tuple[str, str], Any] = {}
    if not regs.empty:
        for r in regs.itertuples():
            newest.setdefault((r.benchmark, r.params_key), r)
    out = series[["benchmark", "params_key", "unit"]].copy()
    none = [None] * len(commit_ids)
    sparks = [wide.get((b, k), none) for b, k in zip(out["benchmark"], out["params_key"], strict=True)]
    out["spark"] = sparks
    out["latest"] = [next((v for v in reversed(s) if v is not None), None) for s in sparks]
    out["change"] = [latest_change(s, direction(b, u)) for s, b, u in
                     zip(sparks, out["benchmark"], out["unit"], strict=True)]
    flags = [newest.get((b, k)) for b, k in zip(out["benchmark"], out["params_key"], strict=True)]
    out["flag_status"] = [f.status if f is not None else "" for f in flags]
    # Numbers through the one formatter (regressions.units, as the Regressions page and the reports).
    out["flag"] = [f"{f.status} {fmt.fmt_ratio(f.ratio)} at {fmt.short_sha(f.sha)}" if f is not None else ""
                   for f in flags]
    return out[cols].reset_index(drop=True)


def names(table: pd.DataFrame, param_names: dict[str, list[str]] | None = None) -> pd.Series:
    """``SparseDecode.time_decode [impl=mma, concurrency=64]`` for the rows of :func:`grid` (only for the rows
    shown: parsing every series' parameters is the grid's largest cost)."""
    order = param_names or {}
    labels = [frames.params_label(k, order.get(b)) for b, k in zip(table["benchmark"], table["params_key"],
                                                                    strict=True)]
    return frames.series_label(table["benchmark"].astype(str), pd.Series(labels, index=table.index, dtype=object))


def search(table: pd.DataFrame, query: str) -> pd.DataFrame:
    """Rows whose benchmark name or parameters (``impl=mma``, ``mma``, ``64``) hold every word of ``query``."""
    if not query.strip():
        return table
    text = table["benchmark"].astype(str) + " " + table["params_key"].astype(str).str.replace(
        r'"(\w+)": "\'?([^"\']*)\'?"', r"\1=\2", regex=True)
    return table[[matches(t, query) for t in text]]
