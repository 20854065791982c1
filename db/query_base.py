"""What the store's queries share (``db.queries``, ``db.regression_queries``): their errors, the frame built
from a ``select()``, the machine and benchmark lookups, and the two rules for a commit measured more than once,
which detection and the dashboard apply: :func:`last_version_only` (of two asv versions of a benchmark there,
the one measured last) and :func:`pool_runs` (the median over the runs left; `mlaperf compare` pools the runs of
a version both commits measured)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import pandas as pd
from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from db.models import MACHINE_INFO_COLUMNS, Benchmark, Machine, Result, Run
from db.models import params_key as canonical_params_key


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


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})


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


AT = ["benchmark_id", "machine_id", "commit_id"]  # one benchmark at one commit on one machine


def last_version_only(s: Session, frame: pd.DataFrame, version: str = "benchmark_version", *,
                      complete: bool = True) -> pd.DataFrame:  # fmt: skip
    """``frame`` (one row per run and series: :data:`AT` ids, ``run_id``, ``value``, the asv version in
    ``version``, None or NaN unknown) less, where one benchmark at one commit on one machine has values at two asv
    versions, the rows of every version but the one measured last (the latest run with a value, by its start,
    then ingest order); rows of an unknown version stay. asv benchmarks an old commit with today's suite (the
    nightly's backlog after a version change does) and its own results file keeps only the last run: pooled, the
    two versions' values made a level never measured, between them.

    ``complete``: the frame holds every result of each benchmark at its commits (all its parameter combinations),
    so it is the evidence; else (History's few series, a detection scoped to some series) the store is asked, so
    a series read alone gets the same answer as read with the others."""
    known = frame.loc[frame[version].notna(), [*AT, version]]
    if known.empty:
        return frame
    if complete:
        evidence = frame.loc[frame[version].notna() & frame["value"].notna(), [*AT, version, "run_id"]]
        evidence = evidence.rename(columns={version: "_v"})
    else:
        evidence = _versions_stored(s, known[AT].drop_duplicates())
    distinct = evidence[[*AT, "_v"]].drop_duplicates()
    twice = distinct.loc[distinct.duplicated(AT, keep=False), AT].drop_duplicates()
    if twice.empty:
        return frame
    sub = evidence[pd.MultiIndex.from_frame(evidence[AT]).isin(pd.MultiIndex.from_frame(twice))]
    if "_when" not in sub:
        ids = sorted({int(r) for r in sub["run_id"]})
        started: dict[int, Any] = {}
        for i in range(0, len(ids), 500):  # bounded IN lists
            started.update(s.execute(select(Run.id, Run.started_at).where(Run.id.in_(ids[i : i + 500]))).all())
        sub = sub.assign(_when=pd.to_datetime(sub["run_id"].map(started)))
    chosen = _latest(sub).rename(columns={"_v": "_chosen"})
    # A left merge keeps the frame's row order and length (one chosen version per key).
    wanted = frame[AT].merge(chosen, on=AT, how="left")["_chosen"].to_numpy(dtype=object)
    have = frame[version].to_numpy(dtype=object)
    drop = pd.notna(wanted) & pd.notna(have) & (have != wanted)
    return frame[~drop]


def _latest(evidence: pd.DataFrame) -> pd.DataFrame:
    """Per :data:`AT` key of ``evidence`` (runs with a value: ``_v``, ``run_id``, ``_when``), the version of its
    latest run, by start (a run without one first), then ingest order: :data:`AT` and ``_v``."""
    last = evidence.sort_values(["_when", "run_id"], na_position="first", kind="stable")
    return last.drop_duplicates(AT, keep="last")[[*AT, "_v"]]


def versions_measured_last(s: Session, keys: pd.DataFrame) -> pd.DataFrame:
    """For ``keys`` (:data:`AT` rows), the asv version the latest run with a value measured there, by the rule of
    :func:`last_version_only`: :data:`AT` and ``version`` (keys without a versioned value left out)."""
    return _latest(_versions_stored(s, keys)).rename(columns={"_v": "version"})


def _versions_stored(s: Session, keys: pd.DataFrame) -> pd.DataFrame:
    """The store's evidence for ``keys`` (:data:`AT` rows): each run with a value of a known version there, any
    parameter combination (:data:`AT`, ``_v``, ``run_id``, ``_when``)."""
    out = []
    bids, mids = sorted({int(b) for b in keys["benchmark_id"]}), sorted({int(m) for m in keys["machine_id"]})
    cids = sorted({int(c) for c in keys["commit_id"]})
    for i in range(0, len(cids), 500):  # bounded IN lists
        stmt = (select(Result.benchmark_id, Run.machine_id, Run.commit_id, Result.benchmark_version, Run.id,
                       Run.started_at)
                .join(Run, Run.id == Result.run_id)
                .where(Result.value.is_not(None), Result.benchmark_version.is_not(None),
                       Result.benchmark_id.in_(bids), Run.machine_id.in_(mids), Run.commit_id.in_(cids[i : i + 500]))
                .distinct())  # fmt: skip
        out += s.execute(stmt).all()
    frame = pd.DataFrame(out, columns=[*AT, "_v", "run_id", "_when"])
    frame["_when"] = pd.to_datetime(frame["_when"])
    wanted = pd.MultiIndex.from_frame(keys[AT].astype("int64"))
    return frame[pd.MultiIndex.from_frame(frame[AT].astype("int64")).isin(wanted)]
