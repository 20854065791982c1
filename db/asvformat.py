"""Reading asv output: results files (format version 2), machine.json, benchmarks.json.

Pure parsing and checking, no database: :func:`parse_results` turns one results file into a
:class:`ParsedRun` whose result rows are ready for a bulk insert, or raises :class:`AsvFormatError` with
a one-line reason. Columns are read by name through the file's ``result_columns`` (never by position),
parameter combinations are expanded in ``itertools.product`` order (as asv itself does), a ``null``
value is a failed benchmark and ``NaN`` a skipped one. Every value is checked against the store's
limits (``db.limits``, docs/ingest.md) here, so SQLite and PostgreSQL accept exactly the same files.
Finding and reading the files on disk is ``db.asvfiles``; the value checks are ``db.asvcheck`` (their public
names are importable from here too).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from db import limits
from db.asvcheck import (
    AsvFormatError,
    ValueRange,
    bounds,
    check_stored,
    check_text,
    counts,
    js_timestamp,
    load_json_object,
    show,
    show_path,
)
from db.asvfiles import BENCHMARKS_JSON, MACHINE_JSON, ResultFile, find_result_files, read_input, scan_inputs

__all__ = [
    "BENCHMARKS_JSON", "MACHINE_JSON", "RESULTS_API_VERSION", "RESULT_FIELDS", "AsvFormatError", "ParsedRun",
    "ResultFile", "ResultGroup", "benchmark_meta", "benchmark_type", "default_unit", "find_result_files",
    "js_timestamp", "load_json_object", "machine_columns", "parse_benchmarks_json", "parse_machine_json",
    "parse_results", "prepare_benchmarks", "read_input", "scan_inputs", "show", "show_path",
]

RESULTS_API_VERSION = 2
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
_COMMIT_HASH = re.compile(r"[0-9a-f]{7,64}")


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
    started_ms: int | None = None  # asv's started_at of the benchmark (ms since the epoch), None where absent


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
    check_stored(info, MACHINE_JSON)
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
    return check_text(str(value), f"{what} {key!r}", limit)


def benchmark_meta(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The benchmark row's values from a benchmarks.json entry (checked against the column limits)."""
    what = f"benchmarks.json entry {show(name)}:"
    param_names = entry.get("param_names") or []
    params = entry.get("params") or []
    if not isinstance(param_names, list) or not isinstance(params, list):
        raise AsvFormatError(f"{what} 'param_names' and 'params' must be lists")
    check_stored(param_names, f"{what} 'param_names'")
    check_stored(params, f"{what} 'params'")
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
        cols[key] = None if value is None or value == "" else check_text(str(value), f"machine {key!r}", limit)
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
    check_text(name, "benchmark name", limits.BENCHMARK_NAME)
    if not isinstance(row, list):
        raise AsvFormatError(f"{where}: result row is {type(row).__name__}, not a list")
    if len(row) > len(columns):
        raise AsvFormatError(f"{where}: {len(row)} values for {len(columns)} result_columns")
    # asv drops trailing None columns, so a short row is normal.
    cols = dict(zip(columns, row, strict=False))
    params = _parse_params(cols.get("params") or [], where)
    names = _param_names(meta["param_names"] if meta else None, len(params))
    n = math.prod(len(p) for p in params)
    kind = ValueRange(meta["type"] if meta else benchmark_type(name))

    values = _column(cols, "result", n, name)
    ci_a = bounds(_column(cols, "stats_ci_99_a", n, name), f"{where}: stats_ci_99_a")
    ci_b = bounds(_column(cols, "stats_ci_99_b", n, name), f"{where}: stats_ci_99_b")
    q_25 = kind.column(_column(cols, "stats_q_25", n, name), f"{where}: stats_q_25")
    q_75 = kind.column(_column(cols, "stats_q_75", n, name), f"{where}: stats_q_75")
    number = counts(_column(cols, "stats_number", n, name), f"{where}: stats_number")
    repeat = counts(_column(cols, "stats_repeat", n, name), f"{where}: stats_repeat")
    samples = _column(cols, "samples", n, name)
    version = cols.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, str | int | float)):
        raise AsvFormatError(f"{where}: version is {type(version).__name__}, not text")
    version_str = None if version is None else check_text(str(version), f"{where}: version", limits.BENCHMARK_VERSION)

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
    group.started_ms = int(started)
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
    return check_text(value, repr(key), limit)


def _check_document(obj: dict[str, Any]) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """A results file's format version and required keys; its result_columns, results and params."""
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
    return columns, results, params


def _machine(params: dict[str, Any], machine_info: dict[str, Any] | None,
             machine_dir_name: str | None) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The machine's name, its description (machine.json overlaid with the file's params) and the file's
    params alone (with the name)."""
    own = {k: v for k, v in params.items() if k not in _ENV_PARAM_KEYS}
    machine = own.get("machine") or (machine_info or {}).get("machine") or machine_dir_name
    if not isinstance(machine, str) or not machine:
        raise AsvFormatError("no machine name: 'params' has no 'machine' and there is no machine.json")
    own["machine"] = check_text(machine, "machine name", limits.MACHINE_NAME)
    info = {**(machine_info or {}), **own}
    check_stored(info, "machine description ('params' and machine.json)")
    machine_columns(info)  # validates the text columns' lengths
    return machine, info, own


def _groups(results: dict[str, Any], columns: list[str], benchmarks: dict[str, dict[str, Any]],
            prepared: dict[str, dict[str, Any] | AsvFormatError] | None
            ) -> tuple[list[ResultGroup], list[float], list[float]]:
    """Every benchmark's rows, and the start and end times (seconds) the benchmarks recorded."""
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
    return groups, starts, ends


def _environment(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """The file's requirements, env_vars and Python version."""
    requirements = {} if obj.get("requirements") is None else obj["requirements"]
    env_vars = {} if obj.get("env_vars") is None else obj["env_vars"]
    for key, value in (("requirements", requirements), ("env_vars", env_vars)):
        if not isinstance(value, dict):
            raise AsvFormatError(f"{key!r} must be an object, got {type(value).__name__}")
        check_stored(value, repr(key))
    python = obj.get("python")
    if python is not None and (isinstance(python, bool) or not isinstance(python, str | int | float)):
        raise AsvFormatError(f"'python' must be a version string, got {show(python)}")
    return requirements, env_vars, None if python is None else check_text(str(python), "'python'",
                                                                          limits.PYTHON_VERSION)


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
    columns, results, params = _check_document(obj)
    commit_hash = _text_field(obj, "commit_hash", limits.COMMIT_SHA)
    if not _COMMIT_HASH.fullmatch(commit_hash):  # it reaches links and markdown (the nightly's issues)
        raise AsvFormatError(
            f"'commit_hash' must be a git commit hash: 7 to 64 lowercase hexadecimal digits, got {show(commit_hash)}"
        )
    env_name = _text_field(obj, "env_name", limits.ENV_NAME)
    machine, info, own = _machine(params, machine_info, machine_dir_name)
    groups, starts, ends = _groups(results, columns, benchmarks or {}, prepared)
    requirements, env_vars, python = _environment(obj)
    return ParsedRun(
        machine=machine,
        machine_info=info,
        own_info=own,
        commit_hash=commit_hash,
        commit_date=js_timestamp(obj.get("date"), "'date'"),
        env_name=env_name,
        python=python,
        requirements=requirements,
        env_vars=env_vars,
        started_at=js_timestamp(min(starts) * 1000, "started_at") if starts else None,
        ended_at=js_timestamp(max(ends) * 1000, "ended_at") if ends else None,
        groups=groups,
    )
