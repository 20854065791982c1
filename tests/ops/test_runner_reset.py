"""scripts/runner-reset.sh with real processes: a job's daemon that left its process group and session is
killed before the next job, the runner's own processes (the reset's ancestors) live on, and a runner folder
that differs from its root-owned pristine copy fails the reset and leaves the marker that stops the next job.

The killing test runs the job and the reset as a throwaway uid (it needs root to switch users): the reset kills
every process of its user, so it must never run as the user who runs the tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scratch import ROOT

RESET = ROOT / "scripts" / "runner-reset.sh"
JOB_UID = 54321  # no account: nothing else on the machine runs as it


def _uid_of(pid: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a parent that does not reap is dead for this purpose)."""
    try:
        state = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return state.split()[1] != "Z"


@pytest.fixture
def job_home() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to run the job and the reset as a throwaway user")
    if any(_uid_of(p) == JOB_UID and _alive(int(p)) for p in os.listdir("/proc") if p.isdigit()):
        pytest.skip(f"uid {JOB_UID} has processes on this machine")
    base = Path(tempfile.mkdtemp(prefix="runner-reset-"))
    base.chmod(0o755)
    home = base / "home"
    (home / "actions-runner" / "_work").mkdir(parents=True)
    (base / "tmp").mkdir()
    for path in (home, home / "actions-runner", home / "actions-runner" / "_work", base / "tmp"):
        os.chown(path, JOB_UID, JOB_UID)
    try:
        yield home
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_job_user(cmd: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ["PATH"], "HOME": str(home), "RESET_TMP_DIRS": str(home.parent / "tmp"), **env}
    return subprocess.run(cmd, env=full, user=JOB_UID, group=JOB_UID, extra_groups=[], cwd=home,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_daemon_that_left_the_job_is_killed(job_home: Path) -> None:
    pidfile = job_home / "daemon.pid"
    # The job: a step that daemonizes a sleep into its own session (so its own process group) and exits.
    step = f'setsid bash -c \'sleep 300 & echo $! > "{pidfile}"; wait\' < /dev/null > /dev/null 2>&1 &'
    proc = as_job_user(["bash", "-c", step], job_home)
    assert proc.returncode == 0, proc.stderr
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    daemon = int(pidfile.read_text())
    assert _alive(daemon) and os.getsid(daemon) != os.getsid(0) and os.getpgid(daemon) != os.getpgid(0)
    assert _uid_of(str(daemon)) == JOB_UID

    proc = as_job_user(["bash", str(RESET), "--dry-run"], job_home)
    assert proc.returncode == 0 and f"{daemon}" in proc.stdout and _alive(daemon), proc.stdout + proc.stderr
    # Run as the runner runs it: a child of a process of the same user (its Worker), which must live on.
    proc = as_job_user(["bash", "-c", f'bash "{RESET}"; echo "parent alive, reset exit $?"'], job_home)
    assert "parent alive, reset exit 0" in proc.stdout, (proc.returncode, proc.stdout + proc.stderr)
    for _ in range(50):
        if not _alive(daemon):
            break
        time.sleep(0.05)
    assert not _alive(daemon), "the daemon outlived the reset"
    assert not pidfile.exists(), "$HOME emptied"


def test_a_changed_runner_folder_fails_the_reset_and_stops_the_next_job(job_home: Path) -> None:
    runner = job_home / "actions-runner"
    (runner / "bin").mkdir()
    (runner / "bin" / "Runner.Worker").write_text("pristine")
    os.chown(runner / "bin", JOB_UID, JOB_UID)
    os.chown(runner / "bin" / "Runner.Worker", JOB_UID, JOB_UID)
    pristine = job_home.parent / "pristine"
    shutil.copytree(runner, pristine)  # root-owned, as the admin keeps it
    (runner / "_work" / "ws").mkdir()
    os.chown(runner / "_work" / "ws", JOB_UID, JOB_UID)
    proc = as_job_user(["bash", str(RESET)], job_home, RUNNER_PRISTINE=str(pristine))
    assert proc.returncode == 0 and "CHANGED" not in proc.stdout, proc.stdout + proc.stderr  # _work is not compared
    (runner / "bin" / "Runner.Worker").write_text("planted")
    (runner / ".env").write_text("ACTIONS_RUNNER_HOOK_JOB_COMPLETED=\n")
    proc = as_job_user(["bash", str(RESET)], job_home, RUNNER_PRISTINE=str(pristine))
    assert proc.returncode == 1 and "differs from" in proc.stderr and "CHANGED" in proc.stdout, proc.stderr
    assert "Runner.Worker" in proc.stderr and ".env" in proc.stderr
    assert (job_home / ".mlaperf-pr-job").exists(), "the next job's first step stops on the marker"


def test_a_root_owned_conf_beside_the_script_overrides_what_a_job_put_in_the_environment(job_home: Path) -> None:
    # A job can reach the hook's environment through $GITHUB_ENV: with runner-reset.conf beside the installed
    # script, neither a decoy HOME nor an emptied RUNNER_PRISTINE from the environment counts.
    runner = job_home / "actions-runner"
    (runner / "bin").mkdir()
    (runner / "bin" / "Runner.Worker").write_text("pristine")
    pristine = job_home.parent / "pristine"
    shutil.copytree(runner, pristine)
    (runner / "bin" / "Runner.Worker").write_text("planted")
    (job_home / "left-by-the-job").write_text("x")
    decoy = job_home.parent / "decoy"
    decoy.mkdir()
    os.chown(decoy, JOB_UID, JOB_UID)
    for path in (runner / "bin", runner / "bin" / "Runner.Worker", job_home / "left-by-the-job"):
        os.chown(path, JOB_UID, JOB_UID)
    installed = job_home.parent / "hook"  # root-owned, as the admin installs it
    installed.mkdir()
    shutil.copy(RESET, installed / "runner-reset.sh")
    conf = installed / "runner-reset.conf"
    conf.write_text(f"# the admin's\nHOME={job_home}\nRUNNER_PRISTINE={pristine}\n"
                    f"RESET_TMP_DIRS={job_home.parent / 'tmp'}\n")  # fmt: skip
    hostile = {"HOME": str(decoy), "RUNNER_PRISTINE": "", "RESET_KILL": "0"}
    proc = as_job_user(["bash", str(installed / "runner-reset.sh")], job_home, **hostile)
    assert proc.returncode == 1 and "differs from" in proc.stderr and "CHANGED" in proc.stdout, proc.stderr
    assert "RESET_KILL=0" not in proc.stdout and f"reset {job_home} " in proc.stdout, proc.stdout
    assert not (job_home / "left-by-the-job").exists() and (job_home / ".mlaperf-pr-job").exists()
    # A conf the job user could have written is refused, and so is a line that is not a known setting.
    conf.chmod(0o666)
    proc = as_job_user(["bash", str(installed / "runner-reset.sh")], job_home)
    assert proc.returncode == 2 and "refusing" in proc.stderr, proc.stderr
    conf.chmod(0o644)
    conf.write_text("HOME=$(touch /tmp/pwned)\nBASH_ENV=/tmp/x\n")
    proc = as_job_user(["bash", str(installed / "runner-reset.sh")], job_home)
    assert proc.returncode == 2 and "BASH_ENV=/tmp/x" in proc.stderr, proc.stderr
