"""Database glue of regression detection: the pipeline that turns the store's series into alerts.

``detect_store`` runs named steps, each a function of its own, tested alone (tests/regressions/
test_pipeline.py):

1. :func:`scope`: which series to examine (``Meta['regressions.watermark']``: the highest ``Result.id``
   examined and the settings used; a later run re-examines only series with newer results, over their
   last ``lookback`` commits; other settings or rules examine everything again);
2. :func:`load_units`: their runs, pooled per commit, one unit per segment (asv version) of a series;
3. :func:`find_steps`: change points of every unit (:mod:`regressions.detect`); a new version whose first
   runs sit at the old version's level is measured against that level;
4. :func:`judge_unit`: stored alerts matched to the steps, and every alert's verdict from its segment's
   runs (:mod:`regressions.policy`, the one place of the status rules), ended segments retired;
5. :func:`write_verdicts`: new alerts created, statuses and numbers written;
6. :func:`assign_groups` and :func:`judge_groups`: alert groups, and members decided together;
7. :func:`retire_gone`: open alerts of benchmarks that no longer run.

The algorithms never see the database; this module is the only place that reads and writes it for them
(result values read and pooled through regressions.results). Sessions are the caller's.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from db.models import AlertGroup, Benchmark, Commit, Machine, Meta, Regression, Result, Run, commit_order, utcnow
from regressions import policy
from regressions.config import Settings
from regressions.detect import DEFAULT_PARAMS, DetectorParams, SeriesDetection, Step, detect_many
from regressions.direction import direction_for, is_provenance
from regressions.listing import alert_columns, regressions_frame
from regressions.policy import OPEN_STATUSES, RETIRED, TRANSIENT, Verdict
from regressions.results import Key, UsageError, commit_positions, load_values, per_commit

__all__ = ["OPEN_STATUSES", "DetectSummary", "alert_columns", "detect_store", "regressions_frame"]

WATERMARK_KEY = "regressions.watermark"
DEFAULT_LOOKBACK = 100
# Bumped when detection's rules change, so the next run re-examines every series (and groups old flags).
_RULES_VERSION = 3
Benchmarks = dict[int, tuple[str, str | None]]  # benchmark id -> (name, unit)
# What a run did to an alert, by the status it moved to (flagged: created by this run).
_EVENT_OF = {policy.NEW: "confirmed", TRANSIENT: "transient", policy.FIXED: "fixed", RETIRED: "retired"}


@dataclass
class DetectSummary:
    series_examined: int = 0
    new: list[int] = field(default_factory=list)  # ids of regressions flagged by this run (any status)
    confirmed: list[int] = field(default_factory=list)  # existing ones that became new (confirmed or reopened)
    transient: list[int] = field(default_factory=list)  # existing ones refuted by this run
    fixed: list[int] = field(default_factory=list)  # existing ones marked fixed by this run
    retired: list[int] = field(default_factory=list)  # existing ones closed: segment ended or benchmark gone
    reopened: list[int] = field(default_factory=list)  # fixed or retired ones open again (the data says so)
    updated: list[int] = field(default_factory=list)  # open ones whose before/after/ratio/p moved
    groups: list[int] = field(default_factory=list)  # alert groups created by this run
    alerting: list[int] = field(default_factory=list)  # flagged or confirmed by this run and now new
    flagged_status: dict[str, int] = field(default_factory=dict)  # status of the flagged ones, counted
    incremental: bool = False
    seconds: float = 0.0

    def events(self) -> dict[int, str]:
        """What this run did to each regression it touched: flagged, confirmed, transient, fixed, retired,
        reopened (one event per id: the list it is in)."""
        out: dict[int, str] = {}
        for name in ("new", "confirmed", "transient", "fixed", "retired", "reopened"):
            for i in getattr(self, name):
                out.setdefault(i, "flagged" if name == "new" else name)
        return out

    def to_json(self) -> dict[str, Any]:
        """The counts of this run, as `detect --json` gives them."""
        return {
            "mode": "incremental" if self.incremental else "full",
            "series_examined": self.series_examined,
            "flagged": len(self.new),
            "flagged_by_status": dict(self.flagged_status),
            "confirmed": len(self.confirmed),
            "transient": len(self.transient),
            "fixed": len(self.fixed),
            "retired": len(self.retired),
            "reopened": len(self.reopened),
            "updated": len(self.updated),
            "new_groups": len(self.groups),
            "seconds": round(self.seconds, 3),
        }


# --- 1. scope -----------------------------------------------------------------------------------------


@dataclass
class Scope:
    """What one detection examines: machines (None: all), series (None: all of them), per-machine
    windows of commit ids (None: whole history), whether it is incremental, and the watermark to write."""

    machine_ids: list[int] | None
    series: set[Key] | None
    windows: dict[int, list[int] | None] | None
    incremental: bool
    state: dict[str, Any]


def _settings_fingerprint(settings: Settings, params: DetectorParams, lookback: int) -> str:
    blob = json.dumps(
        [settings.default_threshold, settings.thresholds, settings.directions, repr(params), lookback, _RULES_VERSION],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def scope(session: Session, fingerprint: str, *, machine: str | None, full: bool, lookback: int) -> Scope:
    """Step 1: full (every series, whole history) or incremental (series with results newer than the
    watermark, over their machine's ``lookback`` newest commits)."""
    machine_ids: list[int] | None = None
    if machine is not None:
        mid = session.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()
        if mid is None:
            raise UsageError(f"--machine: no machine named {machine!r} in the store")
        machine_ids = [mid]
    meta = session.get(Meta, WATERMARK_KEY)
    state: dict[str, Any] = dict(meta.value) if meta is not None and isinstance(meta.value, dict) else {}
    max_id = session.execute(select(func.max(Result.id))).scalar_one() or 0
    new_state = {"result_id": int(max_id), "fingerprint": fingerprint}
    if full or machine is not None or state.get("fingerprint") != fingerprint or "result_id" not in state:
        return Scope(machine_ids, None, None, False, new_state)
    rows = session.execute(
        select(Result.benchmark_id, Result.params_key, Run.machine_id)
        .join(Run, Result.run_id == Run.id)
        .where(Result.id > int(state["result_id"]))
        .distinct()
    ).all()
    series = {(int(b), str(p), int(m)) for b, p, m in rows}
    machine_ids = sorted({m for _, _, m in series})
    return Scope(machine_ids, series, _lookback_windows(session, machine_ids, lookback), True, new_state)


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
    By rank, not by date: commits sharing a date can neither push the window past ``lookback`` nor fall
    out of it by chance."""
    out: dict[int, list[int] | None] = {}
    for mid in machine_ids:
        ids = _newest_commits(session, mid, lookback + 1)
        out[mid] = ids[:lookback] if len(ids) > lookback else None
    return out


# --- 2. load --------------------------------------------------------------------------------------------


@dataclass
class Unit:
    """One segment (asv version) of one series: its commits (positions in history, oldest first), the
    median of each commit's runs, every run's value per position, and how it is judged. ``ended_at``: the
    position of the next version's first run (None: the segment is the series' newest)."""

    key: Key
    positions: np.ndarray
    values: np.ndarray
    runs: dict[int, list[float]]
    threshold: float
    direction: str
    ended_at: int | None = None
    previous: Unit | None = None  # the segment before it, when loaded


def _benchmarks(session: Session) -> Benchmarks:
    rows = session.execute(select(Benchmark.id, Benchmark.name, Benchmark.unit))
    return {int(bid): (name, unit) for bid, name, unit in rows}


def _provenance_ids(bench: Benchmarks) -> list[int]:
    """Benchmarks that record kernel configs (``is_provenance``): not performance, never examined or counted."""
    return [bid for bid, (name, _unit) in bench.items() if is_provenance(name)]


def load_units(session: Session, sc: Scope, pos: dict[int, int], bench: Benchmarks, settings: Settings) -> list[Unit]:
    """Step 2: the units of the series in scope, in (series, segment) order."""
    if sc.series is not None and not sc.series:
        return []
    runs = load_values(session, machine_ids=sc.machine_ids, series=sc.series, windows=sc.windows)
    runs = runs[~runs["benchmark_id"].isin(_provenance_ids(bench))]
    runs = runs.assign(pos=runs["commit_id"].map(pos))
    if sc.windows is not None:
        inside = {(m, c) for m, ids in sc.windows.items() if ids is not None for c in ids}
        whole = {m for m, ids in sc.windows.items() if ids is None}
        keep = [m in whole or (m, c) in inside for m, c in zip(runs["machine_id"], runs["commit_id"], strict=True)]
        runs = runs[np.asarray(keep, dtype=bool)]
    if runs.empty:
        return []
    df = per_commit(runs)
    keys = ["benchmark_id", "params_key", "machine_id"]
    by_run = {k: g for k, g in runs.groupby(keys, sort=False)}
    units: list[Unit] = []
    for (bid, pkey, mid, _seg), g in df.groupby([*keys, "segment"], sort=True):
        key = (int(bid), str(pkey), int(mid))
        name, unit = bench.get(key[0], (str(bid), None))
        positions = g["pos"].to_numpy()
        mine = by_run[key]
        mine = mine[(mine["pos"] >= positions[0]) & (mine["pos"] <= positions[-1])]
        per_pos: dict[int, list[float]] = {}
        for p, v in zip(mine["pos"].to_numpy(), mine["value"].to_numpy(), strict=True):
            per_pos.setdefault(int(p), []).append(float(v))
        u = Unit(key, positions, g["value"].to_numpy(dtype=float), per_pos, settings.threshold_for(name),
                 direction_for(name, unit, settings))  # fmt: skip
        if units and units[-1].key == key:
            units[-1].ended_at = int(positions[0])
            u.previous = units[-1]
        units.append(u)
    return units


# --- 3. find --------------------------------------------------------------------------------------------


@dataclass
class Found:
    """A unit's detection: steps with indices into the unit (a joined previous level shifted away)."""

    steps: list[Step]
    levels: list[tuple[int, int, float]]  # (first, last index, level) within the unit
    parent_positions: list[int | None]  # per step: position of the last commit at the old level


