"""Step 8 of the detection pipeline (:mod:`regressions.store`): alerts of benchmarks, or of parameter
combinations of a benchmark, that no longer run.

A machine's commit is a *full run* when it measured more than half of the benchmarks the machine measured
over its 30 commits before (``policy.full_runs``): an ``asv run --bench`` subset is partial and says nothing
of what it did not select. A benchmark is gone from a machine at the first full run after its last
measurement there whose suite does not list it (``policy.gone_at``; a run ingested with its benchmarks.json
keeps that listing, and ``asv run --bench`` lists the whole suite, so a subset of more than half retires
nothing it left out), whatever its asv module: a deleted module is gone like a deleted benchmark, and the
commit stamped is a function of the history, the same night by night and with ``--full``. Sessions are the
caller's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from db.models import Benchmark, Regression, Result, Run, Suite
from regressions import policy
from regressions.policy import OPEN_STATUSES, RETIRED
from regressions.segments import newest_commits

Gone = dict[int, dict[int, int]]  # machine id -> {benchmark id: commit id of the first full run without it}
Series = tuple[int, str]  # (benchmark id, params_key)
SeriesGone = dict[int, dict[Series, int]]  # machine id -> {series: commit id of its benchmark's first run without it}
_CHUNK = 500  # bounded IN lists


def _rows(session: Session, mid: int, *, commits: list[int] | None = None, benchmarks: Iterable[int] | None = None,
          params: bool = False) -> list[tuple[Any, ...]]:  # fmt: skip
    """Distinct (commit id, benchmark id[, params_key]) of every result on machine ``mid`` (any status: a
    failed or skipped one was selected), of ``benchmarks`` and/or at ``commits``, read in bounded chunks of
    the benchmarks (of the commits when no benchmarks are given: callers name one or two commits beside them)."""
    columns = [Run.commit_id, Result.benchmark_id, *([Result.params_key] if params else [])]
    stmt = select(*columns).join(Run, Result.run_id == Run.id).where(Run.machine_id == mid).distinct()
    if benchmarks is None:
        chunked, keys = Run.commit_id, list(commits or [])
    else:
        chunked, keys = Result.benchmark_id, sorted(set(benchmarks))
        if commits is not None:
            stmt = stmt.where(Run.commit_id.in_(commits))
    out: list[tuple[Any, ...]] = []
    for i in range(0, len(keys), _CHUNK):
        out += [(int(c), int(b), *(str(k) for k in rest)) for c, b, *rest in
                session.execute(stmt.where(chunked.in_(keys[i : i + _CHUNK])))]  # fmt: skip
    return out


def _measured(session: Session, mid: int, *, commits: list[int] | None = None,
              benchmarks: Iterable[int] | None = None) -> dict[int, set[int]]:  # fmt: skip
    """Commit id -> benchmark ids with a result there on machine ``mid``, over ``commits`` or for
    ``benchmarks``."""
    out: dict[int, set[int]] = {}
    for c, b in _rows(session, mid, commits=commits, benchmarks=benchmarks):
        out.setdefault(c, set()).add(b)
    return out


def benchmarks_gone(
    session: Session, machine_ids: list[int], judged: Iterable[tuple[int, int]], pos: dict[int, int],
    skip: Iterable[int] = (),
) -> Gone:  # fmt: skip
    """Per machine, the benchmarks gone from it (``policy.gone_at``) among those with an open alert there or
    in ``judged`` ((machine id, benchmark id) of the alerts judged this run), with the commit they are gone
    at. ``skip``: benchmarks not counted toward a full run (kernel-config records). Only a benchmark missing
    from the machine's newest commit is looked at further, so a night where everything ran costs one query."""
    wanted: dict[int, set[int]] = {m: set() for m in machine_ids}
    for m, b in session.execute(
        select(Regression.machine_id, Regression.benchmark_id)
        .where(_open_or_gone(), Regression.machine_id.in_(machine_ids))
        .distinct()
    ):
        wanted[int(m)].add(int(b))
    for m, b in judged:
        if m in wanted:
            wanted[m].add(b)
    ignored = set(skip)
    out: Gone = {}
    for mid, candidates in wanted.items():
        if not candidates:
            continue
        newest = newest_commits(session, mid, 1)
        if not newest:
            continue
        absent = candidates - _measured(session, mid, commits=newest).get(newest[0], set())
        if not absent:
            continue
        commits = sorted(
            (int(c) for c in session.execute(select(Run.commit_id).where(Run.machine_id == mid).distinct()).scalars()),
            key=lambda c: pos.get(c, -1),
        )
        rank = {c: i for i, c in enumerate(commits)}
        last = {
            b: max(rank[c] for c in where) for b, where in _by_benchmark(_measured(session, mid, benchmarks=absent))
        }
        if not last:
            continue
        first = max(min(last.values()) - policy.FULL_RUN_WINDOW, 0)  # the window the oldest needs, no more
        window = commits[first:]
        measured = _measured(session, mid, commits=window)
        full = policy.full_runs([measured.get(c, set()) - ignored for c in window])
        listing = _listed(session, mid, window, set(last))
        out[mid] = {}
        for b, i in last.items():
            at = policy.gone_at(i - first, full, [b in listing.get(c, ()) for c in window])
            if at is not None:
                out[mid][b] = window[at]
    return out


