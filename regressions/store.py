"""Database glue of regression detection: load series, store regressions, keep the watermark.

The algorithms (regressions.detect, regressions.compare) never see the database; this module is the
only place that reads and writes it for them (result values read and pooled through
regressions.results, as history noise reads them). Sessions are the caller's.

Incremental detection: ``Meta['regressions.watermark']`` holds the highest ``Result.id`` examined and
the settings used. A later run re-examines only the series with newer results, over their last
``lookback`` commits (the store's older data cannot hold a new step of those series that a window of
that size would miss), and a run with other settings examines everything again.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from db.models import (
    AlertGroup,
    Benchmark,
    Commit,
    Machine,
    Meta,
    Regression,
    Result,
    Run,
    commit_order,
    utcnow,
)
from db.provenance import is_provenance
from regressions.config import Settings
from regressions.detect import (
    CONFIRMED,
    DEFAULT_PARAMS,
    RETURNS_TO_EARLIER_LEVEL,
    SUSPECT,
    TRANSIENT,
    DetectorParams,
    detect_many,
    verdict_counts,
)
from regressions.direction import direction_for, slowdown
from regressions.results import Key, UsageError, commit_positions, load_values, per_commit

WATERMARK_KEY = "regressions.watermark"
DEFAULT_LOOKBACK = 100
RETIRED = "retired"
# Listed by default and closed as retired when their series stops running.
OPEN_STATUSES = ("suspect", "new", "acknowledged")
# Confirmed and still open: a later level back within the threshold marks these fixed.
FIXABLE_STATUSES = ("new", "acknowledged")
# A step found again within this many runs of a stored one is the same step seen with more data.
SAME_STEP_RUNS = 3
# A group is machine-wide when it holds more than this share of the series measured on its machine at its
# commit, and at least MACHINE_WIDE_MIN of them (two series moving together say little).
MACHINE_WIDE_SHARE = 0.5
MACHINE_WIDE_MIN = 3
# Runs at the new level, each worse by the threshold, that confirm a member of a refuted machine-wide
# group on its own (or reopen a transient one).
MACHINE_WIDE_CONFIRM = 3
# Bumped when detection's rules change, so the next run re-examines every series (and groups old flags).
_RULES_VERSION = 2
Benchmarks = dict[int, tuple[str, str | None]]  # benchmark id -> (name, unit)


@dataclass
class DetectSummary:
    series_examined: int = 0
    new: list[int] = field(default_factory=list)  # ids of regressions flagged by this run (suspect or new)
    confirmed: list[int] = field(default_factory=list)  # suspect -> new in this run
    transient: list[int] = field(default_factory=list)  # suspect -> transient in this run
    fixed: list[int] = field(default_factory=list)  # ids marked fixed by this run
    retired: list[int] = field(default_factory=list)  # open ones closed because their series stopped
    groups: list[int] = field(default_factory=list)  # alert groups created by this run
    alerting: list[int] = field(default_factory=list)  # confirmed new regressions of this run (flagged or confirmed)
    incremental: bool = False
    seconds: float = 0.0

    def events(self) -> dict[int, str]:
        """What this run did to each regression it touched: flagged, confirmed, transient, fixed, retired."""
        out: dict[int, str] = {}
        for name, ids in (
            ("flagged", self.new),
            ("confirmed", self.confirmed),
            ("transient", self.transient),
            ("fixed", self.fixed),
            ("retired", self.retired),
        ):
            for i in ids:
                out.setdefault(i, name)
        return out


def _settings_fingerprint(settings: Settings, params: DetectorParams, lookback: int) -> str:
    blob = json.dumps(
        [
            settings.default_threshold,
            settings.thresholds,
            settings.directions,
            repr(params),
            lookback,
            _RULES_VERSION,
        ],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _benchmarks(session: Session) -> Benchmarks:
    """Every benchmark's name and unit, read once per detection."""
    rows = session.execute(select(Benchmark.id, Benchmark.name, Benchmark.unit))
    return {int(bid): (name, unit) for bid, name, unit in rows}


def _provenance_ids(bench: Benchmarks) -> list[int]:
    """Benchmarks that record kernel configs (``is_provenance``): not performance, never examined or counted."""
    return [bid for bid, (name, _unit) in bench.items() if is_provenance(name)]


