"""Stopping commands the way a CI runner does (SIGTERM on cancel or timeout) and the exit-status rule.

`mlaperf run` must stop asv and every process it started, remove its worktree and temporary directory and
say so on its last line; `mlaperf dashboard` must stop its Streamlit server. Real processes, real signals.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from scratch import MLAPERF, alive, children, git, make_scratch, serving, wait_for

from settings import exits

SLOW_BENCH = """
import os
import time


class Slow:
    timeout = 300
    number = 1
    repeat = 1
    warmup_time = 0.0

    def time_sleep(self):
        with open({pidfile!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        time.sleep(120)
"""


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "SIGINT")])
def test_run_stops_cleanly(tmp_path: Path, request: pytest.FixtureRequest, sig: int, code: int, name: str) -> None:
    scratch = make_scratch(tmp_path / "repo")
    pidfile = tmp_path / "bench.pids"
    (scratch.path / "benchmarks" / "bench_slow.py").write_text(SLOW_BENCH.format(pidfile=str(pidfile)))
    scratch.commit("slow")
    tmp = Path(tempfile.mkdtemp(prefix="mlops-", dir="/tmp"))  # short: asv's forkserver socket lives below
    request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp)}
    env.pop("MLAPERF_DB", None)
    cmd = [str(MLAPERF), "run", "--tier", "cpu", "--machine", "ci", "--bench", "Slow"]
    proc = subprocess.Popen(cmd, cwd=scratch.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 120, "the benchmark to start")
        bench_pid = int(pidfile.read_text().split()[0])
        assert any(tmp.iterdir()), "the run's temporary directory exists while it runs"
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert time.monotonic() - t0 < 30
    assert err.strip().splitlines()[-1] == (
        f"mlaperf: stopped by {name}; child processes stopped, temporary files removed (exit {code})"
    )
    assert not alive(bench_pid), "the benchmark process (a child of asv's forkserver) is stopped"
    assert list(tmp.iterdir()) == [], "temporary directory and worktree removed"
    assert git(scratch.path, "worktree", "list").count("\n") == 0, "git knows no leftover worktree"


def test_dashboard_stops_streamlit_on_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.Popen([str(MLAPERF), "dashboard", "--port", "0", "--db", f"sqlite:///{tmp_path}/s.sqlite"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split()[2]
        assert url.startswith("http://127.0.0.1:"), line
        wait_for(lambda: serving(url), 120, "Streamlit to serve")
        streamlit = children(proc.pid)
        assert streamlit
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "stopped by SIGTERM" in err.strip().splitlines()[-1]
    assert not any(alive(pid) for pid in streamlit), "Streamlit is stopped with it"
    assert not serving(url)


def test_exit_status_rule(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    args = argparse.Namespace()

    def crash(_: argparse.Namespace) -> int:
        raise KeyError("boom\nsecond line")

    assert exits.dispatch(crash, args) == 3
    err = capsys.readouterr().err
    assert err == "mlaperf: internal error: KeyError: 'boom\\nsecond line'\n", "one line, no traceback"
    monkeypatch.setenv("MLAPERF_DEBUG", "1")
    assert exits.dispatch(crash, args) == 3
    assert "Traceback" in capsys.readouterr().err
    monkeypatch.delenv("MLAPERF_DEBUG")

    from db.engine import StoreError

    def corrupted(_: argparse.Namespace) -> int:
        raise StoreError("store /x/s.sqlite: file is not a database")

    assert exits.dispatch(corrupted, args) == 2
    assert capsys.readouterr().err == "mlaperf: error: store /x/s.sqlite: file is not a database\n"
    assert exits.dispatch(lambda _: 1, args) == 1 and exits.dispatch(lambda _: None, args) == 0
    assert exits.dispatch(lambda _: 7, args) == 3, "statuses outside the rule are internal errors"
    assert exits.dispatch(lambda _: sys.exit(2), args) == 2

    def disk(number: int, *name: str) -> Callable[[argparse.Namespace], int]:
        def write(_: argparse.Namespace) -> int:
            raise OSError(number, os.strerror(number), *name)

        return write

    capsys.readouterr()
    assert exits.dispatch(disk(errno.EROFS, "/ro/plan.txt"), args) == 2, "the machine's disk, not a bug"
    assert capsys.readouterr().err == (f"mlaperf: error: {os.strerror(errno.EROFS)}: /ro/plan.txt (write elsewhere "
                                       "and run it again)\n")  # fmt: skip
    assert exits.dispatch(disk(errno.EDQUOT), args) == 2
    assert capsys.readouterr().err == (f"mlaperf: error: {os.strerror(errno.EDQUOT)} (make room on that disk, or "
                                       "write elsewhere, and run it again)\n")  # fmt: skip
    assert exits.dispatch(disk(errno.EACCES, "/x"), args) == 3, "other OSErrors stay internal errors"
    assert capsys.readouterr().err.startswith("mlaperf: internal error: PermissionError: ")


def test_bad_usage_is_2_for_every_command() -> None:
    for argv in (["run", "--bogus"], ["nightly", "plan", "--budget", "x"], ["bogus"]):
        proc = subprocess.run([str(MLAPERF), *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "usage:" in proc.stderr
