"""Reading asv output: results files (format version 2), machine.json, benchmarks.json.

Pure parsing, no database: :func:`parse_results` turns one results file into a :class:`ParsedRun` whose
result rows are ready for a bulk insert. Columns are read by name through the file's ``result_columns``
(never by position), parameter combinations are expanded in ``itertools.product`` order (as asv itself
does), a ``null`` value is a failed benchmark and ``NaN`` a skipped one.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


class AsvFormatError(ValueError):
    """A file is not valid asv output; the message says why."""


@dataclass
class ResultGroup:
    """The rows of one benchmark in one results file, tuples in :data:`RESULT_FIELDS` order."""

    benchmark: str
    version: str | None
    rows: list[tuple[Any, ...]]


@dataclass
class ParsedRun:
    machine: str
    machine_info: dict[str, Any]
    commit_hash: str
    commit_date: dt.datetime | None
    env_name: str
    python: str | None
    requirements: dict[str, Any]
    env_vars: dict[str, Any]
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    groups: list[ResultGroup] = field(default_factory=list)

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
        return f"{self.path.parent.name}/{self.path.name}"


def js_timestamp(value: Any, what: str) -> dt.datetime | None:
    """asv's JavaScript timestamp (milliseconds since the epoch) as naive UTC."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AsvFormatError(f"{what} is not a timestamp in milliseconds: {value!r}")
    return dt.datetime.fromtimestamp(value / 1000.0, dt.UTC).replace(tzinfo=None)


def benchmark_type(name: str) -> str | None:
    """asv's benchmark type from the function name prefix (``time_`` -> ``time``)."""
    prefix = name.rsplit(".", 1)[-1].split("_", 1)[0]
    return _TYPE_BY_PREFIX.get(prefix)


def default_unit(name: str) -> str | None:
    prefix = name.rsplit(".", 1)[-1].split("_", 1)[0]
    return _UNITS_BY_PREFIX.get(prefix)


def find_result_files(paths: list[str | Path]) -> list[ResultFile]:
    """Results files under each path: an asv results directory, one machine's directory, or files.

    Raises ``FileNotFoundError`` naming a path that does not exist and ``ValueError`` for a directory
    holding no asv results. ``machine.json`` and ``benchmarks.json`` are metadata, never results.
    """
    found: dict[Path, ResultFile] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {raw}")
        if path.is_file():
            if path.name in (MACHINE_JSON, BENCHMARKS_JSON):
                continue
            root = path.parent.parent
            found.setdefault(path.resolve(), ResultFile(path, root if (root / BENCHMARKS_JSON).is_file() else None))
            continue
        if (path / MACHINE_JSON).is_file():
            machine_dirs = [path]
            root = path.parent
        else:
            machine_dirs = sorted(p for p in path.iterdir() if p.is_dir() and (p / MACHINE_JSON).is_file())
            root = path
            if not machine_dirs:
                raise ValueError(
                    f"{raw} is not an asv results directory: no machine.json in it or in its subdirectories"
                )
        results_dir = root if (root / BENCHMARKS_JSON).is_file() else None
        for machine_dir in machine_dirs:
            for file in sorted(machine_dir.glob("*.json")):
                if file.name != MACHINE_JSON:
                    found.setdefault(file.resolve(), ResultFile(file, results_dir))
    return list(found.values())


