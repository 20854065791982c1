"""The schema of a pull request's ``report.json`` as the trusted side reads it.

The file comes from a job that ran the pull request's code, so nothing in it is trusted: it is parsed with
limits (file size, row count, text lengths, dict sizes), every number must be finite, every enumerated
field must hold a known value, and duplicate keys or ``NaN``/``Infinity`` literals refuse the file. What
passes becomes :class:`regressions.compare.Comparison` objects that the project's own renderer
(:mod:`regressions.pr_render`) turns into the comment. Keys the schema does not know are ignored (never
rendered), so a newer writer's extra fields do not break an older reader.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from db import limits
from regressions.compare import (
    CHANGED,
    DEFAULT_ALPHA,
    DEFAULT_Z,
    METHODS,
    REGRESSED,
    SIDE_OK,
    SIDES,
    STATUSES,
    Comparison,
    change_ratio,
    ratio_sides,
    signed_sides,
    status_of,
    status_without_values,
)
from regressions.config import MAX_THRESHOLD, Settings, threshold_in_range
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE, direction_for, slowdown
from regressions.units import relative_change
from settings.pr_contract import SHA

MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_ROWS = 20_000
# A report row holds what the store holds: its names and units are ingest's limits.
MAX_BENCHMARK_CHARS = limits.BENCHMARK_NAME
MAX_MACHINE_CHARS = limits.MACHINE_NAME
MAX_UNIT_CHARS = limits.BENCHMARK_UNIT
MAX_PARAMS = 32
MAX_PARAM_KEY_CHARS = 64
MAX_PARAM_VALUE_CHARS = 1024
DIRECTIONS = (UP_IS_WORSE, DOWN_IS_WORSE)


class ReportError(ValueError):
    """report.json does not match the schema. The message names the row and field and never quotes the data,
    so it can be shown in the comment as it is."""


def _no_constants(name: str) -> float:
    raise ReportError(f"{name} is not a JSON number (only finite numbers are allowed)")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ReportError("an object has a duplicate key")
        out[key] = value
    return out


def _text(row: dict[str, Any], key: str, limit: int, where: str, *, optional: bool = False) -> str | None:
    value = row.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ReportError(f"{where}: {key!r} must be a string of 1 to {limit} characters")
    return value


def _number(row: dict[str, Any], key: str, where: str, *, optional: bool = True) -> float | None:
    value = row.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise ReportError(f"{where}: {key!r} must be a finite number{' or null' if optional else ''}")
    return float(value)


def _choice(row: dict[str, Any], key: str, allowed: tuple[str, ...], where: str) -> str:
    value = row.get(key)
    if value not in allowed:
        raise ReportError(f"{where}: {key!r} must be one of {', '.join(allowed)}")
    return str(value)


def _flag(row: dict[str, Any], key: str, where: str) -> bool:
    value = row.get(key)
    if not isinstance(value, bool):
        raise ReportError(f"{where}: {key!r} must be true or false")
    return value


def _params(row: dict[str, Any], where: str) -> dict[str, str]:
    params = row.get("params")
    if not isinstance(params, dict) or len(params) > MAX_PARAMS:
        raise ReportError(f"{where}: 'params' must be an object of at most {MAX_PARAMS} entries")
    out: dict[str, str] = {}
    for key, value in params.items():
        if not key or len(key) > MAX_PARAM_KEY_CHARS:
            raise ReportError(f"{where}: a 'params' key must have 1 to {MAX_PARAM_KEY_CHARS} characters")
        scalar = isinstance(value, str | int | float) and not isinstance(value, bool)
        if not scalar or len(str(value)) > MAX_PARAM_VALUE_CHARS:
            raise ReportError(f"{where}: a 'params' value must be a string of at most {MAX_PARAM_VALUE_CHARS} chars")
        out[key] = str(value)
    return out


def recheck(c: Comparison) -> str | None:
    """What in a row read back disagrees with compare's own rules (None: nothing): its status and regression flag
    as :mod:`regressions.compare` derives them from the row's sides, values, threshold, direction and test (its
    method, significance and p at the default alpha and z), its ratio as head / base. The values and the test's
    outcome come from the pull request's code and can only be taken as given; what they imply is checked."""
    if c.regression != (c.status == REGRESSED):
        return "'regression' disagrees with 'status'"
    for side, value, name in ((c.base_status, c.base, "base"), (c.head_status, c.head, "head")):
        if (side == SIDE_OK) != (value is not None):  # compare writes a value for an ok side and for no other
            return f"'{name}' must be a number where '{name}_status' is ok, and null elsewhere"
    ratio = change_ratio(c.base, c.head)
    ratio = ratio if ratio is not None and math.isfinite(ratio) else None
    same = ratio is None if c.ratio is None else ratio is not None and math.isclose(ratio, c.ratio, rel_tol=1e-6)
    if not same:
        return "'ratio' is not head / base"
    without = status_without_values(c.base_status, c.head_status)
    if without is not None:
        return None if c.status == without else "'status' disagrees with 'base_status'/'head_status'"
    if (c.status == CHANGED) != (c.method == "version") or c.status == CHANGED and c.significant:
        return "'changed' goes with the method 'version' alone and is never significant"
    if c.status == CHANGED:
        return None
    if (problem := _test_problem(c)) is not None:
        return problem
    status, _ = _judged(c, c.direction, c.threshold)
    return None if status == c.status else "'status' disagrees with its values, threshold, direction and test"


