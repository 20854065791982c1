"""Stored alerts as tables: the regressions with their group, range and close reason
(:func:`regressions_frame`, read by `mlaperf detect`, the nightly and the dashboard), and the alert groups
(:func:`groups_of`) in the versioned JSON shape of `mlaperf detect --json` (:data:`JSON_VERSION`,
docs/detection.md). Read-only; sessions are the caller's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import AlertGroup, Benchmark, Commit, Machine, Regression
from regressions.labels import ordered_params, series_rank
from regressions.level_rules import PARTLY_RECOVERED, RETURNS_TO_EARLIER_LEVEL
from regressions.policy import FIXED, OPEN_STATUSES, group_kind

# Version of the `mlaperf detect --json` document; bumped when a key changes meaning or goes away.
JSON_VERSION = 2
# A `detect --json` record is a row of regressions_frame less these columns, with these renamed.
_NOT_LISTED = ["params_key", "message"]
_LISTED_AS = {"sha": "commit", "fixed_sha": "fixed_at", "closed_sha": "closed_at"}


def regressions_frame(
    session: Session, *, statuses: Iterable[str] | None = None, machine: str | None = None
) -> pd.DataFrame:
    """Stored regressions with names resolved, newest commit first: the columns of ``db.queries.regressions``
    plus :func:`alert_columns` (alert group, its kind and range, the commit range's parent, labels, close
    reason and commit, where the series stands now); an unknown machine gives an empty frame. Params are in
    asv's order and, within one commit, rows go by machine, then series (``labels.series_rank``: numbers
    numerically)."""
    from db import queries
    from regressions.results import param_names

    frame = queries.regressions(session, status=None if statuses is None else list(statuses))
    if machine is not None:
        frame = frame[frame["machine"] == machine]
    names = param_names(session, set(frame["benchmark"]))
    frame = frame.assign(params=[ordered_params(p or {}, names.get(b))
                                 for b, p in zip(frame["benchmark"], frame["params"], strict=True)])  # fmt: skip
    commit_rank = {sha: i for i, sha in enumerate(dict.fromkeys(frame["sha"]))}
    frame = frame.assign(_rank=[(commit_rank[sha], m, series_rank(b, p), int(i)) for sha, m, b, p, i in
                                zip(frame["sha"], frame["machine"], frame["benchmark"], frame["params"], frame["id"],
                                    strict=True)])  # fmt: skip
    frame = frame.sort_values("_rank", kind="stable").drop(columns=["_rank"]).reset_index(drop=True)
    frame = frame.merge(alert_columns(session, [int(i) for i in frame["id"]]), on="id", how="left")
    # Ints stay ints where some rows have no group (regressions stored before groups existed).
    frame["group"] = pd.Series([None if pd.isna(g) else int(g) for g in frame["group"]], dtype=object)
    return frame


_ALERT_COLUMNS = [
    "id",
    "group",
    "machine_wide",
    "group_kind",
    "group_size",
    "group_status",
    "group_commit",
    "group_parent",
    "parent",
    "labels",
    "close_reason",
    "closed_sha",
    "assignee",
    "issue_url",
    "now_ratio",
]
# Booleans from the labels, so a reader need not know the label strings.
_LABEL_FLAGS = {"returns_to_earlier_level": RETURNS_TO_EARLIER_LEVEL, "partly_recovered": PARTLY_RECOVERED}


def alert_columns(session: Session, ids: list[int]) -> pd.DataFrame:
    """Per regression id: group, machine_wide, group_kind (policy.group_kind), group_size (its members),
    group_status, group_commit/group_parent (the group's range, shas), parent (sha), labels, close_reason,
    closed_sha, assignee and issue_url (its triage: who has it, the issue that tracks it), now_ratio (the
    series' newest level over before as the newest detection saw it; None for rows stored before it was kept),
    returns_to_earlier_level and partly_recovered (from labels)."""
    if not ids:
        return pd.DataFrame(columns=[*_ALERT_COLUMNS, *_LABEL_FLAGS])
    parent = Commit.__table__.alias("parent_commit")
    closed = Commit.__table__.alias("closed_commit")
    rows = session.execute(
        select(
            Regression.id,
            Regression.group_id,
            parent.c.sha,
            Regression.labels,
            Regression.close_reason,
            closed.c.sha,
            Regression.assignee,
            Regression.issue_url,
            Regression.now_ratio,
        )
        .outerjoin(parent, parent.c.id == Regression.parent_commit_id)
        .outerjoin(closed, closed.c.id == Regression.closed_commit_id)
        .where(Regression.id.in_(ids))
    ).all()
    groups = groups_of(session, {int(g) for _, g, *_ in rows if g is not None})
    out = pd.DataFrame(
        [
            {
                "id": int(rid),
                "group": None if gid is None else int(gid),
                "machine_wide": bool(gid is not None and groups[gid]["machine_wide"]),
                "group_kind": None if gid is None else groups[gid]["kind"],
                "group_size": 0 if gid is None else groups[gid]["size"],
                "group_status": None if gid is None else groups[gid]["status"],
                "group_commit": None if gid is None else groups[gid]["commit"],
                "group_parent": None if gid is None else groups[gid]["parent"],
                "parent": psha,
                "labels": list(labels or []),
                "close_reason": reason,
                "closed_sha": csha,
                "assignee": assignee,
                "issue_url": issue,
                "now_ratio": now,
            }
            for rid, gid, psha, labels, reason, csha, assignee, issue, now in rows
        ],
        columns=_ALERT_COLUMNS,
    )
    for flag, label in _LABEL_FLAGS.items():
        out[flag] = [label in labels for labels in out["labels"]]
    return out


def groups_of(session: Session, group_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Alert groups by id: id, machine, commit and parent (the group's range, shas), kind, machine_wide,
    series (measured at its commit), status, size (members), open and fixed (members of those statuses),
    members (regression ids, oldest first)."""
    wanted = sorted(set(group_ids))
    if not wanted:
        return {}
    parent = Commit.__table__.alias("group_parent")
    head = Commit.__table__.alias("group_commit")
    found = session.execute(
        select(AlertGroup.id, Machine.name, head.c.sha, parent.c.sha, AlertGroup.machine_wide, AlertGroup.series)
        .join(Machine, Machine.id == AlertGroup.machine_id)
        .join(head, head.c.id == AlertGroup.commit_id)
        .outerjoin(parent, parent.c.id == AlertGroup.parent_commit_id)
        .where(AlertGroup.id.in_(wanted))
    ).all()
    members: dict[int, list[tuple[int, str, str]]] = {}
    for gid, rid, status, bench in session.execute(
        select(Regression.group_id, Regression.id, Regression.status, Benchmark.name)
        .join(Benchmark, Benchmark.id == Regression.benchmark_id)
        .where(Regression.group_id.in_(wanted))
        .order_by(Regression.id)
    ).all():
        members.setdefault(int(gid), []).append((int(rid), status, bench))
    out: dict[int, dict[str, Any]] = {}
    for gid, machine, sha, psha, wide, series in found:
        mine = members.get(int(gid), [])
        statuses = [s for _, s, _ in mine]
        out[int(gid)] = {
            "id": int(gid),
            "machine": machine,
            "commit": sha,
            "parent": psha,
            "kind": group_kind(bool(wide), [b for _, _, b in mine], statuses),
            "machine_wide": bool(wide),
            "series": int(series),
            "status": AlertGroup.status_of(statuses) if statuses else None,
            "size": len(mine),
            "open": sum(s in OPEN_STATUSES for s in statuses),
            "fixed": sum(s == FIXED for s in statuses),
            "members": [rid for rid, _, _ in mine],
        }
    return out


def _clean(v: Any) -> Any:
    if isinstance(v, float):
        # 12 significant digits: a level is a median taken in log space, and its last digits are that noise
        # (318291968.00000054 bytes for 318291968).
        return float(f"{v:.12g}") if math.isfinite(v) else None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def records(frame: pd.DataFrame, events: dict[int, str]) -> list[dict[str, Any]]:
    """The `detect --json` records of a regressions_frame (``events``: what this run did to each id)."""
    out = []
    for row in frame.drop(columns=_NOT_LISTED).rename(columns=_LISTED_AS).to_dict("records"):
        rec = {k: _clean(v) for k, v in row.items()}
        event = events.get(row["id"])
        rec["new"] = event == "flagged"  # flagged by this run
        rec["event"] = event
        out.append(rec)
    return out


def detect_document(
    session: Session, frame: pd.DataFrame, events: dict[int, str], summary: dict[str, Any]
) -> dict[str, Any]:
    """The `mlaperf detect --json` document: ``version``, ``summary`` (what this run did), ``groups`` (every
    group with a listed member: range, kind, status, size, members) and ``regressions`` (the records)."""
    recs = records(frame, events)
    gids = {int(r["group"]) for r in recs if r.get("group") is not None}
    groups = [_group_json(g) for g in groups_of(session, gids).values()]
    groups.sort(key=lambda g: g["id"])
    return {"version": JSON_VERSION, "summary": summary, "groups": groups, "regressions": recs}


def _group_json(g: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": g["id"],
        "machine": g["machine"],
        "range": {"parent": g["parent"], "commit": g["commit"]},
        "kind": g["kind"],
        "machine_wide": g["machine_wide"],
        "series_measured": g["series"],
        "status": g["status"],
        "size": g["size"],
        "open": g["open"],
        "fixed": g["fixed"],
        "members": g["members"],
    }