def _newest_commits(session: Session, machine_id: int, limit: int) -> list[int]:
    """Ids of the machine's ``limit`` newest commits (those it has runs at), newest first (``commit_order``)."""
    ids = session.execute(
        select(Commit.id)
        .where(Commit.id.in_(select(Run.commit_id).where(Run.machine_id == machine_id)))
        .order_by(*commit_order(descending=True))
        .limit(limit)
    ).scalars()
    return [int(i) for i in ids]


def _lookback_windows(session: Session, machine_ids: Iterable[int], lookback: int) -> dict[int, list[int] | None]:
    """Per machine, the ids of its ``lookback`` newest commits in history order (None: it has no more).

    By rank, not by date: commits sharing a date can neither push the window past ``lookback`` nor
    fall out of it by chance.
    """
    out: dict[int, list[int] | None] = {}
    for mid in machine_ids:
        ids = _newest_commits(session, mid, lookback + 1)
        out[mid] = ids[:lookback] if len(ids) > lookback else None
    return out


def _existing_regressions(session: Session, series: set[Key] | None) -> list[Regression]:
    stmt = select(Regression)
    if series is not None:
        if not series:
            return []
        stmt = stmt.where(
            tuple_(Regression.benchmark_id, Regression.params_key, Regression.machine_id).in_(list(series))
        )
    return list(session.execute(stmt).scalars().all())


def _match(step_runs: list[int], stored: list[tuple[int, Regression]]) -> dict[int, Regression]:
    """Steps (run indices) to stored regressions (run index, row), one to one, nearest first, within
    SAME_STEP_RUNS runs; a transient one only at its own run (a later real step near a refuted spike is
    a step of its own). Two close steps each keep their own regression."""
    pairs = sorted(
        (abs(s - r), i, j)
        for i, s in enumerate(step_runs)
        for j, (r, reg) in enumerate(stored)
        if abs(s - r) <= (0 if reg.status == TRANSIENT else SAME_STEP_RUNS)
    )
    out: dict[int, Regression] = {}
    used: set[int] = set()
    for _d, i, j in pairs:
        if i not in out and j not in used:
            out[i] = stored[j][1]
            used.add(j)
    return out


@dataclass
class _Pending:
    """A regression awaiting a verdict (a suspect, or a transient one the detector sees again): its
    measurements are every run of its series from its commit on."""

    reg: Regression
    key: Key
    still_found: bool  # the detector still sees the step this run
    threshold: float


