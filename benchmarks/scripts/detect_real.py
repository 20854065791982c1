"""Detection on real noise: mlaperf's detector against asv.step_detect on real asv histories with known
injected changes (issue 15, deliverable 5).

Real series come from public asv histories vendored under tests/fixtures (results exactly as their
projects' runners wrote them). Only the flat series are used as test series (detect_real_data.FlatRule:
one benchmark version, >= 20 values, every 9-run median within 2.5% of the series median); every real
value, outlier and failed run of them is kept. Each round then writes the history as asv results files
again, changing only the injected measurements, and runs both detectors on it:

- steps: a share of the flat series of every machine gets one step (5-100%, in the direction that is
  worse for the series, balanced over the buckets 5-7, 7-10, 10-20, 20-50, 50-100%) inside its history,
  and a few series of every machine one at the newest commit. The newest run of each machine is held
  back and added afterwards (the step persists), so a step on the newest commit is seen first alone and
  then confirmed. A flag within one commit of a step finds it; any other flag on a flat series is a
  false alarm (per 90 series x 76 commits, the goal's unit, counting the commits each series ran at).
- machine-wide one-run events: at one run of each machine most series (90%) get 10-50% worse together
  and the next run is clean; once inside the history, once at the newest commit (then the held-back clean
  run is added). Flags at the event commit are counted over all series of the machine, less those the
  unmodified history already has there.

mlaperf runs as users run it (ingest into a temporary SQLite store, `mlaperf detect --json --all`, the
newest run then ingested and detected incrementally); asv as `asv publish` lists regressions.

    .venv/bin/python -m benchmarks.scripts.detect_real                 # all vendored histories, 3 rounds
    .venv/bin/python -m benchmarks.scripts.detect_real --rounds 1 --machines gha-aws-skylake --json

Exit status: 0 every goal met, 1 a goal missed, 2 bad usage or input, 3 internal error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.scripts.detect_real_bench import Bench
from benchmarks.scripts.detect_real_cases import CaseTally
from benchmarks.scripts.detect_real_cases import goals as case_goals
from benchmarks.scripts.detect_real_data import FlatRule, load_history
from benchmarks.scripts.detect_real_model import METHODS, MethodReport, Options
from benchmarks.scripts.detect_real_report import goals, render, to_json

# numpy is imported in the functions: asv imports every module under benchmarks/ at discovery, where this
# script must cost nothing and need nothing beyond the standard library.

_REPO = Path(__file__).resolve().parents[2]

DEFAULT_DATA = (_REPO / "tests" / "fixtures" / "asv-openblas" / "results",)


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def detector_revision() -> str:
    """The repository commit of the detector measured (with '+dirty' when regressions/ has local edits)."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=_REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "regressions", "db"],
            cwd=_REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


# ---------------------------------------------------------------------------------------------------
# Command line


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from settings.args import fraction_type  # inside: asv imports this module with the standard library only

    _fraction = fraction_type(1.0)
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.scripts.detect_real",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--data",
        action="append",
        type=Path,
        metavar="DIR",
        help="asv results directory (benchmarks.json + machine folders); repeatable "
        "(default: every vendored history under tests/fixtures that this script knows)",
    )
    ap.add_argument("--machines", metavar="M[,M...]", help="only these machines (default: all)")
    ap.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    ap.add_argument("--rounds", type=_positive, default=3, help="injection rounds per history (default 3)")
    ap.add_argument("--threshold", type=_fraction, default=0.05, help="regression threshold of both detectors (5%%)")
    ap.add_argument(
        "--inside-fraction",
        type=_fraction,
        default=0.3,
        help="share of each machine's flat series given a step inside the history (default 0.3)",
    )
    ap.add_argument(
        "--newest", type=int, default=4, help="flat series per machine given a step at the newest commit (default 4)"
    )
    ap.add_argument(
        "--mw-fraction",
        type=_fraction,
        default=0.9,
        help="share of a machine's series a machine-wide event moves (default 0.9)",
    )
    ap.add_argument("--flat-window", type=_positive, default=9, help="flat rule: runs per rolling median (9)")
    ap.add_argument("--flat-tolerance", type=_fraction, default=0.025, help="flat rule: tolerance (2.5%%)")
    ap.add_argument("--flat-min-runs", type=_positive, default=20, help="flat rule: fewest values (20)")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep the written histories and stores in DIR")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--verbose", action="store_true", help="also list every missed step >= 7%% and false alarm")
    return ap


