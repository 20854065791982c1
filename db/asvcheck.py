"""Checking asv values against the store's limits (``db.limits``, docs/ingest.md), so SQLite and PostgreSQL
accept exactly the same files: JSON documents (duplicate keys, 64-bit integers, NUL characters and lone
surrogates), stored JSON (nesting, finite numbers), text lengths, timestamps, and the numbers a benchmark
records. Each check raises :class:`AsvFormatError` with a one-line reason."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from db import limits

# Only files holding one of these can contain a NUL or a lone surrogate (JSON escapes or raw UTF-8).
_SUSPECT_TEXT = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])|\xed[\xa0-\xbf]")
_EPOCH_MS_MAX = (limits.MAX_DATE - dt.datetime(1970, 1, 1)).total_seconds() * 1000.0
_EPOCH_MS_MIN = (limits.MIN_DATE - dt.datetime(1970, 1, 1)).total_seconds() * 1000.0


class AsvFormatError(ValueError):
    """A file is not valid asv output or is outside the store's limits; the message says why."""


def show(value: Any, limit: int = 60) -> str:
    """A value as one short printable line for messages (long names cut, control characters escaped)."""
    text = value if isinstance(value, str) and value.isprintable() else repr(value)
    if len(text) > limit:
        size = f"{len(value):,} characters" if isinstance(value, str) else "cut"
        text = f"{text[: limit - 3]}... ({size})"
    return text


def show_path(path: str | Path) -> str:
    """A file path as printable text (names that are not UTF-8 get backslash escapes)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise AsvFormatError(f"duplicate key {show(key)!r} in one JSON object")
            seen.add(key)
    return obj


def _int64(text: str) -> int:
    if len(text) < 19:  # the common case: fits whatever its sign
        return int(text)
    digits = len(text.lstrip("-"))
    # Checked before int(): Python refuses to convert more than 4,300 digits at all.
    if digits > 40:
        raise AsvFormatError(f"an integer of {digits:,} digits is outside the 64-bit range")
    value = int(text)
    if not limits.INT64_MIN <= value <= limits.INT64_MAX:
        raise AsvFormatError(f"integer {text} is outside the 64-bit range")
    return value


def _bad_text(obj: Any) -> str | None:
    """Where ``obj`` holds text no store can take (a NUL character, a lone surrogate), else None."""
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                stack.append((key, f"{where} key"))
                stack.append((value, f"{where}[{show(key, 30)}]"))
        elif isinstance(item, list):
            stack.extend((value, f"{where}[{i}]") for i, value in enumerate(item))
        elif isinstance(item, str):
            if "\x00" in item:
                return f"text with a NUL character (\\u0000) at {where.strip() or 'top level'}"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"text with a lone surrogate (not valid Unicode) at {where.strip() or 'top level'}"
    return None


def load_json_object(data: bytes, what: str) -> dict[str, Any]:
    """A JSON object from ``data``; raises :class:`AsvFormatError` for anything else.

    Refused besides invalid JSON: duplicate keys in one object, integers outside 64 bits, nesting deeper
    than Python can parse, text with NUL characters or lone surrogates.
    """
    try:
        obj = json.loads(data, object_pairs_hook=_unique_keys, parse_int=_int64)
    except UnicodeDecodeError as exc:
        raise AsvFormatError(f"{what} is not UTF-8 text: {exc}") from None
    except RecursionError:
        # No depth limit of ours here: stored objects are held to MAX_NESTING later (_check_stored).
        raise AsvFormatError(f"{what} is nested too deeply to read (deeper than Python's JSON parser goes)") from None
    except json.JSONDecodeError as exc:
        # Errors at the very end (or a string never closed) mean the file was cut short.
        truncated = exc.pos >= len(data.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = " (truncated?)" if truncated else ""
        raise AsvFormatError(f"invalid JSON{hint}: {exc}") from None
    if not isinstance(obj, dict):
        raise AsvFormatError(f"{what} must hold a JSON object, not {type(obj).__name__}")
    suspect = (b"\\u" in data or b"\xed" in data) and _SUSPECT_TEXT.search(data)  # substring checks are fast
    if suspect and (where := _bad_text(obj)) is not None:
        raise AsvFormatError(where)
    return obj


def check_stored(value: Any, what: str) -> None:
    """A value stored as JSON: at most ``MAX_NESTING`` levels deep, only finite numbers."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limits.MAX_NESTING:
                raise AsvFormatError(f"{what} is nested deeper than {limits.MAX_NESTING} levels")
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
        elif isinstance(item, float) and not math.isfinite(item):
            raise AsvFormatError(f"{what} holds {item!r}, not a finite number")


