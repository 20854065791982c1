"""Read (and small write) queries over the store, for the dashboard and the regression detector.

Every function takes a caller-owned :class:`~sqlalchemy.orm.Session`, builds its SQL with ``select()``
(parameters bound, never formatted into SQL) and returns a pandas DataFrame unless said otherwise.
Writers (:func:`upsert_regressions`, :func:`set_regression_status`) flush but never commit: the caller
owns the transaction.

A series is (benchmark name, ``params_key``, machine name). When a commit was measured more than once on
a machine (re-runs, several environments), its result is the median over those runs (:func:`pool_runs`,
the one rule: detection, `mlaperf compare` and the dashboard all see the same value).
Times are naive UTC. Big frames are fetched as narrow rows and joined to the small tables in pandas,
which keeps ``series_values`` one bulk query and fast on 1,000 commits x 500 series.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
from sqlalchemy import Select, Text, and_, func, select, type_coerce
from sqlalchemy.orm import Session

from db.models import (
    MACHINE_INFO_COLUMNS,
    REGRESSION_DIRECTIONS,
    REGRESSION_STATUSES,
    Benchmark,
    Commit,
    Machine,
    Regression,
    Result,
    Run,
    commit_order,
    utcnow,
)
from db.models import (
    params_key as canonical_params_key,
)


class CommitNotFound(LookupError):
    """No commit, or more than one, matches a sha or sha prefix; the message says which."""


class NotFound(LookupError):
    """A named machine, benchmark or regression does not exist; the message names it."""


_MACHINE_COLUMNS = ["id", "name", *MACHINE_INFO_COLUMNS]


def _frame(s: Session, stmt: Select[Any]) -> pd.DataFrame:
    result = s.execute(stmt)
    keys = list(result.keys())
    rows = result.all()
    if not rows:
        return pd.DataFrame({k: pd.Series(dtype=object) for k in keys})
    # Column-wise construction: pandas is many times slower when handed a list of Row objects. Text
    # columns stay object dtype: converting 10^5..10^6 values to Arrow strings costs more than the query.
    columns = {}
    for key, values in zip(keys, zip(*rows, strict=True), strict=True):
        first = next((v for v in values if v is not None), None)
        columns[key] = pd.Series(values, dtype=object if isinstance(first, str | dict | list) else None)
    return pd.DataFrame(columns)


def _json_column(values: Iterable[Any]) -> list[Any]:
    """Decode a JSON column fetched as text (SQLite) in one json.loads call; the PostgreSQL driver
    already returns Python objects, which pass through."""
    out = list(values)
    texts = [i for i, v in enumerate(out) if isinstance(v, str)]
    if texts:
        decoded = json.loads("[" + ",".join(out[i] for i in texts) + "]")
        for i, value in zip(texts, decoded, strict=True):
            out[i] = value
    return out


def sort_commits(frame: pd.DataFrame, by: list[str] | None = None, *, descending: bool = False) -> pd.DataFrame:
    """``frame`` (with ``generation``, ``date`` and ``commit_id`` columns) in history order after the
    leading columns ``by``, as :func:`db.models.commit_order` orders in SQL; stable, index reset."""
    lead = list(by or [])
    key = frame.assign(_gen=pd.to_numeric(frame["generation"]).astype(float).fillna(-1.0))
    # NaT dates first (oldest) like nulls_first in SQL; in reverse order they come last.
    key = key.sort_values(
        [*lead, "_gen", "date", "commit_id"],
        ascending=[True] * len(lead) + [not descending] * 3,
        na_position="last" if descending else "first",
        kind="stable",
    )
    return frame.loc[key.index].reset_index(drop=True)


def _datetimes(frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
    for column in columns:
        frame[column] = pd.to_datetime(frame[column])
    return frame


def param_value(text: str) -> Any:
    """A parameter value from asv's repr string: ``"'mma'"`` -> ``'mma'``, ``"64"`` -> ``64``."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _key(params_key: str | Mapping[str, Any]) -> str:
    return params_key if isinstance(params_key, str) else canonical_params_key(dict(params_key))


