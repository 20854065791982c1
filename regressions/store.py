"""Database glue of regression detection: the pipeline that turns the store's series into alerts.

``detect_store`` runs named steps, each a function of its own, tested alone (tests/regressions/
test_pipeline.py):

1. ``segments.scope``: which series to examine (``Meta['regressions.watermark']``: the highest
   ``Result.id`` examined and the settings used; a later run re-examines only series with newer results,
   over their last ``lookback`` commits; other settings or rules examine everything again);
2. ``segments.load_units``: their runs, pooled per commit, one unit per segment (asv version);
3. ``segments.find_steps``: change points of every unit (:mod:`regressions.detect`); a new version whose
   first run sits at the old version's level is measured against that level;
4. :func:`one_run_events` and :func:`judge_unit`: one-run events from the data, stored alerts
   matched to the steps, and every alert's verdict from its segment's runs and those of later versions
   joined to its level (:mod:`regressions.policy`, the one place of the status rules), ended segments
   retired, alerts within a raised threshold closed (``below_threshold``), judged alerts of gone
   benchmarks and dropped parameter combinations retired (``retire.benchmarks_gone``, ``retire.series_gone``);
5. :func:`create_alerts`: rows for new steps, numbers of the steps seen again brought up to date;
6. ``groups.assign_groups``: alert groups (``groups.merge_same_range``: two of one range are one);
7. :func:`apply`: the final statuses written (a person's status kept), events counted;
8. ``retire.retire_gone``: open alerts of benchmarks gone from their machine (absent from a full run
   after their last measurement, whatever their module: ``retire.benchmarks_gone``), and
   ``retire.retire_series_gone``: those of series their benchmark runs without (``retire.series_gone``);
9. ``groups.count_groups``: whether each group changed by this run is machine-wide, on the statuses
   written (transient members do not count).

The algorithms never see the database; this module is the only place that reads and writes it for them
(result values read and pooled through regressions.results). Sessions are the caller's.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from db.models import Machine, Meta, Regression, utcnow
from regressions import policy
from regressions.config import Settings
from regressions.detect import DEFAULT_PARAMS, DetectorParams, Step
from regressions.groups import assign_groups, count_groups, merge_same_range, refit_groups
from regressions.level_rules import GRADUAL
from regressions.listing import alert_columns, regressions_frame
from regressions.policy import OPEN_STATUSES, RETIRED, TRANSIENT, Verdict
from regressions.results import Key, commit_positions
from regressions.retire import benchmarks_gone, retire_gone, retire_series_gone, series_gone
from regressions.segments import (
    WATERMARK_KEY,
    Found,
    Unit,
    continuation,
    find_steps,
    load_benchmarks,
    load_units,
    newest_commit_worse,
    provenance_ids,
    scope,
    settings_fingerprint,
)

__all__ = [
    "OPEN_STATUSES",
    "WATERMARK_KEY",
    "DetectSummary",
    "alert_columns",
    "detect_store",
    "regressions_frame",
]

DEFAULT_LOOKBACK = 100


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
    move: bool = False  # an open alert whose step the detector now places at another commit
    ended_at: int | None = None  # where its segment, or the later ones it is carried into, ended (None: live)
    old_status: str | None = field(init=False)

    def __post_init__(self) -> None:
        self.old_status = self.reg.status if self.reg is not None else None


def _match(
    step_runs: list[int], stored: list[tuple[int, Regression]], reach: list[int] | None = None
) -> dict[int, Regression]:
    """Steps (run indices) to stored regressions (run index, row), one to one, nearest first, within
    SAME_STEP_RUNS runs (``reach``: per step, when more: a gradual regression's own range, where re-segmenting
    a drift moves its last change point); a transient one only at its own run (a later real step near a
    refuted spike is a step of its own), unless only a higher threshold closed it (``policy.holds_its_step``).
    Two close steps each keep their own regression."""
    reach = reach or [policy.SAME_STEP_RUNS] * len(step_runs)
    pairs = sorted(
        (abs(s - r), i, j)
        for i, s in enumerate(step_runs)
        for j, (r, reg) in enumerate(stored)
        if abs(s - r) <= (reach[i] if policy.holds_its_step(reg.status, reg.close_reason) else 0)
    )
    out: dict[int, Regression] = {}
    used: set[int] = set()
    for _d, i, j in pairs:
        if i not in out and j not in used:
            out[i] = stored[j][1]
            used.add(j)
    return out


MACHINE_EVENT, MACHINE_EVENT_PENDING = -1, -2  # one_run_events' benchmark id for events of the whole machine


def one_run_events(units: list[Unit]) -> dict[int, set[tuple[int, int]]]:
    """Step 4a: per machine, one-run events (``policy.is_one_run_event``) as (benchmark id, position),
    MACHINE_EVENT for an event of the whole machine; from every loaded unit's per-commit values (each commit
    decided once the next one is measured). A machine's newest commit where most of its series got worse, not
    decidable yet, is MACHINE_EVENT_PENDING (``segments.newest_commit_worse``, added by :func:`detect_store`)."""
    parts = []
    for u in units:
        decidable, hit = policy.one_run_events(u.values, threshold=u.threshold, direction=u.direction)
        n = int(decidable.sum())
        parts.append((np.full(n, u.key[2]), np.full(n, u.key[0]), u.positions[decidable], hit[decidable]))
    if not parts:
        return {}
    mid, bid, pos, hit = (np.concatenate(column) for column in zip(*parts, strict=True))
    frame = pd.DataFrame({"mid": mid, "bid": bid, "pos": pos, "hit": hit.astype(np.int64)})
    out: dict[int, set[tuple[int, int]]] = {}
    for scope_bid, keys in ((True, ["mid", "pos"]), (False, ["mid", "bid", "pos"])):
        counts = frame.groupby(keys, sort=False)["hit"].agg(["size", "sum"]).reset_index()
        for row in counts[counts["sum"] > 0].itertuples(index=False):
            if policy.is_one_run_event(int(row.size), int(row.sum)):
                out.setdefault(int(row.mid), set()).add((MACHINE_EVENT if scope_bid else int(row.bid), int(row.pos)))
    return out


def _position(u: Unit, index: int | None) -> int | None:
    return None if index is None else int(u.positions[index])


Carry = tuple[list[tuple[Unit, Found]], int | None]  # segments.continuation: later joined units, chain end


def _runs_and_return(
    u: Unit, found: Found, later: list[tuple[Unit, Found]], at: int, before: float
) -> tuple[list[tuple[int, list[float]]], int | None]:
    """The runs an alert at ``at`` is judged on (its segment's from its commit on, then those of the later
    segments it is carried into) and where the detector sees its level back (``policy.level_back``: in its
    own segment after it, else in the first later segment that has such a level)."""
    runs = u.runs_from(at) + [r for v, _f in later for r in v.runs_from(0)]
    for v, f, index in [(u, found, at), *((v, f, -1) for v, f in later)]:
        back = policy.level_back(f.levels, index, before, threshold=u.threshold, direction=u.direction)
        if back is not None:
            return runs, _position(v, back)
    return runs, None


def judge_unit(
    u: Unit,
    found: Found,
    stored: list[Regression],
    pos: dict[int, int],
    events: set[tuple[int, int]] | None = None,
    carry: Carry | None = None,
) -> list[Judged]:
    """Step 4: the unit's steps matched to its stored alerts, and each alert's verdict from the unit's runs
    from its commit on (``policy.judge``), and those of the later segments it is carried into (``carry``,
    ``segments.continuation``: the version changed, the level did not); where that chain of segments ends
    (the unit's own end without ``carry``), what is still open retires. A stored alert the detector no longer
    flags whose step is within the unit's threshold (a higher one than it was flagged at) is closed as
    ``policy.below_threshold``, not refuted."""
    later, ended_at = carry if carry is not None else ([], u.ended_at)
    mine = [
        (int(np.searchsorted(u.positions, pos[r.commit_id])), r)
        for r in stored
        if u.positions[0] <= pos.get(r.commit_id, -1) <= u.positions[-1]
    ]
    steps = [s for s in found.steps if s.regression]
    parents = [p for s, p in zip(found.steps, found.parent_positions, strict=True) if s.regression]
    # A gradual regression's alert may be found anywhere in its range (its parent's run to its own).
    reach = [max(policy.SAME_STEP_RUNS, s.index - int(np.searchsorted(u.positions, p)))
             if GRADUAL in s.labels and p is not None else policy.SAME_STEP_RUNS
             for s, p in zip(steps, parents, strict=True)]  # fmt: skip
    # An alert within the threshold now in force (a higher one than it was flagged at) is not a step the detector
    # flags near it at this threshold: it closes as below_threshold, and that step is an alert of its own (matched,
    # a raised threshold moved a confirmed 8% alert onto a later 11% step as a suspect; review on geocat-comp). At
    # its own run it is that step, grown past the threshold.
    low = {id(r) for _at, r in mine if policy.within_threshold(r.ratio, threshold=u.threshold, direction=u.direction)}
    matched = _match([s.index for s in steps], [(at, r) for at, r in mine if id(r) not in low], reach)
    free = {s.index: i for i, s in enumerate(steps) if i not in matched}
    matched |= {free.pop(at): r for at, r in mine if id(r) in low and at in free}
    seen = {id(r) for r in matched.values()}
    out: list[Judged] = []
    todo = [(i, s, matched.get(i), p) for i, (s, p) in enumerate(zip(steps, parents, strict=True))]
    # An alert the detector does not see is judged only where it could have: with two runs before it, or at
    # a new version's second run (``segments.find_steps`` flags a step there); one within the threshold now in
    # force anywhere (no run could make it a regression at this threshold).
    first = 1 if u.previous is not None else 2
    todo += [(at, None, r, None) for at, r in mine if id(r) not in seen and (at >= first or id(r) in low)]
    i_of = {id(r): at for at, r in mine}
    taken = {int(u.positions[at]) for at, _r in mine}
    after = [int(p) for p in u.positions] + [int(p) for v, _f in later for p in v.positions]
    for i, step, reg, parent in todo:
        at = step.index if step is not None else i
        before = step.before if step is not None else reg.before  # type: ignore[union-attr]
        runs, back = _runs_and_return(u, found, later, at, before)
        verdict = policy.judge(before, runs, threshold=u.threshold, direction=u.direction, still_seen=step is not None,
                               level_back_at=back, after=step.after if step is not None else reg.after)  # type: ignore[union-attr]  # fmt: skip
        here = int(u.positions[at])
        if events and ((MACHINE_EVENT, here) in events or (u.key[0], here) in events):
            nxt = after[at + 1] if at + 1 < len(after) else None
            verdict = policy.after_one_run_event(verdict, nxt, machine_wide=(MACHINE_EVENT, here) in events)
        elif events and (MACHINE_EVENT_PENDING, here) in events:  # the machine's newest measured commit
            verdict = policy.before_machine_event(verdict)
        if ended_at is not None:
            verdict = policy.retire(verdict, policy.SEGMENT_ENDED, ended_at)
        if step is None and id(reg) in low:  # a higher threshold: closed where this run judged it, once
            kept = reg.closed_commit_id if reg.close_reason == policy.BELOW_THRESHOLD else None  # type: ignore[union-attr]
            verdict = policy.below_threshold(verdict, pos[kept] if kept in pos else runs[-1][0])
        if reg is None and verdict.status == TRANSIENT:
            continue  # refuted before it was ever listed: nothing to flag
        moves = (reg is not None and step is not None and policy.holds_its_step(reg.status, reg.close_reason)
                 and step.index != i_of[id(reg)])  # fmt: skip
        # An open alert follows its step as more runs place it (onto a commit no other alert of the series holds).
        out.append(Judged(u, reg, step, parent, verdict, moves and int(u.positions[at]) not in taken, ended_at))
    return out


def _regroup(session: Session, judged: list[Judged], left: list[Regression], refit: set[int], pos: dict[int, int],
             summary: DetectSummary) -> tuple[set[int], set[int]]:  # fmt: skip
    """Step 6: the alerts without a group (new ones, those that left theirs) grouped, then the groups of one range
    made one. Returns the groups that changed and those removed; the groups created go to the summary."""
    ungrouped = [j.reg for j in judged if j.reg is not None and j.reg.group_id is None]
    ungrouped += [r for r in left if all(r is not g for g in ungrouped)]
    touched, created = assign_groups(session, ungrouped, pos)
    merged, removed = merge_same_range(session, touched | refit)
    summary.groups = [g for g in created if g not in removed]
    return touched | merged, removed


# --- 5. write -------------------------------------------------------------------------------------------


def _numbers(reg: Regression, step: Step) -> bool:
    """Before/after/ratio/p, labels and now_ratio of the step as seen now; True when the step itself moved
    (before, after or ratio: ``now_ratio`` moves with every later level and is not counted)."""
    moved = any(
        not math.isclose(getattr(reg, k) or 0.0, v, rel_tol=1e-9)
        for k, v in (("before", step.before), ("after", step.after), ("ratio", step.ratio))
    )
    reg.before, reg.after, reg.ratio, reg.p_value = step.before, step.after, step.ratio, step.p_value
    reg.labels, reg.now_ratio = list(step.labels), step.now
    return moved


def create_alerts(
    session: Session, judged: list[Judged], commit_at: np.ndarray, summary: DetectSummary
) -> set[int]:
    """Step 5: a row for each new step (its status the verdict's; written again by :func:`apply`), and the
    numbers of every step seen again brought up to date (open or closed, never an ignored one); an open
    alert takes its step's range as seen now (its commit moved, or its parent narrowed by backfilled
    commits). Returns the groups whose members' ranges changed (for ``groups.refit_groups``)."""
    refit: set[int] = set()
    for j in judged:
        reg, step, u = j.reg, j.step, j.unit
        if reg is not None:
            reg.direction = u.direction  # the rule may have changed since it was flagged (a rate unit now known)
            moved = step is not None and reg.status != policy.IGNORED and _numbers(reg, step)
            if moved and reg.status in OPEN_STATUSES:
                summary.updated.append(reg.id)
            commit = None if step is None else int(commit_at[int(u.positions[step.index])])
            if commit is not None and (j.move or (commit == reg.commit_id and reg.status in OPEN_STATUSES)):
                parent = None if j.parent_pos is None else int(commit_at[j.parent_pos])
                if (reg.commit_id, reg.parent_commit_id) != (commit, parent) and reg.group_id is not None:
                    refit.add(int(reg.group_id))
                reg.commit_id, reg.parent_commit_id = commit, parent
            continue
        assert step is not None
        p = int(u.positions[step.index])
        j.reg = Regression(
            benchmark_id=u.key[0], params_key=u.key[1], params=json.loads(u.key[1]), machine_id=u.key[2],
            commit_id=int(commit_at[p]),
            parent_commit_id=None if j.parent_pos is None else int(commit_at[j.parent_pos]),
            before=step.before, after=step.after, ratio=step.ratio, direction=u.direction,
            status=j.verdict.status, p_value=step.p_value, labels=list(step.labels), now_ratio=step.now,
            detected_at=utcnow(),
        )  # fmt: skip
        session.add(j.reg)
    session.flush()
    return refit


def _event(old: str, new: str) -> str | None:
    """What moving an existing alert from ``old`` to ``new`` is called in the summary."""
    if old == new:
        return None
    if new == policy.NEW and old == policy.SUSPECT:
        return "confirmed"
    if new in OPEN_STATUSES:
        return "reopened"
    return {TRANSIENT: "transient", policy.FIXED: "fixed", RETIRED: "retired"}.get(new)


def apply(judged: list[Judged], commit_at: np.ndarray, summary: DetectSummary) -> None:
    """Step 7: write each final verdict (status, close reason and commit, fixed-at), a person's status kept
    (``policy.after_person``), and count what changed."""
    for j in judged:
        reg, verdict = j.reg, j.verdict
        assert reg is not None
        old = j.old_status
        v = verdict if old is None else policy.after_person(old, verdict)
        # A transient alert stays closed where it was first found closed for the same reason: "not seen" states the
        # newest run at the time, which would move night after night while nothing about the alert changed.
        frozen = (old == v.status == TRANSIENT and reg.close_reason == v.reason in (policy.NOT_SEEN, policy.REFUTED)
                  and reg.closed_commit_id is not None)  # fmt: skip
        reg.status = v.status
        closed = v.status not in OPEN_STATUSES and v.status != policy.IGNORED
        reg.close_reason = v.reason if closed else (reg.close_reason if v.status == policy.IGNORED else None)
        if v.status != policy.IGNORED and not frozen:
            reg.closed_commit_id = int(commit_at[v.closed_at]) if closed and v.closed_at is not None else None
            reg.fixed_commit_id = reg.closed_commit_id if v.status == policy.FIXED else None
        if old is None:
            summary.new.append(reg.id)
            summary.flagged_status[v.status] = summary.flagged_status.get(v.status, 0) + 1
        elif (event := _event(old, v.status)) is not None:
            getattr(summary, event).append(reg.id)


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
    sc = scope(session, settings_fingerprint(settings, params, lookback), machine=machine, full=full,
               lookback=lookback)  # fmt: skip
    summary.incremental = sc.incremental
    pos = commit_positions(session)
    commit_at = np.array(list(pos), dtype=np.int64)  # the dict is in history order: commit id at each position
    bench = load_benchmarks(session)
    units = load_units(session, sc, pos, bench, settings)
    if progress:
        print(f"detect: examining {len(units)} series segments", flush=True)
    summary.series_examined = len({u.key for u in units})
    stored: dict[Key, list[Regression]] = {}
    if units:
        for reg in _stored(session, {u.key for u in units}):
            stored.setdefault((reg.benchmark_id, reg.params_key, reg.machine_id), []).append(reg)
    events = one_run_events(units)
    for mid, newest in newest_commit_worse(session, {u.key[2] for u in units}, pos, bench, settings,
                                           lookback).items():  # fmt: skip
        events.setdefault(mid, set()).add((MACHINE_EVENT_PENDING, newest))
    founds = find_steps(units, params)
    found_of = {id(u): f for u, f in zip(units, founds, strict=True)}
    judged = [
        j for u, found in zip(units, founds, strict=True)
        for j in judge_unit(u, found, stored.get(u.key, []), pos, events.get(u.key[2]), continuation(u, found_of))
    ]  # fmt: skip
    considered = sc.machine_ids if sc.machine_ids is not None else list(session.execute(select(Machine.id)).scalars())
    provenance = provenance_ids(bench)
    gone = benchmarks_gone(session, [int(m) for m in considered], {(j.unit.key[2], j.unit.key[0]) for j in judged},
                           pos, provenance)  # fmt: skip
    dropped = series_gone(session, [int(m) for m in considered], {j.unit.key for j in judged}, pos)
    for j in judged:
        at = gone.get(j.unit.key[2], {}).get(j.unit.key[0])
        if at is not None and j.ended_at is None:
            j.verdict = policy.retire(j.verdict, policy.BENCHMARK_GONE, pos[at])
        at = dropped.get(j.unit.key[2], {}).get((j.unit.key[0], j.unit.key[1]))
        if at is not None and j.ended_at is None:
            j.verdict = policy.retire(j.verdict, policy.SERIES_GONE, pos[at])
    refit = create_alerts(session, judged, commit_at, summary)
    left = refit_groups(session, refit, pos)  # members that moved out of their group's overlap
    touched, removed = _regroup(session, judged, left, refit, pos, summary)
    apply(judged, commit_at, summary)
    session.flush()  # ids for the alerts flagged now: judged ones are left to their verdict
    summary.retired += retire_gone(session, gone, {j.reg.id for j in judged if j.reg is not None})
    summary.retired += retire_series_gone(session, dropped, {j.reg.id for j in judged if j.reg is not None})
    # Groups are counted on their members' statuses as written now: a member gone transient no longer counts.
    moved = {int(j.reg.group_id) for j in judged if j.reg is not None and j.reg.group_id is not None
             and j.reg.status != j.old_status}  # fmt: skip
    count_groups(session, (touched | refit | moved) - removed, provenance)
    session.flush()
    changed = {*summary.new, *summary.confirmed, *summary.reopened}
    summary.alerting = [j.reg.id for j in judged
                        if j.reg is not None and j.reg.status == policy.NEW and j.reg.id in changed]  # fmt: skip
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