def detect_store(
    session: Session,
    settings: Settings | None = None,
    *,
    machine: str | None = None,
    full: bool = False,
    lookback: int = DEFAULT_LOOKBACK,
    params: DetectorParams = DEFAULT_PARAMS,
    progress: bool = False,
) -> DetectSummary:
    """Detect steps in the store's series and record regressions (idempotent). The caller commits.

    Steps become regressions at the commit where they begin (``suspect`` while their new level is only
    the newest run, else ``new``), grouped per machine and commit range; suspects are confirmed or
    refuted by later runs and re-runs; confirmed ones are marked fixed when a later level comes back;
    open ones of series that stopped running are retired. docs/detection.md has the rules.
    """
    import time

    start = time.perf_counter()
    settings = settings or Settings()
    summary = DetectSummary()
    machine_ids: list[int] | None = None
    if machine is not None:
        mid = session.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()
        if mid is None:
            raise UsageError(f"--machine: no machine named {machine!r} in the store")
        machine_ids = [mid]

    fingerprint = _settings_fingerprint(settings, params, lookback)
    meta = session.get(Meta, WATERMARK_KEY)
    state: dict[str, Any] = dict(meta.value) if meta is not None and isinstance(meta.value, dict) else {}
    max_id = session.execute(select(func.max(Result.id))).scalar_one() or 0
    incremental = not full and machine is None and state.get("fingerprint") == fingerprint and "result_id" in state
    series: set[Key] | None = None
    windows: dict[int, list[int] | None] | None = None
    if incremental:
        rows = session.execute(
            select(Result.benchmark_id, Result.params_key, Run.machine_id)
            .join(Run, Result.run_id == Run.id)
            .where(Result.id > int(state["result_id"]))
            .distinct()
        ).all()
        series = {(int(b), str(p), int(m)) for b, p, m in rows}
        machine_ids = sorted({m for _, _, m in series})
        windows = _lookback_windows(session, machine_ids, lookback)
        summary.incremental = True
    considered = (
        machine_ids if machine_ids is not None else [int(m) for m in session.execute(select(Machine.id)).scalars()]
    )

    pos = commit_positions(session)
    bench = _benchmarks(session)
    commit_at = np.array(list(pos), dtype=np.int64)  # the dict is in history order: commit id at each position
    if series is not None and not series:
        runs = pd.DataFrame(
            columns=["benchmark_id", "params_key", "machine_id", "commit_id", "value", "version", "pos"]
        )
        df = runs
    else:
        runs = load_values(session, machine_ids=machine_ids, series=series, windows=windows)
        runs = runs[~runs["benchmark_id"].isin(_provenance_ids(bench))]
        runs["pos"] = runs["commit_id"].map(pos)
        if windows is not None:
            # Windows per machine (several machines: filtered here rather than in SQL).
            inside = {(m, c) for m, ids in windows.items() if ids is not None for c in ids}
            whole = [m for m, ids in windows.items() if ids is None]
            keep = runs["machine_id"].isin(whole) | pd.Series(
                [(m, c) in inside for m, c in zip(runs["machine_id"], runs["commit_id"], strict=True)],
                index=runs.index,
            )
            runs = runs[keep]
        df = per_commit(runs)

    existing: dict[Key, list[Regression]] = {}
    for reg in _existing_regressions(session, series):
        existing.setdefault((reg.benchmark_id, reg.params_key, reg.machine_id), []).append(reg)
    params_of: dict[tuple[int, str], dict[str, Any]] = {}

    units = (
        list(df.groupby(["benchmark_id", "params_key", "machine_id", "segment"], sort=False)) if not df.empty else []
    )
    names, thresholds, directions = [], [], []
    for (bid, _pkey, _mid, _seg), _g in units:
        name, unit = bench.get(int(bid), (str(bid), None))
        names.append(name)
        directions.append(direction_for(name, unit, settings))
        thresholds.append(settings.threshold_for(name))
    if progress:
        print(f"detect: examining {len(units)} series", flush=True)
    results = detect_many([g["value"].to_numpy() for _, g in units], thresholds, directions, params)
    summary.series_examined = len({u[:3] for u, _ in units})

    pending: list[_Pending] = []
    created: list[Regression] = []
    fixed: list[Regression] = []
    ungrouped: list[Regression] = []
    for ((bid, pkey, mid, _seg), g), result, direction, threshold in zip(
        units, results, directions, thresholds, strict=True
    ):
        positions = g["pos"].to_numpy()
        key = (int(bid), str(pkey), int(mid))
        stored = existing.setdefault(key, [])
        # Stored regressions of this segment, by run index in it.
        mine = [
            (int(np.searchsorted(positions, pos[r.commit_id])), r)
            for r in stored
            if positions[0] <= pos.get(r.commit_id, -1) <= positions[-1]
        ]
        steps = result.regressions
        matched = _match([s.index for s in steps], mine)
        found_now: set[int] = set()  # id() of the rows whose step is seen this run
        for i, step in enumerate(steps):
            reg = matched.get(i)
            if reg is None:
                p = int(positions[step.index])
                if key[:2] not in params_of:
                    params_of[key[:2]] = json.loads(pkey)
                reg = Regression(
                    benchmark_id=key[0],
                    params_key=key[1],
                    params=params_of[key[:2]],
                    machine_id=key[2],
                    commit_id=int(commit_at[p]),
                    parent_commit_id=(
                        int(commit_at[positions[step.parent_index]]) if step.parent_index is not None else None
                    ),
                    before=step.before,
                    after=step.after,
                    ratio=step.ratio,
                    direction=direction,
                    status=CONFIRMED if step.confirmed else SUSPECT,
                    p_value=step.p_value,
                    labels=list(step.labels),
                    detected_at=utcnow(),
                )
                session.add(reg)  # flushed once, after the loop
                stored.append(reg)
                mine.append((step.index, reg))
                created.append(reg)
            elif list(reg.labels or []) != list(step.labels) and reg.status in OPEN_STATUSES:
                reg.labels = list(step.labels)
            found_now.add(id(reg))
            if reg.group_id is None:
                ungrouped.append(reg)
            if reg.status in (SUSPECT, TRANSIENT):
                pending.append(_Pending(reg, key, True, threshold))
        for _run, reg in mine:
            if reg.status == SUSPECT and id(reg) not in found_now:
                pending.append(_Pending(reg, key, False, threshold))
            elif reg.group_id is None and reg not in ungrouped:
                ungrouped.append(reg)
        # Fixed: a later level of the series is back within the threshold of the level before.
        for p_reg, reg in mine:
            if reg.status not in FIXABLE_STATUSES:
                continue
            for first, _last, level in result.levels:
                if first <= p_reg:
                    continue
                if slowdown(level / reg.before, reg.direction) < 1 + threshold:
                    reg.status = "fixed"
                    reg.fixed_commit_id = int(commit_at[positions[first]])
                    fixed.append(reg)
                    break

    session.flush()
    summary.new, summary.fixed = [r.id for r in created], [r.id for r in fixed]
    _update_groups(session, _assign_groups(session, ungrouped, pos, summary), _provenance_ids(bench))
    _confirm(runs, pending, pos, summary)
    _retire(session, considered, bench, summary)
    session.flush()
    summary.alerting = [
        r.id
        for r in session.execute(select(Regression).where(Regression.id.in_(summary.new + summary.confirmed))).scalars()
        if r.status == CONFIRMED
    ]

    state = {"result_id": int(max_id), "fingerprint": fingerprint, "updated": utcnow().isoformat()}
    if machine is None:
        if meta is None:
            session.add(Meta(key=WATERMARK_KEY, value=state))
        else:
            meta.value = state
    session.flush()
    summary.seconds = time.perf_counter() - start
    return summary


