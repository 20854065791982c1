"""Reading asv output: results files (format version 2), machine.json, benchmarks.json.

Pure parsing and checking, no database: :func:`parse_results` turns one results file into a
:class:`ParsedRun` whose result rows are ready for a bulk insert, or raises :class:`AsvFormatError` with
a one-line reason. Columns are read by name through the file's ``result_columns`` (never by position),
parameter combinations are expanded in ``itertools.product`` order (as asv itself does), a ``null``
value is a failed benchmark and ``NaN`` a skipped one. Every value is checked against the store's
limits (``db.limits``, docs/ingest.md) here, so SQLite and PostgreSQL accept exactly the same files.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from db import limits

RESULTS_API_VERSION = 2
MACHINE_JSON = "machine.json"
BENCHMARKS_JSON = "benchmarks.json"
# Keys of a result file's top-level params that describe the environment, not the machine.
_ENV_PARAM_KEYS = {"python", "requirements", "env_vars"}
# Field order of the rows in ResultGroup.rows (the Result columns besides run_id and benchmark_id).
RESULT_FIELDS = (
    "benchmark_version",
    "params",
    "params_key",
    "status",
    "value",
    "ci_99_a",
    "ci_99_b",
    "q_25",
    "q_75",
    "number",
    "repeat",
    "samples",
)
_EMPTY = (None,) * (len(RESULT_FIELDS) - 4)
_UNITS_BY_PREFIX = {"time": "seconds", "mem": "bytes", "peakmem": "bytes"}
_TYPE_BY_PREFIX = {"time": "time", "track": "track", "mem": "memory", "peakmem": "peakmemory"}
# Machine columns holding numbers (the rest are text); values that do not fit stay only in `info`.
_INT_MACHINE_COLUMNS = {"gpu_sm_count"}
_FLOAT_MACHINE_COLUMNS = {"gpu_memory_gb"}
# Only files holding one of these can contain a NUL or a lone surrogate (JSON escapes or raw UTF-8).
_SUSPECT_TEXT = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])|\xed[\xa0-\xbf]")
_EPOCH_MS_MAX = (limits.MAX_DATE - dt.datetime(1970, 1, 1)).total_seconds() * 1000.0
_EPOCH_MS_MIN = (limits.MIN_DATE - dt.datetime(1970, 1, 1)).total_seconds() * 1000.0


_COMMIT_HASH = re.compile(r"[0-9a-f]{7,64}")


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


@dataclass
class ResultGroup:
    """The rows of one benchmark in one results file, tuples in :data:`RESULT_FIELDS` order.

    ``meta`` holds the benchmark's row values from benchmarks.json (type, unit, param_names, params,
    version, code), or None when benchmarks.json does not describe it.
    """

    benchmark: str
    version: str | None
    rows: list[tuple[Any, ...]]
    meta: dict[str, Any] | None = None


@dataclass
class ParsedRun:
    machine: str
    machine_info: dict[str, Any]  # machine.json overlaid with the file's params: the machine's description
    commit_hash: str
    commit_date: dt.datetime | None
    env_name: str
    python: str | None
    requirements: dict[str, Any]
    env_vars: dict[str, Any]
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    groups: list[ResultGroup] = field(default_factory=list)
    own_info: dict[str, Any] = field(default_factory=dict)  # the file's params alone (and its machine name)

    @property
    def num_results(self) -> int:
        return sum(len(g.rows) for g in self.groups)


@dataclass(frozen=True)
class ResultFile:
    """A results file found on disk, with the asv results directory it belongs to (if recognisable)."""

    path: Path
    results_dir: Path | None

    @property
    def machine_json(self) -> Path:
        return self.path.parent / MACHINE_JSON

    @property
    def benchmarks_json(self) -> Path | None:
        return None if self.results_dir is None else self.results_dir / BENCHMARKS_JSON

    @property
    def source_path(self) -> str:
        """``machine/file.json``, the path asv itself uses for a results file."""
        return show_path(f"{self.path.parent.name}/{self.path.name}")


# -- files on disk -------------------------------------------------------------------------------------


def _os_reason(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno == 40:  # ELOOP
        reason += " (a symlink loop)"
    return reason


def read_input(path: Path) -> bytes:
    """A file's bytes; raises :class:`AsvFormatError` for what cannot be a results file.

    Opened non-blocking (a FIFO named ``*.json`` must not hang the ingest), only regular files, at most
    ``limits.MAX_FILE_BYTES``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise AsvFormatError(f"cannot read: {_os_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode) else None
            raise AsvFormatError(f"not a regular file ({kind or 'a device or socket'})")
        if info.st_size > limits.MAX_FILE_BYTES:
            raise AsvFormatError(
                f"file is {limits.describe_bytes(info.st_size)}, over the limit of "
                f"{limits.describe_bytes(limits.MAX_FILE_BYTES)}"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limits.MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise AsvFormatError(f"cannot read: {_os_reason(exc)}") from None
    finally:
        os.close(fd)
    if len(data) > limits.MAX_FILE_BYTES:  # grew while being read
        raise AsvFormatError(f"file is over the limit of {limits.describe_bytes(limits.MAX_FILE_BYTES)}")
    return data


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _listdir(path: Path) -> list[str]:
    with os.scandir(path) as entries:
        return sorted(e.name for e in entries)


def scan_inputs(paths: list[str | Path]) -> tuple[list[ResultFile], list[tuple[str, str]]]:
    """Results files under each path, and the paths that could not be used with their reason.

    A path is an asv results directory, one machine's directory, or a results file. ``machine.json``
    and ``benchmarks.json`` are metadata, never results. Nothing here raises for a bad path: a missing
    path, a symlink loop, an unreadable directory or a directory without asv results is reported.
    Dotfiles (editors' and partial copies) are ignored.
    """
    found: dict[str, ResultFile] = {}
    problems: list[tuple[str, str]] = []

    def add(file: Path, results_dir: Path | None) -> None:
        # One entry per real file (overlapping arguments, links to one file); a broken link is its own.
        key = os.path.realpath(file) if os.path.exists(file) else os.path.abspath(file)
        found.setdefault(key, ResultFile(file, results_dir))

    for raw in paths:
        path = Path(raw)
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            reason = _os_reason(exc)
            if exc.errno == 2:
                reason = "dangling symlink" if os.path.lexists(path) else "no such file or directory"
            problems.append((str(raw), reason))
            continue
        if not stat.S_ISDIR(mode):
            if path.name not in (MACHINE_JSON, BENCHMARKS_JSON):
                root = path.parent.parent
                add(path, root if _is_file(root / BENCHMARKS_JSON) else None)
            continue
        try:
            if _is_file(path / MACHINE_JSON):
                machine_dirs, root = [path], path.parent
            else:
                machine_dirs = [path / n for n in _listdir(path) if _is_file(path / n / MACHINE_JSON)]
                root = path
            if not machine_dirs:
                problems.append(
                    (str(raw), "not an asv results directory: no machine.json in it or in its subdirectories")
                )
                continue
            results_dir = root if _is_file(root / BENCHMARKS_JSON) else None
            for machine_dir in machine_dirs:
                try:
                    names = _listdir(machine_dir)
                except OSError as exc:
                    problems.append((str(machine_dir), f"cannot list directory: {_os_reason(exc)}"))
                    continue
                for name in names:
                    if name.endswith(".json") and name != MACHINE_JSON and not name.startswith("."):
                        add(machine_dir / name, results_dir)
        except OSError as exc:
            problems.append((str(raw), f"cannot list directory: {_os_reason(exc)}"))
    return list(found.values()), problems


def find_result_files(paths: list[str | Path]) -> list[ResultFile]:
    """Results files under each path (see :func:`scan_inputs`); raises for the first unusable path.

    ``FileNotFoundError`` names a path that does not exist, ``ValueError`` any other unusable path.
    """
    files, problems = scan_inputs(paths)
    if problems:
        path, reason = problems[0]
        if reason == "no such file or directory":
            raise FileNotFoundError(f"no such file or directory: {path}")
        raise ValueError(f"{path} is {reason}" if reason.startswith("not an asv") else f"{path}: {reason}")
    return files


# -- JSON documents ------------------------------------------------------------------------------------


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


def _check_stored(value: Any, what: str) -> None:
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


def _check_text(value: str, what: str, limit: int) -> str:
    if len(value) > limit:
        raise AsvFormatError(f"{what} {show(value)} is over the limit of {limit} characters")
    return value


# -- metadata files ------------------------------------------------------------------------------------


def parse_benchmarks_json(data: bytes) -> dict[str, dict[str, Any]]:
    """benchmarks.json as {name: entry}; entries that are not objects are rejected."""
    obj = load_json_object(data, BENCHMARKS_JSON)
    benchmarks = {}
    for name, entry in obj.items():
        if name == "version":
            continue
        if not isinstance(entry, dict):
            raise AsvFormatError(f"benchmarks.json entry {show(name)} is not an object")
        benchmarks[name] = entry
    return benchmarks


def parse_machine_json(data: bytes) -> dict[str, Any]:
    info = load_json_object(data, MACHINE_JSON)
    info.pop("version", None)
    _check_stored(info, MACHINE_JSON)
    return info


def benchmark_type(name: str) -> str | None:
    """asv's benchmark type from the function name prefix (``time_`` -> ``time``)."""
    prefix = name.rsplit(".", 1)[-1].split("_", 1)[0]
    return _TYPE_BY_PREFIX.get(prefix)


def default_unit(name: str) -> str | None:
    prefix = name.rsplit(".", 1)[-1].split("_", 1)[0]
    return _UNITS_BY_PREFIX.get(prefix)


def _optional_text(entry: dict[str, Any], key: str, what: str, limit: int) -> str | None:
    value = entry.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise AsvFormatError(f"{what} {key!r} is {type(value).__name__}, not text")
    return _check_text(str(value), f"{what} {key!r}", limit)


def benchmark_meta(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The benchmark row's values from a benchmarks.json entry (checked against the column limits)."""
    what = f"benchmarks.json entry {show(name)}:"
    param_names = entry.get("param_names") or []
    params = entry.get("params") or []
    if not isinstance(param_names, list) or not isinstance(params, list):
        raise AsvFormatError(f"{what} 'param_names' and 'params' must be lists")
    _check_stored(param_names, f"{what} 'param_names'")
    _check_stored(params, f"{what} 'params'")
    code = entry.get("code")
    return {
        "type": _optional_text(entry, "type", what, limits.BENCHMARK_TYPE) or benchmark_type(name),
        "unit": _optional_text(entry, "unit", what, limits.BENCHMARK_UNIT) or default_unit(name),
        "param_names": list(param_names),
        "params": list(params),
        "version": _optional_text(entry, "version", what, limits.BENCHMARK_VERSION),
        "code": code if isinstance(code, str) else None,
    }


def prepare_benchmarks(entries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any] | AsvFormatError]:
    """:func:`benchmark_meta` of every entry, or the error that refuses the files using it."""
    prepared: dict[str, dict[str, Any] | AsvFormatError] = {}
    for name, entry in entries.items():
        try:
            prepared[name] = benchmark_meta(name, entry)
        except AsvFormatError as exc:
            prepared[name] = exc
    return prepared


def machine_columns(info: dict[str, Any]) -> dict[str, Any]:
    """Machine table columns from a machine dict, coercing asv's strings ("132") where typed.

    Text over a column's length is refused; numbers that do not parse or do not fit their column are
    left NULL there (the whole dict is kept in ``Machine.info``).
    """
    cols: dict[str, Any] = {}
    for key, limit in limits.MACHINE_TEXT.items():
        value = info.get(key)
        cols[key] = None if value is None or value == "" else _check_text(str(value), f"machine {key!r}", limit)
    for key in (*_INT_MACHINE_COLUMNS, *_FLOAT_MACHINE_COLUMNS):
        value = info.get(key)
        integer = key in _INT_MACHINE_COLUMNS
        cols[key] = None if value is None or value == "" else _machine_number(value, integer=integer)
    return cols


def _machine_number(value: Any, *, integer: bool) -> float | int | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(number):
        return None
    if integer:
        return int(number) if 0 <= number <= limits.COUNT_MAX else None
    return number


# -- results files -------------------------------------------------------------------------------------


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


class _Range:
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


def _bounds(column: list[Any], what: str) -> list[float | None]:
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


def _counts(column: list[Any], what: str) -> list[int | None]:
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


def _column(cols: dict[str, Any], key: str, n: int, name: str) -> list[Any]:
    """One per-combination column, ``None`` x n when absent (asv drops all-None columns)."""
    value = cols.get(key)
    if value is None:
        return [None] * n
    if n == 1 and not isinstance(value, list | dict):
        return [value]  # a bare scalar for an unparameterized benchmark
    if not isinstance(value, list) or len(value) != n:
        got = len(value) if isinstance(value, list) else type(value).__name__
        raise AsvFormatError(f"benchmark {show(name)}: column {key!r} has {got} entries for {n} parameter combinations")
    return value


def _param_names(param_names: list[str] | None, count: int) -> list[str]:
    """benchmarks.json's names when they fit, else asv's defaults param1, param2, ..."""
    if (
        param_names is not None
        and len(param_names) == count
        and all(isinstance(p, str) for p in param_names)
        and len(set(param_names)) == count
    ):
        return list(param_names)
    return [f"param{i + 1}" for i in range(count)]


def _parse_params(params: Any, where: str) -> list[list[str]]:
    if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
        raise AsvFormatError(f"{where}: 'params' must be a list of lists, got {show(params)}")
    out = []
    for values in params:
        if all(type(v) is str for v in values):
            out.append(values)
            continue
        if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in values):
            raise AsvFormatError(f"{where}: parameter values must be text (asv writes repr strings)")
        out.append([v if isinstance(v, str) else json.dumps(v) for v in values])
    for i, values in enumerate(out):
        if len(set(values)) != len(values):
            repeated = next(v for v in values if values.count(v) > 1)
            raise AsvFormatError(f"{where}: parameter {i + 1} lists the value {show(repeated)} twice")
    n = math.prod(len(p) for p in out)
    if n > limits.MAX_COMBINATIONS:
        raise AsvFormatError(f"{where}: {n:,} parameter combinations, over the limit of {limits.MAX_COMBINATIONS:,}")
    return out


def _parse_benchmark(
    name: str, row: Any, columns: list[str], meta: dict[str, Any] | None
) -> tuple[ResultGroup, float | None, float | None]:
    where = f"benchmark {show(name)}"
    _check_text(name, "benchmark name", limits.BENCHMARK_NAME)
    if not isinstance(row, list):
        raise AsvFormatError(f"{where}: result row is {type(row).__name__}, not a list")
    if len(row) > len(columns):
        raise AsvFormatError(f"{where}: {len(row)} values for {len(columns)} result_columns")
    # asv drops trailing None columns, so a short row is normal.
    cols = dict(zip(columns, row, strict=False))
    params = _parse_params(cols.get("params") or [], where)
    names = _param_names(meta["param_names"] if meta else None, len(params))
    n = math.prod(len(p) for p in params)
    kind = _Range(meta["type"] if meta else benchmark_type(name))

    values = _column(cols, "result", n, name)
    ci_a = _bounds(_column(cols, "stats_ci_99_a", n, name), f"{where}: stats_ci_99_a")
    ci_b = _bounds(_column(cols, "stats_ci_99_b", n, name), f"{where}: stats_ci_99_b")
    q_25 = kind.column(_column(cols, "stats_q_25", n, name), f"{where}: stats_q_25")
    q_75 = kind.column(_column(cols, "stats_q_75", n, name), f"{where}: stats_q_75")
    number = _counts(_column(cols, "stats_number", n, name), f"{where}: stats_number")
    repeat = _counts(_column(cols, "stats_repeat", n, name), f"{where}: stats_repeat")
    samples = _column(cols, "samples", n, name)
    version = cols.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, str | int | float)):
        raise AsvFormatError(f"{where}: version is {type(version).__name__}, not text")
    version_str = None if version is None else _check_text(str(version), f"{where}: version", limits.BENCHMARK_VERSION)

    # params_key pieces, JSON-encoded once per value: the key equals json.dumps(params, sort_keys=True).
    order = sorted(range(len(names)), key=names.__getitem__)
    encoded = [[json.dumps(names[i]) + ": " + json.dumps(v) for v in params[i]] for i in range(len(params))]
    combos = zip(itertools.product(*params), itertools.product(*encoded), strict=True)
    rows: list[tuple[Any, ...]] = []
    for j, (combo, pieces) in enumerate(combos):
        value = values[j]
        key = "{" + ", ".join([pieces[i] for i in order]) + "}"
        if len(key) > limits.PARAMS_KEY:
            raise AsvFormatError(
                f"{where}: parameters {show(key)} are over the limit of {limits.PARAMS_KEY} characters"
            )
        param_dict = dict(zip(names, combo, strict=True))
        if value is None:
            rows.append((version_str, param_dict, key, "failed") + _EMPTY)
            continue
        if type(value) is float and math.isnan(value):
            rows.append((version_str, param_dict, key, "skipped") + _EMPTY)
            continue
        value = kind.check(value, f"{where}: result {j}")
        sample = samples[j]
        if sample is not None:
            if not isinstance(sample, list):
                raise AsvFormatError(f"{where}: samples {j} is not a list")
            sample = kind.column(sample, f"{where}: samples {j}")
        rows.append(
            (version_str, param_dict, key, "ok", value)
            + (ci_a[j], ci_b[j], q_25[j], q_75[j], number[j], repeat[j], sample)
        )

    started = cols.get("started_at")
    duration = cols.get("duration")
    group = ResultGroup(name, version_str, rows, meta)
    if started is None:
        return group, None, None
    js_timestamp(started, f"{where}: started_at")  # validates
    start_s = started / 1000.0
    if duration is None or (type(duration) is float and math.isnan(duration)):
        return group, start_s, start_s
    if isinstance(duration, bool) or not isinstance(duration, int | float) or not 0 <= duration < math.inf:
        raise AsvFormatError(f"{where}: duration is {show(duration)}, not a number of seconds >= 0")
    js_timestamp((start_s + duration) * 1000.0, f"{where}: started_at + duration")  # validates
    return group, start_s, start_s + duration


