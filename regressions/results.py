"""The one data-access module of regression comparison: a commit's result per series, commit
resolution, the machines two commits share, and a series' run-to-run noise on a machine; and the
reading and per-commit pooling of result values that noise and the detector (regressions.store) share.

`mlaperf compare` (regressions.commands), the library's :func:`regressions.compare.compare_commits` and the
dashboard read the store through these functions and nothing else, so they cannot disagree. Sessions
are the caller's.
"""

from __future__ import annotations

import gc
import math
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from sqlalchemy import null, select
from sqlalchemy.orm import Session

from db.models import Benchmark, Commit, Environment, Machine, Result, Run, commit_order
from db.queries import commit_candidates, commit_results
from db.query_base import versions_measured_last

Key = tuple[int, str, int]  # a series: benchmark_id, params_key, machine_id


class UsageError(ValueError):
    """Bad command-line input (unknown commit, machine, ...): the CLI exits with status 2."""


def commit_positions(session: Session) -> dict[int, int]:
    """{commit id: position in history} (git generation, then date, then id: ``db.models.commit_order``)."""
    ids = session.execute(select(Commit.id).order_by(*commit_order())).scalars().all()
    return {int(cid): pos for pos, cid in enumerate(ids)}


MIN_PREFIX = 4  # hex digits of a commit sha prefix, the CLI's and the dashboard's
# What a link may say for on and off, read alike by the dashboard (dashboard.url_values) and the static site (its
# data file carries them).
LINK_ON, LINK_OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def prefix_problem(ref: str, matches: Sequence[str], where: str = "in the store") -> str:
    """Why ``ref`` names no single commit, ``matches`` being the shas of ``where`` that start with it: too
    short, ambiguous (with the first matches) or none; the one wording of the CLI and the commit pickers."""
    if len(ref) < MIN_PREFIX:
        return f"{ref!r} is too short: give at least {MIN_PREFIX} characters of a commit sha"
    if len(matches) > 1:
        shown = ", ".join(m[:12] for m in matches[:5]) + (", ..." if len(matches) > 5 else "")
        return f"{ref!r} is ambiguous: {len(matches)} commits {where} start with it ({shown})"
    return f"no commit {where} starts with {ref!r}"


def resolve_commit(session: Session, ref: str, what: str, repo: str | Path | None = None) -> Commit:
    """The stored commit ``ref`` names: a full sha, a unique sha prefix (4 hex digits or more), or a git
    ref (``HEAD~1``, a branch, a tag) resolved in the git repository ``repo`` (default: the current
    directory). Anything else raises :class:`UsageError` whose message starts with ``what`` (the
    argument's name, e.g. ``BASE``) and says why: empty, ambiguous (with the candidates), not stored.
    """
    ref = ref.strip()
    if not ref:
        raise UsageError(f"{what}: empty commit")
    hexlike = all(c in "0123456789abcdefABCDEF" for c in ref)
    found = commit_candidates(session, ref) if hexlike and len(ref) >= MIN_PREFIX else []
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise UsageError(f"{what}: {prefix_problem(ref, [c.sha for c in found])}")
    sha = _git_rev_parse(ref, repo)
    if sha is not None:
        commit = session.execute(select(Commit).where(Commit.sha == sha)).scalar_one_or_none()
        if commit is not None:
            return commit
        raise UsageError(f"{what}: {ref!r} is commit {sha}, which has no results in the store")
    if hexlike:
        raise UsageError(f"{what}: {prefix_problem(ref, [])} (and it names no git ref here)")
    raise UsageError(f"{what}: {ref!r} is no git ref here, and no commit in the store starts with it")


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


def machine_id(session: Session, machine: str) -> int:
    """The id of the machine named ``machine`` (a ``--machine`` argument); :class:`UsageError` naming the
    known machines when the store has none of that name."""
    mid = session.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()
    if mid is None:
        known = ", ".join(session.execute(select(Machine.name).order_by(Machine.name)).scalars()) or "none"
        raise UsageError(f"--machine: no machine named {machine!r} in the store (known machines: {known})")
    return int(mid)


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


