"""Running asv in a session of its own and stopping all of it: asv starts a forkserver in a process group of
its own, whose children run the benchmarks, so on Ctrl-C or SIGTERM the whole session is stopped (SIGTERM,
then SIGKILL after a grace period), never asv alone."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

UNIX_SOCKET_PATH_MAX = 108  # sun_path on Linux, terminating NUL included
STOP_GRACE_S = 10.0  # how long asv's processes get to exit after SIGTERM before SIGKILL


def run_group(cmd: list[str], *, cwd: Path, env: dict[str, str]) -> int:
    """Run ``cmd`` as the leader of a new session; on any interruption stop the whole session, then re-raise.

    asv starts a forkserver in a process group of its own, whose children run the benchmarks; killing asv
    alone, or only its group, would orphan them. They all stay in asv's session.
    """
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True)
    try:
        return proc.wait()
    except BaseException:
        stop_session(proc)
        raise


def _session_members(sid: int) -> list[int]:
    """Processes of session ``sid`` (Linux /proc; elsewhere only the leader's process group is known)."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return [sid]
    members = []
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session ...
        if int(fields[3]) == sid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def stop_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to every process of ``proc``'s session, SIGKILL to what is left after STOP_GRACE_S."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _session_members(proc.pid):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _session_members(proc.pid):
                return
            time.sleep(0.1)