def _assign_groups(session: Session, regs: list[Regression], pos: dict[int, int], summary: DetectSummary) -> set[int]:
    """Put each regression into the group of its machine whose commit range its own range
    ``(parent, commit]`` overlaps (the group's range narrows to the overlap), else into a new group.
    Returns the ids of the groups that changed."""
    touched: set[int] = set()
    if not regs:
        return touched

    def span(parent_id: int | None, commit_id: int) -> tuple[int, int]:
        c = pos[commit_id]
        return (pos[parent_id] if parent_id is not None and parent_id in pos else c - 1), c

    for mid in sorted({r.machine_id for r in regs}):
        lowest = min(span(r.parent_commit_id, r.commit_id)[0] for r in regs if r.machine_id == mid)
        groups = [
            g
            for g in session.execute(select(AlertGroup).where(AlertGroup.machine_id == mid)).scalars()
            if pos.get(g.commit_id, -1) > lowest
        ]
        for reg in sorted((r for r in regs if r.machine_id == mid), key=lambda r: (pos[r.commit_id], r.id)):
            lo, hi = span(reg.parent_commit_id, reg.commit_id)
            best, best_overlap = None, 0
            for g in groups:
                glo, ghi = span(g.parent_commit_id, g.commit_id)
                overlap = min(hi, ghi) - max(lo, glo)
                if overlap > best_overlap or (overlap == best_overlap and overlap > 0 and ghi == hi):
                    best, best_overlap = g, overlap
            if best is None:
                best = AlertGroup(
                    machine_id=mid,
                    commit_id=reg.commit_id,
                    parent_commit_id=reg.parent_commit_id,
                    machine_wide=False,
                    series=0,
                    created_at=utcnow(),
                )
                session.add(best)
                session.flush()
                groups.append(best)
                summary.groups.append(best.id)
            else:
                glo, ghi = span(best.parent_commit_id, best.commit_id)
                if hi < ghi:
                    best.commit_id = reg.commit_id
                if lo > glo:
                    best.parent_commit_id = reg.parent_commit_id
            reg.group_id = best.id
            touched.add(best.id)
    session.flush()
    return touched