def _joinable(u: Unit, prev: SeriesDetection, params: DetectorParams) -> bool:
    """A new version whose first run sits at the old version's last level (within half the threshold and
    three noise sigmas) continues that level: the old level may serve as its level before."""
    if u.previous is None or not prev.levels or u.values.size == 0:
        return False
    last = prev.levels[-1][2]
    tolerance = max(0.5 * math.log1p(u.threshold), 3.0 * (prev.noise if math.isfinite(prev.noise) else 0.0))
    return abs(math.log(u.values[0]) - math.log(last)) <= tolerance


def find_steps(units: list[Unit], params: DetectorParams = DEFAULT_PARAMS) -> list[Found]:
    """Step 3: change points of every unit. A unit whose first run sits at the previous version's last
    level is detected again with that level's runs (up to ``level_window``) before it: a step at its
    second run is then found; a change point at the version boundary itself is never a regression."""
    first = detect_many([u.values for u in units], [u.threshold for u in units], [u.direction for u in units], params)
    index = {id(u): i for i, u in enumerate(units)}
    joined: dict[int, int] = {}  # unit index -> runs of the previous level put before it
    series: list[np.ndarray] = []
    for i, u in enumerate(units):
        prev = units[index[id(u.previous)]] if u.previous is not None else None
        if prev is not None and _joinable(u, first[index[id(prev)]], params):
            a, _b, _level = first[index[id(prev)]].levels[-1]
            tail = prev.values[max(a, prev.values.size - params.level_window) :]
            joined[i] = tail.size
            series.append(np.concatenate([tail, u.values]))
    again = iter(
        detect_many(series, [units[i].threshold for i in joined], [units[i].direction for i in joined], params)
    )
    out = []
    for i, u in enumerate(units):
        k = joined.get(i, 0)
        result = next(again) if i in joined else first[i]
        prefix_pos = units[index[id(u.previous)]].positions[-k:] if k else np.empty(0, dtype=np.int64)
        all_pos = np.concatenate([prefix_pos, u.positions])
        steps = [
            Step(**{**s.__dict__, "index": s.index - k, "parent_index": None})
            for s in result.steps
            if s.index > k  # at the boundary (k) or inside the old version: not this segment's step
        ]
        parents = [
            int(all_pos[s.parent_index]) if s.parent_index is not None else None for s in result.steps if s.index > k
        ]
        levels = [(max(a - k, 0), b - k, lv) for a, b, lv in result.levels if b >= k]
        out.append(Found(steps, levels, parents))
    return out