def _machine_id(s: Session, machine: str) -> int:
    found = s.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()
    if found is None:
        known = ", ".join(s.execute(select(Machine.name).order_by(Machine.name)).scalars()) or "none"
        raise NotFound(f"no machine named {machine!r} (known machines: {known})")
    return int(found)


def _benchmark_id(s: Session, benchmark: str) -> int:
    found = s.execute(select(Benchmark.id).where(Benchmark.name == benchmark)).scalar_one_or_none()
    if found is None:
        raise NotFound(f"no benchmark named {benchmark!r}")
    return int(found)


def pool_runs(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per ``keys`` (a series at a commit) from one row per run: a commit's result.

    ``value`` is the median over the runs that have one (failed and skipped runs do not count), so a
    re-run pools with the first run instead of replacing it; ``samples`` are the runs' samples together,
    ``ci_99_a``/``ci_99_b`` the widest interval; ``status`` is 'ok' when any run has a value, else
    'failed' when any failed, else 'skipped'; ``runs`` counts the runs. Other columns come from the
    latest run with a value (else the latest run). ``frame`` needs ``keys``, ``value``, ``status``,
    ``run_id`` and ``run_started_at``; ``samples`` and the interval columns are optional. Row order is
    not kept.
    """
    if frame.empty:
        return frame.assign(runs=pd.Series(dtype="int64"))
    ok = frame["value"].notna()
    # Latest run with a value last in each group: it gives the columns that are not pooled.
    order = frame.assign(_ok=ok).sort_values(["_ok", "run_started_at", "run_id"], na_position="first", kind="stable")
    dup = order.duplicated(keys, keep=False)
    if not dup.any():  # the common case: one run per commit
        return order.drop(columns="_ok").assign(runs=1)
    multi = order[dup]
    grouped = multi.groupby(keys, sort=False, dropna=False)
    pooled = multi.drop_duplicates(keys, keep="last").set_index(keys)
    pooled["value"] = grouped["value"].median()
    pooled["status"] = grouped["status"].agg(
        lambda st: "ok" if (st == "ok").any() else "failed" if (st == "failed").any() else "skipped"
    )
    pooled["runs"] = grouped.size()
    if "samples" in multi:
        pooled["samples"] = grouped["samples"].agg(
            lambda col: [x for s in col if isinstance(s, list) for x in s] or None
        )
    if "ci_99_a" in multi:
        pooled["ci_99_a"] = grouped["ci_99_a"].min()
    if "ci_99_b" in multi:
        pooled["ci_99_b"] = grouped["ci_99_b"].max()
    single = order[~dup].drop(columns="_ok").assign(runs=1)
    return pd.concat([single, pooled.reset_index()[single.columns]], ignore_index=True)


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


def commits(s: Session, machine: str | None = None) -> pd.DataFrame:
    """Commits oldest -> newest (git generation, then date, then id; see :func:`db.models.commit_order`):
    id, sha, date, parents, branch, message, author, generation (None without a repository at ingest).

    With ``machine``, only commits that have results on that machine.
    """
    stmt = select(
        Commit.id,
        Commit.sha,
        Commit.date,
        Commit.parents,
        Commit.branch,
        Commit.message,
        Commit.author,
        Commit.generation,
    ).order_by(*commit_order())
    if machine is not None:
        machine_id = _machine_id(s, machine)
        stmt = stmt.where(Commit.id.in_(select(Run.commit_id).where(Run.machine_id == machine_id)))
    return _datetimes(_frame(s, stmt), "date")


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


def benchmark_units(s: Session) -> dict[str, str | None]:
    """{benchmark name: unit} (a dict, not a DataFrame).

    Unused by mlaperf (only tests/db/test_ingest.py calls it): to be removed with that call.
    """
    return dict(s.execute(select(Benchmark.name, Benchmark.unit)).all())


def _commit_by_sha(s: Session, ref: str) -> Commit:
    """The commit whose sha is ``ref`` or starts with it; :class:`CommitNotFound` if none or several.

    Only for :func:`results_at_commit` and :func:`upsert_regressions`; the public commit lookup (sha,
    prefix or git ref) is ``regressions.results.resolve_commit``.
    """
    ref = ref.strip().lower()
    if not ref:
        raise CommitNotFound("empty commit sha")
    exact = s.execute(select(Commit).where(Commit.sha == ref)).scalar_one_or_none()
    if exact is not None:
        return exact
    found = s.execute(select(Commit).where(Commit.sha.startswith(ref, autoescape=True)).limit(6)).scalars().all()
    if not found:
        raise CommitNotFound(f"no stored commit matches {ref!r}")
    if len(found) > 1:
        shown = ", ".join(c.sha[:12] for c in found[:5])
        raise CommitNotFound(f"commit prefix {ref!r} is ambiguous: {shown}{', ...' if len(found) > 5 else ''}")
    return found[0]


def latest_commit(s: Session, machine: str | None = None) -> str | None:
    """The sha of the newest commit (history order) with results (on ``machine`` if given), or None."""
    stmt = select(Commit.sha).where(Commit.id.in_(select(Run.commit_id))).order_by(*commit_order(descending=True))
    if machine is not None:
        machine_id = _machine_id(s, machine)
        stmt = stmt.where(Commit.id.in_(select(Run.commit_id).where(Run.machine_id == machine_id)))
    return s.execute(stmt.limit(1)).scalar_one_or_none()


# -- series -------------------------------------------------------------------------------------------


def series(s: Session, machine: str | None = None, benchmark: str | None = None) -> pd.DataFrame:
    """Distinct series: benchmark, params_key, params (dict), machine, unit, type, points (results with a
    value), last_date (date of the newest commit measured). Sorted by machine, benchmark, params_key."""
    stmt = (
        select(
            Result.benchmark_id,
            Result.params_key,
            Run.machine_id,
            func.count(Result.value).label("points"),
            func.max(Commit.date).label("last_date"),
        )
        .join(Run, Run.id == Result.run_id)
        .join(Commit, Commit.id == Run.commit_id)
        .group_by(Result.benchmark_id, Result.params_key, Run.machine_id)
    )
    if machine is not None:
        stmt = stmt.where(Run.machine_id == _machine_id(s, machine))
    if benchmark is not None:
        stmt = stmt.where(Result.benchmark_id == _benchmark_id(s, benchmark))
    frame = _frame(s, stmt)
    bench = _frame(s, select(Benchmark.id, Benchmark.name, Benchmark.unit, Benchmark.type)).set_index("id")
    names = dict(s.execute(select(Machine.id, Machine.name)).all())
    out = pd.DataFrame(
        {
            "benchmark": frame["benchmark_id"].map(bench["name"]),
            "params_key": frame["params_key"],
            "params": [json.loads(k) for k in frame["params_key"]],
            "machine": frame["machine_id"].map(names),
            "unit": frame["benchmark_id"].map(bench["unit"]),
            "type": frame["benchmark_id"].map(bench["type"]),
            "points": frame["points"].astype(int),
            "last_date": pd.to_datetime(frame["last_date"]),
        }
    )
    return out.sort_values(["machine", "benchmark", "params_key"], ignore_index=True)


def history(s: Session, benchmark: str, params_key: str | Mapping[str, Any], machine: str) -> pd.DataFrame:
    """One series over commits, oldest -> newest, one row per commit (its runs pooled: :func:`pool_runs`):
    sha, date, message, author, value, q_25, q_75, ci_99_a, ci_99_b, samples, status, commit_id, run_id,
    runs (q_25, q_75 and run_id are those of the commit's latest run with a value).

    ``value`` is NaN for failed/skipped results (see ``status``). Unknown benchmark or machine raises
    :class:`NotFound`; an unknown params_key gives an empty frame.
    """
    machine_id = _machine_id(s, machine)
    benchmark_id = _benchmark_id(s, benchmark)
    stmt = (
        select(
            Commit.sha,
            Commit.date,
            Commit.message,
            Commit.author,
            Result.value,
            Result.q_25,
            Result.q_75,
            Result.ci_99_a,
            Result.ci_99_b,
            Result.samples,
            Result.status,
            Commit.id.label("commit_id"),
            Run.id.label("run_id"),
            Run.started_at.label("run_started_at"),
            Commit.generation,
        )
        .join(Run, Run.id == Result.run_id)
        .join(Commit, Commit.id == Run.commit_id)
        .where(
            Result.benchmark_id == benchmark_id,
            Result.params_key == _key(params_key),
            Run.machine_id == machine_id,
        )
    )
    frame = pool_runs(_frame(s, stmt), ["commit_id"])
    frame = sort_commits(_datetimes(frame, "date"))
    frame["value"] = frame["value"].astype(float)
    return frame.drop(columns=["run_started_at", "generation"])


def commit_results(
    s: Session, commit_id: int, machine: str, benchmark_prefix: str | None = None
) -> pd.DataFrame:
    """A commit's result per series on a machine (its runs pooled: :func:`pool_runs`), sorted by
    benchmark and params_key: benchmark, unit, type, params_key, params (dict), status, value, q_25,
    q_75, ci_99_a, ci_99_b, number, repeat, samples, run_id, runs. Empty (same columns) when the
    machine, known or not, has no run at that commit.
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
        )
        .join(Run, Run.id == Result.run_id)
        .join(Machine, Machine.id == Run.machine_id)
        .join(Benchmark, Benchmark.id == Result.benchmark_id)
        .where(Run.commit_id == commit_id, Machine.name == machine)
    )
    if benchmark_prefix:
        stmt = stmt.where(Benchmark.name.startswith(benchmark_prefix, autoescape=True))
    frame = pool_runs(_frame(s, stmt), ["benchmark", "params_key"]).drop(columns=["run_started_at"])
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


