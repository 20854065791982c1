"""Numbers and names in the units people read: times in ns/us/ms/s, rates with thousands separators,
p-values like ``3e-11``, ratios like ``1.52x``, short SHAs with the commit's subject, and words ("failed",
"not run") where a value is missing. Pure functions: no Streamlit, no database.

Times use ``us`` (not ``µs``), as ``mlaperf detect`` and ``mlaperf compare`` print them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

SHA_LEN = 8
TIME_UNITS = ("seconds", "s", "", None)
# (multiplier from seconds, label), smallest first.
_TIME_SCALES = ((1e9, "ns"), (1e6, "us"), (1e3, "ms"), (1.0, "s"))


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
    return f"{text} {unit}"


def fmt_p(p: float | None) -> str:
    """p-values as a person writes them: ``3e-11``, ``0.0004``, ``0.03``, ``0.5``; ``-`` when untested."""
    if is_missing(p):
        return "-"
    p = float(p)  # type: ignore[arg-type]
    if p == 0:
        return "0"
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


def fmt_bytes(n: Any) -> str:
    """RAM and memory sizes: ``126 GiB`` from a byte count (asv's ``ram`` is a string of bytes)."""
    try:
        v = float(n)
    except (TypeError, ValueError):
        return str(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{sig(v)} {unit}" if unit != "B" else f"{v:,.0f} B"
        v /= 1024.0
    return f"{v:g}"


def short_sha(sha: Any, n: int = SHA_LEN) -> str:
    return "" if is_missing(sha) else str(sha)[:n]


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
    for key, label in (("gpu_driver", "driver"), ("cuda", "CUDA"), ("torch", "torch"), ("triton", "triton"),
                       ("arch_profile", "runner arch profile")):
        if known(key):
            parts.append(f"{label} {known(key)}")
    return " · ".join(parts)


# Kernel-config keys in the order a kernel engineer reads a launch: tile, split-K, pipelining, resources.
LAUNCH_ORDER = ("block_h", "block_n", "num_splits", "prefetch", "num_warps", "num_stages", "spill_bytes",
                "block_t", "select_block", "select_num_warps")


def launch_config(values: dict[str, float]) -> str:
    """``kernel block_h=64 · block_n=32 · num_splits=2 ...`` from {key: value} (four per hover line)."""
    def rank(key: str) -> tuple[int, str]:
        base = key.removeprefix("indexer_")
        return (LAUNCH_ORDER.index(base) if base in LAUNCH_ORDER else len(LAUNCH_ORDER), key)

    items = [f"{k}={values[k]:g}" for k in sorted(values, key=lambda k: (k.startswith("indexer_"), rank(k)))]
    lines = [" · ".join(items[i:i + 4]) for i in range(0, len(items), 4)]
    return "kernel " + "<br>".join(lines)