def _text_field(obj: dict[str, Any], key: str, limit: int) -> str:
    value = obj[key]
    if not isinstance(value, str) or not value:
        raise AsvFormatError(f"{key!r} must be a non-empty string, got {show(value)}")
    return _check_text(value, repr(key), limit)


def parse_results(
    data: bytes,
    *,
    machine_info: dict[str, Any] | None = None,
    machine_dir_name: str | None = None,
    benchmarks: dict[str, dict[str, Any]] | None = None,
    prepared: dict[str, dict[str, Any] | AsvFormatError] | None = None,
) -> ParsedRun:
    """Parse one asv results file (format version 2) into a :class:`ParsedRun`.

    ``machine_info`` is the machine.json beside the file, ``benchmarks`` the results directory's
    benchmarks.json (parameter names, types, units); both optional. ``prepared``: the
    :func:`prepare_benchmarks` of that benchmarks.json, computed once for many files. Raises
    :class:`AsvFormatError` with the reason, for malformed files and values outside the store's limits.
    """
    obj = load_json_object(data, "results file")
    version = obj.get("version")
    if version is None:
        raise AsvFormatError("not an asv results file: no 'version' key")
    if version != RESULTS_API_VERSION:
        raise AsvFormatError(
            f"unsupported asv results format version {show(version)} (mlaperf reads version "
            f"{RESULTS_API_VERSION}; `asv update` converts older files)"
        )
    for key in ("commit_hash", "env_name", "params", "result_columns", "results"):
        if key not in obj:
            raise AsvFormatError(f"missing key {key!r}")
    columns = obj["result_columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise AsvFormatError(f"'result_columns' must be a list of strings, got {show(columns)}")
    if "result" not in columns:
        raise AsvFormatError(f"'result_columns' has no 'result' column: {show(columns)}")
    results = obj["results"]
    if not isinstance(results, dict):
        raise AsvFormatError(f"'results' must be an object, got {type(results).__name__}")
    params = obj["params"]
    if not isinstance(params, dict):
        raise AsvFormatError(f"'params' must be an object, got {type(params).__name__}")
    commit_hash = _text_field(obj, "commit_hash", limits.COMMIT_SHA)
    if not _COMMIT_HASH.fullmatch(commit_hash):  # it reaches links and markdown (the nightly's issues)
        raise AsvFormatError(f"'commit_hash' must be a hexadecimal git commit hash, got {show(commit_hash)}")
    env_name = _text_field(obj, "env_name", limits.ENV_NAME)

    own = {k: v for k, v in params.items() if k not in _ENV_PARAM_KEYS}
    machine = own.get("machine") or (machine_info or {}).get("machine") or machine_dir_name
    if not isinstance(machine, str) or not machine:
        raise AsvFormatError("no machine name: 'params' has no 'machine' and there is no machine.json")
    own["machine"] = _check_text(machine, "machine name", limits.MACHINE_NAME)
    info = {**(machine_info or {}), **own}
    _check_stored(info, "machine description ('params' and machine.json)")
    machine_columns(info)  # validates the text columns' lengths

    benchmarks = benchmarks or {}
    groups = []
    starts: list[float] = []
    ends: list[float] = []
    for name, row in results.items():
        if prepared is not None and name in prepared:
            meta = prepared[name]
            if isinstance(meta, AsvFormatError):
                raise meta
        else:
            entry = benchmarks.get(name)
            meta = None if entry is None else benchmark_meta(name, entry)
        group, start, end = _parse_benchmark(name, row, columns, meta)
        groups.append(group)
        if start is not None:
            starts.append(start)
        if end is not None:
            ends.append(end)

    requirements = {} if obj.get("requirements") is None else obj["requirements"]
    env_vars = {} if obj.get("env_vars") is None else obj["env_vars"]
    for key, value in (("requirements", requirements), ("env_vars", env_vars)):
        if not isinstance(value, dict):
            raise AsvFormatError(f"{key!r} must be an object, got {type(value).__name__}")
        _check_stored(value, repr(key))
    python = obj.get("python")
    if python is not None and (isinstance(python, bool) or not isinstance(python, str | int | float)):
        raise AsvFormatError(f"'python' must be a version string, got {show(python)}")
    return ParsedRun(
        machine=machine,
        machine_info=info,
        own_info=own,
        commit_hash=commit_hash,
        commit_date=js_timestamp(obj.get("date"), "'date'"),
        env_name=env_name,
        python=None if python is None else _check_text(str(python), "'python'", limits.PYTHON_VERSION),
        requirements=requirements,
        env_vars=env_vars,
        started_at=js_timestamp(min(starts) * 1000, "started_at") if starts else None,
        ended_at=js_timestamp(max(ends) * 1000, "ended_at") if ends else None,
        groups=groups,
    )