def _judged(c: Comparison, direction: str, threshold: float) -> tuple[str, bool]:
    """(status, significant) of a row with both values, by compare's rule at ``direction`` and ``threshold``: its
    ratio (or a value's own change where there is none) against the threshold, its test's outcome as given."""
    ratio = change_ratio(c.base, c.head)
    if ratio is not None and math.isfinite(ratio):
        sides = ratio_sides(slowdown(ratio, direction), threshold)
    else:
        sides = signed_sides(relative_change(c.base, c.head) or 0.0, threshold, direction)
    return status_of(None if c.method == "none" else c.significant, *sides, c.method)


def _test_problem(c: Comparison) -> str | None:
    """Where a row's significance disagrees with its own test: a p-value at compare's default alpha (the samples)
    or z (the history), a value leaving or reaching 0."""
    p = c.p_value
    if c.method in ("mann-whitney", "mann-whitney+history", "history") and p is None:
        return f"'method' {c.method!r} comes with a 'p_value'"
    if c.method == "mann-whitney" and c.significant != (p < DEFAULT_ALPHA):
        return "'significant' disagrees with 'p_value'"
    if c.method == "mann-whitney+history" and c.significant and not p < DEFAULT_ALPHA:
        return "'significant' disagrees with 'p_value'"
    if c.method == "history" and c.significant != (p <= math.erfc(DEFAULT_Z / math.sqrt(2.0)) * (1 + 1e-9)):
        return "'significant' disagrees with 'p_value'"
    if c.method == "zero" and not (c.significant and 0.0 in (c.base, c.head)):
        return "'method' 'zero' is a significant change from or to 0"
    return None


def as_configured(c: Comparison, settings: Settings) -> Comparison:
    """A checked row judged again with the direction and threshold ``settings`` (the default branch's configuration,
    read by the trusted side) give its benchmark: a pull request's own configuration (a looser threshold, a flipped
    direction) never decides its status. Its sides, values and test's outcome stand as given."""
    direction, threshold = direction_for(c.benchmark, c.unit, settings), settings.threshold_for(c.benchmark)
    if direction == c.direction and math.isclose(threshold, c.threshold, rel_tol=1e-9):
        return c
    judged = replace(c, direction=direction, threshold=threshold)
    if status_without_values(c.base_status, c.head_status) is not None or c.status == CHANGED:
        return judged  # its status does not rest on the threshold or the direction
    status, significant = _judged(c, direction, threshold)
    ratio = change_ratio(c.base, c.head)
    slow = slowdown(ratio, direction) if ratio is not None and math.isfinite(ratio) else None
    return replace(judged, status=status, significant=significant, regression=status == REGRESSED, slowdown=slow)


