"""Cached loaders: the only way pages reach the store. Each opens a session, calls one query (``db.queries``,
the store's one read module, or ``regressions``; triage notes from ``dashboard.notes``) and returns a DataFrame.

Loaders take the store URL first so the cache key separates stores; frames are cached for ``TTL`` seconds,
so a nightly ingest shows up without a restart (the sidebar's reload button drops them at once). The
shared rules come from the packages that own them: ``regressions.compare.compare_commits`` for Compare
(the same function `mlaperf compare` calls), ``regressions.config.load_settings`` for thresholds and
directions, ``regressions.store.regressions_frame`` for the regression listing (what `mlaperf detect --json`
lists).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from dashboard import frames, notes, store_check, triage
from db import queries
from db.models import params_key
from regressions.compare_sides import EnvChange, case_params

TTL = 300


@st.cache_resource(show_spinner=False)
def engine(url: str, writable: bool = False) -> Engine:
    return store_check.open_engine(url, writable=writable)


def _session(url: str, writable: bool = False) -> Session:
    return Session(engine(url, writable))


@st.cache_data(ttl=10, show_spinner=False)
def status(url: str) -> store_check.StoreStatus:
    """Short-lived, so a store that was just created or filled shows up on the next page load."""
    return store_check.check(url)


@st.cache_resource(ttl=TTL, show_spinner=False)
def settings() -> Any:
    """Thresholds and directions from ./mlaperf.toml or ./pyproject.toml (``[tool.mlaperf]``), as the CLI."""
    from regressions.config import load_settings

    return load_settings()


def config_problem() -> str | None:
    """Why ./mlaperf.toml or ./pyproject.toml cannot be used (``regressions.config.ConfigError``), or None."""
    from regressions.config import ConfigError

    try:
        settings()
    except ConfigError as exc:
        return str(exc)
    return None


@st.cache_resource(ttl=TTL, show_spinner=False)
def tags() -> dict[str, list[str]]:
    """{commit sha: tags} of the git repository the dashboard runs in (History's event markers); a resource, so
    "Reload data" (the store's frames) does not run git again. Read-only for callers."""
    from dashboard.gitremote import tags as git_tags

    return git_tags()


@st.cache_data(ttl=TTL, show_spinner=False)
def machines(url: str) -> pd.DataFrame:
    with _session(url) as s:
        return queries.machines(s)


@st.cache_data(ttl=TTL, show_spinner=False)
def machine_info(url: str, machine: str) -> dict[str, Any]:
    with _session(url) as s:
        return queries.machine_info(s, machine)


@st.cache_data(ttl=TTL, show_spinner=False)
def commits(url: str, machine: str) -> pd.DataFrame:
    """Commits with results on ``machine``, oldest to newest, with their position ``pos``."""
    with _session(url) as s:
        return queries.commits(s, machine)


@st.cache_data(ttl=TTL, show_spinner=False)
def commits_on(url: str, machines: tuple[str, ...]) -> pd.DataFrame:
    """Commits with results on any of ``machines``, in history order, ``pos`` 0..n-1: the x axis History overlays
    machines on, each at its own commits (asv's graphs draw every machine so; on the first machine's commits alone,
    another that ran other commits showed nothing)."""
    with _session(url) as s:
        return queries.commits(s, machines)


@st.cache_data(ttl=TTL, show_spinner=False)
def series(url: str, machine: str) -> pd.DataFrame:
    """The machine's series in the order every listing shows them (``frames.series_sort``: parameter values in
    asv's order, numbers numerically), as the static site lists them."""
    with _session(url) as s:
        return frames.series_sort(queries.series(s, machine))


@st.cache_data(ttl=TTL, show_spinner=False)
def param_names(url: str) -> dict[str, list[str]]:
    """{benchmark: its asv ``param_names``}, so labels read impl=mma, concurrency=64, topk=512 as asv orders
    them (the stored params_key sorts names alphabetically)."""
    with _session(url) as s:
        frame = queries.benchmarks(s)
    return {str(n): list(p) if isinstance(p, list) else [] for n, p in zip(frame["name"], frame["param_names"],
                                                                        strict=True)}


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=256)
def history(url: str, machine: str, benchmark: str, params_keys: tuple[str, ...],
            commit_ids: tuple[int, ...] | None = None) -> pd.DataFrame:
    with _session(url) as s:
        return queries.history(s, benchmark, list(params_keys), machine, commit_ids)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=32)
def recent_values(url: str, machine: str, commit_ids: tuple[int, ...]) -> pd.DataFrame:
    with _session(url) as s:
        return queries.recent_values(s, machine, commit_ids)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=256)