def benchmark_runs(session: Session, commit_id: int, machine: str) -> dict[str, set[tuple[str | None, str]]]:
    """{benchmark name: the (asv version, asv environment) pairs of its results} at a commit on a machine (any
    status)."""
    rows = session.execute(
        select(Benchmark.name, Result.benchmark_version, Environment.name)
        .join(Result, Result.benchmark_id == Benchmark.id)
        .join(Run, Run.id == Result.run_id)
        .join(Environment, Environment.id == Run.environment_id)
        .join(Machine, Machine.id == Run.machine_id)
        .where(Run.commit_id == commit_id, Machine.name == machine)
        .distinct()
    ).all()
    out: dict[str, set[tuple[str | None, str]]] = {}
    for name, version, env in rows:
        out.setdefault(str(name), set()).add((version, str(env)))
    return out


def last_versions(session: Session, commit_id: int, machine: str, names: Iterable[str]) -> dict[str, str]:
    """{benchmark name: the asv version its latest run with a value measured} at a commit on a machine, for the
    benchmarks ``names`` (``db.query_base.versions_measured_last``, the rule History and detection apply)."""
    mid = session.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()
    wanted = select(Benchmark.id, Benchmark.name).where(Benchmark.name.in_(sorted(set(names))))
    ids = dict(session.execute(wanted).all())
    if mid is None or not ids:
        return {}
    keys = pd.DataFrame({"benchmark_id": list(ids), "machine_id": int(mid), "commit_id": int(commit_id)})
    chosen = versions_measured_last(session, keys)
    return {str(ids[int(b)]): str(v) for b, v in zip(chosen["benchmark_id"], chosen["version"], strict=True)}


def param_names(session: Session, benchmarks: Iterable[str] | None = None) -> dict[str, list[str]]:
    """{benchmark: its asv ``param_names``} (of ``benchmarks``, default all): the order its parameters are
    named in (``regressions.labels``); the stored params_key sorts them alphabetically."""
    stmt = select(Benchmark.name, Benchmark.param_names)
    if benchmarks is not None:
        stmt = stmt.where(Benchmark.name.in_(sorted(set(benchmarks))))
    return {str(n): [str(x) for x in p] if isinstance(p, list) else [] for n, p in session.execute(stmt).all()}


def results_at(session: Session, commit_id: int, machine: str, versions: Mapping[str, set[str | None]] | None = None,
               environments: Mapping[str, set[str]] | None = None) -> pd.DataFrame:  # fmt: skip
    """A commit's result per series on a machine: one row per (benchmark, params_key), sorted by both.

    Columns: benchmark, unit, type, params_key, params (dict of asv repr strings), status ('ok' |
    'failed' | 'skipped'), value, samples (finite floats, empty when none), ci_99_a, ci_99_b, runs. A
    commit run more than once there (re-runs, several environments) gets the median over its runs
    (``db.queries.commit_results``/``pool_runs``: the rule the dashboard's pages and the detector apply
    too). Empty (with these columns) when the machine has no run at that commit. ``versions``: only the runs
    of a listed benchmark at those asv versions pool, and in those asv environments (``commit_results``).
    """
    columns = ["benchmark", "unit", "type", "params_key", "params", "status", "value", "samples"]
    out = commit_results(session, commit_id, machine, versions=versions, environments=environments)
    out = out[[*columns, "ci_99_a", "ci_99_b", "runs"]]
    samples = [[float(x) for x in v if _finite(x)] if isinstance(v, list) else [] for v in out["samples"]]
    return out.assign(samples=pd.Series(samples, index=out.index, dtype=object))


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


LEVEL_RUNS = 3  # the base's level: the median of its value and the two before it (of its benchmark version)


class Noise(NamedTuple):
    """A series' history up to the base: run-to-run ``sigma`` (log units), the ``runs`` (commits) it rests on, and
    ``offset``, log(level / last value): how far the newest value (the base's) sits from its own level."""

    sigma: float
    runs: int
    offset: float


