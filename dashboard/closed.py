"""Closed steps for the Regressions page: regressions that were flagged and then closed (fixed, transient,
retired, ignored, or any status the detector adds later), each with the reason it was closed, so a
short-lived regression stays visible without knowing where to look. Pure pandas: no Streamlit, no database.

Statuses are read as stored, not from a fixed list: a status outside ``triage.CATEGORY_OF`` counts as closed
(``triage.enrich``) and shows as itself. The reason is the detector's own where it records one (a
``close_reason`` or ``reason`` column of the listing), else what the status means, with the regression's
labels (``returns_to_earlier_level`` ...) and the newest triage note.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dashboard import fmt

OPEN_CATEGORIES = ("open", "suspect")
REASON_COLUMNS = ("close_reason", "reason")
# What a closed status means, for statuses the detector or a person sets today.
STATUS_MEANING = {
    "fixed": "came back to its earlier level",
    "transient": "refuted: the next runs were back within the threshold",
    "retired": "the series (or its benchmark version) stopped running",
    "ignored": "ignored by a person",
}
COLUMNS = ["id", "machine", "benchmark", "params_key", "status", "reason_kind", "reason", "sha", "parent_sha",
           "fixed_sha", "before", "after", "ratio", "unit"]


def _text(value: Any) -> str:
    return "" if fmt.is_missing(value) else str(value).strip()


def reason_kind(row: pd.Series) -> str:
    """A short key to filter on: the recorded close reason, else the first label, else the status."""
    for column in REASON_COLUMNS:
        if _text(row.get(column)):
            return _text(row.get(column))
    labels = row.get("labels")
    if isinstance(labels, list) and labels:
        return str(labels[0])
    return str(row["status"])


def reason(row: pd.Series) -> str:
    """``transient: refuted: ... · returns_to_earlier_level · note: expected``."""
    recorded = next((_text(row.get(c)) for c in REASON_COLUMNS if _text(row.get(c))), "")
    status = str(row["status"])
    parts = [f"{status}: {recorded or STATUS_MEANING.get(status, 'closed')}"]
    if status == "fixed" and isinstance(row.get("fixed_sha"), str):
        parts[0] += f" at {fmt.short_sha(row['fixed_sha'])}"
    labels = row.get("labels")
    if isinstance(labels, list):
        parts += [str(label) for label in labels if str(label) != recorded]
    if _text(row.get("note")):
        parts.append(f"note: {_text(row.get('note'))}")
    return " · ".join(parts)


def closed_steps(regs: pd.DataFrame) -> pd.DataFrame:
    """The rows of the enriched listing (``triage.enrich``) whose own status is not open or suspect, newest
    commit first, with ``reason_kind`` and ``reason``."""
    if regs.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    category = regs["status"].map(_category)
    rows = regs[~category.isin(OPEN_CATEGORIES)].copy()
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    rows["reason_kind"] = rows.apply(reason_kind, axis=1)
    rows["reason"] = rows.apply(reason, axis=1)
    for column in COLUMNS:
        if column not in rows:
            rows[column] = None
    return rows.reset_index(drop=True)


def _category(status: Any) -> str:
    from dashboard.triage import CATEGORY_OF

    return CATEGORY_OF.get(str(status), "closed")


def filter_closed(rows: pd.DataFrame, statuses: list[str], kinds: list[str]) -> pd.DataFrame:
    """Rows with one of ``statuses`` and one of ``kinds`` (an empty list: no filter on that)."""
    keep = pd.Series(True, index=rows.index)
    if statuses:
        keep &= rows["status"].isin(statuses)
    if kinds:
        keep &= rows["reason_kind"].isin(kinds)
    return rows[keep]