def load_json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except UnicodeDecodeError as exc:
        raise AsvFormatError(f"{what} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        # Errors at the very end (or a string never closed) mean the file was cut short.
        truncated = exc.pos >= len(data.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = " (truncated?)" if truncated else ""
        raise AsvFormatError(f"invalid JSON{hint}: {exc}") from None
    if not isinstance(obj, dict):
        raise AsvFormatError(f"{what} must hold a JSON object, not {type(obj).__name__}")
    return obj


def parse_benchmarks_json(data: bytes) -> dict[str, dict[str, Any]]:
    """benchmarks.json as {name: entry}; entries lacking a name are rejected."""
    obj = load_json_object(data, BENCHMARKS_JSON)
    benchmarks = {}
    for name, entry in obj.items():
        if name == "version":
            continue
        if not isinstance(entry, dict):
            raise AsvFormatError(f"benchmarks.json entry {name!r} is not an object")
        benchmarks[name] = entry
    return benchmarks


def parse_machine_json(data: bytes) -> dict[str, Any]:
    info = load_json_object(data, MACHINE_JSON)
    info.pop("version", None)
    return info


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AsvFormatError(f"{what} is not a number: {value!r}")
    return float(value) if math.isfinite(value) else None


def _floats(column: list[Any], what: str) -> list[Any]:
    """A column of numbers with None kept and NaN/inf turned into None; anything else is an error."""
    if all(type(x) is float and math.isfinite(x) for x in column):  # the common case, checked fast
        return column
    return [_number(x, what) for x in column]


def _ints(column: list[Any], what: str) -> list[int | None]:
    if all(type(x) is int for x in column):
        return column
    return [None if x is None else int(x) for x in _floats(column, what)]


def _column(cols: dict[str, Any], key: str, n: int, name: str) -> list[Any]:
    """One per-combination column, ``None`` x n when absent (asv drops all-None columns)."""
    value = cols.get(key)
    if value is None:
        return [None] * n
    if n == 1 and not isinstance(value, list | dict):
        return [value]  # a bare scalar for an unparameterized benchmark
    if not isinstance(value, list) or len(value) != n:
        got = len(value) if isinstance(value, list) else type(value).__name__
        raise AsvFormatError(f"benchmark {name}: column {key!r} has {got} entries for {n} parameter combinations")
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


def _parse_benchmark(
    name: str, row: Any, columns: list[str], param_names: list[str] | None
) -> tuple[ResultGroup, float | None, float | None]:
    if not isinstance(row, list):
        raise AsvFormatError(f"benchmark {name}: result row is {type(row).__name__}, not a list")
    if len(row) > len(columns):
        raise AsvFormatError(f"benchmark {name}: {len(row)} values for {len(columns)} result_columns")
    # asv drops trailing None columns, so a short row is normal.
    cols = dict(zip(columns, row, strict=False))
    params = cols.get("params") or []
    if not isinstance(params, list) or not all(isinstance(p, list) for p in params):
        raise AsvFormatError(f"benchmark {name}: 'params' must be a list of lists, got {params!r}")
    params = [[str(v) for v in values] for values in params]
    names = _param_names(param_names, len(params))
    n = math.prod(len(p) for p in params)
    where = f"benchmark {name}"

    values = _column(cols, "result", n, name)
    ci_a = _floats(_column(cols, "stats_ci_99_a", n, name), f"{where}: stats_ci_99_a")
    ci_b = _floats(_column(cols, "stats_ci_99_b", n, name), f"{where}: stats_ci_99_b")
    q_25 = _floats(_column(cols, "stats_q_25", n, name), f"{where}: stats_q_25")
    q_75 = _floats(_column(cols, "stats_q_75", n, name), f"{where}: stats_q_75")
    number = _ints(_column(cols, "stats_number", n, name), f"{where}: stats_number")
    repeat = _ints(_column(cols, "stats_repeat", n, name), f"{where}: stats_repeat")
    samples = _column(cols, "samples", n, name)
    version = cols.get("version")
    version_str = None if version is None else str(version)

    # params_key pieces, JSON-encoded once per value: the key equals json.dumps(params, sort_keys=True).
    order = sorted(range(len(names)), key=names.__getitem__)
    encoded = [[json.dumps(names[i]) + ": " + json.dumps(v) for v in params[i]] for i in range(len(params))]
    combos = zip(itertools.product(*params), itertools.product(*encoded), strict=True)
    rows: list[tuple[Any, ...]] = []
    for j, (combo, pieces) in enumerate(combos):
        value = values[j]
        key = "{" + ", ".join([pieces[i] for i in order]) + "}"
        param_dict = dict(zip(names, combo, strict=True))
        if value is None:
            rows.append((version_str, param_dict, key, "failed") + _EMPTY)
            continue
        if type(value) is float and math.isnan(value):
            rows.append((version_str, param_dict, key, "skipped") + _EMPTY)
            continue
        value = _number(value, f"{where}: result {j}")
        if value is None:  # +-inf: asv never writes it; treat as a failed measurement
            rows.append((version_str, param_dict, key, "failed") + _EMPTY)
            continue
        sample = samples[j]
        if sample is not None:
            if not isinstance(sample, list):
                raise AsvFormatError(f"{where}: samples {j} is not a list")
            sample = _floats(sample, f"{where}: samples {j}")
        rows.append(
            (version_str, param_dict, key, "ok", value)
            + (ci_a[j], ci_b[j], q_25[j], q_75[j], number[j], repeat[j], sample)
        )

    started = cols.get("started_at")
    duration = cols.get("duration")
    group = ResultGroup(name, version_str, rows)
    if started is None:
        return group, None, None
    js_timestamp(started, f"{where}: started_at")  # validates
    start_s = started / 1000.0
    if isinstance(duration, int | float) and not isinstance(duration, bool) and math.isfinite(duration):
        return group, start_s, start_s + duration
    return group, start_s, start_s


def parse_results(
    data: bytes,
    *,
    machine_info: dict[str, Any] | None = None,
    machine_dir_name: str | None = None,
    benchmarks: dict[str, dict[str, Any]] | None = None,
) -> ParsedRun:
    """Parse one asv results file (format version 2) into a :class:`ParsedRun`.

    ``machine_info`` is the machine.json beside the file, ``benchmarks`` the results directory's
    benchmarks.json (parameter names); both optional. Raises :class:`AsvFormatError` with the reason.
    """
    obj = load_json_object(data, "results file")
    version = obj.get("version")
    if version is None:
        raise AsvFormatError("not an asv results file: no 'version' key")
    if version != RESULTS_API_VERSION:
        raise AsvFormatError(
            f"unsupported asv results format version {version!r} (mlaperf reads version "
            f"{RESULTS_API_VERSION}; `asv update` converts older files)"
        )
    for key in ("commit_hash", "env_name", "params", "result_columns", "results"):
        if key not in obj:
            raise AsvFormatError(f"missing key {key!r}")
    columns = obj["result_columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise AsvFormatError(f"'result_columns' must be a list of strings, got {columns!r}")
    if "result" not in columns:
        raise AsvFormatError(f"'result_columns' has no 'result' column: {columns}")
    results = obj["results"]
    if not isinstance(results, dict):
        raise AsvFormatError(f"'results' must be an object, got {type(results).__name__}")
    params = obj["params"]
    if not isinstance(params, dict):
        raise AsvFormatError(f"'params' must be an object, got {type(params).__name__}")
    commit_hash = obj["commit_hash"]
    if not isinstance(commit_hash, str) or not commit_hash:
        raise AsvFormatError(f"'commit_hash' must be a non-empty string, got {commit_hash!r}")
    env_name = obj["env_name"]
    if not isinstance(env_name, str) or not env_name:
        raise AsvFormatError(f"'env_name' must be a non-empty string, got {env_name!r}")

    info = dict(machine_info or {})
    info.update({k: v for k, v in params.items() if k not in _ENV_PARAM_KEYS})
    machine = params.get("machine") or info.get("machine") or machine_dir_name
    if not isinstance(machine, str) or not machine:
        raise AsvFormatError("no machine name: 'params' has no 'machine' and there is no machine.json")
    info["machine"] = machine

    benchmarks = benchmarks or {}
    groups = []
    starts: list[float] = []
    ends: list[float] = []
    for name, row in results.items():
        entry = benchmarks.get(name)
        param_names = entry.get("param_names") if entry else None
        group, start, end = _parse_benchmark(name, row, columns, param_names)
        groups.append(group)
        if start is not None:
            starts.append(start)
        if end is not None:
            ends.append(end)

    requirements = obj.get("requirements") or {}
    env_vars = obj.get("env_vars") or {}
    python = obj.get("python")
    return ParsedRun(
        machine=machine,
        machine_info=info,
        commit_hash=commit_hash,
        commit_date=js_timestamp(obj.get("date"), "'date'"),
        env_name=env_name,
        python=None if python is None else str(python),
        requirements=requirements if isinstance(requirements, dict) else {"requirements": requirements},
        env_vars=env_vars if isinstance(env_vars, dict) else {},
        started_at=js_timestamp(min(starts) * 1000, "started_at") if starts else None,
        ended_at=js_timestamp(max(ends) * 1000, "ended_at") if ends else None,
        groups=groups,
    )
