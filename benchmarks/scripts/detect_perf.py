"""Timing targets of regression detection on a store of 1,000 commits x 500 series (SQLite).

1. Full detection: `detect --full` over the whole store (target <= 10 s on a 2-core machine).
2. Nightly update: one new commit's results file arrives; `ingest` of that file plus an incremental
   `detect` (target <= 3 s together).
Both are timed as commands (a fresh Python process each, imports included), the way CI runs them.
The store is built with db.synthetic (real asv result files, written by asv's own Results class) and
real ingestion; pass --store to keep and reuse it (building takes about a minute).

    .venv/bin/python -m benchmarks.scripts.detect_perf
    .venv/bin/python -m benchmarks.scripts.detect_perf --store /tmp/detect-perf --json out.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Both measured commands are `mlaperf ...` (its module entry, so no installed script is needed).
MLAPERF = [sys.executable, "-m", "mlaperf.cli"]


def _run(cmd: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise SystemExit(f"command failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return seconds, out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""


def main(argv: list[str] | None = None) -> int:
    # Imported here, not at the top: asv imports every module under benchmarks/ at discovery.
    from db.engine import make_engine
    from db.ingest import ingest_paths
    from db.synthetic import write_synthetic_results

    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.scripts.detect_perf",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--series", type=int, default=500)
    ap.add_argument("--store", type=Path, help="folder for the results and the SQLite store (kept, reused)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions of each measurement (default 3)")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args(argv)

    work = args.store or Path(tempfile.mkdtemp(prefix="detect-perf-"))
    work.mkdir(parents=True, exist_ok=True)
    results, held = work / "results", work / "held-back"
    base_db = work / f"store-{args.commits}x{args.series}.sqlite"
    if not base_db.exists():
        print(f"building {args.commits + 1} commits x {args.series} series of asv results in {results} ...")
        hist = write_synthetic_results(
            results, commits=args.commits + 1, series=args.series, steps={args.commits // 2: 1.2}
        )
        newest = next(p for p in (results / hist.machine).glob(f"{hist.shas[-1][:8]}-*.json"))
        held.mkdir(exist_ok=True)
        shutil.move(str(newest), held / newest.name)
        t0 = time.perf_counter()
        summary = ingest_paths(make_engine(f"sqlite:///{base_db}"), [results], progress=True)
        print(f"built store: {summary.line()} ({time.perf_counter() - t0:.1f} s)")
    new_file = next(held.glob("*.json"))

    env_db = work / "run.sqlite"
    detect = [*MLAPERF, "detect"]
    figures: dict[str, list[float]] = {"full_detect": [], "nightly_ingest": [], "nightly_detect": []}
    for r in range(args.repeat):
        shutil.copy(base_db, env_db)
        for suffix in ("-wal", "-shm"):
            Path(str(env_db) + suffix).unlink(missing_ok=True)
        url = f"sqlite:///{env_db}"
        secs, line = _run([*detect, "--db", url, "--full"], ROOT)
        figures["full_detect"].append(secs)
        print(f"[{r + 1}/{args.repeat}] full detect: {secs:.2f} s  ({line})")
        # The nightly: one new commit's file, then the incremental detection.
        staged = work / "nightly" / "results"
        shutil.rmtree(work / "nightly", ignore_errors=True)
        machine_dir = next(p for p in results.iterdir() if p.is_dir())
        (staged / machine_dir.name).mkdir(parents=True)
        shutil.copy(machine_dir / "machine.json", staged / machine_dir.name / "machine.json")
        shutil.copy(results / "benchmarks.json", staged / "benchmarks.json")
        shutil.copy(new_file, staged / machine_dir.name / new_file.name)
        secs_i, line_i = _run([*MLAPERF, "ingest", str(staged), "--db", url], ROOT)
        secs_d, line_d = _run([*detect, "--db", url], ROOT)
        figures["nightly_ingest"].append(secs_i)
        figures["nightly_detect"].append(secs_d)
        print(
            f"[{r + 1}/{args.repeat}] nightly: ingest {secs_i:.2f} s ({line_i}) + "
            f"detect {secs_d:.2f} s ({line_d}) = {secs_i + secs_d:.2f} s"
        )

    best = {k: min(v) for k, v in figures.items()}
    nightly = [i + d for i, d in zip(figures["nightly_ingest"], figures["nightly_detect"], strict=True)]
    print(
        f"\n{args.commits} commits x {args.series} series: full detect {best['full_detect']:.2f} s "
        f"(target 10 s; all runs {', '.join(f'{x:.2f}' for x in figures['full_detect'])}); "
        f"nightly ingest+detect {min(nightly):.2f} s "
        f"(target 3 s; all runs {', '.join(f'{x:.2f}' for x in nightly)})"
    )
    if args.json:
        args.json.write_text(json.dumps({"runs": figures, "nightly_total": nightly}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
