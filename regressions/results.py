"""The one data-access module of regression comparison: a commit's result per series, commit
resolution, the machines two commits share, and a series' run-to-run noise on a machine.

`mlaperf compare` (regressions.cli), the library's :func:`regressions.compare.compare_commits` and the
dashboard read the store through these functions and nothing else, so they cannot disagree. Sessions
are the caller's.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Machine, Result, Run, commit_order


class UsageError(ValueError):
    """Bad command-line input (unknown commit, machine, ...): the CLI exits with status 2."""


def commit_positions(session: Session) -> dict[int, int]:
    """{commit id: position in history} (git generation, then date, then id: ``db.models.commit_order``)."""
    ids = session.execute(select(Commit.id).order_by(*commit_order())).scalars().all()
    return {int(cid): pos for pos, cid in enumerate(ids)}


def resolve_commit(session: Session, ref: str, what: str, repo: str | Path | None = None) -> Commit:
    """A stored commit from a full sha, a unique sha prefix, or (with a git repository) a git ref."""
    ref = ref.strip()
    if not ref:
        raise UsageError(f"{what}: empty commit")
    hexlike = all(c in "0123456789abcdefABCDEF" for c in ref)
    if hexlike and len(ref) >= 4:
        found = (
            session.execute(select(Commit).where(Commit.sha.startswith(ref.lower())).limit(2)).scalars().all()
        )
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UsageError(f"{what}: {ref!r} is ambiguous: more than one stored commit starts with it")
    sha = _git_rev_parse(ref, repo)
    if sha is not None:
        commit = session.execute(select(Commit).where(Commit.sha == sha)).scalar_one_or_none()
        if commit is not None:
            return commit
        raise UsageError(f"{what}: {ref!r} is commit {sha}, which has no results in the store")
    raise UsageError(f"{what}: {ref!r} matches no commit in the store (give a full sha or a unique prefix)")


def _git_rev_parse(ref: str, repo: str | Path | None) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            cwd=repo or ".",
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def machines_with(session: Session, commit_ids: list[int]) -> list[str]:
    """Machines that have runs at every one of ``commit_ids``."""
    names: set[str] | None = None
    for cid in commit_ids:
        found = set(
            session.execute(
                select(Machine.name)
                .join(Run, Run.machine_id == Machine.id)
                .where(Run.commit_id == cid)
                .distinct()
            ).scalars()
        )
        names = found if names is None else names & found
    return sorted(names or [])


def results_at(session: Session, commit_id: int, machine: str) -> pd.DataFrame:
    """One row per series at a commit on a machine: several runs are pooled (median value, all samples)."""
    stmt = (
        select(
            Benchmark.name.label("benchmark"),
            Benchmark.unit,
            Result.params_key,
            Result.params,
            Result.status,
            Result.value,
            Result.samples,
            Result.ci_99_a,
            Result.ci_99_b,
        )
        .join(Run, Result.run_id == Run.id)
        .join(Machine, Run.machine_id == Machine.id)
        .join(Benchmark, Result.benchmark_id == Benchmark.id)
        .where(Run.commit_id == commit_id, Machine.name == machine)
    )
    rows = session.execute(stmt).all()
    df = pd.DataFrame(rows, columns=list(stmt.selected_columns.keys()))
    if df.empty:
        return df

    def pool(g: pd.DataFrame) -> pd.Series:
        vals = g["value"].dropna()
        samples = [float(x) for s in g["samples"] if isinstance(s, list) for x in s if _finite(x)]
        a, b = g["ci_99_a"].dropna(), g["ci_99_b"].dropna()
        return pd.Series(
            {
                "unit": g["unit"].iloc[0],
                "params": g["params"].iloc[0],
                "value": float(vals.median()) if len(vals) else math.nan,
                "samples": samples,
                "ci_99_a": float(a.min()) if len(a) else math.nan,
                "ci_99_b": float(b.max()) if len(b) else math.nan,
                "failed": bool(len(vals) == 0),
            }
        )

    out = [
        {"benchmark": bname, "params_key": pkey, **pool(g).to_dict()}
        for (bname, pkey), g in df.groupby(["benchmark", "params_key"], sort=True)
    ]
    return pd.DataFrame(out)


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def history_noise(
    session: Session,
    machine: str,
    series: Iterable[tuple[str, str]],
    *,
    upto: Iterable[int] | None = None,
    window: int = 100,
) -> dict[tuple[str, str], tuple[float, int]]:
    """Per (benchmark, params_key): run-to-run noise sigma (log units) over the machine's last ``window``
    commits in history order (``db.models.commit_order``) up to and including the newest of the commit
    ids ``upto`` (None: all), and the number of runs it rests on."""
    from regressions.detect import noise_scale

    wanted = set(series)
    if not wanted:
        return {}
    mid = session.execute(select(Machine.id).where(Machine.name == machine)).scalar_one()
    position = commit_positions(session)
    measured = session.execute(select(Run.commit_id).where(Run.machine_id == mid).distinct()).scalars().all()
    bounds = [position[c] for c in (upto or []) if c in position]
    last = max(bounds) if bounds else len(position)
    kept = sorted(position[c] for c in measured if position[c] <= last)[-window:] if window > 0 else []
    if not kept:
        return {}
    commit_at = {p: c for c, p in position.items()}
    order = {commit_at[p]: i for i, p in enumerate(kept)}
    rows = session.execute(
        select(Benchmark.name, Result.params_key, Run.commit_id, Result.value)
        .join(Run, Result.run_id == Run.id)
        .join(Benchmark, Result.benchmark_id == Benchmark.id)
        .where(Run.machine_id == mid, Run.commit_id.in_(list(order)), Result.value.is_not(None))
    ).all()
    df = pd.DataFrame(rows, columns=["benchmark", "params_key", "commit_id", "value"])
    out: dict[tuple[str, str], tuple[float, int]] = {}
    if df.empty:
        return out
    df = df[pd.MultiIndex.from_frame(df[["benchmark", "params_key"]]).isin(list(wanted))]
    df = df[df["value"] > 0]
    df["pos"] = df["commit_id"].map(order)
    for (bname, pkey), g in df.groupby(["benchmark", "params_key"]):
        v = g.groupby("pos")["value"].median().sort_index().to_numpy()
        out[(str(bname), str(pkey))] = (noise_scale(np.log(v), floor=0.0), int(v.size))
    return out
