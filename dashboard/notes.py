"""Triage notes: the dashboard's own state in the store, a log per regression of who-knows-why
(acknowledged, ignored or reopened, with a note), kept in ``Meta["triage.<regression id>"]``.

Only the dashboard writes them (``mlaperf dashboard --writable``) and only it shows them, so they live here
rather than in ``db.queries``; the status change they explain is ``db.queries.set_regression_status``, and
the caller's one transaction holds both. Sessions are the caller's.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import Meta, utcnow

TRIAGE_PREFIX = "triage."  # Meta key per regression: "triage.<id>" -> list of {at, status, note, by}


def triage_notes(s: Session) -> dict[int, list[dict[str, Any]]]:
    """{regression id: [{at, status, note}, ...] oldest first} from the triage log."""
    rows = s.execute(select(Meta.key, Meta.value).where(Meta.key.startswith(TRIAGE_PREFIX))).all()
    out: dict[int, list[dict[str, Any]]] = {}
    for key, value in rows:
        try:
            rid = int(key[len(TRIAGE_PREFIX):])
        except ValueError:
            continue
        entries = json.loads(value) if isinstance(value, str) else value
        out[rid] = list(entries or [])
    return out


def add_triage_note(s: Session, regression_id: int, status: str, note: str, *, at: dt.datetime | None = None,
                    by: str | None = None) -> None:
    """Append one entry to a regression's triage log (flushes, does not commit: the caller's transaction
    also changes the status, so both land or neither)."""
    key = f"{TRIAGE_PREFIX}{int(regression_id)}"
    row = s.get(Meta, key)
    entry = {"at": (at or utcnow()).isoformat(timespec="seconds"), "status": status, "note": note}
    if by:
        entry["by"] = by
    if row is None:
        s.add(Meta(key=key, value=[entry]))
    else:
        row.value = [*(row.value or []), entry]
    s.flush()
