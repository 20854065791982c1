"""Numbers in the units people read, for every report the tracker writes (the PR report, the CLI
tables, the dashboard): times in ns/us/ms/s, rates with thousands separators, fractions as percent,
p-values like ``3e-11`` (``< 1e-12`` below the floor), ratios like ``1.52x``, counts without asv's
placeholder unit, and a word ("failed") where a value is missing.

Times use ``us`` (not ``µs``). Pure functions: standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

TIME_UNITS = ("seconds", "s", "", None)
# asv's unit of a track_ benchmark that declares none: a count, shown without a unit.
NO_UNIT = ("unit",)
# Smallest p-value worth stating: below it the noise model (normal, independent runs) says nothing more,
# and a step's p is shown as "< 1e-12" (the detector stores it floored here too).
P_FLOOR = 1e-12
# (multiplier from seconds, label), smallest first.
_TIME_SCALES = ((1e9, "ns"), (1e6, "us"), (1e3, "ms"), (1.0, "s"))


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 commit``, ``1,000 commits`` (``many``: an irregular plural)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_time(unit: str | None) -> bool:
    """asv ``time_`` benchmarks are in seconds (unit ``seconds``, or none recorded)."""
    return unit in TIME_UNITS


def sig(value: float, digits: int = 3) -> str:
    """``digits`` significant digits with thousands separators: 19.5, 194, 1,481, 12,324."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def time_unit(seconds: Iterable[float]) -> tuple[float, str]:
    """(multiplier, label) that puts the median of ``seconds`` between 1 and 1000 (ns, us, ms or s)."""
    finite = sorted(abs(float(v)) for v in seconds if not is_missing(v) and math.isfinite(float(v)))
    median = finite[len(finite) // 2] if finite else 1.0
    for mult, label in _TIME_SCALES:
        if median * mult < 1000.0:
            return mult, label
    return 1.0, "s"


def fmt_time(seconds: float | None, missing: str = "failed") -> str:
    """``19.5 us``, ``1,481 us``, ``12.3 ms``: us below 10 ms (kernel engineers read kernel times in us)."""
    if is_missing(seconds):
        return missing
    s = float(seconds)  # type: ignore[arg-type]
    a = abs(s)
    if a < 1e-6:
        return f"{sig(s * 1e9)} ns"
    if a < 1e-2:
        return f"{sig(s * 1e6)} us"
    if a < 1.0:
        return f"{sig(s * 1e3)} ms"
    return f"{sig(s)} s"


def fmt_value(value: float | None, unit: str | None, missing: str = "failed") -> str:
    """A benchmark value in its unit: times via :func:`fmt_time`, fractions as percent, rates with
    thousands separators (``2,160,000 tokens/s``, ``931 GB/s``)."""
    if is_missing(value):
        return missing
    v = float(value)  # type: ignore[arg-type]
    if is_time(unit):
        return fmt_time(v, missing)
    if unit == "fraction":
        return f"{sig(v * 100.0)}%"
    text = f"{v:,.0f}" if abs(v) >= 1000 else sig(v)
    return text if unit in NO_UNIT else f"{text} {unit}"


def fmt_p(p: float | None) -> str:
    """p-values as a person writes them: ``3e-11``, ``0.0004``, ``0.03``, ``0.5``; ``< 1e-12`` at or
    below :data:`P_FLOOR`; ``-`` when untested."""
    if is_missing(p):
        return "-"
    p = float(p)  # type: ignore[arg-type]
    if p <= P_FLOOR:
        return f"< {P_FLOOR:.0e}"
    if p < 1e-3:
        return f"{p:.0e}".replace("e-0", "e-")
    return f"{p:.1g}" if p < 0.1 else f"{p:.2g}"


def fmt_ratio(ratio: float | None) -> str:
    """``1.52x``, ``0.97x``, ``67x``; ``-`` when there is none."""
    if is_missing(ratio) or not math.isfinite(float(ratio)):  # type: ignore[arg-type]
        return "-"
    r = float(ratio)  # type: ignore[arg-type]
    return f"{r:.0f}x" if r >= 100 else f"{r:.3g}x" if r >= 10 else f"{r:.2f}x"


def fmt_change(worse_by: float | None) -> str:
    """Direction-aware change from the slowdown factor (> 1 worse): ``+52% worse``, ``-18% better``."""
    if is_missing(worse_by) or not math.isfinite(float(worse_by)):  # type: ignore[arg-type]
        return "-"
    pct = (float(worse_by) - 1.0) * 100.0  # type: ignore[arg-type]
    if abs(pct) < 0.05:
        return "0%"
    return f"+{sig(pct, 2)}% worse" if pct > 0 else f"{sig(pct, 2)}% better"
