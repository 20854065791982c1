"""`mlaperf demo`: the Quick start's main job, from a fresh checkout to a dashboard URL.

Steps: create the store, ingest the bundled GPU history, benchmark the current commit (GPU tier when
CUDA is present, the CPU smoke tier otherwise), ingest those results, detect regressions, serve.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import Terminated

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


def _mlaperf(*argv: str) -> int:
    """Run one step as the command a user would type, in a child process (shown first).

    A child keeps the demo a script of the real commands: nothing here re-implements or re-parses them,
    and each step ends with its own exit status and cleanup. A stop signal for the demo (Ctrl-C, or the
    SIGTERM of a CI cancel, both raised as KeyboardInterrupt by ``mlaperf.cli``) is passed to the child,
    which cleans up before the demo returns.
    """
    print("$ mlaperf " + " ".join(shlex.quote(a) for a in argv), flush=True)
    child = subprocess.Popen([sys.executable, "-m", "mlaperf.cli", *argv])
    try:
        return child.wait()
    except KeyboardInterrupt as stop:
        child.send_signal(signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        raise


def handle(args: argparse.Namespace) -> int:
    db = ["--db", args.db] if args.db else []  # else every step's own default ($MLAPERF_DB or the SQLite file)
    total = 5
    _step(1, total, "create or migrate the store")
    rc = _mlaperf("db", "upgrade", *db)
    if rc:
        return rc

    _step(2, total, f"ingest the bundled GPU history ({args.history})")
    if not args.history.is_dir():
        print(f"mlaperf demo: error: --history: no such folder: {args.history}", file=sys.stderr)
        return 2
    rc = _mlaperf("ingest", str(args.history), *db, "--repo", str(REPO_ROOT))
    if rc:
        return rc

    if args.no_bench:
        _step(3, total, "benchmark this commit: skipped (--no-bench)")
    else:
        t0 = _step(3, total, "benchmark this commit (GPU tier with CUDA, else the CPU smoke tier)")
        results = REPO_ROOT / ".asv" / "results"
        rc = _mlaperf("run", "HEAD", *db, "--results-dir", str(results))
        if rc:
            print(f"mlaperf demo: benchmarking ended with status {rc}; continuing with the stored history")
        else:
            print(f"mlaperf demo: benchmarked in {time.perf_counter() - t0:.0f} s")
        if results.is_dir():
            _mlaperf("ingest", str(results), *db, "--repo", str(REPO_ROOT))

    _step(4, total, "detect regressions over history")
    _mlaperf("detect", *db, "--all")  # list fixed ones too: the bundled story has one

    if args.no_serve:
        _step(5, total, "dashboard: skipped (--no-serve)")
        return 0
    _step(5, total, "serve the dashboard (Ctrl-C stops it)")
    return _mlaperf("dashboard", *db, "--port", str(args.port), "--host", args.host)
