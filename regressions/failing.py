"""Series failing now: those whose result at their machine's newest commit failed, with how long they have.

Detection skips failed runs (a failed run has no value to step from), so a benchmark that broke raises no alert:
`mlaperf detect` lists these beside its alerts, as the dashboard's Overview counts them (``dashboard.summary``:
``failed ×N``). A commit's runs pool as everywhere (``db.query_base.pool_runs``): one run with a value and the
commit measured it; a skipped result (asv's "not run here") is no failure and is passed over.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Machine, Result, Run
from db.provenance import is_provenance
from regressions.labels import params_label
from regressions.report import aligned
from regressions.results import commit_positions
from regressions.units import plural


@dataclass(frozen=True)
class Failing:
    """A series whose newest results failed: ``commits`` of its machine's newest ones in a row, from ``since`` (a
    sha); ``last_ok``: the newest commit with a value (None: none ever)."""

    machine: str
    benchmark: str
    params_key: str
    since: str
    commits: int
    last_ok: str | None
    until: str | None = None  # a series not run at the newest commit (:func:`failing_and_unrun`): its newest result


def _statuses(session: Session, machine_id: int, benchmark_ids: list[int] | None, commit_id: int | None = None
              ) -> dict[tuple[int, str], dict[int, set[str]]]:
    """{(benchmark id, params_key): {commit id: statuses of its runs}} on one machine."""
    stmt = (select(Result.benchmark_id, Result.params_key, Run.commit_id, Result.status)
            .join(Run, Run.id == Result.run_id).where(Run.machine_id == machine_id))
    if benchmark_ids is not None:
        stmt = stmt.where(Result.benchmark_id.in_(benchmark_ids))
    if commit_id is not None:
        stmt = stmt.where(Run.commit_id == commit_id)
    out: dict[tuple[int, str], dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for bid, key, cid, status in session.execute(stmt):
        out[(int(bid), str(key))][int(cid)].add(str(status))
    return out


def _tail(commits: dict[int, set[str]], pos: dict[int, int]) -> tuple[int | None, int, int | None, int | None]:
    """A series' newest failed results in a row (skipped ones passed over): (the first of them, how many, the
    newest, the newest commit with a value); (None, 0, None, ...) where its newest result has a value."""
    since = until = last_ok = None
    count = 0
    for cid in sorted(commits, key=lambda c: pos.get(c, -1), reverse=True):
        if "ok" in commits[cid]:
            last_ok = cid
            break
        if "failed" in commits[cid]:
            since, count, until = cid, count + 1, until if until is not None else cid
    return since, count, until, last_ok


def _machine_series(session: Session, machine: str | None, unrun: bool) -> tuple[list[Failing], list[Failing]]:
    """The series failing at their machine's newest commit and, with ``unrun``, those whose last results failed
    and that have no result there (not run, or skipped; else none), each by machine and name: one pass over the
    store's commits and names for both."""
    pos = commit_positions(session)
    names = {int(i): str(n) for i, n in session.execute(select(Benchmark.id, Benchmark.name))}
    shas = {int(i): str(s) for i, s in session.execute(select(Commit.id, Commit.sha))}
    machines = select(Machine.id, Machine.name)
    if machine is not None:
        machines = machines.where(Machine.name == machine)
    out: tuple[list[Failing], list[Failing]] = ([], [])
    for mid, mname in session.execute(machines).all():
        ran = session.execute(select(Run.commit_id).where(Run.machine_id == mid).distinct()).scalars().all()
        if not ran:
            continue
        newest = max((int(c) for c in ran), key=lambda c: pos.get(c, -1))
        now = _statuses(session, mid, None, newest)
        ran_now = {k for k, at in now.items() if {"ok", "failed"} & at[newest]}
        failing = [k for k in ran_now if "ok" not in now[k][newest]]
        gone: list[tuple[int, str]] = []
        if unrun:  # only series that ever failed here: a cheap query, however long the history
            ever = (select(Result.benchmark_id, Result.params_key).join(Run, Run.id == Result.run_id)
                    .where(Run.machine_id == mid, Result.status == "failed").distinct())
            gone = [(int(b), str(k)) for b, k in session.execute(ever) if (int(b), str(k)) not in ran_now]
        kinds = [[k for k in keys if not is_provenance(names.get(k[0], ""))] for keys in (failing, gone)]
        if not any(kinds):
            continue
        history = _statuses(session, mid, sorted({b for keys in kinds for b, _ in keys}))
        for listed, keys, is_gone in zip(out, kinds, (False, True), strict=True):
            for key in keys:
                since, count, until, last_ok = _tail(history[key], pos)
                if since is None:
                    continue
                listed.append(Failing(str(mname), names[key[0]], key[1], shas[since], count,
                                      shas[last_ok] if last_ok is not None else None,
                                      shas[until] if is_gone and until is not None else None))
    order = attrgetter("machine", "benchmark", "params_key")
    return sorted(out[0], key=order), sorted(out[1], key=order)


def failing_series(session: Session, machine: str | None = None) -> list[Failing]:
    """Every series (of ``machine``, or of every machine) failing now, by machine and name."""
    return _machine_series(session, machine, unrun=False)[0]


def failing_and_unrun(session: Session, machine: str | None = None) -> tuple[list[Failing], list[Failing]]:
    """:func:`failing_series` and the series whose last results failed and that did not run at their machine's
    newest commit (removed from the suite, renamed, or skipped there): they no longer count as failing, and
    ``nightly alert`` says so where it had listed them, instead of closing their issue as if they were fixed
    (``until``: their newest result)."""
    return _machine_series(session, machine, unrun=True)


def _params(f: Failing) -> dict[str, Any]:
    try:
        params = json.loads(f.params_key)
    except ValueError:
        return {}
    return params if isinstance(params, dict) else {}


def failing_records(failing: list[Failing]) -> list[dict[str, Any]]:
    """``detect --json``'s ``failing``: machine, benchmark, params, since, commits, last_ok (``failing_unrun``'s
    rows add ``until``, their newest result)."""
    return [{"machine": f.machine, "benchmark": f.benchmark, "params": _params(f), "since": f.since,
             "commits": f.commits, "last_ok": f.last_ok, **({"until": f.until} if f.until else {})} for f in failing]


def failing_text(failing: list[Failing]) -> str:
    """The terminal's section under the alerts ("" with none failing)."""
    if not failing:
        return ""
    rows = [[f.machine, f.benchmark, params_label(_params(f)) or "-", f.since[:10], f"{f.commits:,}",
             (f.last_ok or "never")[:10]] for f in failing]
    head = ["machine", "benchmark", "params", "failing since", "commits", "last value at"]
    return "\n".join([f"\nfailing now: {plural(len(failing), 'series', 'series')} failed at their machine's newest "
                      "commit (detection skips failed runs: no alert flags them)", *aligned(head, rows)])