def _listed(session: Session, mid: int, commits: list[int], benchmarks: set[int]) -> dict[int, set[int]]:
    """Commit id -> which of ``benchmarks`` a suite stored with a run of machine ``mid`` there lists (a run
    ingested with its benchmarks.json, ``Run.suite_id``); commits without one are missing."""
    keys = sorted(benchmarks)
    names: dict[str, int] = {}
    for i in range(0, len(keys), _CHUNK):
        chunk = select(Benchmark.name, Benchmark.id).where(Benchmark.id.in_(keys[i : i + _CHUNK]))
        names.update((str(n), int(b)) for n, b in session.execute(chunk))
    suites: dict[int, set[int]] = {}
    out: dict[int, set[int]] = {}
    for i in range(0, len(commits), _CHUNK):
        rows = session.execute(
            select(Run.commit_id, Run.suite_id)
            .where(Run.machine_id == mid, Run.commit_id.in_(commits[i : i + _CHUNK]), Run.suite_id.is_not(None))
            .distinct()
        )
        for c, sid in rows:
            if sid not in suites:
                listed = session.execute(select(Suite.names).where(Suite.id == sid)).scalar_one_or_none() or []
                suites[sid] = {names[n] for n in listed if n in names}
            out.setdefault(int(c), set()).update(suites[sid])
    return out


def _by_benchmark(measured: dict[int, set[int]]) -> list[tuple[int, list[int]]]:
    """The commit -> benchmarks map turned round: (benchmark id, commit ids measuring it)."""
    where: dict[int, list[int]] = {}
    for c, benchmarks in measured.items():
        for b in benchmarks:
            where.setdefault(b, []).append(c)
    return list(where.items())


def _open_or_gone() -> ColumnElement[bool]:
    """Open alerts, and those retired as gone: a commit measured later (a gap the nightly fills, with the
    current suite) can move where their benchmark is gone, and ``--full`` would stamp that commit."""
    return or_(Regression.status.in_(OPEN_STATUSES),
               (Regression.status == RETIRED) & (Regression.close_reason == policy.BENCHMARK_GONE))  # fmt: skip


