"""Which way is worse for a benchmark: the one rule, used by detection, `mlaperf compare` and the dashboard.

Times and memory (``time_``, ``mem_``, ``peakmem_``) and other ``track_`` values get worse as they grow,
as in asv. A ``track_`` benchmark is a rate (bigger is better) when its unit says so (``tokens/s``,
``GB/s``, ``TFLOP/s``, ``fraction``, ``speedup``, ...), or, when it declares no unit (asv's default unit
is ``"unit"``), when its name says so (``track_gbps``, ``track_tokens_per_s``, ``track_speedup``, ...).
A unit that is not a rate wins over the name (``track_bandwidth`` in ``bytes`` grows worse).
``[tool.mlaperf.directions]`` in the configuration overrides both per benchmark pattern.

Kernel-config records (``<module>.<Class>.track_launch_<key>``, unit ``config``: the BLOCK_H, split-K,
prefetch, spills ... a case ran with) are provenance, not performance: they have no worse direction, and
``db.provenance.is_provenance`` is the one rule that keeps them out of detection and comparisons.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from regressions.config import Settings

UP_IS_WORSE = "up_is_worse"
DOWN_IS_WORSE = "down_is_worse"

# Units of track_ benchmarks where bigger is better (rates, efficiencies, fractions of a roofline).
_RATE_UNIT = re.compile(
    r"(/\s*s(ec(ond)?)?\b|per\s+s(ec(ond)?)?\b|\bflop|\bops\b|throughput|fraction|ratio|efficien|%|percent|speedup)",
    re.IGNORECASE,
)
# Names of unit-less track_ benchmarks that are rates: the same words as the units, as identifiers.
_RATE_NAME = re.compile(
    r"(_per_s(ec(ond)?)?(_|$)|gbps|mbps|flops|_ops_|throughput|bandwidth|roofline|fraction|ratio|efficien|percent|speedup)",
    re.IGNORECASE,
)
# What asv stores for a track_ benchmark that declares no unit.
_NO_UNIT = ("", "unit")


def direction_for(benchmark: str, unit: str | None, settings: Settings | None = None) -> str:
    """``"up_is_worse"`` or ``"down_is_worse"`` for a benchmark (full asv name) and its stored unit.

    A direction declared for the benchmark in ``settings`` (``[tool.mlaperf.directions]``) wins; else the
    rule of this module's docstring.
    """
    if settings is not None:
        declared = settings.direction_override(benchmark)
        if declared is not None:
            return declared
    return _rule(benchmark, unit)


def infer_direction(benchmark: str, unit: str | None = None, declared: str | None = None) -> str:
    """:func:`direction_for` with the declared direction given directly (the detector's older entry point)."""
    return declared if declared is not None else _rule(benchmark, unit)


def _rule(benchmark: str, unit: str | None) -> str:
    last = benchmark.rsplit(".", 1)[-1]
    if not last.startswith("track_"):
        return UP_IS_WORSE
    unit = (unit or "").strip()
    if unit.lower() in _NO_UNIT:
        return DOWN_IS_WORSE if _RATE_NAME.search(last[len("track") :] + "_") else UP_IS_WORSE
    return DOWN_IS_WORSE if _RATE_UNIT.search(unit) else UP_IS_WORSE


def slowdown(ratio: float, direction: str) -> float:
    """Factor by which a change made things worse (>1 worse, <1 better) given ``ratio = new / old``."""
    if not math.isfinite(ratio) or ratio <= 0:
        return math.nan
    return ratio if direction == UP_IS_WORSE else 1.0 / ratio