def check_text(value: str, what: str, limit: int) -> str:
    if len(value) > limit:
        raise AsvFormatError(f"{what} {show(value)} is over the limit of {limit} characters")
    return value


def js_timestamp(value: Any, what: str) -> dt.datetime | None:
    """asv's JavaScript timestamp (milliseconds since the epoch) as naive UTC, within the date limits."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AsvFormatError(f"{what} is not a timestamp in milliseconds: {show(value)}")
    if not _EPOCH_MS_MIN <= value < _EPOCH_MS_MAX:
        raise AsvFormatError(
            f"{what} {value:.6g} ms is outside the dates the store takes "
            f"({limits.MIN_DATE:%Y-%m-%d} to {limits.MAX_DATE:%Y-%m-%d})"
        )
    return dt.datetime.fromtimestamp(value / 1000.0, dt.UTC).replace(tzinfo=None)


class ValueRange:
    """The values a benchmark type may record: time in seconds, memory in bytes, tracks any finite."""

    def __init__(self, kind: str | None) -> None:
        if kind == "time":
            self.lo, self.hi, self.unit = 0.0, limits.MAX_SECONDS, " s"
            self.limit = f"0 .. {limits.MAX_SECONDS:,.0f} s"
        elif kind in ("memory", "peakmemory"):
            self.lo, self.hi, self.unit = 0.0, limits.MAX_BYTES_VALUE, " bytes"
            self.limit = "0 .. 2**63 bytes"
        else:
            self.lo, self.hi, self.unit = -sys.float_info.max, sys.float_info.max, ""
            self.limit = "finite"
        self.kind = kind or "track"

    def check(self, value: Any, what: str) -> float:
        """A recorded number as float; raises for non-numbers, infinities and values out of range."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise AsvFormatError(f"{what} is not a number: {show(value)}")
        number = float(value)
        if not math.isfinite(number):
            raise AsvFormatError(f"{what} is {show(value)}, not a finite number")
        if not self.lo <= number <= self.hi:
            raise AsvFormatError(
                f"{what} = {number:.4g}{self.unit} is outside the range of a {self.kind} benchmark ({self.limit})"
            )
        return number

    def column(self, column: list[Any], what: str) -> list[Any]:
        """A column of recorded numbers: None kept, NaN read as None (not measured), the rest checked."""
        lo, hi = self.lo, self.hi
        if all(type(x) is float and lo <= x <= hi for x in column):  # the common case, checked fast
            return column
        return [None if x is None or (type(x) is float and math.isnan(x)) else self.check(x, what) for x in column]


def bounds(column: list[Any], what: str) -> list[float | None]:
    """Confidence bounds: any finite number; asv writes +-Infinity when it has no estimate (stored NULL)."""
    if all(type(x) is float and x - x == 0.0 for x in column):  # all finite floats (inf - inf is NaN)
        return column
    out: list[float | None] = []
    for x in column:
        if x is None or (type(x) is float and not math.isfinite(x)):
            out.append(None)
        elif isinstance(x, bool) or not isinstance(x, int | float):
            raise AsvFormatError(f"{what} is not a number: {show(x)}")
        else:
            out.append(float(x))
    return out


def counts(column: list[Any], what: str) -> list[int | None]:
    """stats_number / stats_repeat: whole numbers 0 .. 2**31-1 (NaN read as None)."""
    if all(type(x) is int and 0 <= x <= limits.COUNT_MAX for x in column):
        return column
    out: list[int | None] = []
    for x in column:
        if x is None or (type(x) is float and math.isnan(x)):
            out.append(None)
        elif isinstance(x, bool) or not isinstance(x, int | float) or not float(x).is_integer():
            raise AsvFormatError(f"{what} is not a whole number: {show(x)}")
        elif not 0 <= x <= limits.COUNT_MAX:
            raise AsvFormatError(f"{what} = {x:.4g} is outside 0 .. {limits.COUNT_MAX:,}")
        else:
            out.append(int(x))
    return out