def _confirm(runs: pd.DataFrame, pending: list[_Pending], pos: dict[int, int], summary: DetectSummary) -> None:
    """Verdicts from every run of a step's new level, re-runs of its commit included (``verdict``).

    - A suspect is confirmed (new) or refuted (transient) by its own runs; one the detector no longer
      sees, re-measured, is transient.
    - Members of a machine-wide group are decided together: when most of the group is refuted, a
      member confirmed by fewer than MACHINE_WIDE_CONFIRM runs is transient too (the machine moved,
      noisy series with it); when most is confirmed, undecided members are confirmed.
    - Elsewhere an undecided member that was re-measured follows the decided members of its group.
    - A transient one whose step the detector still sees after all, confirmed by MACHINE_WIDE_CONFIRM
      runs and more confirming than refuting runs, is reopened (new).
    """
    if not pending:
        return
    tail = runs[runs["pos"] >= min(pos[p.reg.commit_id] for p in pending)]
    by_key = {k: g for k, g in tail.groupby(["benchmark_id", "params_key", "machine_id"], sort=False)}
    own: dict[int, tuple[str, int, int]] = {}  # id -> (verdict, confirming runs, runs)
    for p in pending:
        g = by_key.get(p.key)
        values = [] if g is None else g.loc[g["pos"] >= pos[p.reg.commit_id], "value"].tolist()
        v, confirming = verdict_counts(p.reg.before, values, threshold=p.threshold, direction=p.reg.direction)
        if p.reg.status == TRANSIENT:
            if p.still_found and v == CONFIRMED and confirming >= MACHINE_WIDE_CONFIRM:
                _set(p.reg, CONFIRMED, summary)
            continue
        if v == SUSPECT and not p.still_found and len(values) >= 2:
            v = TRANSIENT
        own[p.reg.id] = (v, confirming, len(values))
    regs = {p.reg.id: p.reg for p in pending if p.reg.id in own}
    for gid in {r.group_id for r in regs.values()}:
        members = [r for r in regs.values() if r.group_id == gid]
        group = members[0].group
        peers = [r for r in (group.regressions if group is not None else []) if r.id not in own]
        votes = Counter(v for v, _c, n in (own[r.id] for r in members) if v != SUSPECT)
        votes[TRANSIENT] += sum(r.status == TRANSIENT for r in peers)
        votes[CONFIRMED] += sum(r.status in (*FIXABLE_STATUSES, "fixed") for r in peers)
        majority = (
            TRANSIENT
            if votes[TRANSIENT] > votes[CONFIRMED]
            else CONFIRMED
            if votes[CONFIRMED] > votes[TRANSIENT]
            else None
        )
        wide = group is not None and group.machine_wide
        for r in members:
            v, confirming, n = own[r.id]
            if wide and majority == TRANSIENT and v == CONFIRMED and confirming < MACHINE_WIDE_CONFIRM:
                v = TRANSIENT
            elif v == SUSPECT and n >= 2 and majority is not None and gid is not None:
                v = majority
            if v != SUSPECT:
                _set(r, v, summary)


def _set(reg: Regression, status: str, summary: DetectSummary) -> None:
    reg.status = status
    (summary.confirmed if status == CONFIRMED else summary.transient).append(reg.id)


def _retire(session: Session, machine_ids: list[int], bench: Benchmarks, summary: DetectSummary) -> None:
    """Close the open regressions of series that no longer run: the benchmark is missing from its
    machine's newest commit while other benchmarks of its module (the asv file) ran there. A module
    missing altogether is a partial run (``asv run --bench``), and a missing parameter combination a
    grid subset (MLAPERF_CONCURRENCY): neither retires anything."""
    for mid in machine_ids:
        newest = next(iter(_newest_commits(session, mid, 1)), None)
        if newest is None:
            continue
        present = set(
            session.execute(
                select(Result.benchmark_id)
                .join(Run, Result.run_id == Run.id)
                .where(Run.machine_id == mid, Run.commit_id == newest)
                .distinct()
            ).scalars()
        )
        modules = {bench[b][0].split(".", 1)[0] for b in present if b in bench}
        for reg in session.execute(
            select(Regression).where(
                Regression.machine_id == mid,
                Regression.status.in_(OPEN_STATUSES),
                Regression.benchmark_id.not_in(present),
            )
        ).scalars():
            if bench.get(reg.benchmark_id, ("",))[0].split(".", 1)[0] in modules:
                reg.status = RETIRED
                summary.retired.append(reg.id)


