"""Read queries the dashboard needs beyond ``db.queries`` (``select()`` against ``db.models``), and its one
write beside a regression's status: the triage note.

Sessions are the caller's (``dashboard.data`` opens them and caches the frames). Everything here is
shaped for drawing: history of several series of one benchmark at once with per-point provenance, the
series of a machine, the commit range (parent..commit) of each flagged regression, triage notes.

A commit's value of a series pools that commit's runs on the machine by the median, like
``regressions.results.results_at`` (what ``mlaperf compare`` compares), so a History point and a Compare
row of the same commit show the same number.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Environment, Machine, Meta, Result, Run, commit_order, utcnow
from regressions.direction import PROVENANCE_PREFIX, is_provenance

TRIAGE_PREFIX = "triage."  # Meta key per regression: "triage.<id>" -> list of {at, status, note}


def _rows(s: Session, stmt: Any) -> pd.DataFrame:
    result = s.execute(stmt)
    keys = list(result.keys())
    rows = result.all()
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(keys)
    return pd.DataFrame({k: pd.Series(list(v), dtype=object) for k, v in zip(keys, cols, strict=True)})


def machine_id(s: Session, machine: str) -> int | None:
    return s.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()


def commits(s: Session, machine: str) -> pd.DataFrame:
    """Commits measured on ``machine`` in history order: commit_id, sha, date, message, author, pos (0..n-1)."""
    mid = machine_id(s, machine)
    stmt = (
        select(Commit.id.label("commit_id"), Commit.sha, Commit.date, Commit.message, Commit.author)
        .where(Commit.id.in_(select(Run.commit_id).where(Run.machine_id == mid)))
        .order_by(*commit_order())
    )
    df = _rows(s, stmt)
    df["commit_id"] = df["commit_id"].astype("int64")
    df["date"] = pd.to_datetime(df["date"])
    df["pos"] = np.arange(len(df), dtype="int64")
    return df


def series(s: Session, machine: str) -> pd.DataFrame:
    """Distinct series measured on ``machine``: benchmark, params_key, unit, type, version (the benchmark's
    newest asv version), param_names (asv's order). One DISTINCT over the results: no per-series counts,
    which cost a full aggregate. Kernel-config records (``regressions.direction.is_provenance``) are not
    series of their own here: History shows them on the hover of the case they describe."""
    mid = machine_id(s, machine)
    keys = _rows(
        s,
        select(Result.benchmark_id, Result.params_key)
        .where(Result.run_id.in_(select(Run.id).where(Run.machine_id == mid)))
        .distinct(),
    )
    bench = _rows(s, select(Benchmark.id, Benchmark.name, Benchmark.unit, Benchmark.type, Benchmark.version,
                            Benchmark.param_names))
    bench = bench.set_index("id")
    keys = keys[~keys["benchmark_id"].map(bench["name"]).map(lambda n: is_provenance(str(n)))]
    out = pd.DataFrame(
        {
            "benchmark": keys["benchmark_id"].map(bench["name"]),
            "params_key": keys["params_key"],
            "unit": keys["benchmark_id"].map(bench["unit"]),
            "type": keys["benchmark_id"].map(bench["type"]),
            "version": keys["benchmark_id"].map(bench["version"]),
            "param_names": keys["benchmark_id"].map(bench["param_names"]),
        }
    )
    return out.sort_values(["benchmark", "params_key"], ignore_index=True)


def history(s: Session, machine: str, benchmark: str, params_keys: Sequence[str]) -> pd.DataFrame:
    """Several series of one benchmark over the machine's commits, one row per (params_key, commit) that
    has a result, the commit's runs pooled by ``db.queries.pool_runs`` (the shared rule: median value, status
    ok if any run has a value): params_key, commit_id, value, q_25, q_75, status (ok | failed | skipped),
    runs, run_date, benchmark_version, environment and run_id (of the newest run with a value: its
    versions are :func:`run_infos`'). Commits without a row did not run the series."""
    from db.queries import pool_runs

    mid = machine_id(s, machine)
    bid = s.execute(select(Benchmark.id).where(Benchmark.name == benchmark)).scalar_one_or_none()
    cols = ["params_key", "commit_id", "value", "q_25", "q_75", "status", "runs", "run_date",
            "benchmark_version", "environment", "run_id"]
    if mid is None or bid is None or not params_keys:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    stmt = (
        select(
            Result.params_key,
            Run.commit_id,
            Run.id.label("run_id"),
            Run.started_at.label("run_started_at"),
            Result.status,
            Result.value,
            Result.q_25,
            Result.q_75,
            Result.benchmark_version,
            Environment.name.label("environment"),
        )
        .join(Run, Run.id == Result.run_id)
        .join(Environment, Environment.id == Run.environment_id)
        .where(Result.benchmark_id == bid, Run.machine_id == mid, Result.params_key.in_(list(params_keys)))
    )
    df = _rows(s, stmt)
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    for c in ("value", "q_25", "q_75"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    df["run_started_at"] = pd.to_datetime(df["run_started_at"])
    out = pool_runs(df, ["params_key", "commit_id"]).rename(columns={"run_started_at": "run_date"})
    out["commit_id"] = out["commit_id"].astype("int64")
    out["run_id"] = out["run_id"].astype("int64")
    return out[cols].reset_index(drop=True)


def run_infos(s: Session, run_ids: Sequence[int]) -> dict[int, dict[str, Any] | None]:
    """{run id: the run's own versions (``Run.info``: its results file's params)}; None for runs stored
    before runs kept them (the caller falls back to the machine's, saying so)."""
    ids = sorted({int(i) for i in run_ids})
    if not ids:
        return {}
    return {int(i): info for i, info in s.execute(select(Run.id, Run.info).where(Run.id.in_(ids))).all()}


LAUNCH_PREFIX = PROVENANCE_PREFIX  # <suite class>.track_launch_<key>: one kernel-config value per case


def launch_config(s: Session, machine: str, benchmark: str, params_keys: Sequence[str]) -> pd.DataFrame:
    """The kernel configuration each case ran with, where the suite records it: benchmarks named
    ``<module>.<Class>.track_launch_<key>`` (e.g. ``track_launch_block_h``, ``track_launch_num_splits``,
    ``track_launch_prefetch``, ``track_launch_spill_bytes``) in the same module as ``benchmark``, with the
    same params. Long frame: params_key, commit_id, key, value (median over the commit's runs)."""
    cols = ["params_key", "commit_id", "key", "value"]
    module = benchmark.split(".", 1)[0]
    mid = machine_id(s, machine)
    names = dict(s.execute(
        select(Benchmark.id, Benchmark.name).where(Benchmark.name.startswith(f"{module}.", autoescape=True))
    ).all())
    ids = {i: n.rsplit(".", 1)[-1][len(LAUNCH_PREFIX):] for i, n in names.items() if is_provenance(n)}
    if mid is None or not ids or not params_keys:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    df = _rows(s, select(Result.params_key, Run.commit_id, Result.benchmark_id, Result.value)
               .join(Run, Run.id == Result.run_id)
               .where(Run.machine_id == mid, Result.benchmark_id.in_(list(ids)),
                      Result.params_key.in_(list(params_keys)), Result.value.is_not(None)))
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    df["key"] = df["benchmark_id"].map(ids)
    df["value"] = df["value"].astype(float)
    out = df.groupby(["params_key", "commit_id", "key"], sort=False)["value"].median().reset_index()
    out["commit_id"] = out["commit_id"].astype("int64")
    return out[cols]


def machine_info(s: Session, machine: str) -> dict[str, Any]:
    """The machine row as a dict (GPU identity and versions as the newest ingested run recorded them)."""
    row = s.execute(select(Machine).where(Machine.name == machine)).scalar_one_or_none()
    if row is None:
        return {}
    out = {c.name: getattr(row, c.name) for c in Machine.__table__.columns if c.name not in ("id",)}
    info = out.pop("info", None) or {}
    # Keys the runner adds beyond the fixed columns (arch profile, ...), when present.
    for k, v in info.items():
        out.setdefault(k, v)
    return out


def parents(s: Session, regs: pd.DataFrame) -> pd.Series:
    """For each regression row (benchmark, params_key, machine, sha): the sha of the last commit before it
    (history order) at which that series had a value on that machine; None when there is none.

    This is the "good" end of the commit range parent..commit in which the step happened (commits between
    the two did not run the series)."""
    if regs.empty:
        return pd.Series([], dtype=object)
    names = dict(s.execute(select(Machine.name, Machine.id)).all())
    bench = dict(s.execute(select(Benchmark.name, Benchmark.id)).all())
    keys = {(bench.get(b), k, names.get(m)) for b, k, m in zip(regs["benchmark"], regs["params_key"],
                                                                regs["machine"], strict=True)}
    keys = {k for k in keys if None not in k}
    pos = {int(cid): p for p, cid in enumerate(s.execute(select(Commit.id).order_by(*commit_order())).scalars())}
    sha_of = dict(s.execute(select(Commit.id, Commit.sha)).all())
    id_of = {v: k for k, v in sha_of.items()}
    stmt = (
        select(Result.benchmark_id, Result.params_key, Run.machine_id, Run.commit_id)
        .join(Run, Run.id == Result.run_id)
        .where(Result.status == "ok", tuple_(Result.benchmark_id, Result.params_key, Run.machine_id).in_(keys))
        .distinct()
    )
    measured: dict[tuple[int, str, int], list[int]] = {}
    for b, k, m, c in s.execute(stmt).all() if keys else []:
        measured.setdefault((b, k, m), []).append(pos[int(c)])
    at = {p: c for c, p in pos.items()}
    out = []
    for b, k, m, sha in zip(regs["benchmark"], regs["params_key"], regs["machine"], regs["sha"], strict=True):
        here = pos.get(id_of.get(sha, -1))
        before = [p for p in measured.get((bench.get(b), k, names.get(m)), []) if here is not None and p < here]
        out.append(sha_of[at[max(before)]] if before else None)
    return pd.Series(out, index=regs.index, dtype=object)


def commit_messages(s: Session, shas: Sequence[str]) -> dict[str, str | None]:
    wanted = sorted({x for x in shas if isinstance(x, str)})
    if not wanted:
        return {}
    return dict(s.execute(select(Commit.sha, Commit.message).where(Commit.sha.in_(wanted))).all())


def triage_notes(s: Session) -> dict[int, list[dict[str, Any]]]:
    """{regression id: [{at, status, note}, ...] oldest first} from the triage log."""
    rows = s.execute(select(Meta.key, Meta.value).where(Meta.key.startswith(TRIAGE_PREFIX))).all()
    out: dict[int, list[dict[str, Any]]] = {}
    for key, value in rows:
        try:
            rid = int(key[len(TRIAGE_PREFIX):])
        except ValueError:
            continue
        entries = json.loads(value) if isinstance(value, str) else value
        out[rid] = list(entries or [])
    return out


def add_triage_note(s: Session, regression_id: int, status: str, note: str, *, at: dt.datetime | None = None) -> None:
    """Append one entry to a regression's triage log (flushes, does not commit: the caller's transaction
    also changes the status, so both land or neither)."""
    key = f"{TRIAGE_PREFIX}{int(regression_id)}"
    row = s.get(Meta, key)
    entry = {"at": (at or utcnow()).isoformat(timespec="seconds"), "status": status, "note": note}
    if row is None:
        s.add(Meta(key=key, value=[entry]))
    else:
        row.value = [*(row.value or []), entry]
    s.flush()
