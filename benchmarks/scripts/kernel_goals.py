#!/usr/bin/env python
"""Issue 29's goals, read from the kernel measurement scripts' JSON: one table, each goal met or missed.

    python -m benchmarks.scripts.kernel_goals --run OUT     # GPU: the three scripts below, then the table
    python -m benchmarks.scripts.kernel_goals --decode OUT/decode.json --indexer OUT/indexer.json \\
        --step OUT/step.json [--markdown] [--check]         # the table from files already written

``--run`` runs, one after another on this machine's GPU, ``kernel_decode_perf --impls mma,mma_sm120,gluon
--batches 1,16,32,64,128 --no-gather``, ``indexer_perf --impls bf16 --batches 1,64`` and ``kernel_step_perf
--variants mma+indexer --batches 1,64`` (all three contexts), each writing its JSON under OUT. A goal reads
only the rows its file holds: one without its rows is "not measured", never met. How each goal is read:

- decode: the faster of the ``mma`` and ``gluon`` columns (this GPU's profile) against the roofline the
  script measured, and against the ``mma`` column (the issue's "today's kernel") where ``gluon`` was measured
  beside it; the sm_120 set is the ``mma_sm120`` column against ``mma`` (the issue's "this GPU's set" and
  "the sm_120 set").
- indexer: ``bf16`` rows' median time, and at 64 requests its ratio to the row's roofline.
- step: the ``mma+indexer`` variant.

Each indexer and step figure names, in brackets, the top-k select path the row ran (its launch record's; files
written before the scripts kept it show none): the select rule picks it by batch and longest request.

Exit status: 0; with ``--check`` 1 when a goal is missed or not measured; 2 for bad arguments or a file that
is not the named script's JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The goals' numbers (issue 29), one place: indexer_perf's --check-targets reads the indexer's too.
DECODE_ROOFLINE_X = 2.5  # at most this many times the roofline ...
DECODE_ROOFLINE_AT = (64, 128)  # ... at these concurrencies
DECODE_SPEEDUP_FROM = 16  # from this many requests on ...
DECODE_SPEEDUP = 1.5  # ... at least this much faster than the MMA kernel
DECODE_B1_US = 5.0
SM120_WITHIN = 1.2  # the sm_120 set at most this many times this GPU's, at every concurrency
INDEXER_B1_US = {4096: 10.0, 16384: 15.0, 65536: 25.0}  # context -> us at one request
INDEXER_ROOFLINE_B64 = 3.0  # at 64 requests, every context
STEP_B1_US = {4096: 20.0, 65536: 40.0}  # context -> us at one request

RUNS = {  # file stem -> the script's module and arguments (its JSON option and path added)
    "decode": ("benchmarks.scripts.kernel_decode_perf",
               ["--impls", "mma,mma_sm120,gluon", "--batches", "1,16,32,64,128", "--no-gather"], "--json"),
    "indexer": ("benchmarks.scripts.indexer_perf", ["--impls", "bf16", "--batches", "1,64"], "--json-out"),
    "step": ("benchmarks.scripts.kernel_step_perf", ["--variants", "mma+indexer", "--batches", "1,64"], "--json"),
}  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    goal: str  # the words
    figures: str  # what was measured, in the units people read
    met: bool | None  # None: the file holds none of the rows the goal needs

    @property
    def state(self) -> str:
        return "not measured" if self.met is None else "met" if self.met else "missed"


def _join(parts: list[str]) -> str:
    return " / ".join(parts) if parts else "-"


def _all(checks: list[bool], wanted: int) -> bool | None:
    """Met when every wanted row was measured and passes; None when none was."""
    if not checks:
        return None
    return len(checks) == wanted and all(checks)


def _select(launch: Any) -> str:
    """A figure's suffix, ' (path)': the indexer's select path a row's launch record names (the rule picks it by
    batch and length, so a reader sees which path a goal row ran); '' where the file predates the record (early
    records held the select's config dict under that key)."""
    path = launch.get("select") if isinstance(launch, dict) else None
    return f" ({path})" if isinstance(path, str) and path else ""


def decode_verdicts(result: dict[str, Any]) -> list[Verdict]:
    """Issue 29's decode goals from ``kernel_decode_perf``'s JSON."""
    rows = {int(r["batch"]): r for r in result["rows"]}

    def best(r: dict[str, Any]) -> float | None:
        times = [r[k] for k in ("mma_us", "gluon_us") if r.get(k) is not None]
        return min(times) if times else None

    roof_parts, roof_checks = [], []
    for b in DECODE_ROOFLINE_AT:
        r = rows.get(b, {})
        us = best(r) if r else None
        if us is not None and r.get("roofline_us"):
            x = us / r["roofline_us"]
            roof_parts.append(f"{us:.1f} us ({x:.1f}x) at {b}")
            roof_checks.append(x <= DECODE_ROOFLINE_X)
    # Against the MMA kernel only where another impl was measured beside it: alone, it is not "faster" or not.
    speed_rows = [b for b in sorted(rows) if b >= DECODE_SPEEDUP_FROM and rows[b].get("mma_us") is not None
                  and rows[b].get("gluon_us") is not None]  # fmt: skip
    speed = {b: rows[b]["mma_us"] / best(rows[b]) for b in speed_rows}
    one = best(rows[1]) if 1 in rows else None
    sm120 = {b: r["mma_sm120_us"] / r["mma_us"] for b, r in sorted(rows.items())
             if r.get("mma_sm120_us") is not None and r.get("mma_us") is not None}  # fmt: skip
    at = " / ".join(str(b) for b in DECODE_ROOFLINE_AT)
    return [
        Verdict(f"decode <= {DECODE_ROOFLINE_X:g}x the roofline at {at} requests", _join(roof_parts),
                _all(roof_checks, len(DECODE_ROOFLINE_AT))),
        Verdict(f"decode >= {DECODE_SPEEDUP:g}x faster than the MMA kernel from {DECODE_SPEEDUP_FROM} requests",
                _join([f"{s:.2f}x at {b}" for b, s in speed.items()]),
                _all([s >= DECODE_SPEEDUP for s in speed.values()], len(speed))),
        Verdict(f"decode <= {DECODE_B1_US:g} us at one request", "-" if one is None else f"{one:.1f} us",
                _all([] if one is None else [one <= DECODE_B1_US], 1)),
        Verdict(f"the sm_120 set within {SM120_WITHIN:g}x of this GPU's at every concurrency",
                _join([f"{x:.2f}x at {b}" for b, x in sm120.items()]),
                _all([x <= SM120_WITHIN for x in sm120.values()], len(sm120))),
    ]  # fmt: skip


def indexer_verdicts(results: list[dict[str, Any]]) -> list[Verdict]:
    """Issue 29's indexer goals from ``indexer_perf``'s result rows (its JSON's ``results``)."""
    by = {(r["batch"], r["context"]): r for r in results if r["impl"] == "bf16"}
    one = [(c, by[(1, c)]["median_us"], goal) for c, goal in INDEXER_B1_US.items() if (1, c) in by]
    # The goal's contexts only: another context measured beside them is neither counted nor shown.
    wide = [(c, by[(64, c)]["median_us"], by[(64, c)]["median_us"] / by[(64, c)]["roofline_us"])
            for c in INDEXER_B1_US if by.get((64, c), {}).get("roofline_us")]  # fmt: skip
    path = {key: _select(r.get("launch")) for key, r in by.items()}
    contexts = " / ".join(f"{c // 1024}K" for c in INDEXER_B1_US)
    return [
        Verdict(f"indexer <= {INDEXER_ROOFLINE_B64:g}x the roofline at 64 requests, {contexts}",
                _join([f"{us:.1f} us ({x:.1f}x) at {c // 1024}K{path[(64, c)]}" for c, us, x in wide]),
                _all([x <= INDEXER_ROOFLINE_B64 for _, _, x in wide], len(INDEXER_B1_US))),
        Verdict(f"indexer <= {' / '.join(f'{g:g}' for g in INDEXER_B1_US.values())} us at one request, {contexts}",
                _join([f"{us:.1f} us at {c // 1024}K{path[(1, c)]}" for c, us, _ in one]),
                _all([us <= goal for _, us, goal in one], len(INDEXER_B1_US))),
    ]  # fmt: skip


def step_verdicts(result: dict[str, Any]) -> list[Verdict]:
    """Issue 29's decode-step goals from ``kernel_step_perf``'s JSON."""
    by = {(r["batch"], r["context"]): r for r in result["rows"]}
    out = []
    for c, goal in STEP_B1_US.items():
        row = by.get((1, c), {})
        us = row.get("mma+indexer")
        path = _select(row.get("launch", {}).get("mma+indexer", {}).get("indexer"))  # since session 50
        figures = "-" if us is None else f"{us:.1f} us{path}"
        out.append(Verdict(f"decode step <= {goal:g} us at one request and {c // 1024}K", figures,
                           None if us is None else us <= goal))  # fmt: skip
    return out


def _load(path: Path, kind: str) -> dict[str, Any]:
    """A script's JSON, checked to be that script's: ValueError naming the file otherwise."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"--{kind} {path}: cannot read it as JSON ({exc})") from None
    key = "results" if kind == "indexer" else "rows"
    rows = data.get(key) if isinstance(data, dict) else None
    if kind == "indexer" and isinstance(rows, list) and isinstance(data.get("batch"), int):
        # indexer_perf before --batches: one batch for the whole file, named at its top.
        rows = data["results"] = [{"batch": data["batch"], **r} if isinstance(r, dict) else r for r in rows]
    need = {"decode": ("batch", "roofline_us"), "indexer": ("batch", "context", "impl", "median_us"),
            "step": ("batch", "context")}[kind]  # fmt: skip
    if not isinstance(rows, list) or not all(isinstance(r, dict) and all(k in r for k in need) for r in rows):
        raise ValueError(f"--{kind} {path}: not {RUNS[kind][0].rsplit('.', 1)[1]}'s JSON (no {key!r} rows with "
                         f"{', '.join(need)})")  # fmt: skip
    return data


def verdicts(decode: Path | None, indexer: Path | None, step: Path | None) -> list[Verdict]:
    out: list[Verdict] = []
    if decode is not None:
        out += decode_verdicts(_load(decode, "decode"))
    if indexer is not None:
        out += indexer_verdicts(_load(indexer, "indexer")["results"])
    if step is not None:
        out += step_verdicts(_load(step, "step"))
    return out


def table(rows: list[Verdict], markdown: bool = False) -> str:
    if markdown:
        lines = ["| goal | measured | |", "| --- | --- | --- |"]
        lines += [f"| {v.goal} | {v.figures} | {v.state} |" for v in rows]
        return "\n".join(lines)
    width = max((len(v.goal) for v in rows), default=0)
    return "\n".join(f"{v.goal:<{width}}  {v.state:<12}  {v.figures}" for v in rows)


def run_all(out: Path) -> dict[str, Path]:
    """Run the three scripts (GPU), their output streamed; the JSON files they wrote."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]  # the checkout the scripts run from, whatever the caller's cwd
    files = {}
    for n, (stem, (module, args, json_flag)) in enumerate(RUNS.items(), 1):
        files[stem] = out / f"{stem}.json"
        cmd = [sys.executable, "-m", module, *args, json_flag, str(files[stem])]
        print(f"[{n}/{len(RUNS)}] {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, check=False, cwd=root)
        if proc.returncode not in (0, 1):  # 1: indexer_perf's missed targets; the table says which
            raise RuntimeError(f"{module} exited {proc.returncode}")
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scripts.kernel_goals", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--run", type=Path, metavar="OUT", help="run the three scripts (GPU), JSON under OUT")
    for kind in RUNS:
        ap.add_argument(f"--{kind}", type=Path, help=f"{RUNS[kind][0].rsplit('.', 1)[1]}'s JSON")
    ap.add_argument("--markdown", action="store_true", help="a markdown table")
    ap.add_argument("--check", action="store_true", help="exit 1 when a goal is missed or not measured")
    args = ap.parse_args(argv)
    given = {kind: getattr(args, kind) for kind in RUNS}
    if args.run is not None and any(given.values()):
        ap.error("--run writes its own files: give it alone, or the files alone")
    if args.run is None and not any(given.values()):
        ap.error("give --run OUT, or at least one of --decode, --indexer, --step")
    try:
        if args.run is not None:
            given = run_all(args.run)
        rows = verdicts(given["decode"], given["indexer"], given["step"])
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(rows, args.markdown))
    return 1 if args.check and any(v.met is not True for v in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
