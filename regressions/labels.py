"""How a series is named and ordered wherever mlaperf lists series (`mlaperf compare`, `mlaperf detect`,
the PR report; the dashboard's ``dashboard.frames`` labels follow the same rule): the one rule.

- A parameter value is asv's ``repr`` string read back (``"'mma'"`` -> ``mma``, ``"64"`` -> ``64``).
- Parameters go in asv's ``param_names`` order (``impl, concurrency, topk``), those it does not name after
  them in their given order; the store's params_key sorts names alphabetically, so the names come from the
  benchmark's stored ``param_names``.
- Series sort by benchmark, then their values in that order, numbers numerically (1, 2, 16, 128) before
  text.
- A series' name keeps its whole benchmark name: two asv modules may hold a class and method of one name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def param_value(value: Any) -> Any:
    """A parameter value from asv's repr string: ``"'mma'"`` -> ``'mma'``, ``"64"`` -> ``64``; other values
    (already parsed, or not a literal) as they are."""
    if not isinstance(value, str):
        return value
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    return parsed if isinstance(parsed, str | int | float | bool) or parsed is None else value


def ordered_params(params: Mapping[str, Any], names: Iterable[str] | None = None) -> dict[str, Any]:
    """``params`` with its keys in asv's ``names`` order, the others after them in their given order."""
    order = [n for n in names or () if n in params]
    return {k: params[k] for k in [*order, *(k for k in params if k not in order)]}


def params_label(params: Mapping[str, Any], names: Iterable[str] | None = None) -> str:
    """``impl=mma, concurrency=64, topk=512`` (empty without parameters)."""
    return ", ".join(f"{k}={param_value(v)}" for k, v in ordered_params(params, names).items())


def series_label(benchmark: str, params: Mapping[str, Any], names: Iterable[str] | None = None) -> str:
    """``bench_decode.SparseDecode.time_decode [impl=mma, concurrency=64, topk=512]``."""
    label = params_label(params, names)
    return f"{benchmark} [{label}]" if label else benchmark


def value_rank(value: Any) -> tuple[int, float, str]:
    """Sort key of one parameter value: numbers numerically (1, 2, 16, 128), then text (bools as text)."""
    v = param_value(value)
    if isinstance(v, int | float) and not isinstance(v, bool) and v == v:
        return (0, float(v), "")
    return (1, 0.0, str(v))


def params_rank(params: Mapping[str, Any], names: Iterable[str] | None = None) -> tuple[Any, ...]:
    """Sort key of one benchmark's parameter values: in asv's order, each by :func:`value_rank`."""
    return tuple((k, value_rank(v)) for k, v in ordered_params(params, names).items())


def series_rank(benchmark: str, params: Mapping[str, Any], names: Sequence[str] | None = None) -> tuple[Any, ...]:
    """Sort key of a series: its benchmark, then its values in asv's order (:func:`params_rank`)."""
    return (benchmark, params_rank(params, names))
