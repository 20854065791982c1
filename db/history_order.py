"""History order of the store's commits, kept in ``commit.position`` (ORDER BY :func:`db.models.commit_order`).

Git order wins where it is known: commits with a generation (``git rev-list --count``, from the repository at
hand when they were ingested) sort by it. A commit the repository did not have (not fetched yet, another
fork's, ingested from outside the clone) has none; it goes right after the newest-in-git commit dated no later
than it, so a run of a commit the clone lacks lands where its date puts it, not before the whole history (as a
plain ORDER BY generation would put it). With no generation anywhere this is date order, then id (ingest warns
where dates tie: ``db.ingest.IngestSummary.order_note``).

One pure rule (:func:`history_order`) and one writer (:func:`renumber`), which ingest calls after storing files
and describing commits, and migration 0009 calls to fill the column.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

_EARLIEST = dt.datetime.min
# Core table, not the ORM model: the migration that fills the column runs this against its own schema.
_COMMIT = sa.table(
    "commit",
    sa.column("id", sa.Integer()),
    sa.column("generation", sa.Integer()),
    sa.column("date", sa.DateTime()),  # typed: SQLite hands back text otherwise
    sa.column("position", sa.Integer()),
)

Row = tuple[int, int | None, dt.datetime | None]  # (commit id, generation, date)


def history_order(commits: Iterable[Row]) -> list[int]:
    """Commit ids oldest first: known generations by (generation, date, id); each commit without one after
    the known commit of highest generation dated at or before it (first when none is, or it has no date),
    those sharing a place by (date, id)."""
    rows = list(commits)
    known = sorted((r for r in rows if r[1] is not None), key=lambda r: (r[1], r[2] or _EARLIEST, r[0]))
    unknown = sorted((r for r in rows if r[1] is None), key=lambda r: (r[2] is not None, r[2] or _EARLIEST, r[0]))
    # For a date d: the highest place in ``known`` among commits dated <= d (a running max over date order).
    dated = sorted((r[2], place) for place, r in enumerate(known) if r[2] is not None)
    dates = [d for d, _ in dated]
    best: list[int] = []
    for _, place in dated:
        best.append(max(place, best[-1]) if best else place)
    after: dict[int, list[int]] = {}  # place in ``known`` (-1: before all) -> unknown ids placed after it
    for cid, _, date in unknown:
        cut = bisect.bisect_right(dates, date) if date is not None else 0
        after.setdefault(best[cut - 1] if cut else -1, []).append(cid)
    order = list(after.get(-1, []))
    for place, (cid, _, _) in enumerate(known):
        order.append(cid)
        order.extend(after.get(place, []))
    return order


def renumber(conn: Connection) -> int:
    """Write every commit's ``position`` (0 = oldest) from :func:`history_order`; returns how many changed.

    Runs in the caller's transaction. On PostgreSQL it first locks the commit table against other writers, so
    two ingests renumbering at once take turns and the second sees the first's commits (SQLite writers already
    hold the database's write lock from BEGIN IMMEDIATE).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"LOCK TABLE {conn.dialect.identifier_preparer.quote('commit')} IN EXCLUSIVE MODE"))
    rows = conn.execute(sa.select(_COMMIT.c.id, _COMMIT.c.generation, _COMMIT.c.date, _COMMIT.c.position)).all()
    now = {int(r[0]): r[3] for r in rows}
    changes = [
        {"b_id": cid, "b_position": place}
        for place, cid in enumerate(history_order((int(r[0]), r[1], r[2]) for r in rows))
        if now[cid] != place
    ]
    if changes:  # one executemany
        conn.execute(
            sa.update(_COMMIT).where(_COMMIT.c.id == sa.bindparam("b_id")).values(position=sa.bindparam("b_position")),
            changes,
        )
    return len(changes)