def row_to_comparison(row: Any, index: int, settings: Settings | None = None) -> Comparison:
    """One validated row of report.json (judged as ``settings`` configure it, where given)."""
    where = f"row {index}"
    if not isinstance(row, dict):
        raise ReportError(f"{where}: must be an object")
    method = _choice(row, "method", METHODS, where)  # printed as is in the table: only the known words
    p_value = _number(row, "p_value", where)
    if p_value is not None and not 0.0 <= p_value <= 1.0:
        raise ReportError(f"{where}: 'p_value' must be between 0 and 1")
    ratio = _number(row, "ratio", where)
    if ratio is not None and ratio <= 0:
        raise ReportError(f"{where}: 'ratio' must be positive")
    comparison = Comparison(
        benchmark=str(_text(row, "benchmark", MAX_BENCHMARK_CHARS, where)),
        params=_params(row, where),
        machine=str(_text(row, "machine", MAX_MACHINE_CHARS, where)),
        unit=_text(row, "unit", MAX_UNIT_CHARS, where, optional=True),
        direction=_choice(row, "direction", DIRECTIONS, where),
        threshold=_threshold(row, where),
        status=_choice(row, "status", STATUSES, where),
        base_status=_choice(row, "base_status", SIDES, where),
        head_status=_choice(row, "head_status", SIDES, where),
        base=_number(row, "base", where),
        head=_number(row, "head", where),
        ratio=ratio,
        slowdown=_number(row, "slowdown", where),
        significant=_flag(row, "significant", where),
        regression=_flag(row, "regression", where),
        method=method,
        p_value=p_value,
    )
    if (problem := recheck(comparison)) is not None:
        raise ReportError(f"{where}: {problem}")
    return comparison if settings is None else as_configured(comparison, settings)


def _threshold(row: dict[str, Any], where: str) -> float:
    value = float(_number(row, "threshold", where, optional=False) or 0.0)
    if not threshold_in_range(value):
        raise ReportError(f"{where}: 'threshold' must lie in (0, {MAX_THRESHOLD:g})")
    return value


def parse_report(data: bytes, settings: Settings | None = None) -> list[Comparison]:
    """report.json's bytes -> validated comparisons (each judged as ``settings`` configure it, where given);
    :class:`ReportError` names the first problem."""
    if len(data) > MAX_FILE_BYTES:
        raise ReportError(f"{len(data):,} bytes, over the limit of {MAX_FILE_BYTES:,}")
    try:
        # Integers as floats: a 400-digit literal becomes inf (refused below), never a slow big int.
        rows = json.loads(data.decode("utf-8"), object_pairs_hook=_unique, parse_constant=_no_constants,
                          parse_int=float)  # fmt: skip
    except UnicodeDecodeError:
        raise ReportError("not UTF-8") from None
    except RecursionError:
        raise ReportError("nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(rows, list):
        raise ReportError("must be a JSON list of comparison rows")
    if len(rows) > MAX_ROWS:
        raise ReportError(f"{len(rows):,} rows, over the limit of {MAX_ROWS:,}")
    return [row_to_comparison(row, i, settings) for i, row in enumerate(rows)]


def read_report(path: Path, settings: Settings | None = None) -> list[Comparison]:
    """Read and validate report.json at ``path``: a regular file (never a link), within the size limit (each row
    judged as ``settings`` configure it, where given)."""
    if path.is_symlink() or not path.is_file():
        raise ReportError(f"{path.name}: not a regular file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ReportError(f"{path.stat().st_size:,} bytes, over the limit of {MAX_FILE_BYTES:,}")
    return parse_report(path.read_bytes(), settings)


def check_sha(value: str, what: str) -> str:
    if not SHA.fullmatch(value):
        raise ReportError(f"{what}: not a full hexadecimal commit hash")
    return value
