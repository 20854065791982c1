"""The dashboard's formatting namespace: the tracker's number formatting (``regressions.units``: times in
ns/us/ms/s, rates with thousands separators, p-values like ``3e-11``, ratios like ``1.52x``, the same as
the PR report and the CLI print), plus what only the dashboard shows: sizes, short SHAs with the commit's
subject, run versions and kernel configs. Pure functions: no Streamlit, no database.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from regressions import report, units
from regressions.units import (
    BYTE_UNITS,
    NO_UNIT,
    TIME_UNITS,
    fmt_change,
    fmt_p,
    fmt_percent,
    fmt_ratio,
    fmt_time,
    is_missing,
    is_time,
    plural,
    sig,
    time_unit,
    unit_of,
)

__all__ = [
    "SHA_LEN",
    "SHOWN_AS",
    "TIME_UNITS",
    "axis_title",
    "axis_unit",
    "commit_label",
    "commit_range",
    "fmt_before_after",
    "fmt_change",
    "fmt_p",
    "fmt_percent",
    "fmt_ram",
    "fmt_ratio",
    "fmt_speedup",
    "fmt_time",
    "fmt_value",
    "is_missing",
    "is_time",
    "launch_config",
    "md_table",
    "md_text",
    "middle",
    "plural",
    "short_labels",
    "short_sha",
    "sig",
    "subject",
    "time_unit",
    "unit_of",
    "versions",
]

SHA_LEN = 8
# How a grid's ratio and p columns read, kept as numbers so a header click sorts them by number (text sorts
# "12.0x" before "2.00x" and "0.0004" before "3e-11"): ``links.grid``'s and ``publish_tables.table``'s shown_as.
SHOWN_AS: Mapping[str, Callable[[Any], str]] = {"ratio": fmt_ratio, "p": fmt_p}


def axis_unit(values: Any, unit: str | None) -> tuple[float, str]:
    """(multiplier, name) of a chart's value axis, in the unit ``fmt_value`` shows the same values in, so ticks
    and hover read alike: times in the unit of their median (``time_unit``), fractions in percent, others as
    stored."""
    if is_time(unit):
        return time_unit(values)
    if unit == "fraction":
        return 100.0, "%"
    if unit in BYTE_UNITS:  # in the scale of their median, as fmt_value shows them (512 MiB)
        finite = sorted(abs(float(v)) for v in values if not is_missing(v))
        median = finite[len(finite) // 2] if finite else 0.0
        mult, name = units.byte_scale(median)  # the scale units.fmt_bytes shows it in
        return 1.0 / mult, name
    return 1.0, "" if unit in NO_UNIT else str(unit or "")  # a count has no unit to name


def fmt_value(value: Any, unit: Any, missing: str = "failed", *, benchmark: str | None = None) -> str:
    """``regressions.units.fmt_value`` of a frame's cell: a unit pandas read as NaN (none stored) is none, so a
    ``track_`` without one shows as a count (``benchmark``: its asv name), never as ``12.0 nan`` or seconds."""
    return units.fmt_value(value, unit if isinstance(unit, str) else None, missing, benchmark=benchmark)


def fmt_pair(before: Any, after: Any, unit: Any, missing: tuple[str, str] = ("failed", "failed"), *,
             benchmark: str | None = None) -> tuple[str, str]:  # fmt: skip
    """``regressions.units.fmt_pair`` of a frame's cells (a unit pandas read as NaN is none), each side's
    ``missing`` text where it has no value."""
    b, a = units.fmt_pair(before, after, unit if isinstance(unit, str) else None, benchmark=benchmark)
    return (missing[0] if units.is_missing(before) else b, missing[1] if units.is_missing(after) else a)


def fmt_before_after(before: Any, after: Any, unit: Any, *, benchmark: str | None = None) -> str:
    """``regressions.units.fmt_before_after`` of a frame's cells (a unit pandas read as NaN is none)."""
    return units.fmt_before_after(before, after, unit if isinstance(unit, str) else None, benchmark=benchmark)


def axis_title(quantity: str, name: str) -> str:
    """``time (us)``; a count's axis (no unit name) just ``value``."""
    return f"{quantity} ({name})" if name else quantity


def fmt_ram(n: Any) -> str:
    """A machine's RAM: ``126 GiB`` (``regressions.units.fmt_bytes``) from asv's ``ram``: /proc/meminfo's MemTotal in
    KiB in older asv (``65836440``: 62.8 GiB), that times 1024 in bytes in newer (``32757993472``), so a whole
    number of KiB is bytes and any other figure KiB (a size cut at a terabyte misread a 2 TiB host's KiB as
    bytes). It is free text a person may write (``32``, ``16GB``): what is no number, or a number under a
    mebibyte, is shown as written."""
    try:
        value = float(n)
    except (TypeError, ValueError):
        return str(n)
    if value < 2**20:
        return str(n)
    return units.fmt_bytes(value if value % 1024 == 0 else value * 1024)


def fmt_speedup(ratio: Any) -> str:
    """Speed-ups in one table read alike: three significant digits, trailing zeros kept (``35.0x``, ``8.23x``,
    ``1.00x``, ``120x``); ``-`` when there is none."""
    if is_missing(ratio):
        return "-"
    r = float(ratio)
    if not math.isfinite(r) or r <= 0:
        return "-"
    decimals = max(0, 2 - math.floor(math.log10(r)))
    return f"{r:,.{decimals}f}x"


def short_sha(sha: Any, n: int = SHA_LEN) -> str:
    return "" if is_missing(sha) else str(sha)[:n]


