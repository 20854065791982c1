"""Parameters of asv series: parsing asv's repr strings, labels, one column per parameter, numeric order.

Nothing here touches Streamlit or the database, so it is unit-testable on plain DataFrames.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from regressions import labels


def parse_param(value: Any) -> Any:
    """asv stores parameter values as ``repr`` strings (``"'mma'"``, ``"64"``): turn them back into values."""
    return _parse_text(value) if isinstance(value, str) else value


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Any:
    # Cached: a page parses the same few values for hundreds of series, and the results are immutable.
    return labels.param_value(value)


def params_dict(params: Any) -> dict[str, Any]:
    """A result's params as a dict of parsed values, from a dict or a canonical ``params_key`` JSON string."""
    if params is None or (isinstance(params, float) and math.isnan(params)):
        return {}
    if isinstance(params, str):
        params = json.loads(params) if params else {}
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict or JSON object string, got {type(params).__name__}")
    return {str(k): parse_param(v) for k, v in params.items()}


def _raw(params: Any) -> dict[str, Any]:
    """A result's params as stored (asv's repr strings), from a dict or a ``params_key`` JSON string."""
    if params is None or (isinstance(params, float) and math.isnan(params)):
        return {}
    return json.loads(params) if isinstance(params, str) and params else params if isinstance(params, dict) else {}


def params_label(params: Any, names: Iterable[str] | None = None, *, only: bool = False) -> str:
    """``impl=mma, concurrency=64`` (empty for a benchmark without parameters): ``regressions.labels``' rule,
    so the dashboard, the site and the CLI name a series alike; ``names`` (asv's ``param_names``) orders the
    parameters, others follow unless ``only``."""
    raw = _raw(params)
    order = list(names or [])
    return labels.params_label({k: v for k, v in raw.items() if k in order} if only else raw, order)


def series_label(benchmarks: pd.Series, keys: pd.Series, names: Mapping[str, Sequence[str]] | None = None
                 ) -> pd.Series:
    """``bench_decode.SparseDecode.time_decode [impl=mma, concurrency=64]`` per row of ``benchmarks`` and their
    ``keys`` (params_keys), in asv's order of ``names`` (benchmark -> param_names): ``regressions.labels``'."""
    order = names or {}
    return pd.Series([labels.series_label(str(b), _raw(k), order.get(b)) for b, k in zip(benchmarks, keys,
                                                                                          strict=True)],
                     index=benchmarks.index, dtype=object)


def rank(value: Any) -> tuple[int, float, str]:
    """Sort key of one parameter value (``regressions.labels.value_rank``): numbers, and numeric-looking
    strings, numerically (1, 2, 16, 128), then text (bools as text)."""
    return labels.value_rank(value)


def value_order(values: Iterable[Any]) -> list[Any]:
    """Distinct values in the order people expect (:func:`rank`)."""
    return sorted(dict.fromkeys(v for v in values if v is not None), key=rank)


def sort_key(s: pd.Series) -> pd.Series:
    """``sort_values(key=...)`` helper with :func:`rank`'s rule."""
    return s.map(rank)


@functools.lru_cache(maxsize=8192)
def _key_rank(key: str, names: tuple[str, ...]) -> tuple[Any, ...]:
    # Cached: a machine's series share few params_keys, and ranking one parses each of its values.
    return labels.params_rank(_raw(key), names)


def series_sort(series: pd.DataFrame) -> pd.DataFrame:
    """``series`` (benchmark, params_key, and optionally machine and asv's ``param_names`` per row) in the order
    every listing of series uses (``regressions.labels.series_rank``): by machine, benchmark, then parameter
    values in asv's order, numbers numerically (concurrency 1, 2, 16, 128, not the params_key text's 1, 128, 16,
    2). The index is kept."""
    if series.empty:
        return series
    names = series["param_names"] if "param_names" in series.columns else pd.Series(None, index=series.index)
    machines = series["machine"].astype(str) if "machine" in series.columns else pd.Series("", index=series.index)
    keys = [(m, str(b), _key_rank(str(k), tuple(n) if isinstance(n, list | tuple) else ()))
            for m, b, k, n in zip(machines, series["benchmark"], series["params_key"], names, strict=True)]
    return series.iloc[sorted(range(len(keys)), key=keys.__getitem__)]


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
