"""Which way is worse for a benchmark: times and memory up, throughput-like tracks down."""

from __future__ import annotations

import math
import re

UP_IS_WORSE = "up_is_worse"
DOWN_IS_WORSE = "down_is_worse"

# Units of track_ benchmarks where bigger is better (rates, efficiencies, fractions of a roofline).
_RATE_UNIT = re.compile(
    r"(/\s*s(ec(ond)?)?\b|per\s+s(ec(ond)?)?\b|\bflop|\bops\b|throughput|fraction|ratio|efficien|%|percent|speedup)",
    re.IGNORECASE,
)


def infer_direction(benchmark: str, unit: str | None = None, declared: str | None = None) -> str:
    """``declared`` (from configuration) wins; else ``track_`` with a rate unit is down-is-worse and
    everything else (``time_``, ``mem_``, ``peakmem_``, other tracks) up-is-worse, as in asv."""
    if declared is not None:
        return declared
    last = benchmark.rsplit(".", 1)[-1]
    if last.startswith("track_") and unit and _RATE_UNIT.search(unit):
        return DOWN_IS_WORSE
    return UP_IS_WORSE


def slowdown(ratio: float, direction: str) -> float:
    """Factor by which a change made things worse (>1 worse, <1 better) given ``ratio = new / old``."""
    if not math.isfinite(ratio) or ratio <= 0:
        return math.nan
    return ratio if direction == UP_IS_WORSE else 1.0 / ratio