def series_values(s: Session, machine: str | None = None, since: dt.datetime | str | None = None) -> pd.DataFrame:
    """Every 'ok' value of every series, for change-point detection (one bulk query).

    Long frame: benchmark, unit, type, params_key, machine, commit_id, sha, date, value, samples; one row
    per series and commit (its runs pooled: :func:`pool_runs`), sorted by machine, benchmark, params_key,
    then history order (:func:`db.models.commit_order`).
    ``since`` (datetime or ISO date string) keeps commits dated on or after it.

    Unused by mlaperf (the detector reads the store in regressions.store; tests/db/test_ingest.py,
    test_order.py and benchmarks/scripts/ingest_perf.py call it): to be removed with those calls.
    """
    runs_stmt = select(
        Run.id.label("run_id"),
        Run.machine_id,
        Run.commit_id,
        Run.started_at.label("run_started_at"),
        Commit.sha,
        Commit.date,
        Commit.generation,
    ).join(Commit, Commit.id == Run.commit_id)
    if machine is not None:
        runs_stmt = runs_stmt.where(Run.machine_id == _machine_id(s, machine))
    if since is not None:
        since_dt = pd.Timestamp(since).to_pydatetime().replace(tzinfo=None)
        runs_stmt = runs_stmt.where(Commit.date >= since_dt)
    runs = _datetimes(_frame(s, runs_stmt), "run_started_at", "date").set_index("run_id")

    values_stmt = select(
        Result.run_id,
        Result.benchmark_id,
        Result.params_key,
        Result.value,
        type_coerce(Result.samples, Text).label("samples"),  # decoded in bulk below
    ).where(Result.status == "ok")
    if machine is not None or since is not None:
        values_stmt = values_stmt.where(Result.run_id.in_(runs_stmt.with_only_columns(Run.id)))
    frame = _frame(s, values_stmt)
    if frame.empty:
        return pd.DataFrame(
            {
                **{c: pd.Series(dtype=object) for c in ("benchmark", "unit", "type", "params_key", "machine")},
                "commit_id": pd.Series(dtype="int64"),
                "sha": pd.Series(dtype=object),
                "date": pd.Series(dtype="datetime64[us]"),
                "value": pd.Series(dtype=float),
                "samples": pd.Series(dtype=object),
            }
        )

    bench = _frame(s, select(Benchmark.id, Benchmark.name, Benchmark.unit, Benchmark.type)).set_index("id")
    names = dict(s.execute(select(Machine.id, Machine.name)).all())
    run_ids = frame["run_id"]
    out = pd.DataFrame(
        {
            "benchmark": frame["benchmark_id"].map(bench["name"]),
            "unit": frame["benchmark_id"].map(bench["unit"]),
            "type": frame["benchmark_id"].map(bench["type"]),
            "params_key": frame["params_key"],
            "machine": run_ids.map(runs["machine_id"]).map(names),
            "commit_id": run_ids.map(runs["commit_id"]),
            "sha": run_ids.map(runs["sha"]),
            "date": run_ids.map(runs["date"]),
            "generation": run_ids.map(runs["generation"]),
            "value": frame["value"].astype(float),
            "samples": _json_column(frame["samples"]),
            "run_id": run_ids,
            "run_started_at": run_ids.map(runs["run_started_at"]),
        }
    )
    out = pool_runs(out.assign(status="ok"), ["machine", "benchmark", "params_key", "commit_id"])
    out = sort_commits(out, ["machine", "benchmark", "params_key"])
    return out.drop(columns=["run_id", "run_started_at", "generation", "status", "runs"])