# --- 4. judge -------------------------------------------------------------------------------------------


@dataclass
class Judged:
    """One alert of a unit after judging: its stored row (None: a step to flag), the step it matches
    (None: the detector no longer sees it), its verdict and the positions it refers to."""

    unit: Unit
    reg: Regression | None
    step: Step | None
    parent_pos: int | None
    verdict: Verdict
    old_status: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.old_status = self.reg.status if self.reg is not None else None


def _match(step_runs: list[int], stored: list[tuple[int, Regression]]) -> dict[int, Regression]:
    """Steps (run indices) to stored regressions (run index, row), one to one, nearest first, within
    SAME_STEP_RUNS runs; a transient one only at its own run (a later real step near a refuted spike is
    a step of its own). Two close steps each keep their own regression."""
    pairs = sorted(
        (abs(s - r), i, j)
        for i, s in enumerate(step_runs)
        for j, (r, reg) in enumerate(stored)
        if abs(s - r) <= (0 if reg.status == TRANSIENT else policy.SAME_STEP_RUNS)
    )
    out: dict[int, Regression] = {}
    used: set[int] = set()
    for _d, i, j in pairs:
        if i not in out and j not in used:
            out[i] = stored[j][1]
            used.add(j)
    return out


def _position(u: Unit, index: int | None) -> int | None:
    return None if index is None else int(u.positions[index])