def run_infos(url: str, run_ids: tuple[int, ...]) -> dict[int, dict[str, Any] | None]:
    with _session(url) as s:
        return queries.run_infos(s, run_ids)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=256)
def launch_config(url: str, machine: str, benchmark: str, params_keys: tuple[str, ...],
                  commit_ids: tuple[int, ...] | None = None) -> pd.DataFrame:
    with _session(url) as s:
        return queries.launch_config(s, benchmark, list(params_keys), machine, commit_ids)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=64)
def results_at_commit(url: str, sha: str, machine: str) -> pd.DataFrame:
    with _session(url) as s:
        return queries.results_at_commit(s, sha, machine)


@st.cache_data(ttl=TTL, show_spinner=False)
def regressions(url: str, machine: str | None = None) -> pd.DataFrame:
    """The regression listing with what triage needs (``dashboard.triage.regression_listing``)."""
    with _session(url) as s:
        return triage.regression_listing(s, machine)


def set_status(url: str, regression_ids: list[int], new_status: str, note: str, by: str) -> None:
    """Write path (only with ``--writable``): change the status of regressions and log the note with it and
    who (``by``), in one transaction; then drop the cached listing."""
    with _session(url, writable=True) as s, s.begin():
        for rid in regression_ids:
            queries.set_regression_status(s, int(rid), new_status, by=by)
            notes.add_triage_note(s, int(rid), new_status, note, by=by)
    regressions.clear()


def set_triage(url: str, regression_ids: list[int], assignee: str, issue_url: str, by: str) -> None:
    """Write path (only with ``--writable``): assign regressions and link their issue, with a note saying who."""
    what = f"assigned to {assignee or 'nobody'}" + (f", issue {issue_url}" if issue_url else "")
    with _session(url, writable=True) as s, s.begin():
        for rid in regression_ids:
            status = queries.set_regression_triage(s, int(rid), assignee=assignee, issue_url=issue_url)
            notes.add_triage_note(s, int(rid), status, what, by=by)
    regressions.clear()


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=32)
def compare(url: str, machine: str, base_sha: str, head_sha: str, threshold: float | None) -> pd.DataFrame:
    """Every series of ``machine`` at head against base, by ``regressions.compare.compare_commits`` (what
    `mlaperf compare` prints); ``threshold`` (a fraction) replaces the configuration's, like ``--threshold``.

    Columns: status, benchmark, params_key, series_key (params_key without ``asv env``: the series' own), params
    (dict), unit, direction, threshold, base, head,
    base_status, head_status, ratio (head / base), slowdown (> 1 worse), significant, method, p_value.
    """
    from regressions.compare import compare_commits
    from regressions.results import resolve_commit

    conf = settings().with_threshold(threshold)
    with _session(url) as s:
        base = resolve_commit(s, base_sha, "base")
        head = resolve_commit(s, head_sha, "head")
        comparisons = compare_commits(s, base, head, machines=[machine], settings=conf)
    cols = ["status", "benchmark", "params_key", "series_key", "params", "unit", "direction", "threshold", "base",
            "head", "base_status", "head_status", "ratio", "slowdown", "significant", "method", "p_value"]
    if not comparisons:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    # The comparisons' own fields (``Comparison.to_json`` deep-copies every params dict, a third of the
    # time here at 552 series); numbers that are not finite become NaN, as to_json's None does.
    df = pd.DataFrame([vars(c) for c in comparisons])
    df["params_key"] = [params_key(p) for p in df["params"]]  # the store's key rule, not a copy of it
    # The series a row is (its History's key): a row of one asv environment is its series all the same.
    df["series_key"] = [params_key(case_params(p)) for p in df["params"]]
    for c in ("base", "head", "ratio", "slowdown", "p_value"):
        values = pd.to_numeric(df[c], errors="coerce").astype(float)
        df[c] = values.where(np.isfinite(values))
    return df[cols]


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=32)
def environments_apart(url: str, machine: str, base_sha: str, head_sha: str) -> EnvChange | None:
    """``regressions.compare_sides.environments_apart``: the two commits' asv environments on ``machine`` where they
    share none (what `mlaperf compare` warns of), else None."""
    from regressions.compare_sides import environments_apart as apart
    from regressions.results import resolve_commit

    with _session(url) as s:
        base, head = resolve_commit(s, base_sha, "base"), resolve_commit(s, head_sha, "head")
        return apart(s, base.id, head.id, machine)


def clear_all() -> None:
    """Drop cached frames and settings (the engines stay: their pools are reused)."""
    st.cache_data.clear()
    settings.clear()
