"""The store's read queries (and one small write), the one home of them: the dashboard's pages, the
comparisons (``regressions.results``), the tests and the benchmark scripts all read through here.

Every function takes a caller-owned :class:`~sqlalchemy.orm.Session`, builds its SQL with ``select()``
(parameters bound, never formatted into SQL) and returns a pandas DataFrame unless said otherwise.
The regressions and their triage writers live in ``db.regression_queries`` (re-exported here); the
shared errors, lookups and the rules for a commit measured more than once in ``db.query_base``.

A series is (benchmark name, ``params_key``, machine name). When a commit was measured more than once on
a machine (re-runs, several environments), its result is the median over those runs (:func:`pool_runs`) of
the asv version measured last there (:func:`last_version_only`): the rules detection and the dashboard apply,
so they see the same value (`mlaperf compare` pools the same way, of the versions both commits measured).
Times are naive UTC. Big frames are fetched as narrow rows and joined to the small tables in pandas.
Shaped for the dashboard at 1,000 commits x 500 series: :func:`history` reads several series of one
benchmark at once, :func:`series` is one DISTINCT without per-series counts. Kernel-config records
(``db.provenance.is_provenance``) are not series: :func:`launch_config` reads them for the case they describe.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from db.models import Benchmark, Commit, Environment, Machine, Result, Run, commit_order
from db.provenance import config_key, is_provenance
from db.query_base import (
    _MACHINE_COLUMNS,
    AT,
    CommitNotFound,
    NotFound,
    _benchmark_id,
    _datetimes,
    _empty,
    _frame,
    _key,
    _machine_id,
    last_version_only,
    param_value,
    pool_runs,
)
from db.regression_queries import regressions, set_regression_status, set_regression_triage, triage_fields

__all__ = [
    "CommitNotFound", "NotFound", "benchmarks", "commit_candidates", "commit_messages", "commit_results", "commits",
    "history", "last_version_only", "launch_config", "machine_info", "machines", "param_value", "pool_runs",
    "recent_values",
    "regressions", "results_at_commit", "run_infos", "series", "set_regression_status", "set_regression_triage",
    "triage_fields",
]


# -- lookups ------------------------------------------------------------------------------------------


def machines(s: Session) -> pd.DataFrame:
    """All machines with their GPU identity, plus ``runs`` (count) and ``last_run_at``; by name."""
    stats = (
        select(Run.machine_id, func.count(Run.id).label("runs"), func.max(Run.started_at).label("last_run_at"))
        .group_by(Run.machine_id)
        .subquery()
    )
    stmt = (
        select(*(getattr(Machine, c) for c in _MACHINE_COLUMNS), stats.c.runs, stats.c.last_run_at)
        .outerjoin(stats, stats.c.machine_id == Machine.id)
        .order_by(Machine.name)
    )
    frame = _frame(s, stmt)
    frame["runs"] = frame["runs"].fillna(0).astype(int)
    return _datetimes(frame, "last_run_at")


def commits(s: Session, machine: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Commits oldest -> newest (git generation, then date, then id; see :func:`db.models.commit_order`):
    commit_id, sha, date, message, author, parents, branch, generation (None without a repository at
    ingest), pos (0..n-1, the commit's place in this frame: the x axis of a history).

    With ``machine``, only commits that have runs on that machine, or on any of several (History's overlay of
    machines, each at its own commits); an unknown machine: :class:`NotFound`.
    """
    stmt = select(
        Commit.id.label("commit_id"),
        Commit.sha,
        Commit.date,
        Commit.message,
        Commit.author,
        Commit.parents,
        Commit.branch,
        Commit.generation,
    ).order_by(*commit_order())
    if machine is not None:
        ids = [_machine_id(s, m) for m in ([machine] if isinstance(machine, str) else machine)]
        stmt = stmt.where(Commit.id.in_(select(Run.commit_id).where(Run.machine_id.in_(ids))))
    frame = _datetimes(_frame(s, stmt), "date")
    frame["commit_id"] = frame["commit_id"].astype("int64")
    frame["pos"] = np.arange(len(frame), dtype="int64")
    return frame


def benchmarks(s: Session) -> pd.DataFrame:
    """All benchmarks: id, name, type, unit, param_names, params, version; by name."""
    stmt = select(
        Benchmark.id,
        Benchmark.name,
        Benchmark.type,
        Benchmark.unit,
        Benchmark.param_names,
        Benchmark.params,
        Benchmark.version,
    ).order_by(Benchmark.name)
    return _frame(s, stmt)


