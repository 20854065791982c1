"""Rendering: the pull-request markdown, machine-readable JSON and the terminal table of `detect`."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from regressions.compare import Comparison

MARKER = "<!-- mlaperf-benchmark-report -->"


def fmt_value(value: float | None, unit: str | None) -> str:
    if value is None or not math.isfinite(value):
        return "failed"
    if unit in (None, "seconds", "s"):
        for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if abs(value) >= scale or suffix == "ns":
                return f"{value / scale:.3g} {suffix}"
    if unit == "fraction":
        return f"{value:.3g}"
    return f"{value:.4g} {unit}"


def fmt_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def _ratio(c: Comparison) -> str:
    return "-" if c.ratio is None else f"{c.ratio:.3f}"


def _p(c: Comparison) -> str:
    return "-" if c.p_value is None else f"{c.p_value:.2g}"


def _table(rows: Sequence[Comparison]) -> list[str]:
    out = [
        "| benchmark | params | machine | base | head | ratio | p | test |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for c in rows:
        out.append(
            f"| `{c.benchmark}` | {fmt_params(c.params)} | {c.machine} | {fmt_value(c.base, c.unit)} | "
            f"{fmt_value(c.head, c.unit)} | {_ratio(c)} | {_p(c)} | {c.method} |"
        )
    return out


def _worst_first(rows: list[Comparison]) -> list[Comparison]:
    return sorted(rows, key=lambda c: -(c.slowdown or 0.0))


def compare_markdown(
    comparisons: Sequence[Comparison],
    *,
    base: str,
    head: str,
    machines: Sequence[str],
    threshold_note: str,
    marker: bool = True,
) -> str:
    """PR comment: summary line, regressions first, improvements, failures, unchanged collapsed."""
    regs = _worst_first([c for c in comparisons if c.change == "regression"])
    imps = sorted((c for c in comparisons if c.change == "improvement"), key=lambda c: c.slowdown or 0.0)
    failed = [c for c in comparisons if c.change == "failed" and c.base is not None]
    both_failed = [c for c in comparisons if c.change == "failed" and c.base is None]  # not this PR's doing
    fixed = [c for c in comparisons if c.change == "fixed"]
    same = [c for c in comparisons if c.change == "unchanged"]
    lines = [MARKER] if marker else []
    lines.append("## mlaperf benchmark report")
    icon = ":x:" if regs else ":white_check_mark:"
    counts = [
        f"**{len(regs)} regression{'s' * (len(regs) != 1)}**",
        f"{len(imps)} improvement{'s' * (len(imps) != 1)}",
        f"{len(same)} unchanged",
    ]
    if failed:
        counts.append(f"{len(failed)} failing on head")
    if both_failed:
        counts.append(f"{len(both_failed)} with no result on base or head")
    if fixed:
        counts.append(f"{len(fixed)} without a base result")
    lines.append(
        f"{icon} {', '.join(counts)}: head `{head[:12]}` against base `{base[:12]}` on "
        f"{', '.join(f'`{m}`' for m in machines) or 'no machine'} ({threshold_note}; a change counts when "
        f"it is also significant)."
    )
    if regs:
        lines += ["", "### Regressions", "", *_table(regs)]
    if imps:
        lines += ["", "### Improvements", "", *_table(imps)]
    if failed:
        lines += ["", "### Failing on head (ran on base)", "", *_table(failed)]
    if fixed:
        # asv stores null both for a failed case and for one the base run did not select
        lines += ["", "### Running on head (no base result: failed or not run)", "", *_table(fixed)]
    if both_failed:
        lines += ["", "### No result on base or head (failed or not run)", "", *_table(both_failed)]
    if same:
        lines += [
            "",
            f"<details><summary>Unchanged ({len(same)})</summary>",
            "",
            *_table(same),
            "",
            "</details>",
        ]
    if not comparisons:
        lines += ["", "No series has results at both commits."]
    return "\n".join(lines) + "\n"


def compare_json(comparisons: Sequence[Comparison]) -> str:
    return json.dumps([c.to_json() for c in comparisons], indent=2, allow_nan=False)


def detect_table(records: Sequence[dict[str, Any]]) -> str:
    """Plain-text table of regressions for a terminal."""
    if not records:
        return "no regressions"
    head = ["status", "commit", "machine", "benchmark", "params", "before", "after", "ratio"]
    rows = [
        [
            r["status"] + ("*" if r.get("new") else ""),
            r["commit"][:10],
            r["machine"],
            r["benchmark"],
            fmt_params(r["params"]),
            fmt_value(r["before"], r.get("unit")),
            fmt_value(r["after"], r.get("unit")),
            f"{r['ratio']:.3f}",
        ]
        for r in records
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=False)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=False))]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)) for row in rows]
    if any(r.get("new") for r in records):
        out.append("(* flagged by this run)")
    return "\n".join(out)
