"""Streamlit building blocks shared by the pages: context from the sidebar, commit pickers, generic sweep."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from dashboard import charts, data, frames, store


@dataclass(frozen=True)
class Context:
    url: str
    machine: str
    writable: bool
    repo_url: str


def context() -> Context:
    """What the sidebar in ``app.py`` chose (the app stops before any page when there is no machine)."""
    return Context(
        url=st.session_state["_url"],
        machine=st.session_state["machine"],
        writable=st.session_state.get("_writable", False),
        repo_url=(st.session_state.get("repo_url") or "").rstrip("/"),
    )


def commit_url(repo_url: str, sha: str) -> str | None:
    return f"{repo_url}/commit/{sha}" if repo_url else None


def commit_labels(commits: pd.DataFrame) -> dict[str, str]:
    """sha -> ``abcd1234 · 2024-06-29 · first line of message`` (vectorized: 1,000s of commits)."""
    if commits.empty:
        return {}
    shas = commits["sha"].astype(str)
    days = pd.to_datetime(commits["date"], errors="coerce").dt.strftime("%Y-%m-%d").fillna("????-??-??")
    msgs = commits["message"].fillna("").astype(str).str.split("\n").str[0].str.slice(0, 60) \
        if "message" in commits else pd.Series("", index=commits.index)
    text = shas.str.slice(0, 8) + " · " + days + msgs.map(lambda m: f" · {m}" if m else "")
    return dict(zip(shas, text, strict=True))


def commit_select(
    label: str,
    commits: pd.DataFrame,
    *,
    key: str,
    default: int = -1,
    allow_none: bool = False,
    help: str = "",
) -> str | None:
    """Pick a commit (newest first in the list); returns its full sha. ``default`` indexes oldest->newest."""
    labels = commit_labels(commits.iloc[::-1])
    options: list[str | None] = list(labels)
    n = len(options)
    index = (n - 1 - (default % n)) if n else 0
    if allow_none:
        options, index = [None, *options], 0
    return st.selectbox(
        label, options, index=index, key=key,
        format_func=lambda sha: "(none)" if sha is None else labels[sha], help=help or None,
    )


def no_suites_note(what: str) -> None:
    st.info(
        f"No sparse-MLA suites on this machine, so there is no {what} to draw. "
        "This page comes alive when `bench_decode`, `bench_indexer` or `bench_step` results "
        "(see docs/CONTRACTS.md) are ingested; the generic parameter sweep below works for any asv benchmark."
    )


def sweep_section(results: pd.DataFrame, *, key: str, title_suffix: str = "") -> None:
    """Generic asv chart: any benchmark's value against one parameter, coloured by another."""
    if results.empty:
        st.warning("No results at this commit.")
        return
    names = sorted(results["benchmark"].unique())
    bench = st.selectbox("Benchmark", names, key=f"{key}_bench")
    rows = results[results["benchmark"] == bench]
    df, pcols = frames.expand_params(rows)
    unit = rows["unit"].dropna().iloc[0] if "unit" in rows and rows["unit"].notna().any() else None
    if not pcols:
        st.metric(bench, frames.format_value(float(rows["value"].iloc[0]), unit))
        return
    c1, c2, c3 = st.columns(3)
    x = c1.selectbox("x-axis parameter", pcols, key=f"{key}_x", format_func=lambda c: c.removeprefix("p:"))
    others = [c for c in pcols if c != x]
    color = c2.selectbox("colour by", [None, *others], index=1 if others else 0, key=f"{key}_color",
                         format_func=lambda c: "(none)" if c is None else c.removeprefix("p:"))
    log_x = c3.checkbox("log x", value=False, key=f"{key}_logx")
    # Parameters neither on x nor colour: fix each to one value so the lines are comparable.
    for col in others:
        if col == color:
            continue
        values = sorted(df[col].dropna().unique(), key=str)
        pick = st.selectbox(col.removeprefix("p:"), values, key=f"{key}_fix_{col}")
        df = df[df[col] == pick]
    fig = charts.sweep_figure(df, x=x, color=color, unit=unit, title=f"{bench}{title_suffix}", log_x=log_x)
    st.plotly_chart(fig, width="stretch", key=f"{key}_chart")


def store_gate(url: str) -> bool:
    """Show why there is nothing to browse (no store, empty, old schema, unreachable); True when usable."""
    st_ = data.status(url)
    if st_.state == "ok":
        return True
    if st_.state in ("missing", "empty"):
        st.title("mlaperf dashboard")
        st.info(f"{st_.message} Store: `{store.redact(url)}`")
        st.markdown(store.ingest_help(url))
    elif st_.state == "outdated":
        st.error(st_.message)
    else:
        st.error(st_.message)
    return False
