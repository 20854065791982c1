"""Selections in the URL, for ``dashboard.widgets``: a widget's key is its query parameter. Before the widget is
drawn, a valid ``?key=value`` seeds it (once per widget lifetime, so the user's later changes win); after, its value
is written back to the URL. Values are checked against the options: a stale or hand-edited link falls back to the
default (of several values, to the good ones), never an error, and a value this session did not write itself (a
link's) is named in a warning. Several values travel as repeated keys (``?k=a&k=b``), so a value may hold a comma; a
single ``?k=a,b`` (links before that) still reads. Only a commit travels as a prefix (``cmp_base=eee79092``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from dashboard import fmt
from regressions.report import md_code
from regressions.results import LINK_OFF, LINK_ON, MIN_PREFIX

WRITTEN = "_url_written"  # session key: {query key: the value this session last wrote there}
# A commit option (asv's results name 7 to 64 hex digits), the one kind a prefix names: a machine or benchmark named
# by a prefix is a mistyped link, named in a warning, not another machine shown.
_SHA = re.compile(r"[0-9a-f]{7,64}")


def _encode(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(_encode(v) for v in value)
    return "" if value is None else str(value)


def url_value(value: Any) -> str | list[str]:
    """What the URL holds for ``value``: a list of several values as repeated keys, one value or none as one."""
    if isinstance(value, list):
        texts = [_encode(v) for v in value]
        return texts if len(texts) > 1 else (texts[0] if texts else "")
    return _encode(value)


def in_url(key: str) -> str | list[str] | None:
    """The URL's value of ``key`` in ``url_value``'s shape (None: absent)."""
    texts = st.query_params.get_all(key)
    return None if not texts else texts[0] if len(texts) == 1 else list(texts)


def _decode_one(text: str, options: Sequence[Any] | None) -> Any:
    if options is None:
        return text
    by_text = {_encode(o): o for o in options}
    if text in by_text:
        return by_text[text]
    hits = [o for o in options
            if isinstance(o, str) and len(text) >= MIN_PREFIX and _SHA.fullmatch(o) and o.startswith(text)]
    if len(hits) == 1:
        return hits[0]
    raise ValueError(text)


def _split(texts: list[str], options: Sequence[Any] | None) -> tuple[list[Any], list[str]]:
    """A link's several values: those the texts name, and the texts that name none. Repeated keys, or one key's
    text: one value (a comma in it or not), else its comma-joined values (links before repeated keys)."""
    if len(texts) == 1 and texts[0] != "":
        try:
            return [_decode_one(texts[0], options)], []
        except ValueError:
            pass
    good: list[Any] = []
    bad: list[str] = []
    for t in (texts[0].split(",") if len(texts) == 1 else texts):
        if t == "":
            continue
        try:
            good.append(_decode_one(t, options))
        except ValueError:
            bad.append(t)
    return good, bad


def _decode_many(texts: list[str], options: Sequence[Any] | None) -> list[Any]:
    """The values the texts name; those naming none are left out (:func:`_bad_texts` names them), and a link
    naming none at all is a ValueError (the default instead)."""
    good, bad = _split(texts, options)
    if bad and not good:
        raise ValueError(bad[0])
    return good


def _from_url(key: str, options: Sequence[Any] | None, kind: str) -> Any:
    texts = st.query_params.get_all(key)
    if not texts:
        raise KeyError(key)
    if kind == "many":
        return _decode_many(texts, options)
    text = texts[-1]
    if kind == "bool":
        word = text.strip().lower()
        if word not in LINK_ON + LINK_OFF:
            raise ValueError(text)
        return word in LINK_ON
    if kind == "float":
        return float(text) if text != "" else None
    return _decode_one(text, options)


def valid(value: Any, options: Sequence[Any] | None, kind: str) -> bool:
    if kind == "float":  # options: (low, high), the number input's bounds
        low, high = options or (None, None)
        return value is None or (isinstance(value, int | float) and math.isfinite(value)
                                 and (low is None or value >= low) and (high is None or value <= high))  # fmt: skip
    if options is None or kind == "bool":
        return True
    if kind == "many":
        return isinstance(value, list) and all(v in options for v in value)
    return value in options


def url_or_default(key: str, default: Any, options: Sequence[Any] | None, kind: str) -> Any:
    """The URL's valid value of ``key``, else ``default``."""
    try:
        value = _from_url(key, options, kind)
    except (KeyError, ValueError):
        return default
    return value if valid(value, options, kind) else default


def _bad_texts(key: str, options: Sequence[Any] | None, kind: str) -> list[str]:
    """The texts of the URL's ``key`` that name no option (a value decoded from options is one of them)."""
    texts = st.query_params.get_all(key)
    if kind == "many":
        return _split(texts, options)[1]
    try:
        value = _from_url(key, options, kind)
    except KeyError:
        return []
    except ValueError:
        return [texts[-1]]
    return [] if valid(value, options, kind) else [texts[-1]]


def _not_available(key: str, label: str, options: Sequence[Any] | None, kind: str,
                   format_func: Callable[[Any], Any]) -> str | None:
    """The warning for a link's value of ``key`` that is not among ``options`` (None: there is none, or this
    session wrote the URL's value itself: its own choice gone stale after another one, which needs no word)."""
    if in_url(key) in (None, st.session_state.get(WRITTEN, {}).get(key)):
        return None
    bad = _bad_texts(key, options, kind)
    if not bad:
        return None
    if kind == "bool":
        known = "1 or 0"
    elif kind == "float":
        low, high = options or (None, None)
        known = "a number" + (f" from {low:g}" if low is not None else "") \
            + (f" to {high:g}" if high is not None else "")
    else:
        listed = [str(format_func(o)) for o in (options or []) if o is not None]  # "(none)" is no value a link names
        known = ", ".join(listed[:10]) + (f" and {len(listed) - 10:,} more" if len(listed) > 10 else "")
    what = " and ".join(md_code(t, table=False) for t in bad)
    kept = kind == "many" and bool(_split(st.query_params.get_all(key), options)[0])  # the good ones are shown
    return (f"{fmt.md_text(label)}: the link's {what} is not available here (known: {fmt.md_text(known) or 'none'})"
            + ("; showing the link's other values." if kept else "; showing the default instead."))


def seed(key: str, default: Any, options: Sequence[Any] | None = None, kind: str = "one", *,
         label: str | None = None, format_func: Callable[[Any], Any] = str) -> None:
    """Put the URL's value (or ``default``) into session state before the widget ``key`` is drawn; with a
    ``label``, a link's value that is not among ``options`` is named in a warning where the widget goes."""
    if key in st.session_state and valid(st.session_state[key], options, kind):
        return
    st.session_state[key] = url_or_default(key, default, options, kind)
    if label is not None:
        warn_link(key, label, options, kind, format_func)


def warn_link(key: str, label: str, options: Sequence[Any] | None, kind: str,
              format_func: Callable[[Any], Any] = str) -> None:
    """A warning where the widget goes when the link's value of ``key`` names nothing available (once)."""
    message = _not_available(key, label, options, kind, format_func)
    if message:
        st.warning(message)
        st.session_state.setdefault(WRITTEN, {})[key] = in_url(key)  # said once
