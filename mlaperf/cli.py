"""The `mlaperf` command: one entry point over the runner, the store, detection and the dashboard.

Exit status, the same for every command (enforced here, in :func:`dispatch`):

- 0 nothing found, 1 regression (or a failed benchmark), 2 bad usage or input (argparse errors, a store
  that is corrupted, foreign, unreadable or unwritable), 3 internal error (one line; the traceback only
  with ``MLAPERF_DEBUG=1``);
- SIGINT and SIGTERM (what a CI runner sends on cancel or timeout) both interrupt the command like Ctrl-C,
  so every ``except KeyboardInterrupt`` / ``finally`` cleanup runs (children stopped, worktrees and temp
  dirs removed); the last line says so and the status is 130 (SIGINT) or 143 (SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from . import Terminated, __version__

EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
_VALID = {EXIT_OK, EXIT_FOUND, EXIT_USAGE, EXIT_INTERNAL}
_SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


_received: int | None = None  # the first stop signal of this process, if any


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    global _received
    if _received is not None:
        return  # cleanup of the first signal is running; do not interrupt it halfway
    _received = signum
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread while a command runs."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _on_signal) for s in _SIGNAL_NAMES}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def dispatch(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace, prog: str = "mlaperf") -> int:
    """Run one command handler and map every way it can end to the exit-status rule above."""
    global _received
    from db.engine import StoreError  # imported when a command runs (SQLAlchemy, alembic), as in build_parser

    with _stop_signals():
        try:
            rc = func(args)
            rc = EXIT_OK if rc is None else int(rc)
        except KeyboardInterrupt:
            if _received is None:
                _received = signal.SIGINT  # a Ctrl-C that arrived as a plain KeyboardInterrupt
        except SystemExit as exc:  # a handler that called sys.exit()
            code = exc.code
            rc = code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - the one place that turns crashes into status 3
            if isinstance(exc, StoreError):
                print(f"{prog}: error: {exc}", file=sys.stderr)
                rc = EXIT_USAGE
            else:
                if os.environ.get("MLAPERF_DEBUG") == "1":
                    traceback.print_exc()
                message = " ".join(str(exc).split())
                print(f"{prog}: internal error: {type(exc).__name__}: {message}", file=sys.stderr)
                rc = EXIT_INTERNAL
    if _received is not None:
        name = _SIGNAL_NAMES.get(signal.Signals(_received), str(_received))
        rc = 128 + _received
        print(f"{prog}: stopped by {name}; child processes stopped, temporary files removed (exit {rc})",
              file=sys.stderr, flush=True)  # fmt: skip
        _received = None
        return rc
    if rc not in _VALID:
        print(f"{prog}: internal error: the command ended with status {rc}", file=sys.stderr)
        return EXIT_INTERNAL
    return rc


def build_parser() -> argparse.ArgumentParser:
    import dashboard.cli
    import db.cli
    import regressions.cli

    from . import demo, doctor, nightly, publish, runner

    parser = argparse.ArgumentParser(
        prog="mlaperf",
        description="Performance-regression tracking for sparse-MLA decode kernels: asv suites on every "
        "commit, a SQL store, regression detection, PR reports and a Streamlit dashboard. Exit status of "
        "every command: 0 nothing found, 1 regression, 2 bad usage or input, 3 internal error, "
        "130/143 stopped by SIGINT/SIGTERM.",
    )
    parser.add_argument("--version", action="version", version=f"mlaperf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    runner.register(sub)
    db.cli.register(sub)
    regressions.cli.register(sub)
    dashboard.cli.register(sub)
    publish.register(sub)
    demo.register(sub)
    nightly.register(sub)
    doctor.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # bad usage: argparse prints it and exits 2
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_USAGE
    return dispatch(func, args)


if __name__ == "__main__":
    raise SystemExit(main())