def judge_unit(u: Unit, found: Found, stored: list[Regression], pos: dict[int, int]) -> list[Judged]:
    """Step 4: the unit's steps matched to its stored alerts, and each alert's verdict from the unit's runs
    from its commit on (``policy.judge``); an ended segment retires what is still open."""
    mine = [
        (int(np.searchsorted(u.positions, pos[r.commit_id])), r)
        for r in stored
        if u.positions[0] <= pos.get(r.commit_id, -1) <= u.positions[-1]
    ]
    steps = [s for s in found.steps if s.regression]
    parents = [p for s, p in zip(found.steps, found.parent_positions, strict=True) if s.regression]
    matched = _match([s.index for s in steps], mine)
    seen = {id(r) for r in matched.values()}
    out: list[Judged] = []
    todo = [(i, s, matched.get(i), p) for i, (s, p) in enumerate(zip(steps, parents, strict=True))]
    todo += [(at, None, r, None) for at, r in mine if id(r) not in seen]
    for i, step, reg, parent in todo:
        at = step.index if step is not None else i
        before = step.before if step is not None else reg.before  # type: ignore[union-attr]
        runs = [(int(p), u.runs.get(int(p), [])) for p in u.positions[at:]]
        verdict = policy.judge(
            before,
            runs,
            threshold=u.threshold,
            direction=u.direction,
            still_seen=step is not None,
            level_back_at=_position(
                u, policy.level_back(found.levels, at, before, threshold=u.threshold, direction=u.direction)
            ),
        )
        if u.ended_at is not None:
            verdict = policy.retire(verdict, policy.SEGMENT_ENDED, u.ended_at)
        if reg is None and verdict.status == TRANSIENT:
            continue  # refuted before it was ever listed: nothing to flag
        out.append(Judged(u, reg, step, parent, verdict))
    return out