def run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, MethodReport], Options, CaseTally]:
    import numpy as np

    opts = Options(
        rounds=args.rounds,
        seed=args.seed,
        threshold=args.threshold,
        inside_fraction=args.inside_fraction,
        newest_per_machine=args.newest,
        mw_fraction=args.mw_fraction,
        rule=FlatRule(min_runs=args.flat_min_runs, window=args.flat_window, tolerance=args.flat_tolerance),
    )
    machines = [m.strip() for m in args.machines.split(",") if m.strip()] if args.machines else None
    data = args.data or list(DEFAULT_DATA)
    reports = {m: MethodReport() for m in METHODS}
    cases = CaseTally()
    datasets = []
    with tempfile.TemporaryDirectory(prefix="detect_real-") as tmp:
        base = args.keep or Path(tmp)
        for d_i, root in enumerate(data):
            history = load_history(root, machines=machines)
            workdir = base / f"{d_i}-{history.name}"
            if workdir.exists():
                raise ValueError(f"--keep: {workdir} already exists; give an empty folder")
            bench = Bench(history, opts, workdir, reports, cases)
            n_runs = {m: len(r) for m, r in history.runs.items()}
            datasets.append(
                {
                    "name": history.name,
                    "path": str(root),
                    "machines": n_runs,
                    "series": len(history.series),
                    "flat": len(bench.flat),
                    "excluded": bench.excluded,
                }
            )
            _progress(
                f"{history.name}: {len(n_runs)} machine(s) ({', '.join(f'{m} {n} runs' for m, n in n_runs.items())}), "
                f"{len(history.series)} series, {len(bench.flat)} flat"
            )
            if len(history.runs) and min(n_runs.values()) < 16:
                raise ValueError(f"{root}: a machine has fewer than 16 runs; too short for this benchmark")
            start = time.perf_counter()
            bench.baseline()
            for r in range(opts.rounds):
                rng = np.random.default_rng([opts.seed, d_i, r])
                bench.steps_round(rng, r)
                bench.event_round(rng, r, "inside")
                bench.event_round(rng, r, "newest")
                bench.cases_round(rng, r)
                _progress(f"  round {r + 1}/{opts.rounds} done ({time.perf_counter() - start:.0f} s)")
    revision = detector_revision()
    summary: dict[str, Any] = {
        "revision": revision,
        "datasets": datasets,
        "datasets_text": "; ".join(
            f"{d['name']} ({len(d['machines'])} machines, {d['flat']} flat of {d['series']} series)" for d in datasets
        ),
        "goals": goals(reports["mlaperf"]) + case_goals(cases),
        "asv_goals": goals(reports["asv.step_detect"]),
    }
    return summary, reports, opts, cases


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary, reports, opts, cases = run(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"detect_real: error: {exc}", file=sys.stderr)
        return 2
    except Exception:  # a crash of either detector or of the store is an internal error
        traceback.print_exc()
        return 3
    if args.json:
        print(json.dumps(to_json(summary, reports, opts, cases), indent=2, default=str))
    else:
        print(render(summary, reports, opts, cases))
        if args.verbose:
            for m in METHODS:
                for line in reports[m].steps.misses + reports[m].steps.alarms:
                    print(f"{m}: {line}")
    return 0 if all(g["pass"] for g in summary["goals"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
