"""Numbers in the units people read, for every report the tracker writes (the PR report, the CLI
tables, the dashboard): times in ns/us/ms/s, bytes in B/KiB/MiB/GiB/TiB, rates with thousands separators,
fractions as percent, p-values like ``3e-11`` (``< 1e-12`` below the floor), ratios like ``1.52x``, counts
(a ``track_`` without a unit) as plain numbers, changes as the value's own relative change
(``+336% better``), and a word ("failed") where a value is missing.

Times use ``us`` (not ``µs``). Pure functions: standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from regressions.direction import DOWN_IS_WORSE

TIME_UNITS = ("seconds", "s", "", None)
# asv's unit of a track_ benchmark that declares none: a count, shown without a unit.
NO_UNIT = ("unit",)
BYTE_UNITS = ("bytes", "byte", "B")
# The unit asv implies by a benchmark's name prefix, where the store has none (results without benchmarks.json).
_UNIT_OF_PREFIX = (("time_", "seconds"), ("mem_", "bytes"), ("peakmem_", "bytes"), ("track_", "unit"))
_BYTE_SCALES = ((1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB"))
# Smallest p-value worth stating: below it the noise model (normal, independent runs) says nothing more,
# and a step's p is shown as "< 1e-12" (the detector stores it floored here too).
P_FLOOR = 1e-12


# Line breaks and other control characters (escape sequences too), and bidirectional controls (embeddings,
# overrides, isolates, marks): in a value from data they would break a table's row, drive a terminal or
# reorder the text shown around it.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_text(value: Any) -> str:
    """A value from data as a terminal shows it safely: every :data:`CONTROL` character written as its escape
    (``\\x1b``, ``\\n``, ``\\u202e``), so a benchmark name cannot clear the screen, rewrite a row or split one."""
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(value))


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 commit``, ``1,000 commits`` (``many``: an irregular plural)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_time(unit: str | None) -> bool:
    """asv ``time_`` benchmarks are in seconds (unit ``seconds``, or none recorded)."""
    return unit in TIME_UNITS


def unit_of(benchmark: str | None, unit: str | None) -> str | None:
    """The unit to show a benchmark's values in: the stored one, else the one asv implies by the name
    (``time_`` seconds, ``mem_``/``peakmem_`` bytes, ``track_`` a plain number), so a unitless ``track_``
    value is never read as seconds."""
    if unit or not benchmark:
        return unit
    last = benchmark.rsplit(".", 1)[-1]
    return next((u for prefix, u in _UNIT_OF_PREFIX if last.startswith(prefix)), unit)


def sig(value: float, digits: int = 3) -> str:
    """``digits`` significant digits with thousands separators: 19.5, 194, 1,481, 12,324 (99.99 -> 100:
    the decimals are those of the rounded value)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    rounded = round(value, max(0, digits - 1 - magnitude))  # whole digits are kept: 12,324 stays
    if rounded != 0:
        magnitude = math.floor(math.log10(abs(rounded)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{rounded:,.{decimals}f}"


def fmt_number(value: float) -> str:
    """A plain number: ``0.25``, ``194``, ``12,324``; very large or small ones as ``9.97e+17``, ``3e-11``."""
    a = abs(value)
    if a != 0 and (a >= 1e15 or a < 1e-3):
        return f"{value:.3g}"
    return f"{value:,.0f}" if a >= 1000 else sig(value)


def byte_scale(value: float) -> tuple[float, str]:
    """(bytes per unit, unit) :func:`fmt_bytes` shows ``value`` in: 1024**2 and MiB for 512 MiB."""
    for mult, label in _BYTE_SCALES:
        if abs(value) >= 0.9995 * mult:  # what rounds to 1.00 of a scale is shown in it
            return mult, label
    return 1.0, "B"


def fmt_bytes(value: float) -> str:
    """``512 B``, ``1.50 KiB``, ``512 MiB``, ``1.00 GiB``."""
    mult, label = byte_scale(value)
    return f"{sig(value / mult)} {label}" if label != "B" else f"{fmt_number(value)} B"


def time_unit(seconds: Iterable[float]) -> tuple[float, str]:
    """(multiplier, label) of a chart's time axis: the unit :func:`fmt_time` shows the median of ``seconds`` in,
    so the axis and the values' own text read alike (a 5 ms series on a ``us`` axis, as its points read
    ``5,089 us``; on a ``ms`` axis they disagreed)."""
    finite = sorted(abs(float(v)) for v in seconds if not is_missing(v) and math.isfinite(float(v)))
    median = finite[len(finite) // 2] if finite else 1.0
    return _time_scale(median) if median > 0 else (1.0, "s")


def fmt_time(seconds: float | None, missing: str = "failed") -> str:
    """``19.5 us``, ``1,481 us``, ``12.3 ms``: us below 10 ms (kernel engineers read kernel times in us)."""
    if is_missing(seconds):
        return missing
    s = float(seconds)  # type: ignore[arg-type]
    if s == 0:
        return "0 s"
    mult, name = _time_scale(s)
    return f"{sig(s * mult)} {name}"


def _time_scale(seconds: float) -> tuple[float, str]:
    """(multiplier, name) :func:`fmt_time` shows ``seconds`` in: ns, us below 10 ms, ms, s."""
    a = abs(float(f"{seconds:.3g}"))  # the scale of the value as shown: 9.9999 ms reads 10.0 ms, not 10,000 us
    if a < 1e-6:
        return 1e9, "ns"
    if a < 1e-2:
        return 1e6, "us"
    if a < 1.0:
        return 1e3, "ms"
    return 1.0, "s"


def fmt_pair(before: float | None, after: float | None, unit: str | None, *, missing: str = "failed",
             benchmark: str | None = None) -> tuple[str, str]:  # fmt: skip
    """Two values read side by side (before and after, base and head) in the unit of each (:func:`fmt_value`),
    times both in the larger side's scale where the smaller reads at least 1 there: ``9.98 ms``, ``10.8 ms``,
    not ``9,978 us``, ``10.8 ms``; ``2.00 s``, ``5,000 us``."""
    if is_time(unit_of(benchmark, unit)) and not is_missing(before) and not is_missing(after):
        b, a = float(before), float(after)  # type: ignore[arg-type]
        big, small = max(abs(b), abs(a)), min(abs(b), abs(a))
        mult, name = _time_scale(big) if math.isfinite(big) and big > 0 else (0.0, "")
        if small * mult >= 1:  # the smaller side reads in whole units there too (not "0.00500 s")
            return f"{sig(b * mult)} {name}", f"{sig(a * mult)} {name}"
    return (fmt_value(before, unit, missing, benchmark=benchmark), fmt_value(after, unit, missing, benchmark=benchmark))


def fmt_before_after(before: float | None, after: float | None, unit: str | None, *,
                     benchmark: str | None = None) -> str:  # fmt: skip
    """``before → after`` (:func:`fmt_pair`): ``9.98 ms → 10.8 ms``."""
    return " → ".join(fmt_pair(before, after, unit, benchmark=benchmark))


def fmt_value(value: float | None, unit: str | None, missing: str = "failed", *, benchmark: str | None = None) -> str:
    """A benchmark value in its unit: times via :func:`fmt_time`, bytes scaled (``512 MiB``), fractions as
    percent, rates with thousands separators (``2,160,000 tokens/s``, ``931 GB/s``), counts as plain numbers.
    ``benchmark`` (its asv name) supplies the unit asv implies where none is stored (:func:`unit_of`)."""
    if is_missing(value):
        return missing
    v = float(value)  # type: ignore[arg-type]
    unit = unit_of(benchmark, unit)
    if is_time(unit):
        return fmt_time(v, missing)
    if unit in BYTE_UNITS:
        return fmt_bytes(v)
    if unit == "fraction":
        return f"{sig(v * 100.0)}%"
    text = fmt_number(v)
    return text if unit in NO_UNIT else f"{text} {unit}"


def fmt_percent(fraction: float) -> str:
    """A threshold or share as people write it: ``5%``, ``2.5%``, ``0.5%`` (``:.0%`` printed 0.005 as ``0%``)."""
    return f"{fraction * 100:.3g}%"


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


def relative_change(before: float | None, after: float | None) -> float | None:
    """The value's own relative change, ``(after - before) / |before|``: 3.36 for 1,000 -> 4,360 tokens/s,
    -0.25 for -5 -> -6.25; +-inf from 0 to another value; None where a side is missing."""
    if is_missing(before) or is_missing(after):
        return None
    b, a = float(before), float(after)  # type: ignore[arg-type]
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    if b == 0:
        return 0.0 if a == 0 else math.copysign(math.inf, a)
    return (a - b) / abs(b)


def fmt_change(worse_by: float | None, direction: str | None = None) -> str:
    """A change given as its slowdown factor (> 1 worse), shown as the value's own relative change:
    ``+52% worse`` (a time 1.52x), ``+336% better`` (a rate 4.36x: factor 0.23 with ``direction``
    ``down_is_worse``). Without ``direction`` the factor is taken as the value's ratio (times, memory and
    other values where up is worse)."""
    if is_missing(worse_by) or not math.isfinite(float(worse_by)) or float(worse_by) < 0:  # type: ignore[arg-type]
        return "-"
    w = float(worse_by)  # type: ignore[arg-type]
    ratio = w if direction != DOWN_IS_WORSE else (1.0 / w if w > 0 else math.inf)
    return _fmt_relative(ratio - 1.0, worse=w > 1.0)


def fmt_value_change(before: float | None, after: float | None, direction: str | None) -> str:
    """From ``before`` to ``after``: :func:`relative_change` in percent, worse or better by ``direction``
    (``+336% better``, ``-25% better`` for -5 -> -6.25 where up is worse, ``worse (from 0)``)."""
    change = relative_change(before, after)
    if change is None:
        return "-"
    return _fmt_relative(change, worse=(change > 0) == (direction != DOWN_IS_WORSE))


def _fmt_relative(change: float, *, worse: bool) -> str:
    word = "worse" if worse else "better"
    if math.isinf(change):
        return f"{word} (from 0)"
    pct = change * 100.0
    if abs(pct) < 0.05:
        return "0%"
    return f"{'+' if pct > 0 else ''}{sig(pct, 2)}% {word}"