def commit_candidates(s: Session, sha: str) -> list[Commit]:
    """The stored commits ``sha`` (lower-cased) may name: the one whose sha it is, else up to 6 whose sha
    starts with it, by sha (callers show the first 5, and ``...`` when there are more). The one sha and
    prefix lookup of :func:`results_at_commit` and ``regressions.results.resolve_commit``."""
    sha = sha.lower()
    exact = s.execute(select(Commit).where(Commit.sha == sha)).scalar_one_or_none()
    if exact is not None:
        return [exact]
    stmt = select(Commit).where(Commit.sha.startswith(sha, autoescape=True)).order_by(Commit.sha).limit(6)
    return list(s.execute(stmt).scalars())


def _commit_by_sha(s: Session, ref: str) -> Commit:
    """The commit whose sha is ``ref`` or starts with it; :class:`CommitNotFound` if none or several.

    Only for :func:`results_at_commit`; the public commit lookup (sha, prefix or git ref) is
    ``regressions.results.resolve_commit``.
    """
    ref = ref.strip().lower()
    if not ref:
        raise CommitNotFound("empty commit sha")
    found = commit_candidates(s, ref)
    if not found:
        raise CommitNotFound(f"no stored commit matches {ref!r}")
    if len(found) > 1:
        shown = ", ".join(c.sha[:12] for c in found[:5])
        raise CommitNotFound(f"commit prefix {ref!r} is ambiguous: {shown}{', ...' if len(found) > 5 else ''}")
    return found[0]


# -- series -------------------------------------------------------------------------------------------

def series(s: Session, machine: str | None = None) -> pd.DataFrame:
    """Distinct series: benchmark, params_key, machine, unit, type, version (the benchmark's newest asv
    version), param_names (asv's order); sorted by machine, benchmark, params_key. Kernel-config records
    (``db.provenance.is_provenance``) are not listed.

    One DISTINCT over the results, no per-series counts (an aggregate over every result costs seconds on
    10^6 results). With ``machine``, that machine's series only (unknown machine: :class:`NotFound`).
    """
    if machine is not None:
        mid = _machine_id(s, machine)
        keys = _frame(s, _machine_series(s, mid))
        keys["machine_id"] = mid
    else:
        keys = _frame(
            s,
            select(Result.benchmark_id, Result.params_key, Run.machine_id)
            .join(Run, Run.id == Result.run_id)
            .distinct(),
        )
    bench = _frame(
        s,
        select(Benchmark.id, Benchmark.name, Benchmark.unit, Benchmark.type, Benchmark.version, Benchmark.param_names),
    ).set_index("id")
    names = dict(s.execute(select(Machine.id, Machine.name)).all())
    keys = keys[~keys["benchmark_id"].map(bench["name"]).map(lambda n: is_provenance(str(n))).astype(bool)]
    out = pd.DataFrame(
        {
            "benchmark": keys["benchmark_id"].map(bench["name"]),
            "params_key": keys["params_key"],
            "machine": keys["machine_id"].map(names),
            **{col: _of_benchmark(keys["benchmark_id"], bench[col]) for col in ("unit", "type", "version",
                                                                                  "param_names")},
        }
    )
    return out.sort_values(["machine", "benchmark", "params_key"], ignore_index=True)


def _of_benchmark(ids: pd.Series, column: pd.Series) -> pd.Series:
    """A benchmark column per series. ``map`` would turn a missing unit (a ``track_`` benchmark run without
    benchmarks.json) into NaN; the store's None stays None, as every other text column holds it."""
    values = ids.map(column).astype(object)
    return values.where(values.notna(), None)


def _machine_series(s: Session, mid: int) -> Any:
    """The SELECT of (benchmark_id, params_key) measured on machine ``mid``. For a machine with most of the
    store's runs, one walk of the series index keeping the series it ran (a DISTINCT over its results sorts
    every one of them: 0.17 -> 0.04 s at 10^6 results); for a smaller one, a DISTINCT over its own results."""
    mine = s.scalar(select(func.count()).select_from(Run).where(Run.machine_id == mid)) or 0
    total = s.scalar(select(func.count()).select_from(Run)) or 0
    if 2 * mine < total:
        return select(Result.benchmark_id, Result.params_key).where(
            Result.run_id.in_(select(Run.id).where(Run.machine_id == mid))).distinct()
    every = select(Result.benchmark_id, Result.params_key).distinct().subquery()
    other = aliased(Result)
    ran = select(other.id).join(Run, Run.id == other.run_id).where(
        other.benchmark_id == every.c.benchmark_id, other.params_key == every.c.params_key, Run.machine_id == mid)
    return select(every.c.benchmark_id, every.c.params_key).where(ran.exists())


