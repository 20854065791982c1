"""Pure pandas transforms shared by the pages: parameter parsing, units, directions, two-commit compare.

Nothing here touches Streamlit or the database, so it is unit-testable on plain DataFrames.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

# Units whose bigger values are better (throughput-like); everything else (time, memory) is lower-is-better,
# which is also asv's own convention.
RATE_UNITS = frozenset({"tokens/s", "gb/s", "tflop/s", "gflop/s", "fraction", "ops/s", "items/s", "bytes/s"})
RATE_NAME_HINTS = ("tokens_per_s", "gbps", "tflops", "gflops", "roofline", "throughput", "bandwidth")


def parse_param(value: Any) -> Any:
    """asv stores parameter values as ``repr`` strings (``"'mma'"``, ``"64"``): turn them back into values."""
    if not isinstance(value, str):
        return value
    try:
        parsed = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
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


def params_label(params: Any) -> str:
    """Human label like ``impl=mma, concurrency=64`` (empty string for a non-parameterized benchmark)."""
    return ", ".join(f"{k}={v}" for k, v in params_dict(params).items())


def expand_params(df: pd.DataFrame, params_col: str = "params_key") -> tuple[pd.DataFrame, list[str]]:
    """Return ``df`` with one parsed column per parameter (named ``p:<name>``) and the list of those columns.

    Parameter columns get a ``p:`` prefix so a parameter called ``value`` or ``unit`` cannot clash with the
    result columns.
    """
    if df.empty or params_col not in df.columns:
        return df.copy(), []
    # Parse each distinct key once: 500 series x many rows share few keys.
    parsed = {key: params_dict(key) for key in pd.unique(df[params_col].astype(str))}
    names: list[str] = []
    for d in parsed.values():
        for name in d:
            if name not in names:
                names.append(name)
    out = df.copy()
    keys = out[params_col].astype(str)
    for name in names:
        out[f"p:{name}"] = keys.map(lambda k, n=name: parsed[k].get(n))
    return out, [f"p:{n}" for n in names]


def short_sha(sha: Any, n: int = 8) -> str:
    return str(sha)[:n] if sha is not None else ""


def higher_is_better(benchmark: str, unit: str | None) -> bool:
    """Direction of a series: rates (tokens/s, GB/s, TFLOP/s, roofline fraction) go up when things improve."""
    if unit and unit.strip().lower() in RATE_UNITS:
        return True
    leaf = benchmark.rsplit(".", 1)[-1].lower()
    return leaf.startswith("track_") and any(h in leaf for h in RATE_NAME_HINTS)


def time_scale(values: Iterable[float]) -> tuple[float, str]:
    """Pick a display unit for times in seconds from their median: (multiplier, unit label)."""
    arr = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    med = float(np.median(np.abs(arr))) if arr.size else 1.0
    for mult, label in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if med * mult >= 1.0:
            return mult, label
    return 1e9, "ns"


def display_scale(unit: str | None, values: Iterable[float]) -> tuple[float, str]:
    """Multiplier and axis unit for a series: times get s/ms/µs/ns, other units are shown as stored."""
    if unit in (None, "", "seconds", "s"):
        return time_scale(values)
    return 1.0, str(unit)


def is_different(
    samples_a: Sequence[float] | None,
    samples_b: Sequence[float] | None,
    ci_a: tuple[float, float] | None,
    ci_b: tuple[float, float] | None,
    p_threshold: float = 0.002,
) -> tuple[bool | None, float | None]:
    """asv's significance rule: Mann-Whitney U on samples (p < 0.002) when there are enough of them, else
    non-overlapping 99% confidence intervals. Returns (different, p_value); ``None`` when nothing to test."""
    if samples_a is not None and samples_b is not None:
        a = [float(x) for x in samples_a if x is not None and not math.isnan(x)]
        b = [float(x) for x in samples_b if x is not None and not math.isnan(x)]
        if a and b and 1 / math.comb(len(a) + len(b), min(len(a), len(b))) < p_threshold:
            from scipy.stats import mannwhitneyu

            p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
            return p < p_threshold, p
    if ci_a is not None and ci_b is not None and all(np.isfinite(v) for v in (*ci_a, *ci_b)):
        overlap = ci_a[1] >= ci_b[0] and ci_a[0] <= ci_b[1]
        return (not overlap), None
    return None, None


def _ci(row: pd.Series, suffix: str) -> tuple[float, float] | None:
    a, b = row.get(f"ci_99_a{suffix}"), row.get(f"ci_99_b{suffix}")
    if a is None or b is None or pd.isna(a) or pd.isna(b):
        return None
    return float(a), float(b)


def _samples(row: pd.Series, suffix: str) -> list[float] | None:
    s = row.get(f"samples{suffix}")
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return None
    if isinstance(s, str):
        s = json.loads(s)
    return list(s) if len(s) else None


def _compare_one(benchmark: str, params_key: str, unit: str | None, threshold: float, r: pd.Series) -> dict:
    """One series: ``regressions.compare.compare_pair`` when that package is installed, else asv's rule."""
    vb, vh = r["value_base"], r["value_head"]
    vb = None if pd.isna(vb) else float(vb)
    vh = None if pd.isna(vh) else float(vh)
    try:
        from regressions.compare import SeriesPair, compare_pair
        from regressions.direction import infer_direction
    except ImportError:
        compare_pair = None  # type: ignore[assignment]
    if compare_pair is not None:
        c = compare_pair(SeriesPair(
            benchmark=benchmark, params=params_dict(params_key), machine="", unit=unit,
            direction=infer_direction(benchmark, unit), threshold=threshold, base=vb, head=vh,
            base_samples=_samples(r, "_base") or [], head_samples=_samples(r, "_head") or [],
            base_ci=_ci(r, "_base"), head_ci=_ci(r, "_head"),
        ))
        marks = {"regression": "+", "improvement": "-", "failed": "x", "fixed": "x"}
        return {"ratio": c.ratio if c.ratio is not None else float("nan"),
                "worse_by": c.slowdown if c.slowdown is not None else float("nan"),
                "p_value": c.p_value, "significant": c.significant, "change": marks.get(c.change, ""),
                "method": c.method}
    up_good = higher_is_better(benchmark, unit)
    ratio = vh / vb if vb and vh is not None else float("nan")
    worse_by = (1 / ratio if up_good else ratio) if ratio == ratio and ratio != 0 else float("nan")
    diff, p = is_different(_samples(r, "_base"), _samples(r, "_head"), _ci(r, "_base"), _ci(r, "_head"))
    # asv treats "no statistics" as significant: the factor alone decides.
    significant = True if diff is None else diff
    if (vb is None) != (vh is None):
        change = "x"
    elif worse_by == worse_by and significant and worse_by > 1 + threshold:
        change = "+"
    elif worse_by == worse_by and significant and worse_by < 1 / (1 + threshold):
        change = "-"
    else:
        change = ""
    return {"ratio": ratio, "worse_by": worse_by, "p_value": p, "significant": significant, "change": change,
            "method": "asv"}


