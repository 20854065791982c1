"""Parameters of asv series: parsing asv's repr strings, labels, one column per parameter, numeric order.

Nothing here touches Streamlit or the database, so it is unit-testable on plain DataFrames.
"""

from __future__ import annotations

import ast
import functools
import json
import math
from collections.abc import Iterable
from typing import Any

import pandas as pd


def parse_param(value: Any) -> Any:
    """asv stores parameter values as ``repr`` strings (``"'mma'"``, ``"64"``): turn them back into values."""
    return _parse_text(value) if isinstance(value, str) else value


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Any:
    # Cached: a page parses the same few values for hundreds of series, and the results are immutable.
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return value
    return parsed if isinstance(parsed, (str, int, float, bool)) or parsed is None else value


def params_dict(params: Any) -> dict[str, Any]:
    """A result's params as a dict of parsed values, from a dict or a canonical ``params_key`` JSON string."""
    if params is None or (isinstance(params, float) and math.isnan(params)):
        return {}
    if isinstance(params, str):
        params = json.loads(params) if params else {}
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict or JSON object string, got {type(params).__name__}")
    return {str(k): parse_param(v) for k, v in params.items()}


def params_label(params: Any, names: Iterable[str] | None = None, *, only: bool = False) -> str:
    """``impl=mma, concurrency=64`` (empty for a benchmark without parameters); ``names`` (asv's
    ``param_names``) orders the parameters, others follow unless ``only``."""
    d = params_dict(params)
    order = list(names or [])
    keys = [n for n in order if n in d] + ([] if only else [k for k in d if k not in order])
    return ", ".join(f"{k}={d[k]}" for k in keys)


def series_label(benchmarks: pd.Series, labels: pd.Series) -> pd.Series:
    """``SparseDecode.time_decode [impl=mma, concurrency=64]``: the benchmark's class and method with the
    series' parameters (``params_label``), as the tables and charts name a series."""
    return benchmarks.str.rsplit(".", n=2).str[-2:].str.join(".") + " [" + labels + "]"


def rank(value: Any) -> tuple[int, float, str]:
    """Sort key of one parameter value: numbers numerically (1, 2, 16, 128), then text (bools as text)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def value_order(values: Iterable[Any]) -> list[Any]:
    """Distinct values in the order people expect (:func:`rank`)."""
    return sorted(dict.fromkeys(v for v in values if v is not None), key=rank)


def sort_key(s: pd.Series) -> pd.Series:
    """``sort_values(key=...)`` helper with :func:`rank`'s rule."""
    return s.map(rank)


def param_names(params: Iterable[Any]) -> list[str]:
    """Parameter names in first-seen order, from params_keys or parsed params dicts (asv's ``param_names``
    order survives in params dicts)."""
    return list(dict.fromkeys(n for p in params for n in (p if isinstance(p, dict) else params_dict(p))))


def expand_params(df: pd.DataFrame, params_col: str = "params_key") -> tuple[pd.DataFrame, list[str]]:
    """Return ``df`` with one parsed column per parameter (named ``p:<name>``) and the list of those columns.

    Parameter columns get a ``p:`` prefix so a parameter called ``value`` or ``unit`` cannot clash with the
    result columns.
    """
    if df.empty or params_col not in df.columns:
        return df.copy(), []
    # Parse each distinct key once: 500 series x many rows share few keys.
    parsed = {key: params_dict(key) for key in pd.unique(df[params_col].astype(str))}
    names = param_names(parsed.values())
    out = df.copy()
    keys = out[params_col].astype(str)
    for name in names:
        out[f"p:{name}"] = keys.map(lambda k, n=name: parsed[k].get(n))
    return out, [f"p:{n}" for n in names]
