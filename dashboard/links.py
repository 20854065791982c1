"""Links between the dashboard's pages, opened in the same tab and the same session.

Streamlit opens every link of Markdown and of a data grid's LinkColumn in a new tab (a new session, the
sidebar's choices lost), so in-app links are not links there: a grid's link cell is a cell whose selection
switches page (``grid``), a list of links is ``st.page_link`` (``page_links``). Both take a relative URL
(``to``, ``history``, ``compare``) naming a page and its selections; the keys it names drop their session
state on arrival (``arrive``), so the page's widgets seed from the new URL. Links to other sites (a commit
on GitHub, an issue) stay LinkColumns and open in a new tab.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn
from urllib.parse import parse_qs, urlencode, urlparse

import pandas as pd
import streamlit as st

from dashboard import frames

_ARRIVING = "_link_keys"  # session key: the query keys of the link being followed
FIT = "fit"  # a ``grid`` width: the column as wide as its longest text (within FIT_PX)
FIT_PX = (160, 560)  # a fitted column's narrowest and widest, in pixels
_CHAR_PX = 6.6  # the grid's font, one average character (Source Sans at 14 px), with room for wide ones


def _encode(value: Any) -> str | list[str]:
    # Several values as repeated keys, as the pages' widgets write them (a value may hold a comma).
    return [str(v) for v in value] if isinstance(value, list) else str(value)


def to(page: str, **params: Any) -> str:
    """Relative URL of a page (``history``; the Overview is ``overview``) with its selections (a list: one
    key per value)."""
    return f"{page}?{urlencode({k: _encode(v) for k, v in params.items() if v is not None}, doseq=True)}"


def history(machine: str, benchmark: str, params_key: str) -> str:
    """History of one series: ``hist_bench`` and one ``hp_<name>`` per parameter, as the History page reads."""
    p = {f"hp_{k}": v for k, v in frames.params_dict(params_key).items()}
    return to("history", machine=machine, hist_bench=benchmark, **p)


def compare(machine: str, base: str | None, head: str) -> str:
    base = base[:12] if isinstance(base, str) and base else None  # a step with no parent: head alone
    return to("compare", machine=machine, cmp_base=base, cmp_head=str(head)[:12])


def commit_url(repo_url: str, sha: str) -> str | None:
    """A commit on the repository's site (opens in a new tab: it is another site)."""
    return f"{repo_url}/commit/{sha}" if repo_url else None


def target(link: str) -> tuple[str, dict[str, str | list[str]]]:
    """(script path of the page, query parameters: a repeated key's values as a list) of a relative URL made
    by :func:`to`."""
    parsed = urlparse(link)
    params = {k: v if len(v) > 1 else v[0] for k, v in parse_qs(parsed.query, keep_blank_values=True).items()}
    return f"views/{parsed.path}.py", params


def follow(link: str) -> NoReturn:
    """Switch to the page of ``link`` in this session, with its query parameters as the URL."""
    page, params = target(link)
    st.session_state[_ARRIVING] = list(params)
    st.switch_page(page, query_params=params)


def arrive() -> None:
    """Before any widget is drawn (``app.py``): the keys a followed link names forget their state, so the
    widgets take the link's values (the sidebar's machine among them) instead of the previous page's."""
    for key in st.session_state.pop(_ARRIVING, []):
        st.session_state.pop(key, None)


def fit_width(texts: Iterable[Any], bounds: tuple[int, int] = FIT_PX) -> int:
    """Pixels that show the longest of ``texts`` whole in a grid cell, within ``bounds`` (narrowest, widest)."""
    longest = max((len(str(t)) for t in texts), default=0)
    return int(min(max(longest * _CHAR_PX + 24, bounds[0]), bounds[1]))


def _text_column(texts: pd.Series, width: int | str) -> Any:
    # A series name is what tells rows apart: as wide as it needs (a cut one hides the parameters that differ).
    return st.column_config.TextColumn(width=fit_width(texts) if width == FIT else width)


def grid(table: pd.DataFrame, *, key: str, links: Mapping[str, str], widths: Mapping[str, int | str] | None = None,
         column_config: Mapping[str, Any] | None = None, shown_as: Mapping[str, Callable[[Any], str]] | None = None,
         **kw: Any) -> None:
    """A data grid whose ``links`` columns (column -> the text shown, e.g. "plot") hold relative URLs: a
    click on such a cell opens its page in this tab; an empty cell is blank and goes nowhere. ``widths``: text
    columns' widths (pixels, "small"/"medium"/"large", or :data:`FIT`: as wide as the column's longest text);
    ``column_config`` for any other kind of column. ``shown_as``: numeric columns drawn as their function of each
    value says (``fmt.fmt_ratio``): a click on the header sorts them by number, where text sorts "10.0x" before
    "2.00x" and "100 us" before "20 us"."""
    shown = table.copy()
    config = {col: _text_column(table[col], w) for col, w in (widths or {}).items()
              if col in table.columns and col not in (shown_as or {})}
    config |= {col: st.column_config.NumberColumn(width=(widths or {}).get(col)) for col in shown_as or {}
               if col in table.columns}
    config.update(column_config or {})
    for col, text in links.items():
        shown[col] = [f"{text} →" if isinstance(u, str) and u else "" for u in table[col]]
        given = config.get(col)
        width = given.get("width") if isinstance(given, dict) else None
        config[col] = st.column_config.TextColumn(col, width=width, help="Click to open it in this tab")
    data = shown.style.format({c: f for c, f in shown_as.items() if c in shown.columns}) if shown_as else shown
    # A missing number reads "-", as everywhere else (the grid's own word for it is "None"). Streamlit refuses a
    # Styler over pandas' cell limit (262,144: a Compare of 30,000 series); drawing all of them takes about 2 s.
    with pd.option_context("styler.render.max_elements", max(shown.size, pd.get_option("styler.render.max_elements"))):
        event = st.dataframe(data, key=key, on_select="rerun", selection_mode="single-cell", hide_index=True,
                             width="stretch", column_config=config, placeholder="-", **kw)
    for row, col in event.selection.get("cells", []):
        if col in links and 0 <= int(row) < len(table):
            link = table[col].iloc[int(row)]
            if isinstance(link, str) and link:
                follow(link)


def page_links(links: Iterable[tuple[str, str]]) -> None:
    """``(label, relative URL)`` pairs as page links in a row (same tab, same session)."""
    pairs = list(links)
    for i in range(0, len(pairs), 4):
        for col, (label, link) in zip(st.columns(4), pairs[i:i + 4], strict=False):
            page, params = target(link)
            col.page_link(page, label=label, query_params=params)
