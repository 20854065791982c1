"""How long the comparison report takes to write at the pull-request report's row limit (``pr_schema.MAX_ROWS``,
20,000): the rename pairing alone (``regressions.renames``), the PR comment (``report.compare_markdown``) and the
text table (`mlaperf compare`'s ``text_table.compare_text``). Target: each at most 2 s at 20,000 rows on a 2-core
machine (a pairing that scored every old case against every new one took 6 s at 20,000 rows of which a tenth had
gone, and 189 s where a whole suite moved).

Two shapes of rows, one machine, no parameters:
- ``mixed``: a tenth of the cases gone at head and a tenth new, half of them pairable (module moved, class kept),
  half sharing only their method name with many others (ties: no pairing); the rest unchanged.
- ``moved``: the whole suite moved to another package: every case gone at head and new under its new name.

    python -m benchmarks.scripts.report_perf
    python -m benchmarks.scripts.report_perf --rows 5000 --rows 20000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGET_S = 2.0


def _case(benchmark: str, status: str, head: float | None = 1.0) -> Any:
    from regressions.compare import Comparison

    base: float | None = 1.0
    sides = {"missing": ("ok", "missing"), "removed": ("ok", "absent"), "new": ("absent", "ok")}
    base_status, head_status = sides.get(status, ("ok", "ok"))
    if head_status != "ok":
        head = None
    if base_status != "ok":
        base = None
    ratio = head / base if base and head else None
    return Comparison(benchmark=benchmark, params={}, machine="m", unit="seconds", direction="up_is_worse",
                      threshold=0.05, status=status, base_status=base_status, head_status=head_status, base=base,
                      head=head, ratio=ratio, slowdown=ratio, significant=False, regression=False,
                      method="none" if status in sides else "mann-whitney", p_value=None)


def mixed(n: int) -> list[Any]:
    """A tenth gone (missing or removed, alternately) and a tenth new, half pairable; the rest unchanged."""
    rows = []
    for i in range(n // 10):
        gone = "missing" if i % 2 else "removed"
        old, new = (f"old{i % 5}.Cls{i}", f"new{i % 5}.Cls{i}") if i % 4 != 3 else (f"old{i % 5}.A{i}",
                                                                                       f"new{i % 5}.B{i}")
        rows += [_case(f"{old}.time_run", gone), _case(f"{new}.time_run", "new", 1.1)]
    rows += [_case(f"kept{i % 5}.K{i}.time_{i % 7}", "unchanged") for i in range(n - len(rows))]
    return rows


def moved(n: int) -> list[Any]:
    """Every case of the suite gone from ``old*`` and new under ``new*``, class and method kept."""
    return [_case(f"{side}{i % 20}.C{i}.time_run", status) for side, status in (("old", "removed"), ("new", "new"))
            for i in range(n // 2)]


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(n: int, shape: str) -> dict[str, Any]:
    """Seconds of each step on ``n`` rows of ``shape`` (``mixed`` or ``moved``), and how many pairs it found."""
    from regressions.renames import renames
    from regressions.report import compare_markdown
    from regressions.text_table import compare_text

    rows = (mixed if shape == "mixed" else moved)(n)
    sides = {"base": "a" * 40, "head": "b" * 40, "machines": ["m"], "threshold_note": "threshold 5%"}
    return {"rows": len(rows), "shape": shape, "pairs": len(renames(rows)),
            "renames_s": _timed(lambda: renames(rows)),
            "markdown_s": _timed(lambda: compare_markdown(rows, **sides)),
            "text_s": _timed(lambda: compare_text(rows, **sides, width=200))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scripts.report_perf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", metavar="N",
                        help="rows of each report (repeatable; default 5,000 and 20,000)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    sizes = args.rows or [5_000, 20_000]
    if any(n < 10 for n in sizes):
        parser.error("--rows: at least 10 rows")
    results, slow = [], False
    print(f"{'rows':>8}  {'shape':<6} {'pairs':>7}  {'renames':>9}  {'PR comment':>10}  {'text table':>10}")
    for n in sizes:
        for shape in ("mixed", "moved"):
            r = measure(n, shape)
            results.append(r)
            times = [r["renames_s"], r["markdown_s"], r["text_s"]]
            slow |= n <= 20_000 and max(times) > TARGET_S
            print(f"{r['rows']:>8,}  {shape:<6} {r['pairs']:>7,}  " + "  ".join(f"{t:>8.2f} s" for t in times)
                  + ("  (over the target)" if max(times) > TARGET_S and n <= 20_000 else ""), flush=True)
    print(f"target: each step at most {TARGET_S:g} s up to 20,000 rows: {'missed' if slow else 'met'}")
    if args.json:
        args.json.write_text(json.dumps({"target_s": TARGET_S, "results": results}, indent=2) + "\n")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