def _update_groups(session: Session, group_ids: set[int], provenance: list[int]) -> None:
    """Recount each group's series base (series measured on its machine at its commit) and decide
    whether it is machine-wide."""
    if not group_ids:
        return
    groups = list(session.execute(select(AlertGroup).where(AlertGroup.id.in_(group_ids))).scalars())
    members = dict(
        session.execute(
            select(Regression.group_id, func.count(Regression.id))
            .where(Regression.group_id.in_(group_ids))
            .group_by(Regression.group_id)
        ).all()
    )
    # Series measured per (machine, commit) of the groups, in one query.
    measured_series = (
        select(Run.machine_id, Run.commit_id, Result.benchmark_id, Result.params_key)
        .join(Run, Result.run_id == Run.id)
        .where(
            tuple_(Run.machine_id, Run.commit_id).in_(sorted({(g.machine_id, g.commit_id) for g in groups})),
            Result.value.is_not(None),
            Result.benchmark_id.not_in(provenance),
        )
        .distinct()
        .subquery()
    )
    counts = {
        (int(m), int(c)): int(k)
        for m, c, k in session.execute(
            select(measured_series.c.machine_id, measured_series.c.commit_id, func.count()).group_by(
                measured_series.c.machine_id, measured_series.c.commit_id
            )
        )
    }
    for g in groups:
        measured = counts.get((g.machine_id, g.commit_id), 0)
        n = int(members.get(g.id, 0))
        g.series = measured
        g.machine_wide = bool(n >= MACHINE_WIDE_MIN and n > MACHINE_WIDE_SHARE * max(measured, 1))


def regressions_frame(
    session: Session, *, statuses: Iterable[str] | None = None, machine: str | None = None
) -> pd.DataFrame:
    """Stored regressions with names resolved, newest commit first: the columns of ``db.queries.regressions``
    plus :func:`alert_columns` (alert group, the commit range's parent, labels); an unknown machine gives an
    empty frame. ``mlaperf detect --json`` lists these rows (less params_key and message, with sha and
    fixed_sha named commit and fixed_at)."""
    from db import queries

    frame = queries.regressions(session, status=None if statuses is None else list(statuses))
    if machine is not None:
        frame = frame[frame["machine"] == machine]
    # Within one commit, oldest regression first.
    commit_rank = {sha: i for i, sha in enumerate(dict.fromkeys(frame["sha"]))}
    frame = frame.assign(_rank=frame["sha"].map(commit_rank)).sort_values(["_rank", "id"], kind="stable")
    frame = frame.drop(columns=["_rank"]).reset_index(drop=True)
    frame = frame.merge(alert_columns(session, [int(i) for i in frame["id"]]), on="id", how="left")
    # Ints stay ints where some rows have no group (regressions stored before groups existed).
    frame["group"] = pd.Series([None if pd.isna(g) else int(g) for g in frame["group"]], dtype=object)
    return frame


def alert_columns(session: Session, ids: list[int]) -> pd.DataFrame:
    """Per regression id: group, machine_wide, group_size, group_status, parent (sha), labels,
    returns_to_earlier_level."""
    cols = ["id", "group", "machine_wide", "group_size", "group_status", "parent", "labels"]
    if not ids:
        return pd.DataFrame(columns=[*cols, "returns_to_earlier_level"])
    parent = Commit.__table__.alias("parent_commit")
    rows = session.execute(
        select(Regression.id, Regression.group_id, AlertGroup.machine_wide, parent.c.sha, Regression.labels)
        .outerjoin(AlertGroup, AlertGroup.id == Regression.group_id)
        .outerjoin(parent, parent.c.id == Regression.parent_commit_id)
        .where(Regression.id.in_(ids))
    ).all()
    group_ids = {g for _, g, _, _, _ in rows if g is not None}
    member_statuses: dict[int, list[str]] = {}
    for gid, status in session.execute(
        select(Regression.group_id, Regression.status).where(Regression.group_id.in_(group_ids))
    ).all():
        member_statuses.setdefault(int(gid), []).append(status)
    out = pd.DataFrame(
        [
            {
                "id": int(rid),
                "group": None if gid is None else int(gid),
                "machine_wide": bool(wide),
                "group_size": len(member_statuses.get(gid, [])) if gid is not None else 0,
                "group_status": AlertGroup.status_of(member_statuses[gid]) if gid in member_statuses else None,
                "parent": psha,
                "labels": list(labels or []),
            }
            for rid, gid, wide, psha, labels in rows
        ],
        columns=cols,
    )
    out["returns_to_earlier_level"] = [RETURNS_TO_EARLIER_LEVEL in labels for labels in out["labels"]]
    return out