# -- regressions --------------------------------------------------------------------------------------


def regressions(s: Session, status: str | Iterable[str] | None = None, machine: str | None = None) -> pd.DataFrame:
    """Flagged regressions, newest commit first (history order): id, benchmark, unit, params_key, params, machine, sha,
    date, message, before, after, ratio, direction, status, p_value, detected_at, fixed_sha."""
    fixed = Commit.__table__.alias("fixed_commit")
    stmt = (
        select(
            Regression.id,
            Benchmark.name.label("benchmark"),
            Benchmark.unit,
            Regression.params_key,
            Regression.params,
            Machine.name.label("machine"),
            Commit.sha,
            Commit.date,
            Commit.message,
            Regression.before,
            Regression.after,
            Regression.ratio,
            Regression.direction,
            Regression.status,
            Regression.p_value,
            Regression.detected_at,
            fixed.c.sha.label("fixed_sha"),
        )
        .join(Benchmark, Benchmark.id == Regression.benchmark_id)
        .join(Machine, Machine.id == Regression.machine_id)
        .join(Commit, Commit.id == Regression.commit_id)
        .outerjoin(fixed, fixed.c.id == Regression.fixed_commit_id)
        .order_by(*commit_order(descending=True), Regression.id.desc())
    )
    if status is not None:
        wanted = [status] if isinstance(status, str) else list(status)
        for value in wanted:
            _check_status(value)
        stmt = stmt.where(Regression.status.in_(wanted))
    if machine is not None:
        stmt = stmt.where(Regression.machine_id == _machine_id(s, machine))
    return _datetimes(_frame(s, stmt), "date", "detected_at")