# --- 5. write -------------------------------------------------------------------------------------------


def _numbers(reg: Regression, step: Step) -> bool:
    """Before/after/ratio/p and labels of the step as seen now; True when a number moved."""
    moved = any(
        not math.isclose(getattr(reg, k) or 0.0, v, rel_tol=1e-9)
        for k, v in (("before", step.before), ("after", step.after), ("ratio", step.ratio))
    )
    reg.before, reg.after, reg.ratio, reg.p_value = step.before, step.after, step.ratio, step.p_value
    reg.labels = list(step.labels)
    return moved


def create_alerts(session: Session, judged: list[Judged], commit_at: np.ndarray, summary: DetectSummary) -> None:
    """Step 5: a row for each new step (its status the verdict's; written again by :func:`apply`), and the
    numbers of every step seen again brought up to date (open or closed, never an ignored one)."""
    for j in judged:
        reg, step, u = j.reg, j.step, j.unit
        if reg is not None:
            if step is not None and reg.status != policy.IGNORED and _numbers(reg, step):
                summary.updated.append(reg.id)
            continue
        assert step is not None
        p = int(u.positions[step.index])
        j.reg = Regression(
            benchmark_id=u.key[0], params_key=u.key[1], params=json.loads(u.key[1]), machine_id=u.key[2],
            commit_id=int(commit_at[p]),
            parent_commit_id=None if j.parent_pos is None else int(commit_at[j.parent_pos]),
            before=step.before, after=step.after, ratio=step.ratio, direction=u.direction,
            status=j.verdict.status, p_value=step.p_value, labels=list(step.labels), detected_at=utcnow(),
        )  # fmt: skip
        session.add(j.reg)
    session.flush()


def _event(old: str, new: str) -> str | None:
    """What moving an existing alert from ``old`` to ``new`` is called in the summary."""
    if old == new:
        return None
    if new == policy.NEW and old == policy.SUSPECT:
        return "confirmed"
    if new in OPEN_STATUSES:
        return "reopened"
    return {TRANSIENT: "transient", policy.FIXED: "fixed", RETIRED: "retired"}.get(new)


def apply(judged: list[Judged], verdicts: list[Verdict], commit_at: np.ndarray, summary: DetectSummary) -> None:
    """Step 8: write each final verdict (status, close reason and commit, fixed-at), a person's status kept
    (``policy.after_person``), and count what changed."""
    for j, verdict in zip(judged, verdicts, strict=True):
        reg = j.reg
        assert reg is not None
        old = j.old_status
        v = verdict if old is None else policy.after_person(old, verdict)
        reg.status = v.status
        closed = v.status not in OPEN_STATUSES and v.status != policy.IGNORED
        reg.close_reason = v.reason if closed else (reg.close_reason if v.status == policy.IGNORED else None)
        if v.status != policy.IGNORED:
            reg.closed_commit_id = int(commit_at[v.closed_at]) if closed and v.closed_at is not None else None
            reg.fixed_commit_id = reg.closed_commit_id if v.status == policy.FIXED else None
        if old is None:
            summary.new.append(reg.id)
            summary.flagged_status[v.status] = summary.flagged_status.get(v.status, 0) + 1
        elif (event := _event(old, v.status)) is not None:
            getattr(summary, event).append(reg.id)


# --- 6. groups ------------------------------------------------------------------------------------------