def series_gone(session: Session, machine_ids: list[int], judged: Iterable[tuple[int, str, int]],
                pos: dict[int, int]) -> SeriesGone:  # fmt: skip
    """Per machine, the series among those with an open alert there or in ``judged`` ((benchmark id,
    params_key, machine id) of the alerts judged this run) whose benchmark still runs without them: gone at
    the first commit after the series' last result where its benchmark has results and the series none. asv
    stores a result for every parameter combination a benchmark ran (failed and skipped ones too), so one
    missing from a benchmark that ran was dropped from its grid; asv's version does not change with the
    parameters, so neither a version segment nor ``benchmarks_gone`` ends such a series. A series present at
    the machine's newest commit is not looked at further; one whose benchmark did not run there (a partial
    run) is, by the benchmark's own newest run, so a partial run keeps what was decided."""
    wanted: dict[int, set[Series]] = {m: set() for m in machine_ids}
    for b, k, m in session.execute(
        select(Regression.benchmark_id, Regression.params_key, Regression.machine_id)
        .where(Regression.status.in_(OPEN_STATUSES), Regression.machine_id.in_(machine_ids))
        .distinct()
    ):
        wanted[int(m)].add((int(b), str(k)))
    for b, k, m in judged:
        if m in wanted:
            wanted[m].add((b, k))
    out: SeriesGone = {}
    for mid, candidates in wanted.items():
        newest = newest_commits(session, mid, 1) if candidates else []
        if not newest:
            continue
        at_newest = _rows(session, mid, benchmarks={b for b, _ in candidates}, commits=newest, params=True)
        present = {(b, k) for _c, b, k in at_newest}
        # A benchmark that did not run there (a partial run): its own newest commit instead, one small read each.
        not_run = {b for b, _ in candidates} - {b for _c, b, _k in at_newest}
        newest_of = {b: max(where, key=lambda c: pos.get(c, -1))
                     for b, where in _by_benchmark(_measured(session, mid, benchmarks=not_run))}  # fmt: skip
        for c in set(newest_of.values()):
            wanted_here = {b for b, n in newest_of.items() if n == c}
            present |= {(b, k) for _c, b, k in _rows(session, mid, benchmarks=wanted_here, commits=[c], params=True)}
        absent = candidates - present
        if not absent:
            continue
        runs_of: dict[int, set[int]] = {}  # benchmark -> commits it ran at
        last: dict[Series, int] = {}  # series -> position of its last result
        for c, b, k in _rows(session, mid, benchmarks={b for b, _ in absent}, params=True):
            runs_of.setdefault(b, set()).add(c)
            if (b, k) in absent:
                last[(b, k)] = max(last.get((b, k), -1), pos.get(c, -1))
        for (b, k), p in last.items():
            later = [c for c in runs_of[b] if pos.get(c, -1) > p]
            if later:
                out.setdefault(mid, {})[(b, k)] = min(later, key=lambda c: pos.get(c, -1))
    return out


def retire_series_gone(session: Session, gone: SeriesGone, judged: set[int]) -> list[int]:
    """Open alerts not judged this run (``judged``: their regression ids) of a series gone from its machine
    (:func:`series_gone`) retire, closed at the commit it is gone at. Returns the ids it retired."""
    retired: list[int] = []
    for mid, series in gone.items():
        for reg in session.execute(
            select(Regression).where(
                Regression.machine_id == mid,
                Regression.status.in_(OPEN_STATUSES),
                Regression.benchmark_id.in_(sorted({b for b, _ in series})),
            )
        ).scalars():
            at = series.get((int(reg.benchmark_id), str(reg.params_key)))
            if at is not None and reg.id not in judged:
                reg.status, reg.close_reason, reg.closed_commit_id = RETIRED, policy.SERIES_GONE, at
                retired.append(reg.id)
    return retired


def retire_gone(session: Session, gone: Gone, judged: set[int]) -> list[int]:
    """Step 8: open alerts not judged this run (``judged``: their regression ids) whose benchmark is gone from
    their machine retire, closed at the commit it is gone at (judged ones were retired with their verdict, at
    the same commit); one retired as gone before is stamped again where its benchmark is gone now. Returns the
    ids of the alerts it retired."""
    retired: list[int] = []
    for mid, benchmarks in gone.items():
        if not benchmarks:
            continue
        for reg in session.execute(
            select(Regression).where(
                Regression.machine_id == mid,
                _open_or_gone(),
                Regression.benchmark_id.in_(sorted(benchmarks)),
            )
        ).scalars():
            if reg.status == RETIRED:  # retired as gone before: only its commit can move
                reg.closed_commit_id = benchmarks[int(reg.benchmark_id)]
            elif reg.id not in judged:
                reg.status, reg.close_reason = RETIRED, policy.BENCHMARK_GONE
                reg.closed_commit_id = benchmarks[int(reg.benchmark_id)]
                retired.append(reg.id)
    return retired