COMPARE_COLUMNS = ["change", "benchmark", "params", "unit", "base", "head", "ratio", "p_value", "significant",
                   "method", "worse_by", "params_key"]


def compare_frames(base: pd.DataFrame, head: pd.DataFrame, threshold: float = 0.05) -> pd.DataFrame:
    """``asv compare``-style table from two ``results_at_commit`` frames.

    Columns: change ('+' worse, '-' better, '' unchanged, 'x' failed on one side), benchmark, params, unit,
    base, head, ratio (head / base), p_value, significant, method, worse_by (ratio oriented so > 1 is worse),
    params_key. Sorted worst first. Significance comes from ``regressions.compare`` (the detector's own
    rule) when available, else asv's (Mann-Whitney U on samples, else non-overlapping 99% CIs).
    """
    cols = ["benchmark", "params_key", "unit", "value", "ci_99_a", "ci_99_b", "samples"]
    m = base.reindex(columns=cols).merge(
        head.reindex(columns=cols), on=["benchmark", "params_key"], how="outer", suffixes=("_base", "_head")
    )
    if m.empty:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    m["unit"] = m["unit_head"].fillna(m["unit_base"])
    rows = []
    for _, r in m.iterrows():
        unit = None if pd.isna(r["unit"]) else str(r["unit"])
        row = _compare_one(str(r["benchmark"]), str(r["params_key"]), unit, threshold, r)
        row.update(benchmark=r["benchmark"], params=params_label(r["params_key"]), unit=unit,
                   base=r["value_base"], head=r["value_head"], params_key=r["params_key"])
        rows.append(row)
    out = pd.DataFrame(rows)[COMPARE_COLUMNS]
    order = {"+": 0, "x": 1, "-": 2, "": 3}
    out["_o"] = out["change"].map(order)
    out = out.sort_values(["_o", "worse_by", "benchmark"], ascending=[True, False, True], na_position="last")
    return out.drop(columns="_o").reset_index(drop=True)


def format_value(value: float | None, unit: str | None) -> str:
    """asv-like human value: ``187.0±us`` style without the ±; times get a readable unit."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "failed"
    if unit in (None, "", "seconds", "s"):
        mult, label = time_scale([value])
        return f"{value * mult:.3g} {label}"
    return f"{value:.4g} {unit}"
