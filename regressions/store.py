"""Database glue of regression detection: load series, store regressions, keep the watermark.

The algorithms (regressions.detect, regressions.compare) never see the database; this module is the
only place that reads and writes it for them. Sessions are the caller's.

Incremental detection: ``Meta['regressions.watermark']`` holds the highest ``Result.id`` examined and
the settings used. A later run re-examines only the series with newer results, over their last
``lookback`` commits (the store's older data cannot hold a new step of those series that a window of
that size would miss), and a run with other settings examines everything again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Machine, Meta, Regression, Result, Run, commit_order, utcnow
from regressions.config import Settings
from regressions.detect import DEFAULT_PARAMS, DetectorParams, detect_many
from regressions.direction import infer_direction, slowdown
from regressions.results import UsageError, history_noise  # noqa: F401  (history_noise re-exported for old imports)

WATERMARK_KEY = "regressions.watermark"
DEFAULT_LOOKBACK = 100
OPEN_STATUSES = ("new", "acknowledged")
# A step found again within this many runs of a stored one is the same step seen with more data.
SAME_STEP_RUNS = 3


@dataclass
class DetectSummary:
    series_examined: int = 0
    new: list[int] = field(default_factory=list)  # ids of regressions flagged by this run
    fixed: list[int] = field(default_factory=list)  # ids marked fixed by this run
    incremental: bool = False
    seconds: float = 0.0


def _settings_fingerprint(settings: Settings, params: DetectorParams, lookback: int) -> str:
    blob = json.dumps(
        [settings.default_threshold, settings.thresholds, settings.directions, repr(params), lookback],
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _commit_order(session: Session) -> pd.DataFrame:
    """Every commit with its position in history (git generation, then date, then id: ``commit_order``)."""
    rows = session.execute(select(Commit.id, Commit.sha).order_by(*commit_order())).all()
    df = pd.DataFrame(rows, columns=["commit_id", "sha"])
    df["pos"] = np.arange(len(df))
    return df


def _load_values(
    session: Session,
    *,
    machine_ids: list[int] | None,
    series: set[tuple[int, str, int]] | None,
    windows: dict[int, list[int] | None] | None,
) -> pd.DataFrame:
    """Successful results: benchmark_id, params_key, machine_id, commit_id, value (one row per run)."""
    stmt = (
        select(Result.benchmark_id, Result.params_key, Run.machine_id, Run.commit_id, Result.value)
        .join(Run, Result.run_id == Run.id)
        .where(Result.value.is_not(None))
    )
    if machine_ids is not None:
        stmt = stmt.where(Run.machine_id.in_(machine_ids))
    if windows is not None and len(windows) == 1 and None not in windows.values():
        # One machine (the usual runner): the window's commits go into SQL, so only they are read.
        (window,) = windows.values()
        stmt = stmt.where(Run.commit_id.in_(window or []))
    # Core execution and column-wise arrays: the ORM and pandas' row-by-row construction each cost
    # seconds on a store of 500,000 results.
    rows = session.connection().execute(stmt).fetchall()
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), (), ()]
    df = pd.DataFrame(
        {
            "benchmark_id": np.array(cols[0], dtype=np.int64),
            "params_key": np.array(cols[1], dtype=object),
            "machine_id": np.array(cols[2], dtype=np.int64),
            "commit_id": np.array(cols[3], dtype=np.int64),
            "value": np.array(cols[4], dtype=float),
        }
    )
    if series is not None and not df.empty:
        keys = pd.MultiIndex.from_frame(df[["benchmark_id", "params_key", "machine_id"]])
        df = df[keys.isin(list(series))]
    return df


def _lookback_windows(session: Session, machine_ids: Iterable[int], lookback: int) -> dict[int, list[int] | None]:
    """Per machine, the ids of its ``lookback`` newest commits in history order (None: it has no more).

    By rank, not by date: commits sharing a date can neither push the window past ``lookback`` nor
    fall out of it by chance.
    """
    out: dict[int, list[int] | None] = {}
    for mid in machine_ids:
        ids = (
            session.execute(
                select(Commit.id)
                .where(Commit.id.in_(select(Run.commit_id).where(Run.machine_id == mid)))
                .order_by(*commit_order(descending=True))
                .limit(lookback + 1)
            )
            .scalars()
            .all()
        )
        out[mid] = [int(i) for i in ids[:lookback]] if len(ids) > lookback else None
    return out


def _existing_regressions(session: Session, series: set[tuple[int, str, int]] | None) -> list[Regression]:
    stmt = select(Regression)
    if series is not None:
        if not series:
            return []
        stmt = stmt.where(
            tuple_(Regression.benchmark_id, Regression.params_key, Regression.machine_id).in_(list(series))
        )
    return list(session.execute(stmt).scalars().all())


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
    """Detect steps in the store's series and record regressions (idempotent). The caller commits."""
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
    incremental = (
        not full and machine is None and state.get("fingerprint") == fingerprint and "result_id" in state
    )
    series: set[tuple[int, str, int]] | None = None
    windows: dict[int, list[int] | None] | None = None
    if incremental:
        rows = session.execute(
            select(Result.benchmark_id, Result.params_key, Run.machine_id)
            .join(Run, Result.run_id == Run.id)
            .where(Result.id > int(state["result_id"]))
            .distinct()
        ).all()
        series = {(int(b), str(p), int(m)) for b, p, m in rows}
        touched = sorted({m for _, _, m in series})
        machine_ids = touched
        windows = _lookback_windows(session, touched, lookback)
        summary.incremental = True

    if series is not None and not series:
        df = pd.DataFrame(columns=["benchmark_id", "params_key", "machine_id", "commit_id", "value"])
    else:
        df = _load_values(session, machine_ids=machine_ids, series=series, windows=windows)
    order = _commit_order(session)
    pos = dict(zip(order["commit_id"], order["pos"], strict=False))
    if not df.empty:
        df["pos"] = df["commit_id"].map(pos)
        if windows is not None:
            # Windows per machine (several machines: filtered here rather than in SQL).
            inside = {(m, c) for m, ids in windows.items() if ids is not None for c in ids}
            whole = [m for m, ids in windows.items() if ids is None]
            keep = df["machine_id"].isin(whole) | pd.Series(
                [(m, c) in inside for m, c in zip(df["machine_id"], df["commit_id"], strict=True)], index=df.index
            )
            df = df[keep]
        # Several runs of one commit (re-runs, environments): their median is the commit's value.
        df = df.groupby(["benchmark_id", "params_key", "machine_id", "pos"], sort=True, as_index=False)[
            "value"
        ].median()

    bench = {
        bid: (name, unit)
        for bid, name, unit in session.execute(select(Benchmark.id, Benchmark.name, Benchmark.unit)).all()
    }
    sha_of_pos = order["commit_id"].to_numpy()
    existing: dict[tuple[int, str, int], list[Regression]] = {}
    for reg in _existing_regressions(session, series):
        existing.setdefault((reg.benchmark_id, reg.params_key, reg.machine_id), []).append(reg)
    params_of: dict[tuple[int, str], dict[str, Any]] = {}

    groups = (
        list(df.groupby(["benchmark_id", "params_key", "machine_id"], sort=False)) if not df.empty else []
    )
    names, thresholds, directions = [], [], []
    for (bid, _pkey, _mid), _g in groups:
        name, unit = bench.get(int(bid), (str(bid), None))
        names.append(name)
        directions.append(infer_direction(name, unit, settings.direction_override(name)))
        thresholds.append(settings.threshold_for(name))
    if progress:
        print(f"detect: examining {len(groups)} series", flush=True)
    results = detect_many([g["value"].to_numpy() for _, g in groups], thresholds, directions, params)
    for ((bid, pkey, mid), g), result, direction, threshold in zip(
        groups, results, directions, thresholds, strict=True
    ):
        positions = g["pos"].to_numpy()
        summary.series_examined += 1
        key = (int(bid), str(pkey), int(mid))
        stored = existing.setdefault(key, [])
        stored_pos = {r.id: pos.get(r.commit_id, -1) for r in stored}
        for step in result.regressions:
            p = int(positions[step.index])
            if any(abs(stored_pos[r.id] - p) <= SAME_STEP_RUNS for r in stored if r.id is not None):
                continue
            if key[:2] not in params_of:
                params_of[key[:2]] = json.loads(pkey)
            reg = Regression(
                benchmark_id=key[0],
                params_key=key[1],
                params=params_of[key[:2]],
                machine_id=key[2],
                commit_id=int(sha_of_pos[p]),
                before=step.before,
                after=step.after,
                ratio=step.ratio,
                direction=direction,
                status="new",
                p_value=step.p_value,
                detected_at=utcnow(),
            )
            session.add(reg)
            session.flush()
            stored.append(reg)
            stored_pos[reg.id] = p
            summary.new.append(reg.id)
        # Fixed: a later level of the series is back within the threshold of the level before.
        for reg in stored:
            if reg.status not in OPEN_STATUSES:
                continue
            p_reg = stored_pos[reg.id]
            for first, _last, level in result.levels:
                p_level = int(positions[first])
                if p_level <= p_reg:
                    continue
                if slowdown(level / reg.before, reg.direction) < 1 + threshold:
                    reg.status = "fixed"
                    reg.fixed_commit_id = int(sha_of_pos[p_level])
                    summary.fixed.append(reg.id)
                    break

    state = {"result_id": int(max_id), "fingerprint": fingerprint, "updated": utcnow().isoformat()}
    if machine is None:
        if meta is None:
            session.add(Meta(key=WATERMARK_KEY, value=state))
        else:
            meta.value = state
    session.flush()
    summary.seconds = time.perf_counter() - start
    return summary


def regressions_frame(
    session: Session, *, statuses: Iterable[str] | None = None, machine: str | None = None
) -> pd.DataFrame:
    """Stored regressions with names resolved, newest commit first (``db.queries.regressions`` under the
    column names of the detect CLI's JSON contract); an unknown machine gives an empty frame."""
    from db import queries

    frame = queries.regressions(session, status=None if statuses is None else list(statuses))
    if machine is not None:
        frame = frame[frame["machine"] == machine]
    # Within one commit, oldest regression first.
    commit_rank = {sha: i for i, sha in enumerate(dict.fromkeys(frame["sha"]))}
    frame = frame.assign(_rank=frame["sha"].map(commit_rank)).sort_values(["_rank", "id"], kind="stable")
    frame = frame.drop(columns=["_rank", "params_key", "message"])
    return frame.rename(columns={"sha": "commit", "fixed_sha": "fixed_commit"}).reset_index(drop=True)