def history_noise(
    session: Session,
    machine: str,
    series: Iterable[tuple[str, str]],
    *,
    upto: Iterable[int] | None = None,
    window: int = 100,
) -> dict[tuple[str, str], Noise]:
    """Per (benchmark, params_key): run-to-run noise sigma (log units) around the series' own levels
    (``detect.step_free``) over the machine's last ``window`` commits in history order
    (``db.models.commit_order``) up to and including the newest of the commit ids ``upto`` (None: all), the
    number of commits it rests on (a commit's runs pooled by median), and the newest value's offset from its
    level (the median of it and the values just before it of the same benchmark version, :data:`LEVEL_RUNS` in
    all). Empty for an unknown machine."""
    from regressions.detect import noise_scales, step_free

    wanted = set(series)
    if not wanted:
        return {}
    mid = session.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()
    if mid is None:
        return {}
    position = commit_positions(session)
    measured = session.execute(select(Run.commit_id).where(Run.machine_id == mid).distinct()).scalars().all()
    bounds = [position[c] for c in (upto or []) if c in position]
    last = max(bounds) if bounds else len(position)
    kept = sorted(position[c] for c in measured if position[c] <= last)[-window:] if window > 0 else []
    if not kept:
        return {}
    commit_at = {p: c for c, p in position.items()}
    bench_id = dict(
        session.execute(
            select(Benchmark.name, Benchmark.id).where(Benchmark.name.in_({b for b, _ in wanted}))
        ).all()
    )
    wanted_keys = {(bench_id[b], k, mid) for b, k in wanted if b in bench_id}
    if not wanted_keys:
        return {}
    # Noise pools a series' commits across its version segments; the level keeps to the newest segment.
    runs = load_values(session, machine_ids=[mid], series=wanted_keys, windows={mid: [commit_at[p] for p in kept]})
    runs = runs[runs["value"] > 0]
    if runs.empty:
        return {}
    # A commit's runs pooled by median, then each series' values in history order (the detector's pooling;
    # its version segments do not matter to noise).
    med = per_commit(version_codes(runs).assign(pos=runs["commit_id"].map(position)))
    name_of = {i: b for b, i in bench_id.items()}
    bids = med["benchmark_id"].to_numpy()
    pkeys = med["params_key"].to_numpy(dtype=object)
    logs = np.log(med["value"].to_numpy(dtype=float))
    starts = np.flatnonzero(np.r_[True, (bids[1:] != bids[:-1]) | (pkeys[1:] != pkeys[:-1])])
    # Noise around the series' own levels: its past steps are changes, not noise.
    sigmas = noise_scales(step_free(logs, starts), starts, floor=0.0)
    sizes = np.diff(np.r_[starts, len(bids)])
    segment = med["segment"].to_numpy()
    offsets = []
    for i, n in zip(starts, sizes, strict=True):
        tail = np.arange(i + max(0, n - LEVEL_RUNS), i + n)
        tail = tail[segment[tail] == segment[i + n - 1]]
        offsets.append(float(np.median(logs[tail]) - logs[i + n - 1]))
    return {(name_of[int(bids[i])], str(pkeys[i])): Noise(float(sigma), int(n), off)
            for i, sigma, n, off in zip(starts, sigmas, sizes, offsets, strict=True)}


def _in_window(stmt: Any, windows: dict[int, list[int] | None] | None) -> Any:
    if windows is not None and len(windows) == 1 and None not in windows.values():
        # One machine (the usual runner): the window's commits go into SQL, so only they are read.
        (window,) = windows.values()
        stmt = stmt.where(Run.commit_id.in_(window or []))
    return stmt


# The columns :func:`load_values` reads, typed as the frame holds them.
_ROW = np.dtype(
    [("benchmark_id", np.int64), ("params_key", object), ("machine_id", np.int64), ("commit_id", np.int64),
     ("value", np.float64), ("version", object), ("run_id", np.int64)]
)  # fmt: skip


