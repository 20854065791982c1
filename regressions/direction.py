"""Which way is worse for a benchmark: the one rule, used by detection, `mlaperf compare` and the dashboard.

Times and memory (``time_``, ``mem_``, ``peakmem_``) and other ``track_`` values get worse as they grow,
as in asv. A ``track_`` benchmark is a rate (bigger is better, a drop is the regression) by this rule, in
order:

1. its unit is a rate (case-insensitive): anything per second (``tokens/s``, ``GB/s``, ``TFLOP/s``,
   ``it/s``, ``samples per second``), a rate word with or without an SI prefix (``TFLOPS``, ``GFLOPS``,
   ``Gbps``, ``qps``, ``iops``, ``TOPS``, ``tps``, ``fps``, ``MHz``, stencil codes' ``MLUPS``), a plural count
   with a trailing ``s`` for "per second" (Devito's ``gflopss``, ``gpointss``), or a share of a best case
   (``fraction``, ``%``, ``ratio``, ``speedup``, ``efficiency``, ``throughput``);
2. else its unit is a time, a size or a count (``seconds``, ``ms``, ``bytes``, ``GiB``, ``count``): not a
   rate, whatever the name says (``track_bandwidth`` in ``bytes`` grows worse);
3. else (no unit, asv's default ``"unit"``, or a unit this rule does not know) the name decides: a rate
   name (``track_tflops``, ``track_gbps``, ``track_qps``, ``track_tokens_per_s``, ``track_speedup``,
   ``track_gpointss``, ...)
   or a model's score, as the whole name (``track_test_score``, ``track_accuracy``, ``track_f1_macro``: asv
   projects of estimators track them in asv's default unit; not ``track_score_time``) is a rate, any other name
   grows worse.

So an explicit rate unit or a rate name wins over an unknown unit, and only a known non-rate unit wins
over a rate name. ``[tool.mlaperf.directions]`` in the configuration overrides all of it per benchmark
pattern.

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

# Rate words, with an optional SI prefix (TFLOPS, Gbps, kqps, MHz): per second, bigger is better.
_RATE_WORD = r"(k|m|g|t|p|e|ki|mi|gi|ti)?(flops?|ops|iops|bps|qps|rps|tps|fps|hz|lups)"
# A plural count and an "s" for per second, with an optional SI prefix: Devito's gflopss and gpointss (its
# track_runtime falls as they grow), MLUPSs; "points" alone is a count.
_PER_SECOND_PLURAL = r"(k|m|g|t|p)?(flops|points|pts|cells|updates|lups|ops|samples|tokens|items)s"
# Units of track_ benchmarks where bigger is better (rates, efficiencies, fractions of a roofline).
_RATE_UNIT = re.compile(
    r"(/\s*s(ec(ond)?)?\b|\bper\s*s(ec(ond)?)?\b"  # anything per second: GB/s, TFLOP/s, it/s
    rf"|(?<![a-z]){_RATE_WORD}(?![a-z])"  # a rate word standing alone: "TFLOPS", "10 Gbps"
    rf"|(?<![a-z]){_PER_SECOND_PLURAL}(?![a-z])"  # "gpointss": giga-points per second
    r"|(?<![a-z])ratios?(?![a-z])|(?<![a-z])efficien"  # words: not the "ratio" of "duration"
    r"|throughput|fraction|%|percent|speedup)",
    re.IGNORECASE,
)
# Units that are no rate (times, sizes, counts): a rate-like name does not make them one.
_NON_RATE_UNIT = re.compile(
    r"(s|secs?|seconds?|ms|us|\u00b5s|\u03bcs|ns|ps|min|minutes?|h|hours?"
    r"|b|bytes?|bits?|[kmgtpe]i?b(ytes?)?|[kmgtpe]i?bits?|counts?|items?|cycles?)",
    re.IGNORECASE,
)
# Names of unit-less track_ benchmarks that are rates: the same words as the units, as identifiers.
_RATE_NAME = re.compile(
    r"(_per_s(ec(ond)?)?(_|$)|gbps|mbps|flops|throughput|bandwidth|roofline|fraction|_ratios?(_|\d)|_efficien|percent"
    r"|speedup"
    rf"|_{_RATE_WORD}(_|\d)|_{_PER_SECOND_PLURAL}(_|\d))",
    re.IGNORECASE,
)
# A model's score, the whole name after ``track`` (``track_test_score``, ``track_f1_macro``): higher is better, as
# scikit-learn's scorers. Not a name that only holds the word (``track_score_time``, ``track_num_scores``).
_SCORE_NAME = re.compile(
    r"_((test|train|val|valid|validation|cv|mean|model)_)?(scores?|accuracy|precision|recall|auc|f1)"
    r"(_(macro|micro|weighted|samples))?_", re.IGNORECASE)
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
    if _RATE_UNIT.search(unit):
        return DOWN_IS_WORSE
    if unit.lower() not in _NO_UNIT and _NON_RATE_UNIT.fullmatch(unit):
        return UP_IS_WORSE
    # No unit, or one this rule does not know: the name says whether it is a rate.
    rest = last[len("track") :] + "_"
    return DOWN_IS_WORSE if _RATE_NAME.search(rest) or _SCORE_NAME.fullmatch(rest) else UP_IS_WORSE


def slowdown(ratio: float, direction: str) -> float:
    """Factor by which a change made things worse (>1 worse, <1 better) given ``ratio = new / old``."""
    if not math.isfinite(ratio) or ratio <= 0:
        return math.nan
    return ratio if direction == UP_IS_WORSE else 1.0 / ratio