def middle(value: Any, width: int = 40) -> str:
    """A long value cut in its middle to ``width`` characters (``WindowsPath('C:…\\grid.nc')``): two long
    values that differ keep the ends they differ by, which a cut at the end would drop."""
    text = str(value)
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def module_of(benchmark: str) -> str:
    """The asv module of a benchmark's name, with its dot (``benchmarks.`` of ``benchmarks.Class.time_x``; "" for a
    name without one): what names drop where the module is shared."""
    return benchmark.rsplit(".", 2)[0] + "." if benchmark.count(".") >= 2 else ""


def short_labels(names: Sequence[str], width: int = 52, *, drop_module: bool = True) -> list[str]:
    """Axis labels for series ``names`` that still tell them apart: the asv module all share dropped
    (``benchmark.`` of ``benchmark.Class.track_x [...]``; the class and method stay), each cut in its middle
    (:func:`middle`) to ``width`` characters, widened until no two are alike. Cut at their end, one
    benchmark's cases all read ``benchmark.AlohaPot.track_metric [function=step.forwar…`` (a review).
    ``drop_module`` False: values that are no series names (a parameter's: ``3.10.1``), only cut."""
    names = [str(n) for n in names]
    benchmarks = [n.split(" [", 1)[0] for n in names]
    modules = {module_of(b) for b in benchmarks}
    (module,) = modules if drop_module and len(modules) == 1 and len(set(names)) > 1 else ("",)
    rest = [n[len(module):] for n in names]
    for w in range(width, max(map(len, rest), default=0) + 8, 8):
        labels = [middle(n, w) for n in rest]
        if len(set(labels)) == len(set(rest)):
            return labels
    return rest


def subject(message: Any, width: int = 60) -> str:
    """First line of a commit message, cut to ``width`` characters with an ellipsis."""
    if is_missing(message):
        return ""
    line = str(message).strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def commit_label(sha: Any, message: Any = None, width: int = 60) -> str:
    """``eee79092 tuning: fixed BLOCK_H=16 without split-K…``."""
    text = subject(message, width)
    return f"{short_sha(sha)} {text}".rstrip()


def commit_range(parent: Any, sha: Any) -> str:
    """``9c7d0b23..eee79092`` (git's notation for "after parent, up to and including sha")."""
    return f"{short_sha(parent)}..{short_sha(sha)}" if not is_missing(parent) else short_sha(sha)


def versions(info: dict[str, Any] | None) -> str:
    """A run's (or machine's) provenance in one line: ``GPU NVIDIA H200 (sm 9.0) · driver 580.159.04 · CUDA 13.0
    · torch 2.11.0 · triton 3.6.0 · runner arch profile native``; ``CPU (no GPU)`` for the smoke tier; ``""`` when
    nothing is known."""
    info = info or {}

    def known(key: str) -> str | None:
        value = info.get(key)
        return None if is_missing(value) or str(value).strip() in ("", "none") else str(value)

    parts = []
    if known("gpu_name"):
        parts.append(f"GPU {known('gpu_name')} (sm {known('gpu_cc') or '?'})")
    elif info.get("gpu_name") == "none":
        parts.append("CPU (no GPU)")
    # arch_profile here is the runner's setting (MLAPERF_ARCH_PROFILE); a case may ask for its own (mma_sm120).
    for key, label in (
        ("gpu_driver", "driver"),
        ("cuda", "CUDA"),
        ("torch", "torch"),
        ("triton", "triton"),
        ("arch_profile", "runner arch profile"),
    ):
        if known(key):
            parts.append(f"{label} {known(key)}")
    return " · ".join(parts)


# Kernel-config keys in the order a kernel engineer reads a launch: tile, split-K, pipelining, resources.
LAUNCH_ORDER = (
    "block_h",
    "block_n",
    "block_d",
    "num_splits",
    "prefetch",
    "num_warps",
    "num_stages",
    "spill_bytes",
    "block_t",
    "select_block",
    "select_num_warps",
)


def launch_config(values: dict[str, float]) -> str:
    """``block_h=64 · block_n=32 · num_splits=2 ...`` from {key: value}, one line: the chart's tooltip
    wraps a long value itself, and shows markup such as ``<br>`` as text (Streamlit's Vega tooltip escapes it)."""

    def rank(key: str) -> tuple[int, str]:
        base = key.removeprefix("indexer_")
        return (LAUNCH_ORDER.index(base) if base in LAUNCH_ORDER else len(LAUNCH_ORDER), key)

    items = [f"{k}={values[k]:g}" for k in sorted(values, key=lambda k: (k.startswith("indexer_"), rank(k)))]
    return " · ".join(items)


def md_text(value: Any) -> str:
    """``value`` as literal Markdown text (a commit subject may hold ``*``, ``_``, ``|`` or a ``<tag>``): the PR
    report's escaping (:func:`regressions.report.md_text`), a missing value as an empty cell."""
    return "" if is_missing(value) else report.md_text(value)


def md_table(rows: pd.DataFrame) -> str:
    """A few rows as a Markdown table, every cell literal text (no links: Streamlit opens a Markdown link in a
    new tab, a new session; ``dashboard.links`` has the in-app ones). For short tables: Markdown is drawn by an
    element every page already has, where a data grid costs the browser its own code and canvas on the page's
    first render."""
    head = "| " + " | ".join(md_text(c) for c in rows.columns) + " |"
    rule = "|" + "---|" * len(rows.columns)
    body = [
        "| " + " | ".join(
            md_text(v) for v in row) + " |"
        for row in rows.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])
