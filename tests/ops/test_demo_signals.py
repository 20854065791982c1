"""`scripts/demo.sh` while it installs: a progress line every 10 seconds, and an interrupt (Ctrl-C, a CI
cancel) stops the install itself, not only the shell around it (pip went on installing into .venv)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Stands in for scripts/setup.sh: a long child (pip) under a shell, its pid written down.
FAKE_SETUP = """#!/usr/bin/env bash
sleep 313 &
echo $! > child.pid
wait
"""


def _as_from_a_terminal() -> None:
    # A shell started in the background without job control ignores SIGINT, and so would demo.sh (bash cannot
    # trap a signal ignored at its start): the user's terminal gives it the default, so this test does too.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _gone(pid: int) -> bool:
    # Gone, or a zombie waiting for a parent that does not reap (PID 1 of a container may not).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_stops_the_install(tmp_path: Path, sig: signal.Signals, status: int) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo.sh", tmp_path / "scripts" / "demo.sh")
    (tmp_path / "scripts" / "setup.sh").write_text(FAKE_SETUP)
    demo = subprocess.Popen(["bash", "scripts/demo.sh"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=_as_from_a_terminal)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "child.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        child = int((tmp_path / "child.pid").read_text())
        if sig == signal.SIGINT:
            time.sleep(12)  # long enough for one progress line (ten 1 s ticks, slower on a loaded machine)
        os.killpg(demo.pid, sig)  # the terminal's Ctrl-C reaches the foreground group: demo.sh, not setup's
        out, _ = demo.communicate(timeout=30)
        assert demo.returncode == status, out
        deadline = time.monotonic() + 10
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(child), "the install went on after the demo stopped"
        if sig == signal.SIGINT:
            # Wall-clock seconds since the start: 10 at the tenth tick, a second or two more under load.
            assert re.search(r"^setup: still installing \(1[0-3] s\)$", out, re.MULTILINE), out
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
        if (tmp_path / "child.pid").exists() and not _gone(pid := int((tmp_path / "child.pid").read_text())):
            os.kill(pid, signal.SIGKILL)