def assign_groups(session: Session, regs: list[Regression], pos: dict[int, int], summary: DetectSummary) -> set[int]:
    """Step 6: put each regression into the group of its machine whose commit range its own range
    ``(parent, commit]`` overlaps most (``policy.best_group``; the group's range narrows to the overlap),
    else into a new group. Returns the ids of the groups that changed."""
    touched: set[int] = set()

    def span(parent_id: int | None, commit_id: int) -> tuple[int, int]:
        c = pos[commit_id]
        return (pos[parent_id] if parent_id is not None and parent_id in pos else c - 1), c

    for mid in sorted({r.machine_id for r in regs}):
        mine = sorted((r for r in regs if r.machine_id == mid), key=lambda r: (pos[r.commit_id], r.id))
        lowest = min(span(r.parent_commit_id, r.commit_id)[0] for r in mine)
        groups = [
            g
            for g in session.execute(select(AlertGroup).where(AlertGroup.machine_id == mid)).scalars()
            if pos.get(g.commit_id, -1) > lowest
        ]
        for reg in mine:
            lo, hi = span(reg.parent_commit_id, reg.commit_id)
            i = policy.best_group((lo, hi), [span(g.parent_commit_id, g.commit_id) for g in groups])
            if i is None:
                best = AlertGroup(machine_id=mid, commit_id=reg.commit_id, parent_commit_id=reg.parent_commit_id,
                                  machine_wide=False, series=0, created_at=utcnow())  # fmt: skip
                session.add(best)
                session.flush()
                groups.append(best)
                summary.groups.append(best.id)
            else:
                best = groups[i]
                glo, ghi = span(best.parent_commit_id, best.commit_id)
                if hi < ghi:
                    best.commit_id = reg.commit_id
                if lo > glo:
                    best.parent_commit_id = reg.parent_commit_id
            reg.group_id = best.id
            touched.add(best.id)
    session.flush()
    return touched


def count_groups(session: Session, group_ids: set[int], provenance: list[int]) -> None:
    """Recount each group's series base (series measured on its machine at its commit) and decide whether
    it is machine-wide (``policy.is_machine_wide``)."""
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
        g.series = counts.get((g.machine_id, g.commit_id), 0)
        g.machine_wide = policy.is_machine_wide(int(members.get(g.id, 0)), g.series)


def judge_groups(session: Session, judged: list[Judged]) -> list[Verdict]:
    """Step 7: the verdicts of members of one group decided together (``policy.group_verdicts``, with the
    stored statuses of the members not examined now)."""
    out = [j.verdict for j in judged]
    by_group: dict[int, list[int]] = {}
    for i, j in enumerate(judged):
        if j.reg is not None and j.reg.group_id is not None:
            by_group.setdefault(j.reg.group_id, []).append(i)
    for gid, idx in by_group.items():
        group = session.get(AlertGroup, gid)
        here = {id(judged[i].reg) for i in idx}
        peers = [r.status for r in (group.regressions if group is not None else []) if id(r) not in here]
        decided = policy.group_verdicts([out[i] for i in idx], peers, bool(group is not None and group.machine_wide))
        for i, v in zip(idx, decided, strict=True):
            out[i] = v
    return out


# --- 9. benchmarks gone ---------------------------------------------------------------------------------


def _gone(session: Session, machine_ids: list[int], bench: Benchmarks) -> dict[int, tuple[int, set[int]]]:
    """Per machine: its newest commit and the benchmarks that no longer run there (missing from that
    commit while other benchmarks of their asv module ran there; a module missing altogether is a partial
    ``asv run --bench``, a missing parameter combination a grid subset: neither counts)."""
    out: dict[int, tuple[int, set[int]]] = {}
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
        gone = {b for b, (name, _u) in bench.items() if b not in present and name.split(".", 1)[0] in modules}
        out[mid] = newest, gone
    return out


