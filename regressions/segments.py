"""The series a detection examines, as units of one segment each, and their change points: steps 1-3 of
the pipeline in :mod:`regressions.store` (scope, load, find). Sessions are the caller's.

A unit is one asv version of one benchmark x params on one machine (asv gives a benchmark a new version
when its code changes: no step across, no fix across). A new version whose first run sits at the old
version's last level is detected with that level's runs before it, so a step at its second run is found.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Meta, Result, Run, commit_order
from db.provenance import is_provenance
from regressions.config import Settings
from regressions.detect import DEFAULT_PARAMS, DetectorParams, SeriesDetection, Step, detect_many
from regressions.direction import direction_for
from regressions.results import Key, load_values, machine_id, per_commit

WATERMARK_KEY = "regressions.watermark"
# Bumped when detection's rules change, so the next run re-examines every series (and groups old flags).
RULES_VERSION = 3
Benchmarks = dict[int, tuple[str, str | None]]  # benchmark id -> (name, unit)


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


def settings_fingerprint(settings: Settings, params: DetectorParams, lookback: int) -> str:
    blob = json.dumps(
        [settings.default_threshold, settings.thresholds, settings.directions, repr(params), lookback, RULES_VERSION],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def scope(session: Session, fingerprint: str, *, machine: str | None, full: bool, lookback: int) -> Scope:
    """Step 1: full (every series, whole history) or incremental (series with results newer than the
    watermark, over their machine's ``lookback`` newest commits)."""
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
    return Scope(machine_ids, series, _lookback_windows(session, machine_ids, lookback), True, new_state)


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
    runs = runs[~runs["benchmark_id"].isin(provenance_ids(bench))]
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
            u.previous = units[-1]
        units.append(u)
    return units


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


def _joinable(u: Unit, prev: SeriesDetection) -> bool:
    """A new version whose first run sits at the old version's last level (within half the threshold and
    three noise sigmas) continues that level: the old level may serve as its level before."""
    if u.previous is None or not prev.levels or u.values.size == 0 or not u.values[0] > 0:
        return False  # a first value of 0 or below has no relative distance to the old level
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
        prev = u.previous
        if prev is not None and _joinable(u, first[index[id(prev)]]):
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
        out.append(Found(steps, levels, parents))
    return out
