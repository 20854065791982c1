"""The exit status of every mlaperf command, and the one function that maps a command's end to it.

- 0 nothing found, 1 a regression (or a failed benchmark), 2 bad usage or input (argparse errors, a bad file,
  a store that is corrupted, foreign, unreadable or unwritable: any :class:`BadInput`; a file the command could
  not write for want of room or a read-only filesystem), 3 internal error (one line; the traceback only with
  ``MLAPERF_DEBUG=1``);
- SIGINT and SIGTERM (what a CI runner sends on cancel or timeout) both interrupt the command like Ctrl-C,
  so every ``except KeyboardInterrupt`` / ``finally`` cleanup runs (children stopped, worktrees and temp
  dirs removed); the last line says so and the status is 130 (SIGINT) or 143 (SIGTERM): 128 + the signal.
"""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from settings import env

OK, FOUND, USAGE, INTERNAL = 0, 1, 2, 3
# Errors of the machine a command runs on, not of the command: a full disk, a quota, a read-only mount.
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
SIGNALS = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
INTERRUPTED = {name: 128 + int(sig) for sig, name in SIGNALS.items()}  # {"SIGINT": 130, "SIGTERM": 143}
STATUSES = (OK, FOUND, USAGE, INTERNAL)
SUMMARY = ("Exit status: 0 done, 1 a check failed (compare: a regression, failed or missing benchmark; detect "
           "--fail-on-new: a new alert; a run's failed benchmark), 2 bad usage or input (a full disk too), 3 internal "
           "error, 130/143 stopped by SIGINT/SIGTERM; each command's --help gives its own.")  # fmt: skip


class BadInput(Exception):
    """An error of the user's input or environment (argument, file, store): one line, exit status 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM raised as a KeyboardInterrupt, so cleanup written for Ctrl-C also runs on a CI cancel."""


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
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _on_signal) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _internal(prog: str, exc: Exception) -> int:
    """Report a crash in one line (the traceback with MLAPERF_DEBUG=1): status 3."""
    if env.debug():
        traceback.print_exc()
    message = " ".join(str(exc).split())
    print(f"{prog}: internal error: {type(exc).__name__}: {message}", file=sys.stderr)
    return INTERNAL


def dispatch(func: Callable[[argparse.Namespace], int | None], args: argparse.Namespace, prog: str = "mlaperf") -> int:
    """Run one command handler and map every way it can end to the exit-status rule above."""
    global _received
    with _stop_signals():
        try:
            rc = func(args)
            rc = OK if rc is None else int(rc)
        except KeyboardInterrupt:
            if _received is None:
                _received = signal.SIGINT  # a Ctrl-C that arrived as a plain KeyboardInterrupt
        except SystemExit as exc:  # a handler that called sys.exit()
            code = exc.code
            rc = code if isinstance(code, int) else (OK if code is None else USAGE)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
        except BadInput as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            rc = USAGE
        except OSError as exc:
            if exc.errno not in _DISK_ERRNOS:
                rc = _internal(prog, exc)
            else:
                where = f": {exc.filename}" if exc.filename else ""  # a failed write() names no file
                fix = "write elsewhere" if exc.errno == errno.EROFS else "make room on that disk, or write elsewhere,"
                print(f"{prog}: error: {exc.strerror}{where} ({fix} and run it again)", file=sys.stderr)
                rc = USAGE
        except Exception as exc:  # noqa: BLE001 - the one place that turns crashes into status 3
            rc = _internal(prog, exc)
    if _received is not None:
        name = SIGNALS.get(signal.Signals(_received), str(_received))
        rc = 128 + _received
        print(f"{prog}: stopped by {name}; child processes stopped, temporary files removed (exit {rc})",
              file=sys.stderr, flush=True)  # fmt: skip
        _received = None
        return rc
    if rc not in STATUSES:
        print(f"{prog}: internal error: the command ended with status {rc}", file=sys.stderr)
        return INTERNAL
    return rc
