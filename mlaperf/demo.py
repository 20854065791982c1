"""`mlaperf demo`: the Quick start's main job, from a fresh checkout to a dashboard URL.

Steps: create the store, ingest the bundled GPU history, benchmark the current commit (GPU tier when
CUDA is present, the CPU smoke tier otherwise), ingest those results, detect regressions, serve.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HISTORY = REPO_ROOT / "history" / "results"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="ingest the bundled GPU history, benchmark this commit, detect regressions, serve the dashboard",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--db", metavar="URL", default=None, help="store URL (default: MLAPERF_DB or SQLite)")
    parser.add_argument("--history", type=Path, default=HISTORY, help="bundled asv results to ingest")
    parser.add_argument("--no-bench", action="store_true", help="skip benchmarking the current commit")
    parser.add_argument("--no-serve", action="store_true", help="stop after detection (no dashboard)")
    parser.add_argument("--port", type=int, default=8501, help="dashboard port (0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="dashboard address")
    parser.set_defaults(func=handle)


def _step(n: int, total: int, what: str) -> float:
    print(f"\n[{n}/{total}] {what}", flush=True)
    return time.perf_counter()


def handle(args: argparse.Namespace) -> int:
    from db.engine import default_url, display_url, upgrade

    from .cli import main

    url = args.db or default_url()
    total = 5
    _step(1, total, f"store: {display_url(url)}")
    upgrade(url)

    _step(2, total, f"ingest the bundled GPU history ({args.history})")
    if not args.history.is_dir():
        print(f"demo: bundled history not found at {args.history}")
        return 2
    rc = main(["ingest", str(args.history), "--db", url, "--repo", str(REPO_ROOT)])
    if rc:
        return rc

    if args.no_bench:
        _step(3, total, "benchmark this commit: skipped (--no-bench)")
    else:
        t0 = _step(3, total, "benchmark this commit (GPU tier with CUDA, else the CPU smoke tier)")
        rc = main(["run", "HEAD"])
        if rc:
            print(f"demo: benchmarking failed (exit {rc}); continuing with the stored history")
        else:
            print(f"demo: benchmarked in {time.perf_counter() - t0:.0f} s")
            results = REPO_ROOT / ".asv" / "results"
            if results.is_dir():
                main(["ingest", str(results), "--db", url, "--repo", str(REPO_ROOT)])

    _step(4, total, "detect regressions over history")
    main(["detect", "--db", url, "--all"])  # list fixed ones too: the bundled story has one

    if args.no_serve:
        _step(5, total, "dashboard: skipped (--no-serve)")
        return 0
    _step(5, total, "serve the dashboard (Ctrl-C stops it)")
    return main(["dashboard", "--db", url, "--port", str(args.port), "--host", args.host])
