"""Detection quality on labelled synthetic GPU histories: mlaperf vs asv's step detection vs a z-score rule.

Each history is 60 commits x 60 series (regressions.synthetic: between-run offsets, bimodal clocks,
outliers, failed runs, regression steps of 7-100% including on the newest commit and reverted ones,
speed-ups, sub-threshold steps). A labelled regression counts as found when a method flags it within
one commit (``exact`` counts the very commit); any other flag is a false alarm.

    .venv/bin/python -m benchmarks.scripts.detect_quality                # 10 histories, seeds 1000..1009
    .venv/bin/python -m benchmarks.scripts.detect_quality --seeds 20 --first-seed 5000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# Project and third-party imports live in the functions: asv imports every module under benchmarks/ at
# discovery, where this script must cost nothing and need nothing beyond the standard library.
if TYPE_CHECKING:
    from regressions.synthetic import SyntheticSeries

THRESHOLD = 0.05
Method = Callable[["SyntheticSeries"], list[int]]


def mlaperf_method(s: SyntheticSeries) -> list[int]:
    from regressions.detect import detect_steps

    return [st.index for st in detect_steps(s.values, threshold=THRESHOLD, direction=s.direction).regressions]


def asv_method(s: SyntheticSeries) -> list[int]:
    """asv.step_detect as `asv publish` uses it; asv has no direction, so throughput is fed inverted."""
    from asv import step_detect

    from regressions.direction import UP_IS_WORSE

    y = [None if v is None else (v if s.direction == UP_IS_WORSE else 1.0 / v) for v in s.values]
    steps = step_detect.detect_steps(y)
    _, _, pos = step_detect.detect_regressions(steps, threshold=THRESHOLD)
    return [int(after) for _, after, _, _ in (pos or [])]


def zscore_method(s: SyntheticSeries, window: int = 10, z_crit: float = 3.0) -> list[int]:
    """Classic alerting: a run more than 3 sigma and the threshold worse than the mean of the last 10."""
    import numpy as np

    from regressions.direction import UP_IS_WORSE

    sign = 1.0 if s.direction == UP_IS_WORSE else -1.0
    hist: list[float] = []
    flags: list[int] = []
    prev_flag = False
    for i, v in enumerate(s.values):
        if v is None:
            continue
        x = float(np.log(v))
        flag = False
        if len(hist) >= 5:
            ref = np.array(hist[-window:])
            sd = max(float(ref.std(ddof=1)), 1e-9)
            d = sign * (x - float(ref.mean()))
            flag = d / sd > z_crit and d > np.log1p(THRESHOLD)
        if flag and not prev_flag:
            flags.append(i)
        prev_flag = flag
        hist.append(x)
    return flags


METHODS: dict[str, Method] = {
    "mlaperf": mlaperf_method,
    "asv.step_detect": asv_method,
    "z-score": zscore_method,
}


def score(labels: list[int], flags: list[int], tol: int = 1) -> tuple[int, int, int, list[int]]:
    """(found, found at the exact commit, false alarms, labels missed)."""
    unmatched = sorted(set(flags))
    found = exact = 0
    missed = []
    for lab in labels:
        near = [f for f in unmatched if abs(f - lab) <= tol]
        if near:
            best = min(near, key=lambda f: abs(f - lab))
            unmatched.remove(best)
            found += 1
            exact += best == lab
        else:
            missed.append(lab)
    return found, exact, len(unmatched), missed


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The arguments and the methods asked for (an unknown one exits 2 naming it)."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.scripts.detect_quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--seeds", type=int, default=10, help="number of histories (default 10)")
    ap.add_argument("--first-seed", type=int, default=1000, help="seed of the first history (default 1000)")
    ap.add_argument("--commits", type=int, default=60)
    ap.add_argument("--series", type=int, default=60)
    ap.add_argument(
        "--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS)
    )
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    ap.add_argument("--verbose", action="store_true", help="list every miss and false alarm of mlaperf")
    args = ap.parse_args(argv)
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in names:
        if m not in METHODS:
            ap.error(f"--methods: unknown method {m!r}; choose from {', '.join(METHODS)}")
    return args, names


@dataclass
class _Tally:
    """Per method: found/exact counts and seconds, false alarms per history, (found, labels) per case."""

    totals: dict[str, dict[str, float]]
    fa_per_history: dict[str, list[int]]
    by_case: dict[str, dict[str, list[int]]]
    n_labels: int = 0


def _score_histories(args: argparse.Namespace, names: list[str]) -> _Tally:
    """Every method over ``args.seeds`` synthetic histories, scored against their labels."""
    from regressions.synthetic import make_history

    tally = _Tally({m: defaultdict(float) for m in names}, {m: [] for m in names},
                   {m: defaultdict(lambda: [0, 0]) for m in names})
    for h in range(args.seeds):
        seed = args.first_seed + h
        history = make_history(seed, args.commits, args.series)
        tally.n_labels += sum(len(s.regressions) for s in history)
        for m in names:
            fa_h = 0
            t0 = time.perf_counter()
            for s in history:
                flags = METHODS[m](s)
                found, exact, fa, missed = score(s.regressions, flags)
                tally.totals[m]["found"] += found
                tally.totals[m]["exact"] += exact
                fa_h += fa
                event = next((k for k in s.cases if k in ("step", "newest", "reverted")), None)
                if event is not None:
                    tally.by_case[m][event][0] += found
                    tally.by_case[m][event][1] += len(s.regressions)
                if args.verbose and m == "mlaperf" and (missed or fa):
                    print(f"  seed {seed} {s.name}: cases={s.cases} labels={s.regressions} flags={flags}")
            tally.totals[m]["seconds"] += time.perf_counter() - t0
            tally.fa_per_history[m].append(fa_h)
        print(f"history {h + 1}/{args.seeds} (seed {seed}) done", file=sys.stderr, flush=True)
    return tally


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    args, names = _parse_args(argv)
    tally = _score_histories(args, names)
    n_labels = tally.n_labels
    report = {
        "histories": args.seeds,
        "commits": args.commits,
        "series": args.series,
        "labelled_regressions": n_labels,
        "methods": {},
    }
    print(
        f"\n{args.seeds} histories of {args.commits} commits x {args.series} series, "
        f"{n_labels} labelled regressions, threshold {THRESHOLD:.0%}\n"
    )
    print(
        "| method | recall | exact commit | false alarms (total) | per history mean / max | "
        "recall newest | recall reverted | recall step | seconds |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in names:
        t = tally.totals[m]
        fa = tally.fa_per_history[m]
        case = {k: (v[0] / v[1] if v[1] else float("nan")) for k, v in tally.by_case[m].items()}
        row = {
            "recall": t["found"] / n_labels if n_labels else float("nan"),
            "exact_commit": t["exact"] / n_labels if n_labels else float("nan"),
            "false_alarms": int(sum(fa)),
            "false_alarms_per_history_mean": float(np.mean(fa)),
            "false_alarms_per_history_max": int(max(fa)),
            "recall_by_case": case,
            "seconds": t["seconds"],
        }
        report["methods"][m] = row
        print(
            f"| {m} | {row['recall']:.1%} | {row['exact_commit']:.1%} | {row['false_alarms']} | "
            f"{row['false_alarms_per_history_mean']:.2f} / {row['false_alarms_per_history_max']} | "
            f"{case.get('newest', float('nan')):.0%} | {case.get('reverted', float('nan')):.0%} | "
            f"{case.get('step', float('nan')):.0%} | {t['seconds']:.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
