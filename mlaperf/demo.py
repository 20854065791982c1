"""`mlaperf demo`: the Quick start's main job, from a fresh checkout to a dashboard URL.

Steps: create the store, ingest the bundled GPU history, benchmark the current commit (GPU tier when
CUDA is present, the CPU smoke tier otherwise), ingest those results, detect regressions, serve.
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from settings import exits
from settings.args import DefaultsFormatter, add_db

REPO_ROOT = Path(__file__).resolve().parents[1]
HISTORY = REPO_ROOT / "history" / "results"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="ingest the bundled GPU history, benchmark this commit, detect regressions, serve the dashboard",
        description=__doc__,
        formatter_class=DefaultsFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=handle)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_db(parser)
    parser.add_argument("--history", type=Path, default=HISTORY, help="bundled asv results to ingest")
    parser.add_argument("--no-bench", action="store_true", help="skip benchmarking the current commit")
    parser.add_argument("--no-serve", action="store_true", help="stop after detection (no dashboard)")
    parser.add_argument("--port", type=int, default=8501, help="dashboard port (0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="dashboard address")


def _step(n: int, total: int, what: str) -> float:
    print(f"\n[{n}/{total}] {what}", flush=True)
    return time.perf_counter()


# asv's console: "· Running 24 total benchmarks (...)", then per benchmark "[ 12.50%] ··· name   ok" followed by
# its table of results; the demo shows one line per benchmark with a running count instead.
_TOTAL = re.compile(r"Running (\d+) total benchmarks")
# (a long name is cut at its start, "...Metrics.track_tflops"; "Setting up bench_decode:97" is no benchmark)
_DONE = re.compile(r"^\[\s*[\d.]+%\]\s+·{3}\s(?P<name>\.*[A-Za-z_][\w.]*)\s{2,}(?P<status>\S+)\s*$")


@dataclass
class BenchProgress:
    """Condenses asv's output to one line per finished benchmark: ``[3/24] bench_decode...time_decode: ok``."""

    total: int = 0
    done: int = 0

    def line(self, text: str) -> str | None:
        """What to print for one line of `mlaperf run`'s output (None: nothing)."""
        if m := _TOTAL.search(text):
            self.total = int(m.group(1))
            return f"  running {self.total} benchmarks"
        m = _DONE.match(text.rstrip())
        if m:
            self.done += 1
            return f"  [{self.done}/{self.total or '?'}] {m.group('name')}: {m.group('status')}"
        if text.startswith("mlaperf"):
            return text.rstrip()
        return None


def _mlaperf(*argv: str, condense: Path | None = None) -> int:
    """Run one step as the command a user would type, in a child process (shown first).

    A child keeps the demo a script of the real commands: nothing here re-implements or re-parses them,
    and each step ends with its own exit status and cleanup. A stop signal for the demo (Ctrl-C, or the
    SIGTERM of a CI cancel, both raised as KeyboardInterrupt by ``settings.exits``) is passed to the child,
    which cleans up before the demo returns.
    """
    print("$ mlaperf " + " ".join(shlex.quote(a) for a in argv), flush=True)
    if condense is None:
        child = subprocess.Popen([sys.executable, "-m", "mlaperf.cli", *argv])
    else:  # the whole output goes to the log file ``condense``, one line per benchmark to the terminal
        child = subprocess.Popen([sys.executable, "-m", "mlaperf.cli", *argv], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, errors="replace")
    try:
        if condense is not None and child.stdout is not None:
            progress = BenchProgress()
            condense.parent.mkdir(parents=True, exist_ok=True)
            with condense.open("w", encoding="utf-8") as log:
                for text in child.stdout:
                    log.write(text)
                    shown = progress.line(text)
                    if shown:
                        print(shown, flush=True)
        return child.wait()
    except KeyboardInterrupt as stop:
        child.send_signal(signal.SIGTERM if isinstance(stop, exits.Terminated) else signal.SIGINT)
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
        return exits.USAGE
    rc = _mlaperf("ingest", str(args.history), *db, "--repo", str(REPO_ROOT))
    if rc:
        return rc

    measured = None
    if args.no_bench:
        _step(3, total, "benchmark this commit: skipped (--no-bench)")
    else:
        t0 = _step(3, total, "benchmark this commit (GPU tier with CUDA, else the CPU smoke tier)")
        results = REPO_ROOT / ".asv" / "results"
        log = REPO_ROOT / ".mlaperf" / "demo-run.log"
        rc = _mlaperf("run", "HEAD", *db, "--results-dir", str(results), condense=log)
        if rc:
            print(f"mlaperf demo: benchmarking ended with status {rc} (asv's output: {log}); continuing with the "
                  "stored history")
        else:
            print(f"mlaperf demo: benchmarked in {time.perf_counter() - t0:.0f} s (asv's output: {log})")
        if results.is_dir():
            _mlaperf("ingest", str(results), *db, "--repo", str(REPO_ROOT))
            measured = newest_machine(results)

    _step(4, total, "detect regressions over history")
    _mlaperf("detect", *db, "--all")  # list fixed ones too: the bundled story has one

    if args.no_serve:
        _step(5, total, "dashboard: skipped (--no-serve)")
        return exits.OK
    _step(5, total, "serve the dashboard (Ctrl-C stops it)")
    opens_on = ["--machine", measured] if measured else []  # the machine just measured, not the bundled one
    return _mlaperf("dashboard", *db, "--port", str(args.port), "--host", args.host, *opens_on)


def newest_machine(results: Path) -> str | None:
    """The asv machine (a folder of ``results`` with a machine.json) whose results changed last."""
    folders = [p for p in results.iterdir() if (p / "machine.json").is_file()] if results.is_dir() else []
    if not folders:
        return None
    return max(folders, key=lambda p: max((f.stat().st_mtime for f in p.iterdir()), default=0.0)).name


def main(argv: list[str] | None = None) -> int:
    """``python -m mlaperf.demo``: the same options (scripts/demo.sh answers --help with this, before any
    install: this module needs only the standard library)."""
    parser = argparse.ArgumentParser(prog="scripts/demo.sh", description=__doc__,
                                     formatter_class=DefaultsFormatter)
    add_arguments(parser)
    return exits.dispatch(handle, parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