def load_values(
    session: Session,
    *,
    machine_ids: list[int] | None,
    series: set[Key] | None,
    windows: dict[int, list[int] | None] | None,
    versions: bool = True,
) -> pd.DataFrame:
    """Successful results: benchmark_id, params_key, machine_id, commit_id, value, version (the asv
    benchmark version as stored: None unknown, and always None unless ``versions``; :func:`version_codes`
    turns it into integers once every frame to be compared is joined), run_id; one row per run."""
    stmt = (
        select(
            Result.benchmark_id,
            Result.params_key,
            Run.machine_id,
            Run.commit_id,
            Result.value,
            Result.benchmark_version if versions else null(),
            Run.id,
        )
        .join(Run, Result.run_id == Run.id)
        .where(Result.value.is_not(None))
    )
    if machine_ids is not None:
        stmt = stmt.where(Run.machine_id.in_(machine_ids))
    if series is not None:
        # Only the benchmarks asked for are read (the exact series are kept below).
        stmt = stmt.where(Result.benchmark_id.in_(sorted({b for b, _, _ in series})))
    stmt = _in_window(stmt, windows)
    # Column-wise arrays from the driver's own rows, through one structured array (typed in one pass, no
    # per-column conversion of objects): the ORM and pandas' row-by-row construction each cost seconds on a
    # store of 500,000 results, SQLAlchemy's per-row result processing (nothing to convert for these plain
    # columns) half of reading Compare's noise window (64,800 values at 1,000 commits x 552 series), and
    # transposing the rows with zip() a tuple iterator per row (garbage-collector passes that take longer
    # the larger the process).
    with _collector_paused():
        cols = np.array(_driver_rows(session, stmt), dtype=_ROW)
    df = pd.DataFrame(
        {
            "benchmark_id": cols["benchmark_id"],
            "params_key": cols["params_key"],
            "machine_id": cols["machine_id"],
            "commit_id": cols["commit_id"],
            "value": cols["value"],
            "version": cols["version"],
            "run_id": cols["run_id"],
        }
    )
    if series is not None and not df.empty:
        keys = pd.MultiIndex.from_frame(df[["benchmark_id", "params_key", "machine_id"]])
        df = df[keys.isin(list(series))]
    return df


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a read builds a row tuple per result: the tuples hold no
    cycles, and the full collections their number triggers walk every object of the process."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _driver_rows(session: Session, stmt: Any) -> list[Any]:
    """``stmt``'s rows as the DBAPI cursor returns them (integers, floats and strings only)."""
    conn = session.connection()
    compiled = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args = tuple(params[k] for k in compiled.positiontup) if compiled.positional else params
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        cursor.execute(str(compiled), args)
        return cursor.fetchall()
    finally:
        cursor.close()


def version_codes(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with the version strings of :func:`load_values` as integer codes (-1 unknown). Codes of one
    call only compare with each other: frames read apart (a machine's window, a series' wider one) are joined
    first, then coded."""
    return runs.assign(version=pd.factorize(runs["version"].to_numpy(dtype=object), use_na_sentinel=True)[0])


def version_changed(versions: Sequence[object]) -> np.ndarray:
    """Per value in commit order, whether the benchmark's asv version changed there: it differs from the last
    known version before it. A value without one (older asv: None, NaN) continues its segment, as
    :func:`per_commit` reads it; the History chart and the site draw their version lines by this."""
    known = pd.Series([None if v is None or str(v) in ("None", "nan", "") else str(v) for v in versions],
                      dtype=object).ffill()  # fmt: skip
    prev = known.shift(1)
    return (known.notna() & prev.notna() & (known != prev)).to_numpy(dtype=bool)


def per_commit(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per series and commit (the median of its runs: re-runs, environments), in history order,
    with ``segment``: asv gives a benchmark a new version when its code changes, and each version is a
    segment of its own (no step across). A run without a version (older asv) continues its segment."""
    keys = ["benchmark_id", "params_key", "machine_id"]
    grouped = runs.groupby([*keys, "pos"], sort=True)
    medians = grouped["value"].median()
    df = medians.reset_index()
    version = grouped["version"].max().to_numpy().astype(float)
    version[version < 0] = np.nan
    # A new series where a key's code changes (the sorted groups' own integer codes: comparing the key
    # columns costs a conversion of the params_key strings).
    first = np.ones(len(df), dtype=bool)
    if len(df) > 1:
        codes = medians.index.codes[: len(keys)]
        first[1:] = np.logical_or.reduce([c[1:] != c[:-1] for c in codes])
    # Carry the last known version forward within each series.
    series_id = np.cumsum(first)
    known = pd.Series(version).groupby(series_id).ffill().to_numpy()
    prev = np.concatenate([[np.nan], known[:-1]])
    changed = ~first & ~np.isnan(prev) & ~np.isnan(known) & (known != prev)
    df["segment"] = np.cumsum(changed)
    return df
