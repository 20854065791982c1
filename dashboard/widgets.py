"""Streamlit building blocks shared by the pages: the sidebar's context, widgets whose value lives in the
URL (every page's selections can be shared as a link), commit pickers, links between pages, the store gate
and the generic parameter sweep for asv projects without the sparse-MLA suites.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import pandas as pd
import streamlit as st

from dashboard import charts, data, fmt, frames, links, store_check, url_values
from dashboard.url_values import seed
from regressions.report import md_code
from regressions.results import MIN_PREFIX, prefix_problem


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


_PENDING = "_url_pending"  # session key: the URL writes of the run in progress (``url_writes``)


@contextmanager
def url_writes() -> Iterator[None]:
    """Around a run (``app.py``): the widgets' URL writes go to the browser as one change when the run ends or
    stops (``stop``), not one per widget: each change is a message the browser handles (its URL, its host
    frame) while the page is first drawn. A run cut short for another (``st.rerun``, a followed link, which
    sets the URL itself) drops them: the next run writes its own."""
    st.session_state[_PENDING] = {}
    try:
        yield
        _send_url_writes()
    finally:
        st.session_state.pop(_PENDING, None)


def _send_url_writes() -> None:
    changed = {k: v for k, v in st.session_state.get(_PENDING, {}).items() if url_values.in_url(k) != v}
    st.session_state[_PENDING] = {}
    if changed:
        st.query_params.update(changed)


def stop() -> NoReturn:
    """``st.stop`` for the pages: sends the run's URL writes first (once a run is stopping, Streamlit sends
    nothing more of it)."""
    _send_url_writes()
    st.stop()
    raise AssertionError("st.stop returned")  # it raises; for the type checker


def publish(key: str, value: Any, short: Callable[[Any], str] | None = None) -> None:
    """Write a widget's value to the URL (``short`` shortens it, e.g. a sha to 12 characters); inside
    ``url_writes``, when the run ends."""
    text = short(value) if short is not None and value is not None else url_values.url_value(value)
    st.session_state.setdefault(url_values.WRITTEN, {})[key] = text
    pending = st.session_state.get(_PENDING)
    if pending is None:
        if url_values.in_url(key) != text:
            st.query_params[key] = text
    else:
        pending[key] = text


def literal(format_func: Callable[[Any], Any] = str) -> Callable[[Any], str]:
    """``format_func`` whose text is shown as is where Streamlit reads an option's label as Markdown (pills,
    radio buttons): a parameter value ``*x*`` or ``a&amp;b`` reads as written."""
    return lambda v: fmt.md_text(format_func(v))


def drop_unknown_keys(prefix: str, known: Sequence[str], what: str) -> None:
    """The URL's ``prefix`` keys that name none of ``known`` (``hp_nosuch``: a parameter the benchmark does not
    have) leave the URL; one a link brought is named in a warning (``what``: how the page says it), one this
    session wrote for another benchmark goes without a word."""
    for key in [k for k in st.query_params if k.startswith(prefix) and k[len(prefix):] not in known]:
        if st.session_state.get(url_values.WRITTEN, {}).get(key) != url_values.in_url(key):
            st.warning(f"{what} {md_code(key[len(prefix):], table=False)} (the link's {md_code(key, table=False)}); "
                       f"its parameters: {fmt.md_text(', '.join(known)) or 'none'}.")
        del st.query_params[key]


def url_selectbox(label: str, options: Sequence[Any], *, key: str, default: Any = None,
                  short: Callable[[Any], str] | None = None, **kw: Any) -> Any:
    options = list(options)
    seed(key, default if default in options else (options[0] if options else None), options, label=label,
         format_func=kw.get("format_func", str))
    value = st.selectbox(label, options, key=key, **kw)
    publish(key, value, short)
    return value


def url_pills(label: str, options: Sequence[Any], *, key: str, default: Sequence[Any] = (),
              format_func: Callable[[Any], Any] = str, **kw: Any) -> list[Any]:
    """Pick any of a few options (parameter values, statuses), each a pill one click toggles; returns them in
    the options' order. Pills, not a multiselect: one click instead of opening a list, and every page keeps to
    the one button-group element (each kind of element is code the browser loads on a page's first render)."""
    options = list(options)
    seed(key, [v for v in default if v in options], options, "many", label=label, format_func=format_func)
    value = st.pills(label, options, key=key, selection_mode="multi", format_func=literal(format_func), **kw) or []
    chosen = [v for v in options if v in value]
    publish(key, chosen)
    return chosen


def url_radio(label: str, options: Sequence[Any], *, key: str, default: Any = None,
              format_func: Callable[[Any], Any] = str, **kw: Any) -> Any:
    options = list(options)
    seed(key, default if default in options else options[0], options, label=label, format_func=format_func)
    value = st.radio(label, options, key=key, format_func=literal(format_func), **kw)
    publish(key, value)
    return value


def url_switches(label: str, switches: dict[str, tuple[str, bool]], *, key: str, **kw: Any) -> dict[str, bool]:
    """Several on/off choices as one row of pills (``switches``: {URL key: (pill text, default)}); each choice
    keeps its own key in the URL ("1"/"0", as a toggle would), the row's state lives under ``key``."""
    texts = {k: text for k, (text, _) in switches.items()}
    if key not in st.session_state or not url_values.valid(st.session_state[key], list(texts.values()), "many"):
        st.session_state[key] = [text for k, (text, default) in switches.items()
                                 if url_values.url_or_default(k, default, None, "bool")]
        for k, text in texts.items():
            url_values.warn_link(k, f"{label}: {text}", None, "bool")
    chosen = st.pills(label, list(texts.values()), key=key, selection_mode="multi", **kw) or []
    out = {k: text in chosen for k, text in texts.items()}
    for k, value in out.items():
        publish(k, value)
    return out


def url_toggle(label: str, *, key: str, default: bool = False, **kw: Any) -> bool:
    seed(key, default, kind="bool", label=label)
    value = bool(st.toggle(label, key=key, **kw))
    publish(key, value)
    return value


def url_text(label: str, *, key: str, default: str = "", **kw: Any) -> str:
    seed(key, default, kind="text")
    value = st.text_input(label, key=key, **kw)
    publish(key, value)
    return str(value)


def url_number(label: str, *, key: str, default: float | None = None, **kw: Any) -> float | None:
    """A number input; a link's value that is no finite number within ``min_value``..``max_value`` is named."""
    seed(key, default, (kw.get("min_value"), kw.get("max_value")), kind="float", label=label)
    value = st.number_input(label, key=key, **kw)
    publish(key, value)
    return value


def url_expander(label: str, *, key: str, default: bool = False) -> Any:
    """An expander whose open state reruns the page and is kept in the URL; its ``.open`` says whether to build
    what it holds (a closed one costs the server and the browser nothing)."""
    seed(key, default, kind="bool", label=label)
    box = st.expander(label, key=key, on_change="rerun")
    publish(key, bool(box.open))
    return box


# -- commits and links -------------------------------------------------------------------------------


def commit_labels(commits: pd.DataFrame) -> dict[str, str]:
    """sha -> ``eee79092 · 2026-11-29 · tuning: fixed BLOCK_H=16…`` (vectorized: 1,000s of commits)."""
    if commits.empty:
        return {}
    shas = commits["sha"].astype(str)
    days = pd.to_datetime(commits["date"], errors="coerce").dt.strftime("%Y-%m-%d").fillna("no date")
    subjects = commits["message"].map(lambda m: fmt.subject(m, 60)) if "message" in commits \
        else pd.Series("", index=commits.index)
    text = shas.str.slice(0, fmt.SHA_LEN) + " · " + days + subjects.map(lambda m: f" · {m}" if m else "")
    return dict(zip(shas, text, strict=True))


COMMIT_CHOICES = 100  # newest commits listed in a commit picker (opening a list of 1,000 costs seconds)


def fullest_commit(ctx: Context, commits: pd.DataFrame, *, grid: bool = True) -> tuple[str | None, str]:
    """The commit a page opens on where the newest is a partial run, and why (``throughput_model.default_commit``
    over the newest commits, the Overview's cached values): the newest with the most points of the suites' grids
    (``grid``), or (Compare) with at least half as many results that ran as the one with the most (a head of 60 of
    240 series opened as "missing at head 180")."""
    from dashboard import summary
    from dashboard import throughput_model as tp

    ids = tuple(int(c) for c in commits["commit_id"].iloc[-summary.SPARK:])
    recent = data.recent_values(ctx.url, ctx.machine, ids)
    if grid:
        return tp.default_commit(commits, tp.grid_points(recent))
    # Results that ran, failed ones too: a case failing at the newest commit is what Compare is opened for.
    ran = recent[recent["status"].isin(["ok", "failed"])] if "status" in recent else recent
    counts = ran.groupby("commit_id").size() if not ran.empty else pd.Series(dtype="int64")
    return tp.default_commit(commits, counts, unit="results", fullest="the most results", share=tp.PARTIAL_SHARE)


def opened_on(sha: str | None, fullest: str | None, why: str) -> None:
    """The caption under a commit picker that opened on ``fullest`` instead of the newest commit."""
    if why and sha == fullest:
        st.caption(f"Opened on {fmt.short_sha(sha)}, {why}")


def commit_select(label: str, commits: pd.DataFrame, *, key: str, default: str | None = None,
                  allow_none: bool = False, extra: Sequence[str] = (), help: str = "") -> str | None:
    """Pick a commit; returns its full sha and keeps 12 characters of it in the URL.

    The list holds the newest ``COMMIT_CHOICES`` commits (newest first), ``extra`` ones the page points at
    (flagged commits, their parents) and the current choice; any other commit of the machine is one typed
    sha prefix away (Enter), and a link may name any of them."""
    shas = list(commits["sha"].astype(str))
    known = set(shas)

    def resolve(text: object) -> str | None:
        if not isinstance(text, str) or len(text.strip()) < MIN_PREFIX:
            return None
        text = text.strip().lower()
        hits = [s for s in shas if s.startswith(text)] if text not in known else [text]
        return hits[0] if len(hits) == 1 else None

    linked = st.query_params.get(key)
    if key not in st.session_state and linked and resolve(linked) is None:
        # A link naming a commit this machine does not have: say so, never show another pair instead.
        st.error(f"{label}: {commit_problem(linked, shas)} (from the link's `{key}={linked}`). Pick a commit "
                 "above or fix the link.")
        st.query_params.pop(key, None)
        stop()
    wanted = {resolve(st.session_state.get(key)), resolve(linked), resolve(default)}
    keep = set(shas[-COMMIT_CHOICES:]) | {s for s in extra if s in known} | {s for s in wanted if s}
    shown = commits[commits["sha"].astype(str).isin(keep)]
    labels = commit_labels(shown.iloc[::-1])
    if key in st.session_state and st.session_state[key] not in labels and resolve(st.session_state[key]):
        st.session_state[key] = resolve(st.session_state[key])  # a typed prefix: its full sha
    options: list[str | None] = list(labels)
    if allow_none:
        options = [None, *options]
    fallback = default if default in options else (None if allow_none else (options[0] if options else None))
    typed_help = f"The newest {COMMIT_CHOICES} commits are listed; type any other commit's sha and press Enter."
    value = url_selectbox(
        label, options, key=key, default=fallback, short=lambda s: str(s)[:12],
        format_func=lambda sha: "(none)" if sha is None else labels.get(sha, str(sha)),
        help=f"{help} {typed_help}".strip(), accept_new_options=True,
        placeholder="Pick a commit or type its sha",  # Streamlit's own read "Choose or add an option"
    )
    if value is not None and value not in labels:
        full = resolve(value)
        if full is None:
            st.warning(f"{label}: {commit_problem(str(value), shas)}; showing the default.")
            return fallback
        return full
    return value


def commit_problem(text: str, shas: Sequence[str]) -> str:
    """Why ``text`` names no single commit of ``shas`` (``regressions.results.prefix_problem``'s words)."""
    text = text.strip().lower()
    return prefix_problem(text, [s for s in shas if s.startswith(text)], "of this machine")


# -- common page parts --------------------------------------------------------------------------------


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
    measured = results.loc[results["value"].notna(), "benchmark"]
    # Opens on the first benchmark with a value: one that only failed here draws no chart.
    bench = url_selectbox("Benchmark", names, key=f"{key}_bench", default=min(measured) if len(measured) else None)
    rows = results[results["benchmark"] == bench]
    df, pcols = frames.expand_params(rows)
    unit = fmt.unit_of(bench, rows["unit"].dropna().iloc[0] if "unit" in rows and rows["unit"].notna().any() else None)
    if not pcols:
        st.metric(bench, fmt.fmt_value(float(rows["value"].iloc[0]), unit))
        return
    c1, c2, c3 = st.columns(3)
    with c1:
        x = url_selectbox("x-axis parameter", pcols, key=f"{key}_x", format_func=lambda c: c.removeprefix("p:"))
    others = [c for c in pcols if c != x]
    with c2:
        color = url_selectbox("colour by", [None, *others], key=f"{key}_color",
                              default=others[0] if others else None,
                              format_func=lambda c: "(none)" if c is None else c.removeprefix("p:"))
    with c3:
        log_x = url_toggle("log x", key=f"{key}_logx")
    # Parameters neither on x nor colour: fix each to one value so the lines are comparable.
    for col in others:
        if col == color:
            continue
        values = frames.value_order(df[col].dropna())
        pick = url_selectbox(col.removeprefix("p:"), values, key=f"{key}_fix_{col.removeprefix('p:')}")
        df = df[df[col] == pick]
    spec = charts.sweep_spec(df, x=x, color=color, unit=unit, title=f"{bench}{title_suffix}", log_x=log_x)
    st.vega_lite_chart(spec, width="stretch", key=f"{key}_chart")


def store_gate(url: str) -> bool:
    """Show why there is nothing to browse (no store, empty, old schema, unreachable); True when usable."""
    st_ = data.status(url)
    if st_.state == "ok":
        return True
    if st_.state in ("missing", "empty"):
        st.title("mlaperf dashboard")
        st.info(f"{st_.message} Store: `{store_check.redact(url)}`")
        st.markdown(store_check.ingest_help(url))
    else:
        st.error(st_.message)
    return False


def summary_table(ctx: Context, window: int | None = None) -> tuple[pd.DataFrame, int]:
    """``dashboard.summary.grid`` of the machine's series over its newest ``window`` commits (default
    ``summary.SPARK``), and how many commits that is."""
    from dashboard import summary
    from regressions.direction import direction_for

    commits = data.commits(ctx.url, ctx.machine)
    ids = tuple(int(c) for c in commits["commit_id"].iloc[-(window or summary.SPARK):])
    settings = data.settings()
    return summary.grid(data.series(ctx.url, ctx.machine), data.recent_values(ctx.url, ctx.machine, ids), ids,
                        data.regressions(ctx.url, ctx.machine), lambda b, u: direction_for(b, u, settings)), len(ids)


def summary_grid(ctx: Context, *, key: str, limit: int | None = None, by_change: bool = False,
                 grid: tuple[pd.DataFrame, int] | None = None) -> None:
    """Every series of the machine (``grid``: :func:`summary_table`'s, made here by default) with a search box
    whose words are kept in the URL under ``key``; ``by_change``: failing and largest latest change first;
    ``limit``: the first rows only."""
    from dashboard import summary

    table, n_ids = grid if grid is not None else summary_table(ctx)
    query = url_text("Search benchmarks and parameters", key=key, placeholder="every word counts, e.g. decode mma 64")
    shown = summary.search(table, query)
    shown = summary.largest_first(shown) if by_change else summary.live_first(shown)
    listed = shown.head(limit) if limit else shown
    links.grid(pd.DataFrame({
        "series": summary.names(listed, data.param_names(ctx.url)),
        "latest": summary.latest_texts(listed),
        # Measured values only: the grid's line chart refuses a list with gaps (it shows the list as text).
        "newest values": [[v for v in s.tolist() if v == v] for s in listed["spark"]],
        "latest change": listed["change_text"],
        "last flagged": listed["flag"],
        "history": [links.history(ctx.machine, b, k) for b, k in zip(listed["benchmark"], listed["params_key"],
                                                                     strict=True)],
    }), key=f"{key}_grid", links={"history": "plot"}, widths={"series": "large", "history": 60},
       column_config={"newest values": st.column_config.LineChartColumn(
           "trend", width="small", help=f"The newest {n_ids} commits' values")})
    st.caption(f"{len(listed):,} of {fmt.plural(len(table), 'series', 'series')}"
               + (f" matching {query!r}" if query.strip() else "")
               + ". Latest change: the newest value against the median of the five before it of the same benchmark "
               "version (none right after a version change), direction-aware. failed ×N: the series' newest N "
               "results failed (after the value it had).")