def retire_gone(
    session: Session, gone: dict[int, tuple[int, set[int]]], judged: list[Judged], summary: DetectSummary
) -> None:
    """Step 9: open alerts not judged this run whose benchmark no longer runs on their machine retire."""
    here = {id(j.reg) for j in judged}
    for mid, (newest, benchmarks) in gone.items():
        if not benchmarks:
            continue
        for reg in session.execute(
            select(Regression).where(
                Regression.machine_id == mid,
                Regression.status.in_(OPEN_STATUSES),
                Regression.benchmark_id.in_(sorted(benchmarks)),
            )
        ).scalars():
            if id(reg) not in here:
                reg.status, reg.close_reason, reg.closed_commit_id = RETIRED, policy.BENCHMARK_GONE, newest
                summary.retired.append(reg.id)


# --- the pipeline ---------------------------------------------------------------------------------------


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
    """Detect steps in the store's series and record alerts (idempotent). The caller commits.

    The steps of the module docstring, in order; docs/detection.md has the rules."""
    start = time.perf_counter()
    settings = settings or Settings()
    summary = DetectSummary()
    sc = scope(session, _settings_fingerprint(settings, params, lookback), machine=machine, full=full,
               lookback=lookback)  # fmt: skip
    summary.incremental = sc.incremental
    pos = commit_positions(session)
    commit_at = np.array(list(pos), dtype=np.int64)  # the dict is in history order: commit id at each position
    bench = _benchmarks(session)
    units = load_units(session, sc, pos, bench, settings)
    if progress:
        print(f"detect: examining {len(units)} series segments", flush=True)
    summary.series_examined = len({u.key for u in units})
    stored: dict[Key, list[Regression]] = {}
    if units:
        for reg in _stored(session, {u.key for u in units}):
            stored.setdefault((reg.benchmark_id, reg.params_key, reg.machine_id), []).append(reg)
    judged = [
        j for u, found in zip(units, find_steps(units, params), strict=True)
        for j in judge_unit(u, found, stored.get(u.key, []), pos)
    ]  # fmt: skip
    considered = sc.machine_ids if sc.machine_ids is not None else list(session.execute(select(Machine.id)).scalars())
    gone = _gone(session, [int(m) for m in considered], bench)
    for j in judged:
        newest, benchmarks = gone.get(j.unit.key[2], (None, set()))
        if j.unit.key[0] in benchmarks and j.unit.ended_at is None:
            j.verdict = policy.retire(j.verdict, policy.BENCHMARK_GONE, pos.get(newest or -1))
    create_alerts(session, judged, commit_at, summary)
    ungrouped = [j.reg for j in judged if j.reg is not None and j.reg.group_id is None]
    count_groups(session, assign_groups(session, ungrouped, pos, summary), _provenance_ids(bench))
    apply(judged, judge_groups(session, judged), commit_at, summary)
    retire_gone(session, gone, judged, summary)
    session.flush()
    summary.alerting = [
        j.reg.id
        for j in judged
        if j.reg is not None and j.reg.status == policy.NEW and j.reg.id in (*summary.new, *summary.confirmed,
                                                                              *summary.reopened)
    ]  # fmt: skip
    if machine is None:
        meta = session.get(Meta, WATERMARK_KEY)
        state = {**sc.state, "updated": utcnow().isoformat()}
        if meta is None:
            session.add(Meta(key=WATERMARK_KEY, value=state))
        else:
            meta.value = state
    session.flush()
    summary.seconds = time.perf_counter() - start
    return summary


def _stored(session: Session, series: set[Key]) -> list[Regression]:
    """The stored regressions of ``series``."""
    keys = sorted(series)
    out: list[Regression] = []
    for i in range(0, len(keys), 500):  # bounded IN lists
        out += session.execute(
            select(Regression).where(
                tuple_(Regression.benchmark_id, Regression.params_key, Regression.machine_id).in_(keys[i : i + 500])
            )
        ).scalars()
    return out
