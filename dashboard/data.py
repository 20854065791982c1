"""Cached loaders: the only way pages reach the store. Each wraps one ``db.queries`` function.

Loaders take the store URL as their first argument so the cache key separates stores; results are cached
for ``TTL`` seconds so a nightly ingest shows up without restarting (the sidebar has a reload button).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from dashboard import frames, store

TTL = 300


@st.cache_resource(show_spinner=False)
def engine(url: str, writable: bool = False) -> Engine:
    return store.open_engine(url, writable=writable)


def _session(url: str, writable: bool = False) -> Session:
    return Session(engine(url, writable))


@st.cache_data(ttl=10, show_spinner=False)
def status(url: str) -> store.StoreStatus:
    """Short-lived, so a store that was just created or filled shows up on the next page load."""
    return store.check(url)


@st.cache_data(ttl=TTL, show_spinner=False)
def machines(url: str) -> pd.DataFrame:
    from db import queries

    with _session(url) as s:
        return queries.machines(s)


@st.cache_data(ttl=TTL, show_spinner=False)
def commits(url: str, machine: str | None) -> pd.DataFrame:
    """Commits with results on ``machine``, oldest to newest."""
    from db import queries

    with _session(url) as s:
        return queries.commits(s, machine=machine)


@st.cache_data(ttl=TTL, show_spinner=False)
def benchmarks(url: str) -> pd.DataFrame:
    from db import queries

    with _session(url) as s:
        return queries.benchmarks(s)


@st.cache_data(ttl=TTL, show_spinner=False)
def series(url: str, machine: str | None, benchmark: str | None = None) -> pd.DataFrame:
    from db import queries

    with _session(url) as s:
        return queries.series(s, machine=machine, benchmark=benchmark)


@st.cache_data(ttl=TTL, show_spinner=False)
def history(url: str, benchmark: str, params_key: str, machine: str) -> pd.DataFrame:
    from db import queries

    with _session(url) as s:
        return queries.history(s, benchmark, params_key, machine)


@st.cache_data(ttl=TTL, show_spinner=False)
def results_at_commit(url: str, sha: str, machine: str) -> pd.DataFrame:
    from db import queries

    with _session(url) as s:
        return queries.results_at_commit(s, sha, machine)


@st.cache_data(ttl=TTL, show_spinner=False)
def regressions(url: str, machine: str | None = None) -> pd.DataFrame:
    from db import queries

    with _session(url) as s:
        return queries.regressions(s, machine=machine)


def set_regression_status(url: str, regression_id: int, new_status: str) -> None:
    """Write path (only offered with ``--writable``): change one regression's status, then drop caches."""
    from db import queries

    with _session(url, writable=True) as s:
        queries.set_regression_status(s, regression_id, new_status)
        s.commit()
    regressions.clear()


@st.cache_data(ttl=TTL, show_spinner=False)
def compare(url: str, base_sha: str, head_sha: str, machine: str, threshold: float) -> pd.DataFrame:
    """asv-compare-style table of two commits (see ``frames.compare_frames``)."""
    base = results_at_commit(url, base_sha, machine)
    head = results_at_commit(url, head_sha, machine)
    return frames.compare_frames(base, head, threshold=threshold)


def clear_all() -> None:
    st.cache_data.clear()
