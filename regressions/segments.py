"""The series a detection examines, as units of one segment each, and their change points: steps 1-3 of
the pipeline in :mod:`regressions.store` (scope, load, find). Sessions are the caller's.

A unit is one asv version of one benchmark x params on one machine (asv gives a benchmark a new version
when its code changes: no step across, no fix across). A new version whose first run sits at the old
version's last level is detected with that level's runs before it, so a step at its second run is found,
and the old version's open alerts are carried into it (:func:`continuation`); one whose first run is off
that level has that run as the level before a step at its second run. An incremental run's window reaches
back to a series' old open alerts (:func:`scope`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Meta, Regression, Result, Run, commit_order
from db.provenance import is_provenance
from db.query_base import last_version_only
from regressions import policy
from regressions.config import Settings
from regressions.detect import (
    DEFAULT_PARAMS,
    DetectorParams,
    SeriesDetection,
    Step,
    consistent_level,
    detect_many,
    median_se,
)
from regressions.direction import UP_IS_WORSE, direction_for
from regressions.level_rules import PARTLY_RECOVERED, partly_recovered
from regressions.policy import OPEN_STATUSES
from regressions.results import Key, load_values, machine_id, per_commit, version_codes
from regressions.units import P_FLOOR

WATERMARK_KEY = "regressions.watermark"
# Bumped when detection's rules change, so the next run re-examines every series (and groups old flags).
# 6: gradual regressions, partly_recovered and now_ratio (written on every alert whose step that full pass sees).
RULES_VERSION = 6
# An open alert near or beyond the start of the incremental window is judged over its series' window widened
# back to it, with this many of the machine's commits before it (the runs its level before is measured on),
# and at most REACH_LOOKBACKS lookbacks deep: enough history to see its fix, as ``--full`` does.
REACH_CONTEXT = 30
REACH_LOOKBACKS = 10
Benchmarks = dict[int, tuple[str, str | None]]  # benchmark id -> (name, unit)


# --- 1. scope -----------------------------------------------------------------------------------------


@dataclass
class Scope:
    """What one detection examines: machines (None: all), series (None: all of them), per-machine
    windows of commit ids (None: whole history), whether it is incremental, and the watermark to write.
    ``reach``: series whose window is widened back to an old open alert (commit ids; None: whole history)."""

    machine_ids: list[int] | None
    series: set[Key] | None
    windows: dict[int, list[int] | None] | None
    incremental: bool
    state: dict[str, Any]
    reach: dict[Key, list[int] | None] = field(default_factory=dict)


def settings_fingerprint(settings: Settings, params: DetectorParams, lookback: int) -> str:
    blob = json.dumps(
        [settings.default_threshold, settings.thresholds, settings.directions, repr(params), lookback, RULES_VERSION],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def scope(session: Session, fingerprint: str, *, machine: str | None, full: bool, lookback: int) -> Scope:
    """Step 1: full (every series, whole history) or incremental (series with results newer than the
    watermark, over their machine's ``lookback`` newest commits; a series with an old open alert over a
    window reaching back to it, ``_reach_back``)."""
    machine_ids: list[int] | None = None
    if machine is not None:
        machine_ids = [machine_id(session, machine)]
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
    windows = _lookback_windows(session, machine_ids, lookback)
    return Scope(machine_ids, series, windows, True, new_state, _reach_back(session, series, windows, lookback))


def newest_commits(session: Session, machine_id: int, limit: int) -> list[int]:
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
        ids = newest_commits(session, mid, lookback + 1)
        out[mid] = ids[:lookback] if len(ids) > lookback else None
    return out


def _reach_back(
    session: Session, series: set[Key], windows: dict[int, list[int] | None], lookback: int
) -> dict[Key, list[int] | None]:
    """Series of ``series`` with an open alert whose commit lies before their machine's window or among its
    first REACH_CONTEXT commits: their window widened to the alert's commit and REACH_CONTEXT commits before
    it (the oldest such alert; at most REACH_LOOKBACKS x ``lookback`` commits; None: the whole history)."""
    limited = sorted(m for m, ids in windows.items() if ids is not None)
    if not limited:
        return {}
    rows = session.execute(
        select(Regression.benchmark_id, Regression.params_key, Regression.machine_id, Regression.commit_id).where(
            Regression.status.in_(OPEN_STATUSES), Regression.machine_id.in_(limited)
        )
    ).all()
    alerts: dict[int, dict[Key, set[int]]] = {}  # machine id -> series -> commits of its open alerts
    for b, p, m, c in rows:
        if (key := (int(b), str(p), int(m))) in series:
            alerts.setdefault(int(m), {}).setdefault(key, set()).add(int(c))
    out: dict[Key, list[int] | None] = {}
    deepest = REACH_LOOKBACKS * lookback
    for mid, mine in sorted(alerts.items()):
        ids = newest_commits(session, mid, deepest + 1)  # newest first
        rank = {c: i for i, c in enumerate(ids)}
        for key, commits in mine.items():  # each series ranked by its own machine's commits
            oldest = max(rank.get(c, len(ids)) for c in commits)
            if oldest + REACH_CONTEXT >= lookback:  # beyond the window, or too close to its start
                width = min(oldest + 1 + REACH_CONTEXT, deepest)
                out[key] = ids[:width] if len(ids) > width else None
    return out


# --- 2. load --------------------------------------------------------------------------------------------


@dataclass
class Unit:
    """One segment (asv version) of one series: its commits (positions in history, oldest first), the
    median of each commit's runs, every run (position and value, in position order), and how it is judged.
    ``ended_at``: the position of the next version's first run (None: the segment is the series' newest)."""

    key: Key
    positions: np.ndarray
    values: np.ndarray
    run_pos: np.ndarray
    run_val: np.ndarray
    threshold: float
    direction: str
    ended_at: int | None = None
    previous: Unit | None = None  # the segment before it, when loaded
    following: Unit | None = None  # the segment after it, when loaded

    def runs_from(self, index: int) -> list[tuple[int, list[float]]]:
        """(position, values of its runs) of every commit from ``positions[index]`` on, in order."""
        first = int(np.searchsorted(self.run_pos, self.positions[index]))
        if self.run_pos.size - first == self.positions.size - index:  # one run per commit: no pooling
            return [(p, [v]) for p, v in zip(self.run_pos[first:].tolist(), self.run_val[first:].tolist(), strict=True)]
        per_pos: dict[int, list[float]] = {int(p): [] for p in self.positions[index:]}
        for p, v in zip(self.run_pos[first:].tolist(), self.run_val[first:].tolist(), strict=True):
            per_pos[p].append(v)
        return list(per_pos.items())


def load_benchmarks(session: Session) -> Benchmarks:
    rows = session.execute(select(Benchmark.id, Benchmark.name, Benchmark.unit))
    return {int(bid): (name, unit) for bid, name, unit in rows}


def provenance_ids(bench: Benchmarks) -> list[int]:
    """Benchmarks that record kernel configs (``is_provenance``): not performance, never examined or counted."""
    return [bid for bid, (name, _unit) in bench.items() if is_provenance(name)]


def load_units(session: Session, sc: Scope, pos: dict[int, int], bench: Benchmarks, settings: Settings) -> list[Unit]:
    """Step 2: the units of the series in scope, in (series, segment) order."""
    if sc.series is not None and not sc.series:
        return []
    runs = load_values(session, machine_ids=sc.machine_ids, series=sc.series, windows=sc.windows)
    # Every series at the window's commits is the evidence for which version a commit measured last; some series,
    # or some read over wider windows, are not: the store is asked.
    runs = _counted(session, _in_windows(session, runs, sc), bench, pos, complete=sc.series is None and not sc.reach)
    if runs.empty:
        return []
    df = per_commit(runs)
    keys = ["benchmark_id", "params_key", "machine_id"]
    run_slices, run_pos, run_val = _runs_by_series(runs, keys)
    unit_id = df.groupby([*keys, "segment"], sort=False).ngroup().to_numpy()  # rows of a unit are contiguous
    starts = np.flatnonzero(np.r_[True, unit_id[1:] != unit_id[:-1]])
    all_pos, all_val = df["pos"].to_numpy(), df["value"].to_numpy(dtype=float)
    units: list[Unit] = []
    for key, a, b in zip(_keys_at(df, keys, starts), starts, [*starts[1:], len(df)], strict=True):
        name, unit = bench.get(key[0], (str(key[0]), None))
        positions = all_pos[a:b]
        lo, hi = run_slices[key]
        first, last = lo + np.searchsorted(run_pos[lo:hi], [positions[0], positions[-1] + 1])
        u = Unit(key, positions, all_val[a:b], run_pos[first:last], run_val[first:last],
                 settings.threshold_for(name), direction_for(name, unit, settings))  # fmt: skip
        if units and units[-1].key == key:
            units[-1].ended_at = int(positions[0])
            u.previous, units[-1].following = units[-1], u
        units.append(u)
    return units


def _counted(session: Session, runs: pd.DataFrame, bench: Benchmarks, pos: dict[int, int], *,
             complete: bool = True) -> pd.DataFrame:  # fmt: skip
    """The runs of :func:`load_values` that detection counts, at their history positions (``pos``): no kernel-config
    records, and at a commit measured at two asv versions the last one's (``db.query_base.last_version_only``, the
    dashboard's rule; ``complete``: ``runs`` hold every series at their commits), versions then coded, once the
    frames read apart are joined."""
    runs = runs[~runs["benchmark_id"].isin(provenance_ids(bench))]
    runs = version_codes(last_version_only(session, runs, "version", complete=complete))
    return runs.assign(pos=runs["commit_id"].map(pos))


def newest_commit_worse(session: Session, machine_ids: Iterable[int], pos: dict[int, int], bench: Benchmarks,
                        settings: Settings, lookback: int, before: int = 5) -> dict[int, int]:  # fmt: skip
    """Per machine, the position of its newest measured commit (the newest with a successful result: a night
    whose every result failed measured nothing) when most of the series measured there (``is_machine_wide``) got
    worse than the median of their own ``before`` measured commits before it (``policy.newest_worse``, each
    series in its version segment, over the machine's ``lookback`` newest commits): a machine-wide event that the
    next commit will decide. Read from the store over every series the machine measured there, not the series a
    run examines, so night by night and ``--full`` agree."""
    out: dict[int, int] = {}
    for mid in machine_ids:
        window = newest_commits(session, mid, lookback)
        runs = _counted(session, load_values(session, machine_ids=[mid], series=None, windows={mid: window}),
                        bench, pos)  # fmt: skip
        if runs.empty:
            continue
        df = per_commit(runs)
        newest = int(df["pos"].max())
        measured = worse = 0
        for (bid, _key), g in df.groupby(["benchmark_id", "params_key"], sort=False):
            if int(g["pos"].iloc[-1]) != newest:
                continue
            measured += 1
            mine = g[g["segment"] == g["segment"].iloc[-1]]["value"].to_numpy(dtype=float)[-(before + 1):]
            name, unit = bench.get(int(bid), (str(bid), None))
            worse += policy.newest_worse(mine, threshold=settings.threshold_for(name),
                                         direction=direction_for(name, unit, settings), before=before)  # fmt: skip
        if policy.is_machine_wide(worse, measured):
            out[mid] = newest
    return out


def _in_windows(session: Session, runs: pd.DataFrame, sc: Scope) -> pd.DataFrame:
    """The runs inside their machine's window; for the series of ``sc.reach``, those of their own (wider)
    window instead, read again."""
    if sc.windows is None:
        return runs
    inside = {(m, c) for m, ids in sc.windows.items() if ids is not None for c in ids}
    whole = {m for m, ids in sc.windows.items() if ids is None}
    keep = [m in whole or (m, c) in inside for m, c in zip(runs["machine_id"], runs["commit_id"], strict=True)]
    runs = runs[np.asarray(keep, dtype=bool)]
    if not sc.reach:
        return runs
    cols = ["benchmark_id", "params_key", "machine_id"]
    parts = [runs[~pd.MultiIndex.from_frame(runs[cols]).isin(list(sc.reach))]]
    for mid in sorted({k[2] for k in sc.reach}):
        mine = {k: None if w is None else set(w) for k, w in sc.reach.items() if k[2] == mid}
        union = None if None in mine.values() else sorted(set().union(*mine.values()))  # type: ignore[arg-type]
        wide = load_values(session, machine_ids=[mid], series=set(mine), windows={mid: union})
        rows = zip(wide["benchmark_id"], wide["params_key"], wide["commit_id"], strict=True)
        own = [(w := mine[(int(b), str(p), mid)]) is None or int(c) in w for b, p, c in rows]
        parts.append(wide[np.asarray(own, dtype=bool)])
    return pd.concat(parts, ignore_index=True)


def _runs_by_series(
    runs: pd.DataFrame, keys: list[str]
) -> tuple[dict[tuple[int, str, int], tuple[int, int]], np.ndarray, np.ndarray]:
    """Every run's position and value, sorted by series then position, and each series' slice of them."""
    series_id = runs.groupby(keys, sort=False).ngroup().to_numpy()
    pos = runs["pos"].to_numpy(dtype=np.int64)
    order = np.lexsort((pos, series_id))
    sid, pos, val = series_id[order], pos[order], runs["value"].to_numpy(dtype=float)[order]
    starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
    slices = {
        key: (int(a), int(b))
        for key, a, b in zip(_keys_at(runs, keys, order[starts]), starts, [*starts[1:], len(sid)], strict=True)
    }
    return slices, pos, val


def _keys_at(frame: pd.DataFrame, keys: list[str], rows: np.ndarray) -> list[tuple[int, str, int]]:
    """The series key of each of ``rows`` (positions in ``frame``): only those rows are converted, not the
    whole string column."""
    bids, pkeys, mids = (frame[k].take(rows).tolist() for k in keys)
    return [(int(b), str(p), int(m)) for b, p, m in zip(bids, pkeys, mids, strict=True)]


# --- 3. find --------------------------------------------------------------------------------------------


@dataclass
class Found:
    """A unit's detection: steps with indices into the unit (a joined previous level shifted away)."""

    steps: list[Step]
    levels: list[tuple[int, int, float]]  # (first, last index, level) within the unit
    parent_positions: list[int | None]  # per step: position of the last commit at the old level
    joined: bool = False  # it continued the previous version's last level (``_joinable``)


def _join_tolerance(u: Unit, prev: SeriesDetection) -> float:
    """How far (log) a value may sit from the old version's last level and still be at it: half the
    threshold, or three noise sigmas of the old version where that is more."""
    return max(0.5 * math.log1p(u.threshold), 3.0 * (prev.noise if math.isfinite(prev.noise) else 0.0))


# Runs of a new version that decide whether it continues the old version's level when its first run does not:
# their median, so one outlier among them (a machine's hiccup on the first run) does not end the old segment.
JOIN_RUNS = 3


def _joinable(u: Unit, prev: SeriesDetection) -> bool:
    """A new version whose first run, or the median of its first ``JOIN_RUNS`` runs, sits at the old version's
    last level (within ``_join_tolerance``) continues that level: the old level may serve as its level before."""
    if u.previous is None or not prev.levels or u.values.size == 0:
        return False
    old, tolerance = math.log(prev.levels[-1][2]), _join_tolerance(u, prev)

    def at_old(value: float) -> bool:  # a value of 0 or below has no relative distance to the old level
        return value > 0 and abs(math.log(value) - old) <= tolerance

    head = u.values[:JOIN_RUNS]
    return at_old(float(u.values[0])) or (head.size == JOIN_RUNS and at_old(float(np.median(head))))


def _step_off_first_run(u: Unit, own: SeriesDetection, prev: SeriesDetection, params: DetectorParams) -> Step | None:
    """A new version whose first run is off the old version's level (the version change moved the level)
    has one run before a step at its second run. That step is this segment's regression when the runs from
    the second on (up to the segment's next change point) sit at a level worse than the first run by the
    threshold, significantly (the old version's noise), every one of their first ``short_level`` runs at it,
    and that level is off the old version's level too (else the first run was the outlier)."""
    v = u.values
    if u.previous is None or not prev.levels or v.size < 2 or not (v[0] > 0 and v[1] > 0):
        return None
    if any(s.index <= 2 for s in own.steps):  # the segment's own first level is two runs: its step stands
        return None
    rest = v[1 : min(own.levels[0][1] + 1 if own.levels else v.size, 1 + params.level_window)]
    if not (rest > 0).any():
        return None
    z = np.log(rest[rest > 0])
    z0, z1 = math.log(v[0]), float(np.median(z))
    sigma = prev.noise if math.isfinite(prev.noise) else params.noise_floor
    delta, sign = math.log1p(u.threshold), (1.0 if u.direction == UP_IS_WORSE else -1.0)
    zs = abs(z1 - z0) / median_se(sigma, 1, z.size)
    off_old = abs(z1 - math.log(prev.levels[-1][2])) > _join_tolerance(u, prev)
    if not (sign * (z1 - z0) > delta and zs >= params.z_flag and off_old):
        return None
    if not consistent_level(z[: params.short_level], z0, z1, sigma, delta):
        return None
    # The segment's later levels: the newest is where the series stands now (level_rules.partly_recovered).
    later = [math.log(level) for first, _last, level in own.levels if first > 1]
    newest = later[-1] if later else z1
    labels = (PARTLY_RECOVERED,) if partly_recovered(z0, z1, later, sign, delta) else ()
    return Step(index=1, before=float(v[0]), after=math.exp(z1), ratio=math.exp(z1 - z0),
                slowdown=math.exp(sign * (z1 - z0)), z=zs, p_value=max(math.erfc(zs / math.sqrt(2)), P_FLOOR),
                regression=True, labels=labels, now=math.exp(newest - z0))  # fmt: skip


def find_steps(units: list[Unit], params: DetectorParams = DEFAULT_PARAMS) -> list[Found]:
    """Step 3: change points of every unit. A unit whose first run sits at the previous version's last
    level is detected again with that level's runs (up to ``level_window``) before it: a step at its
    second run is then found; a change point at the version boundary itself is never a regression. A unit
    whose first run is off that level has that run alone as the level before a step at its second run
    (``_step_off_first_run``)."""
    first = detect_many([u.values for u in units], [u.threshold for u in units], [u.direction for u in units], params)
    index = {id(u): i for i, u in enumerate(units)}
    joined: dict[int, int] = {}  # unit index -> runs of the previous level put before it
    series: list[np.ndarray] = []
    for i, u in enumerate(units):
        prev = u.previous
        if prev is not None and _joinable(u, first[index[id(prev)]]):
            a, _b, _level = first[index[id(prev)]].levels[-1]
            tail = prev.values[max(a, prev.values.size - params.level_window) :]
            joined[i] = tail.size
            series.append(np.concatenate([tail, u.values]))
    again = iter(detect_many(series, [units[i].threshold for i in joined], [units[i].direction for i in joined],
                             params, boundaries=list(joined.values())))  # fmt: skip
    out = []
    for i, u in enumerate(units):
        k = joined.get(i, 0)
        result = next(again) if i in joined else first[i]
        prefix_pos = u.previous.positions[-k:] if k and u.previous is not None else np.empty(0, dtype=np.int64)
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
        off = None if k or u.previous is None else _step_off_first_run(u, result, first[index[id(u.previous)]], params)
        if off is not None:  # the version moved the level: its first run alone is the level before
            steps, parents = [off, *steps], [int(u.positions[0]), *parents]
            last = levels[0][1] if levels else 1
            levels = [(0, 0, off.before), (1, last, off.after), *levels[1:]]
        out.append(Found(steps, levels, parents, joined=i in joined))
    return out


def continuation(u: Unit, found: dict[int, Found]) -> tuple[list[tuple[Unit, Found]], int | None]:
    """The later segments an open alert of ``u`` is carried into (each joined to the level of the one
    before it: the version changed, the level did not), and where the chain ends: the first position of
    the next segment that is not joined (its alerts retire there), None when it reaches the series' newest
    segment. ``found``: each loaded unit's detection, by ``id(unit)``."""
    later: list[tuple[Unit, Found]] = []
    nxt = u.following
    while nxt is not None and found[id(nxt)].joined:
        later.append((nxt, found[id(nxt)]))
        nxt = nxt.following
    if nxt is None or (nxt.values.size < JOIN_RUNS and nxt.following is None):
        return later, None  # the newest version, not joined yet on fewer runs than decide it: the end waits
    return later, int(nxt.positions[0])
