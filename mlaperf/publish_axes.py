"""The static site's chart axes, decided in Python beside every other number it shows: tick positions (in
the values' own unit, so the browser only scales them), their labels and the axis title.

Value axes follow the dashboard's rules (``dashboard.fmt.axis_unit``): a time axis in the unit that suits the
median value (us, ms ...), a fraction in percent, named in the title, as ``dashboard.history_chart`` does; log axes
on ``dashboard.charts.log_ticks``' 1-2-5 ticks; throughput with SI prefixes (``500k``, ``1.5M``) and a plain
``0``. Linear axes take 1-2-5 steps and every label has the decimals its step needs, so no label reads
``2e+2``, ``0M`` or ``2.50000001``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dashboard.charts import linear_ticks, log_domain, log_ticks
from dashboard.fmt import axis_title, axis_unit, is_time

SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"))
# Values spanning more than this factor are drawn on a log axis.
LOG_SPAN = 20.0


def _decimals(step: float) -> int:
    return max(0, min(12, -math.floor(math.log10(step) + 1e-9)))


def _number(value: float, decimals: int) -> str:
    return "0" if value == 0 else f"{value:,.{decimals}f}"


def _labels(ticks: Sequence[float], step: float | None, *, si: bool) -> list[str]:
    """Labels of ticks already in the axis unit: a linear axis's decimals from its step, a log axis's from
    each tick; with ``si`` each tick from 1,000 up with its own prefix, trailing zeros dropped (``500k``,
    ``1M``, ``1.5M``), as the dashboard's throughput axis reads."""
    out = []
    for t in ticks:
        f, prefix = next(((f, p) for f, p in SI if si and abs(t) >= f), (1.0, ""))
        d = _decimals(step / f) if step else _decimals(abs(t) / f) if t else 0
        text = _number(t / f, d)
        if prefix and "." in text:
            text = text.rstrip("0").rstrip(".")
        out.append(f"{text}{prefix}")
    return out


def value_axis(values: Sequence[float], unit: str | None, *, zero: bool = False, si: bool = False,
               title: str | None = None, log: bool | None = None) -> dict[str, Any]:
    """The y axis of values in ``unit``: title, log, domain and ticks (both in the values' unit) and labels.
    ``log`` None: log when the values span more than ``LOG_SPAN``; ``zero``: a linear axis from 0."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    mult, name = axis_unit(finite, unit)
    quantity = "time" if is_time(unit) else "value"
    axis: dict[str, Any] = {"title": title or axis_title(quantity, name), "log": False}
    if not finite:
        return {**axis, "domain": [0.0, 1.0], "ticks": [], "labels": []}
    lo, hi = min(finite) * mult, max(finite) * mult
    if log is None:
        log = not zero and lo > 0 and hi / lo > LOG_SPAN
    if log and lo > 0:
        ticks = log_ticks(lo, hi)
        # A range too short for 1-2-5 ticks gets linear ones: labelled by their step ("2.2M", not "2M" twice).
        gaps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
        step = gaps.pop() if len(ticks) > 2 and len(gaps) == 1 else None
        domain = log_domain(lo, hi, ticks)
    else:
        ticks, step = linear_ticks(min(lo, 0.0) if zero else lo, hi)
        domain = [ticks[0], ticks[-1]]
        log = False
    return {**axis, "log": bool(log), "domain": [d / mult for d in domain], "ticks": [t / mult for t in ticks],
            "labels": _labels(ticks, step, si=si)}


def position_axis(positions: Sequence[int], labels: Sequence[str], count: int = 10) -> dict[str, Any]:
    """The x axis of commit positions: whole-number ticks inside the drawn range, labelled by ``labels``
    (the commits' short SHAs)."""
    if not positions:
        return {"domain": [0, 1], "ticks": [], "labels": []}
    lo, hi = min(positions), max(positions)
    if lo == hi:
        return {"domain": [lo - 1, hi + 1], "ticks": [lo], "labels": [labels[lo]]}
    ticks = [int(t) for t in linear_ticks(lo, hi, count)[0] if lo <= t <= hi and float(t).is_integer()]
    return {"domain": [lo, hi], "ticks": ticks, "labels": [labels[t] for t in ticks]}