def _check_status(status: str) -> None:
    if status not in REGRESSION_STATUSES:
        raise ValueError(f"status must be one of {', '.join(REGRESSION_STATUSES)}, not {status!r}")


def set_regression_status(s: Session, regression_id: int, status: str) -> None:
    """Set a regression's status ('new', 'acknowledged', 'fixed', 'ignored'); flushes, does not commit."""
    _check_status(status)
    regression = s.get(Regression, regression_id)
    if regression is None:
        raise NotFound(f"no regression with id {regression_id}")
    regression.status = status
    s.flush()


def _ref_id(s: Session, row: Mapping[str, Any], name: str, lookup: Any) -> int | None:
    if row.get(f"{name}_id") is not None:
        return int(row[f"{name}_id"])
    if row.get(name) is None:
        return None
    return lookup(row[name])


def upsert_regressions(s: Session, rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Insert or update regressions keyed by (benchmark, params_key, machine, commit).

    Each row gives ``benchmark`` (name) or ``benchmark_id``, ``params_key`` (or ``params``), ``machine``
    or ``machine_id``, ``commit`` (sha or prefix) or ``commit_id``, ``before``, ``after``, ``ratio``,
    ``direction``; optionally ``p_value``, ``status``, ``fixed_commit``/``fixed_commit_id``. An existing
    regression keeps its status (a user's 'acknowledged' survives re-detection) unless the row sets one.
    Returns ``{"inserted": n, "updated": m}``; flushes, does not commit.

    Unused by mlaperf (the detector writes its regressions in regressions.store; only
    tests/db/test_order.py calls it): to be removed with that call.
    """
    bench_cache: dict[str, int] = {}
    machine_cache: dict[str, int] = {}
    commit_cache: dict[str, int] = {}

    def bench(name: str) -> int:
        if name not in bench_cache:
            bench_cache[name] = _benchmark_id(s, name)
        return bench_cache[name]

    def mach(name: str) -> int:
        if name not in machine_cache:
            machine_cache[name] = _machine_id(s, name)
        return machine_cache[name]

    def commit(ref: str) -> int:
        if ref not in commit_cache:
            commit_cache[ref] = _commit_by_sha(s, ref).id
        return commit_cache[ref]

    counts = {"inserted": 0, "updated": 0}
    for row in rows:
        benchmark_id = _ref_id(s, row, "benchmark", bench)
        machine_id = _ref_id(s, row, "machine", mach)
        commit_id = _ref_id(s, row, "commit", commit)
        if benchmark_id is None or machine_id is None or commit_id is None:
            raise ValueError(f"regression row needs benchmark, machine and commit: {dict(row)!r}")
        if row.get("params_key") is not None:
            key = _key(row["params_key"])
            params = dict(row.get("params") or json.loads(key))
        elif row.get("params") is not None:
            params = dict(row["params"])
            key = canonical_params_key(params)
        else:
            raise ValueError(f"regression row needs params_key or params: {dict(row)!r}")
        direction = row["direction"]
        if direction not in REGRESSION_DIRECTIONS:
            raise ValueError(f"direction must be one of {', '.join(REGRESSION_DIRECTIONS)}, not {direction!r}")
        status = row.get("status")
        if status is not None:
            _check_status(status)
        values: dict[str, Any] = {
            "before": float(row["before"]),
            "after": float(row["after"]),
            "ratio": float(row["ratio"]),
            "direction": direction,
            "p_value": None if row.get("p_value") is None else float(row["p_value"]),
            "fixed_commit_id": _ref_id(s, row, "fixed_commit", commit),
        }
        existing = s.execute(
            select(Regression).where(
                and_(
                    Regression.benchmark_id == benchmark_id,
                    Regression.params_key == key,
                    Regression.machine_id == machine_id,
                    Regression.commit_id == commit_id,
                )
            )
        ).scalar_one_or_none()
        if existing is None:
            s.add(
                Regression(
                    benchmark_id=benchmark_id,
                    params_key=key,
                    params=params,
                    machine_id=machine_id,
                    commit_id=commit_id,
                    status=status or "new",
                    detected_at=row.get("detected_at") or utcnow(),
                    **values,
                )
            )
            counts["inserted"] += 1
        else:
            for name, value in values.items():
                if name == "fixed_commit_id" and value is None and "fixed_commit" not in row:
                    continue
                setattr(existing, name, value)
            if status is not None:
                existing.status = status
            counts["updated"] += 1
    s.flush()
    return counts