_HISTORY_COLUMNS = ["params_key", "commit_id", "sha", "value", "q_25", "q_75", "status", "runs", "run_date",
                    "benchmark_version", "environment", "run_id"]


def history(
    s: Session,
    benchmark: str,
    params_keys: str | Mapping[str, Any] | Sequence[str | Mapping[str, Any]],
    machine: str,
    commit_ids: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Series of one benchmark over the machine's commits: one row per (params_key, commit) that has a
    result, the commit's runs pooled (:func:`pool_runs`: median value, status ok if any run has a value),
    by params_key then oldest -> newest commit: params_key, commit_id, sha, value, q_25, q_75, status
    (ok | failed | skipped), runs, run_date, benchmark_version, environment and run_id (those of the newest
    run with a value: its versions are :func:`run_infos`'). A commit without a row did not run the series;
    dates, messages and positions are :func:`commits`'.

    ``params_keys``: one series (a params_key string or a params dict) or several (a list of them; the
    dashboard draws several at once). ``commit_ids``: only at these commits (None: every commit; the dashboard
    reads the commits it draws). ``value`` is NaN for failed/skipped results. Unknown benchmark or machine:
    :class:`NotFound`; an unknown params_key has no rows.
    """
    one = isinstance(params_keys, str | Mapping)
    wanted = [_key(params_keys)] if one else [_key(k) for k in params_keys]  # type: ignore[union-attr]
    mid = _machine_id(s, machine)
    bid = _benchmark_id(s, benchmark)
    if not wanted:
        return _empty(_HISTORY_COLUMNS)
    # In history order from SQL (of the commit only the sha is fetched: parsing 10^4 dates would cost more
    # than the rest); the rows of one (series, commit) are adjacent, so the pooled row's place keeps it.
    stmt = (
        select(
            Result.params_key,
            Run.commit_id,
            Commit.sha,
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
        .join(Commit, Commit.id == Run.commit_id)
        .join(Environment, Environment.id == Run.environment_id)
        .where(Result.benchmark_id == bid, Run.machine_id == mid, Result.params_key.in_(wanted))
        .order_by(Result.params_key, *commit_order())
    )
    if commit_ids is not None:
        stmt = stmt.where(Run.commit_id.in_([int(c) for c in commit_ids]))
    frame = _frame(s, stmt)
    if frame.empty:
        return _empty(_HISTORY_COLUMNS)
    for column in ("value", "q_25", "q_75"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame = _datetimes(frame, "run_started_at")
    frame["_row"] = np.arange(len(frame))
    # A few series of the benchmark: the store says which version each commit measured last.
    frame = last_version_only(s, frame.assign(benchmark_id=bid, machine_id=mid), complete=False)
    frame = pool_runs(frame, ["params_key", "commit_id"]).rename(columns={"run_started_at": "run_date"})
    frame = frame.sort_values("_row")
    frame["commit_id"] = frame["commit_id"].astype("int64")
    frame["run_id"] = frame["run_id"].astype("int64")
    return frame[_HISTORY_COLUMNS].reset_index(drop=True)


def launch_config(
    s: Session, benchmark: str, params_keys: Sequence[str | Mapping[str, Any]], machine: str,
    commit_ids: Sequence[int] | None = None,
) -> pd.DataFrame:
    """The kernel configuration each case of ``benchmark`` ran with, where its suite records it: the
    benchmarks ``<module>.<Class>.track_launch_<key>`` (``db.provenance``; e.g. ``track_launch_block_h``,
    ``track_launch_num_splits``, ``track_launch_spill_bytes``) of the same module, with the same params.
    Long frame: params_key, commit_id, key (``block_h``), value (median over the commit's runs with one).
    ``commit_ids``: only at these commits (None: every commit). Unknown machine: :class:`NotFound`."""
    cols = ["params_key", "commit_id", "key", "value"]
    mid = _machine_id(s, machine)
    module = benchmark.split(".", 1)[0]
    names = dict(s.execute(
        select(Benchmark.id, Benchmark.name).where(Benchmark.name.startswith(f"{module}.", autoescape=True))
    ).all())
    ids = {i: key for i, n in names.items() if (key := config_key(n)) is not None}
    wanted = [_key(k) for k in params_keys]
    if not ids or not wanted:
        return _empty(cols)
    runs = select(Run.id).where(Run.machine_id == mid)
    if commit_ids is not None:
        runs = runs.where(Run.commit_id.in_(list(commit_ids)))
    # Run ids from a subquery, so the (benchmark, params, run) index is searched for each series and run
    # instead of scanning every run of each series (History's 4 series x 250 commits of a 1,000-commit store:
    # 65 -> 28 ms).
    stmt = (select(Result.params_key, Run.commit_id, Result.benchmark_id, Result.value)
            .join(Run, Run.id == Result.run_id)
            .where(Result.run_id.in_(runs), Result.benchmark_id.in_(list(ids)), Result.params_key.in_(wanted),
                   Result.value.is_not(None)))
    frame = _frame(s, stmt)
    if frame.empty:
        return _empty(cols)
    frame["key"] = frame["benchmark_id"].map(ids)
    frame["value"] = frame["value"].astype(float)
    out = frame.groupby(["params_key", "commit_id", "key"], sort=False)["value"].median().reset_index()
    out["commit_id"] = out["commit_id"].astype("int64")
    return out[cols]


def recent_values(s: Session, machine: str, commit_ids: Sequence[int]) -> pd.DataFrame:
    """Every series' result at ``commit_ids`` on ``machine`` (the newest few commits: the summary grid's
    sparklines), runs pooled (:func:`pool_runs`, of the version measured last: :func:`last_version_only`):
    benchmark, params_key, commit_id, value (NaN unless ok), benchmark_version (the asv version, None unknown),
    status (pooled: ok, failed or skipped). Kernel-config records (:func:`is_provenance`) are left out. Unknown
    machine: :class:`NotFound`."""
    cols = ["benchmark", "params_key", "commit_id", "value", "benchmark_version", "status"]
    mid = _machine_id(s, machine)
    if not commit_ids:
        return _empty(cols)
    names = {i: n for i, n in s.execute(select(Benchmark.id, Benchmark.name)).all() if not is_provenance(n)}
    runs = select(Run.id).where(Run.machine_id == mid, Run.commit_id.in_([int(c) for c in commit_ids]))
    stmt = (select(Result.benchmark_id, Result.params_key, Run.commit_id, Run.id.label("run_id"), Result.status,
                   Result.value, Result.benchmark_version)
            .join(Run, Run.id == Result.run_id)
            .where(Result.run_id.in_(runs), Result.benchmark_id.in_(list(names))))
    # Through the session's connection, without the run's date: plain rows, no per-row ORM or date processing
    # (more than half the time at 40 commits x 552 series); the pooled value, a median, needs no run order.
    result = s.connection().execute(stmt)
    keys, rows = list(result.keys()), result.all()
    if not rows:
        return _empty(cols)
    frame = pd.DataFrame(dict(zip(keys, map(list, zip(*rows, strict=True)), strict=True)))
    frame["benchmark"] = frame["benchmark_id"].map(names)
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    frame = last_version_only(s, frame.assign(machine_id=mid))  # every benchmark's every result at these commits
    frame = pool_runs(frame.assign(run_started_at=frame["run_id"]), ["benchmark", "params_key", "commit_id"])
    frame["commit_id"] = frame["commit_id"].astype("int64")
    return frame[cols].reset_index(drop=True)


# -- provenance of points -----------------------------------------------------------------------------


def run_infos(s: Session, run_ids: Iterable[int]) -> dict[int, dict[str, Any] | None]:
    """{run id: the run's own versions (``Run.info``: its results file's params)}; None for runs stored
    before runs kept them (migration 0005: the caller falls back to :func:`machine_info`, saying so)."""
    ids = sorted({int(i) for i in run_ids})
    if not ids:
        return {}
    return {int(i): info for i, info in s.execute(select(Run.id, Run.info).where(Run.id.in_(ids))).all()}


def machine_info(s: Session, machine: str) -> dict[str, Any]:
    """The machine's row as a dict (GPU identity and versions as its newest ingested run recorded them),
    with the keys the runner adds beyond the fixed columns (``arch_profile``, ...) from ``Machine.info``.
    Unknown machine: :class:`NotFound`."""
    row = s.execute(select(Machine).where(Machine.name == machine)).scalar_one_or_none()
    if row is None:
        _machine_id(s, machine)  # raises NotFound naming the known machines
    out = {c.name: getattr(row, c.name) for c in Machine.__table__.columns if c.name != "id"}
    for key, value in (out.pop("info", None) or {}).items():
        out.setdefault(key, value)
    return out


def commit_messages(s: Session, shas: Iterable[str | None]) -> dict[str, str | None]:
    """{sha: commit message} for the stored commits among ``shas`` (non-strings are skipped)."""
    wanted = sorted({x for x in shas if isinstance(x, str)})
    if not wanted:
        return {}
    return dict(s.execute(select(Commit.sha, Commit.message).where(Commit.sha.in_(wanted))).all())


def commit_results(
    s: Session, commit_id: int, machine: str, benchmark_prefix: str | None = None,
    versions: Mapping[str, set[str | None]] | None = None, environments: Mapping[str, Collection[str]] | None = None,
) -> pd.DataFrame:  # fmt: skip
    """A commit's result per series on a machine (its runs pooled: :func:`pool_runs`), sorted by
    benchmark and params_key: benchmark, unit, type, params_key, params (dict), status, value, q_25,
    q_75, ci_99_a, ci_99_b, number, repeat, samples, run_id, runs. Empty (same columns) when the
    machine, known or not, has no run at that commit. ``versions`` ({benchmark: asv versions}): only the
    runs of a listed benchmark at one of those versions pool (a result without a version always does).
    ``environments`` ({benchmark: asv environment names}): only the runs of a listed benchmark in those pool.
    """
    stmt = (
        select(
            Benchmark.name.label("benchmark"),
            Benchmark.unit,
            Benchmark.type,
            Result.params_key,
            Result.params,
            Result.status,
            Result.value,
            Result.q_25,
            Result.q_75,
            Result.ci_99_a,
            Result.ci_99_b,
            Result.number,
            Result.repeat,
            Result.samples,
            Run.id.label("run_id"),
            Run.started_at.label("run_started_at"),
            Result.benchmark_id,
            Run.machine_id,
            Run.commit_id,
        )
        .join(Run, Run.id == Result.run_id)
        .join(Machine, Machine.id == Run.machine_id)
        .join(Benchmark, Benchmark.id == Result.benchmark_id)
        .where(Run.commit_id == commit_id, Machine.name == machine)
    )
    if benchmark_prefix:
        stmt = stmt.where(Benchmark.name.startswith(benchmark_prefix, autoescape=True))
    stmt = stmt.join(Environment, Environment.id == Run.environment_id)
    frame = _frame(s, stmt.add_columns(Result.benchmark_version.label("_version"), Environment.name.label("_env")))
    if environments:
        pairs = zip(frame["benchmark"], frame["_env"], strict=True)
        frame = frame[pd.Series([b not in environments or e in environments[b] for b, e in pairs], index=frame.index,
                                dtype=bool)]  # fmt: skip
    frame = frame.drop(columns="_env")
    if versions:
        pairs = zip(frame["benchmark"], frame["_version"], strict=True)
        keep = pd.Series([b not in versions or v is None or v in versions[b] for b, v in pairs], index=frame.index,
                         dtype=bool)  # fmt: skip
        frame = frame[keep]
    frame = last_version_only(s, frame, "_version").drop(columns=["_version", *AT])
    frame = pool_runs(frame, ["benchmark", "params_key"]).drop(columns=["run_started_at"])
    frame = frame.sort_values(["benchmark", "params_key"], ignore_index=True)
    frame["value"] = frame["value"].astype(float)
    return frame


def results_at_commit(s: Session, sha: str, machine: str, benchmark_prefix: str | None = None) -> pd.DataFrame:
    """:func:`commit_results` of one commit (sha or unique prefix) with ``sha`` inserted before
    ``run_id``, then one column per parameter name holding the parsed value (``'mma'``, ``64``); a
    parameter named like a fixed column gets a ``param_`` prefix. Unknown machine: :class:`NotFound`.
    """
    commit = _commit_by_sha(s, sha)
    _machine_id(s, machine)
    frame = commit_results(s, commit.id, machine, benchmark_prefix)
    frame.insert(frame.columns.get_loc("run_id"), "sha", commit.sha)
    fixed = set(frame.columns)
    names: list[str] = []
    for params in frame["params"]:
        names.extend(n for n in params if n not in names)
    for name in names:
        column = f"param_{name}" if name in fixed else name
        frame[column] = [param_value(p[name]) if name in p else None for p in frame["params"]]
    return frame
