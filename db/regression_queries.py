"""The store's regression queries: the flagged regressions with their commits and fixes, and the triage
writes (status, assignee, issue link), which flush but never commit: the caller owns the transaction.
Importable from ``db.queries`` too, where the other reads live."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import REGRESSION_STATUSES, Benchmark, Commit, Machine, Regression, commit_order
from db.query_base import NotFound, _datetimes, _empty, _frame, _machine_id


def regressions(s: Session, status: str | Iterable[str] | None = None, machine: str | None = None) -> pd.DataFrame:
    """Flagged regressions, newest commit first (history order): id, benchmark, unit, params_key, params, machine, sha,
    date, message, before, after, ratio, direction, status, p_value, detected_at, fixed_sha."""
    fixed = Commit.__table__.alias("fixed_commit")
    stmt = (
        select(
            Regression.id,
            Benchmark.name.label("benchmark"),
            Benchmark.unit,
            Regression.params_key,
            Regression.params,
            Machine.name.label("machine"),
            Commit.sha,
            Commit.date,
            Commit.message,
            Regression.before,
            Regression.after,
            Regression.ratio,
            Regression.direction,
            Regression.status,
            Regression.p_value,
            Regression.detected_at,
            fixed.c.sha.label("fixed_sha"),
        )
        .join(Benchmark, Benchmark.id == Regression.benchmark_id)
        .join(Machine, Machine.id == Regression.machine_id)
        .join(Commit, Commit.id == Regression.commit_id)
        .outerjoin(fixed, fixed.c.id == Regression.fixed_commit_id)
        .order_by(*commit_order(descending=True), Regression.id.desc())
    )
    if status is not None:
        wanted = [status] if isinstance(status, str) else list(status)
        for value in wanted:
            _check_status(value)
        stmt = stmt.where(Regression.status.in_(wanted))
    if machine is not None:
        stmt = stmt.where(Regression.machine_id == _machine_id(s, machine))
    return _datetimes(_frame(s, stmt), "date", "detected_at")


def _check_status(status: str) -> None:
    if status not in REGRESSION_STATUSES:
        raise ValueError(f"status must be one of {', '.join(REGRESSION_STATUSES)}, not {status!r}")


def set_regression_status(s: Session, regression_id: int, status: str, *, by: str | None = None) -> None:
    """Set a regression's status ('new', 'acknowledged', 'fixed', 'ignored'), and who set it (``by``: kept in
    ``status_by``); flushes, does not commit."""
    _check_status(status)
    regression = s.get(Regression, regression_id)
    if regression is None:
        raise NotFound(f"no regression with id {regression_id}")
    regression.status = status
    if by is not None:
        regression.status_by = by[:255]
    s.flush()


ISSUE_SCHEMES = ("https://", "http://")
MAX_ISSUE_URL = 1024  # the column's length


def issue_link_problem(issue: str | None) -> str | None:
    """Why ``issue`` cannot be stored as a regression's tracking-issue link, or None ("" clears it): the one
    rule of the dashboard's form and of :func:`set_regression_triage`."""
    issue = (issue or "").strip()
    if issue and not issue.startswith(ISSUE_SCHEMES):
        return f"the issue link must start with https:// (or http://), not {issue[:80]!r}"
    if len(issue) > MAX_ISSUE_URL:
        return f"the issue link is longer than {MAX_ISSUE_URL:,} characters"
    return None


def set_regression_triage(s: Session, regression_id: int, *, assignee: str | None, issue_url: str | None) -> str:
    """Assign a regression to a person and link the issue that tracks it (None or "" clears a field); flushes,
    does not commit; returns the regression's status. ``issue_url`` must be an http(s) URL (ValueError
    otherwise)."""
    regression = s.get(Regression, regression_id)
    if regression is None:
        raise NotFound(f"no regression with id {regression_id}")
    if (problem := issue_link_problem(issue_url)) is not None:
        raise ValueError(problem)
    issue = (issue_url or "").strip()
    regression.assignee = (assignee or "").strip()[:255] or None
    regression.issue_url = issue or None
    s.flush()
    return regression.status


def triage_fields(s: Session, regression_ids: Iterable[int]) -> pd.DataFrame:
    """id, assignee, issue_url, status_by of the given regressions (migration 0008)."""
    ids = sorted({int(i) for i in regression_ids})
    cols = ["id", "assignee", "issue_url", "status_by"]
    if not ids:
        return _empty(cols)
    stmt = select(Regression.id, Regression.assignee, Regression.issue_url, Regression.status_by)
    frame = _frame(s, stmt.where(Regression.id.in_(ids)))
    return frame[cols] if not frame.empty else _empty(cols)
