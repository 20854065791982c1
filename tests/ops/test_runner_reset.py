"""scripts/runner-reset.sh with real processes: a job's daemon that left its process group and session is
killed before the next job, the runner's own processes (the reset's ancestors) live on, and a runner folder
that differs from its root-owned pristine copy fails the reset and leaves the marker that stops the next job.
What a job can leave or change to defeat it (a PATH of its own, read-only folders, a runner folder deeper in
HOME, a crontab or an at job, files in /var/tmp) is tried here too, and so is the command docs/admin.md installs.

The tests run the job and the reset as a throwaway uid (they need root to switch users): the reset kills
every process of its user, so it must never run as the user who runs the tests. Where a tool needs an account
for that uid (runuser, crontab, at), it gets one in a private mount namespace only."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scratch import ROOT

RESET = ROOT / "scripts" / "runner-reset.sh"
JOB_UID = 54321  # no account: nothing else on the machine runs as it
NAME = "mlaperf-reset-test"  # its account inside with_account's mount namespace, and nowhere else
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # the PATH the documented ExecStartPre gives the reset


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


def installed(home: Path) -> Path:
    """The reset as the job_home fixture installs it for ``home``'s test."""
    return home.parent / "opt" / "runner-reset.sh"


@pytest.fixture
def job_home() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root to run the job and the reset as a throwaway user")
    if any(_uid_of(p) == JOB_UID and _alive(int(p)) for p in os.listdir("/proc") if p.isdigit()):
        pytest.skip(f"uid {JOB_UID} has processes on this machine")
    base = Path(tempfile.mkdtemp(prefix="runner-reset-"))
    base.chmod(0o755)
    # Installed as docs/admin.md says, root-owned where the runner user can read it: the checkout itself may lie
    # in a folder only its owner can enter (a CI workspace under mktemp -d).
    (base / "opt").mkdir(mode=0o755)
    shutil.copy(RESET, installed(base / "home"))
    home = base / "home"
    (home / "actions-runner" / "_work").mkdir(parents=True)
    (base / "tmp").mkdir()
    for path in (home, home / "actions-runner", home / "actions-runner" / "_work", base / "tmp"):
        os.chown(path, JOB_UID, JOB_UID)
    try:
        yield home
    finally:
        # A test that failed may leave the job's daemon: the uid had no process before, so none of its is kept.
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == JOB_UID):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def as_job_user(cmd: list[str], home: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    """`cmd` as JOB_UID; a setting given as None is left out of the environment."""
    full = {"PATH": os.environ["PATH"], "HOME": str(home), "RESET_TMP_DIRS": str(home.parent / "tmp"), **env}
    return subprocess.run(cmd, env={k: v for k, v in full.items() if v is not None}, user=JOB_UID, group=JOB_UID,
                          extra_groups=[], cwd=home, capture_output=True, text=True, timeout=60)  # fmt: skip


def give_to_job(*paths: Path) -> None:
    for top in paths:
        for path in (top, *top.rglob("*")):
            os.chown(path, JOB_UID, JOB_UID, follow_symlinks=False)


def with_account(home: Path, script: str, private: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`script` (bash, run as root) in a private mount namespace where JOB_UID is the account NAME with `home`
    (runuser, crontab and at need one; the machine's /etc/passwd is not touched), and each folder of `private`
    is an empty stand-in of the same owner and mode (with its folders and dot files, at's .SEQ), so no job reaches
    the machine's cron or at spool. $NAME, $RESET and $TMPD (the test's tmp folder) are set."""
    if shutil.which("unshare") is None or shutil.which("runuser", path=SYSTEM_PATH) is None:
        pytest.skip("needs unshare and runuser (util-linux)")
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("cannot make a mount namespace here (unshare --mount)")
    base = home.parent
    (base / "passwd").write_text(Path("/etc/passwd").read_text() + f"{NAME}:x:{JOB_UID}:{JOB_UID}::{home}:/bin/sh\n")
    (base / "group").write_text(Path("/etc/group").read_text() + f"{NAME}:x:{JOB_UID}:\n")
    binds = [str(base / "passwd"), "/etc/passwd", str(base / "group"), "/etc/group"]
    for i, folder in enumerate(private):
        copy, st = base / f"private{i}", os.stat(folder)
        copy.mkdir()
        os.chown(copy, st.st_uid, st.st_gid)
        copy.chmod(stat.S_IMODE(st.st_mode))
        for child in Path(folder).iterdir():
            if child.is_dir() and not child.is_symlink():
                (copy / child.name).mkdir(stat.S_IMODE(child.stat().st_mode))
            elif child.name.startswith(".") and child.is_file():
                shutil.copy2(child, copy / child.name)
            else:
                continue
            os.chown(copy / child.name, child.stat().st_uid, child.stat().st_gid)
            (copy / child.name).chmod(stat.S_IMODE(child.stat().st_mode))
        binds += [str(copy), folder]
    mounts = 'set -e; while (( $# )); do mount --bind "$1" "$2"; shift 2; done; set +e\n'
    env = {"PATH": SYSTEM_PATH, "NAME": NAME, "RESET": str(installed(home)), "TMPD": str(base / "tmp")}
    cmd = ["unshare", "--mount", "--propagation", "private", "bash", "-c", mounts + script, "_", *binds]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _daemon(home: Path, pidfile: Path | None = None) -> int:
    """The job: a step that daemonizes a sleep into its own session (so its own process group) and exits."""
    pidfile = pidfile or home.parent / "tmp" / "daemon.pid"
    step = f'setsid bash -c \'sleep 300 & echo $! > "{pidfile}"; wait\' < /dev/null > /dev/null 2>&1 &'
    proc = as_job_user(["bash", "-c", step], home)
    assert proc.returncode == 0, proc.stderr
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    daemon = int(pidfile.read_text())
    assert _alive(daemon) and _uid_of(str(daemon)) == JOB_UID
    return daemon


def _dead(pid: int) -> bool:
    for _ in range(50):
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_daemon_that_left_the_job_is_killed(job_home: Path) -> None:
    daemon = _daemon(job_home, job_home / "daemon.pid")
    assert os.getsid(daemon) != os.getsid(0) and os.getpgid(daemon) != os.getpgid(0)

    proc = as_job_user(["bash", str(installed(job_home)), "--dry-run"], job_home)
    assert proc.returncode == 0 and f"{daemon}" in proc.stdout and _alive(daemon), proc.stdout + proc.stderr
    # Run as the runner runs it: a child of a process of the same user (its Worker), which must live on.
    proc = as_job_user(["bash", "-c", f'bash "{installed(job_home)}"; echo "parent alive, reset exit $?"'], job_home)
    assert "parent alive, reset exit 0" in proc.stdout, (proc.returncode, proc.stdout + proc.stderr)
    for _ in range(50):
        if not _alive(daemon):
            break
        time.sleep(0.05)
    assert not _alive(daemon), "the daemon outlived the reset"
    assert not (job_home / "daemon.pid").exists(), "$HOME emptied"


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
    proc = as_job_user(["bash", str(installed(job_home))], job_home, RUNNER_PRISTINE=str(pristine))
    assert proc.returncode == 0 and "CHANGED" not in proc.stdout, proc.stdout + proc.stderr  # _work is not compared
    (runner / "bin" / "Runner.Worker").write_text("planted")
    (runner / ".env").write_text("ACTIONS_RUNNER_HOOK_JOB_COMPLETED=\n")
    proc = as_job_user(["bash", str(installed(job_home))], job_home, RUNNER_PRISTINE=str(pristine))
    assert proc.returncode == 1 and "differs from" in proc.stderr and "CHANGED" in proc.stdout, proc.stderr
    assert "Runner.Worker" in proc.stderr and ".env" in proc.stderr
    assert (job_home / ".mlaperf-pr-job").exists(), "the next job's first step stops on the marker"
    # in the work folder too: a container job's home is the runner's, not this one (a review's find)
    assert (runner / "_work" / ".mlaperf-pr-job").exists()


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
    hook = job_home.parent / "hook"  # root-owned, as the admin installs it
    hook.mkdir()
    shutil.copy(RESET, hook / "runner-reset.sh")
    conf = hook / "runner-reset.conf"
    conf.write_text(f"# the admin's\nHOME={job_home}\nRUNNER_PRISTINE={pristine}\n"
                    f"RESET_TMP_DIRS={job_home.parent / 'tmp'}\n")  # fmt: skip
    hostile = {"HOME": str(decoy), "RUNNER_PRISTINE": "", "RESET_KILL": "0"}
    proc = as_job_user(["bash", str(hook / "runner-reset.sh")], job_home, **hostile)
    assert proc.returncode == 1 and "differs from" in proc.stderr and "CHANGED" in proc.stdout, proc.stderr
    assert "RESET_KILL=0" not in proc.stdout and f"reset {job_home} " in proc.stdout, proc.stdout
    assert not (job_home / "left-by-the-job").exists() and (job_home / ".mlaperf-pr-job").exists()
    # A conf the job user could have written is refused, and so is a line that is not a known setting.
    conf.chmod(0o666)
    proc = as_job_user(["bash", str(hook / "runner-reset.sh")], job_home)
    assert proc.returncode == 2 and "refusing" in proc.stderr, proc.stderr
    conf.chmod(0o644)
    conf.write_text("HOME=$(touch /tmp/pwned)\nBASH_ENV=/tmp/x\n")
    proc = as_job_user(["bash", str(hook / "runner-reset.sh")], job_home)
    assert proc.returncode == 2 and "BASH_ENV=/tmp/x" in proc.stderr, proc.stderr


def test_help_prints_the_whole_comment_block() -> None:
    lines = RESET.read_text().splitlines()[1:]
    block = [re.sub(r"^# ?", "", x) for x in itertools.takewhile(lambda x: x.startswith("#"), lines)]
    proc = subprocess.run(["bash", str(RESET), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.splitlines() == block, proc.stdout


def test_a_path_the_job_prepends_changes_nothing(job_home: Path) -> None:
    # A job prepends to PATH through $GITHUB_PATH, and a job-completed hook runs with it: a fake `bash` (for a
    # `#!/usr/bin/env bash` line), `id` (uid 0: nothing killed), `rm` (nothing removed) and the rest come first.
    fakes, ran = job_home.parent / "fakes", job_home.parent / "fakes-ran"
    fakes.mkdir()
    ran.touch()
    os.chown(ran, JOB_UID, JOB_UID)
    for name in ("bash", "sh", "env", "id", "rm", "chmod", "find", "sed", "stat", "getent", "cut", "realpath",
                 "sleep", "diff", "head", "grep", "dirname", "crontab", "atq", "atrm"):  # fmt: skip
        (fakes / name).write_text(f'#!/bin/sh\necho "$0 $*" >> {ran}\necho 0\n')
        (fakes / name).chmod(0o755)
    daemon = _daemon(job_home)
    (job_home / ".bashrc").write_text("planted")
    give_to_job(job_home / ".bashrc")
    # Run through its #! line, which picks bash.
    proc = as_job_user([str(installed(job_home))], job_home, PATH=f"{fakes}:{os.environ['PATH']}")
    assert proc.returncode == 0 and f"reset {job_home} " in proc.stdout, proc.stdout + proc.stderr
    assert ran.read_text() == "", "a program from the job's PATH ran"
    assert _dead(daemon), "the daemon outlived the reset"
    assert sorted(p.name for p in job_home.iterdir()) == ["actions-runner"]


def test_read_only_folders_are_removed_and_a_removal_that_fails_stops_the_next_job(job_home: Path) -> None:
    # rm -rf cannot empty a folder its owner made read-only: under `set -e` that ended the reset at that entry.
    step = ("mkdir -p .aaa/ro && touch .aaa/ro/f && chmod 500 .aaa/ro && mkdir -p .bbb/none/x && chmod 000 .bbb/none"
            " && touch zzz && mkdir -p actions-runner/_work/ws/ro && chmod 500 actions-runner/_work/ws/ro"
            " && chmod 500 actions-runner/_work . && mkdir ../tmp/ro && chmod 500 ../tmp/ro")  # fmt: skip
    proc = as_job_user(["bash", "-c", step], job_home)
    assert proc.returncode == 0, proc.stderr
    proc = as_job_user(["bash", str(installed(job_home))], job_home)
    assert proc.returncode == 0 and "::error::" not in proc.stderr, proc.stdout + proc.stderr
    assert sorted(p.name for p in job_home.iterdir()) == ["actions-runner"]
    assert not any((job_home / "actions-runner" / "_work").iterdir()) and not any((job_home.parent / "tmp").iterdir())
    # A folder the runner user cannot empty (here one root made; a FUSE mount is another): named, the rest of
    # HOME still removed, exit 1 and the marker.
    (job_home / "aaa-stuck").mkdir()
    (job_home / "aaa-stuck" / "f").write_text("root's")
    (job_home / "zzz").write_text("the job's")
    give_to_job(job_home / "zzz")
    proc = as_job_user(["bash", str(installed(job_home))], job_home)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"::error::runner-reset: could not remove {job_home / 'aaa-stuck'}" in proc.stderr, proc.stderr
    assert not (job_home / "zzz").exists() and (job_home / ".mlaperf-pr-job").exists()


def test_a_runner_folder_deeper_in_home_or_written_with_a_slash_is_kept(job_home: Path) -> None:
    runner = job_home / "runners" / "pr"
    forms = [(str(job_home), str(runner)), (f"{job_home}/", f"{runner}/"),
             (f"{job_home}//", f"{job_home}/runners//pr/"),
             (f"{job_home}/", f"{job_home}/actions-runner/")]  # fmt: skip
    for home, root in forms:
        kept = Path(root.rstrip("/").replace("//", "/"))
        for path in (kept / "bin", kept / "_work" / "ws", job_home / "runners" / "other", job_home / ".cache"):
            path.mkdir(parents=True, exist_ok=True)
        (kept / "bin" / "Runner.Worker").write_text("the runner")
        (job_home / "runners" / "file").write_text("x")
        give_to_job(job_home)
        proc = as_job_user(["bash", str(installed(job_home)), "--dry-run"], job_home, HOME=home, RUNNER_ROOT=root)
        assert proc.returncode == 0 and f"(kept {kept})" in proc.stdout, proc.stdout + proc.stderr
        for line in proc.stdout.splitlines():
            assert not (line.startswith("would remove") and kept.is_relative_to(line.split(" ", 2)[2])), line
        proc = as_job_user(["bash", str(installed(job_home))], job_home, HOME=home, RUNNER_ROOT=root)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (kept / "bin" / "Runner.Worker").exists() and list((kept / "_work").iterdir()) == [], (home, root)
        left = sorted(str(p.relative_to(job_home)) for p in job_home.rglob("*"))
        rel = kept.relative_to(job_home)
        want = [*(str(p) for p in rel.parents if p != Path(".")), str(rel), *(f"{rel}/{x}" for x in ("_work", "bin",
                "bin/Runner.Worker"))]  # fmt: skip
        assert left == sorted(want), (home, root, left)
    proc = as_job_user(["bash", str(installed(job_home)), "--dry-run"], job_home, RUNNER_ROOT=f"{job_home}/")
    assert proc.returncode == 2 and "refusing RUNNER_ROOT" in proc.stderr, proc.stdout + proc.stderr


def test_a_link_to_the_runner_folder_is_kept(job_home: Path) -> None:
    # ~/actions-runner -> ~/runners/v2 (an admin's versioned install): the link and its target stay, the rest goes.
    target = job_home / "runners" / "v2"
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "Runner.Worker").write_text("the runner")
    shutil.rmtree(job_home / "actions-runner", ignore_errors=True)
    (job_home / "actions-runner").symlink_to(target)
    (job_home / "runners" / "old").mkdir()
    (job_home / ".cache").mkdir()
    give_to_job(job_home)
    proc = as_job_user(["bash", str(installed(job_home))], job_home, RUNNER_ROOT=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (job_home / "actions-runner").is_symlink() and (target / "bin" / "Runner.Worker").exists()
    assert not (job_home / "runners" / "old").exists() and not (job_home / ".cache").exists()


def test_a_jobs_links_to_home_or_the_runner_go(job_home: Path) -> None:
    """The marker's names as links to HOME (or the runner folder) were kept as "on the runner folder's path", so
    every later job stopped at its first step ("already ran ... not reset") however often the runner was reset (a
    security review). Links are removed, never followed; only the configured path's own link stays."""
    runner, work = job_home / "actions-runner", job_home / "actions-runner" / "_work"
    (runner / "bin").mkdir(parents=True, exist_ok=True)
    (runner / "bin" / "Runner.Worker").write_text("the runner")
    (job_home / ".mlaperf-pr-job").symlink_to(job_home)
    (work / ".mlaperf-pr-job").symlink_to(job_home)
    (job_home / "runner-again").symlink_to(runner)
    (work / "up").symlink_to(runner)
    give_to_job(job_home)
    proc = as_job_user(["bash", str(installed(job_home))], job_home, RUNNER_ROOT=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for link in (job_home / ".mlaperf-pr-job", work / ".mlaperf-pr-job", job_home / "runner-again", work / "up"):
        assert not link.is_symlink() and not link.exists(), link
    assert (runner / "bin" / "Runner.Worker").exists()  # the links' targets stay
    assert sorted(p.name for p in job_home.iterdir()) == ["actions-runner"]


def test_a_runner_root_spelled_through_a_linked_folder_keeps_its_link(job_home: Path) -> None:
    """RUNNER_ROOT=<base>/hl/actions-runner where hl -> home and ~/actions-runner -> ~/runners/v2: the runner's link
    is on its configured path, though not under HOME as written (a review: the link was removed)."""
    target = job_home / "runners" / "v2"
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "Runner.Worker").write_text("the runner")
    shutil.rmtree(job_home / "actions-runner", ignore_errors=True)
    (job_home / "actions-runner").symlink_to(target)
    (job_home / "stray").symlink_to(target)
    alias = job_home.parent / "hl"
    alias.symlink_to(job_home)
    give_to_job(job_home)
    proc = as_job_user(["bash", str(installed(job_home))], job_home, RUNNER_ROOT=f"{alias}/actions-runner")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (job_home / "actions-runner").is_symlink() and (target / "bin" / "Runner.Worker").exists()
    assert not (job_home / "stray").is_symlink()


def test_the_jobs_files_inside_a_shared_sticky_folder_go(job_home: Path) -> None:
    # /tmp/.X11-unix and its kind: root's folders of mode 1777 where any job may leave files; only the top of the
    # tmp folders was searched, so those files outlived the reset. Root's own file there stays.
    shared = job_home.parent / "tmp" / ".X11-unix"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "X0").write_text("root's")
    proc = as_job_user(["bash", "-c", f"echo planted > {shared}/left-by-job && mkdir {shared}/d && touch {shared}/d/f"],
                       job_home)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = as_job_user(["bash", str(installed(job_home))], job_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["X0"]


def test_the_default_tmp_dirs_are_tmp_var_tmp_and_dev_shm(job_home: Path) -> None:
    dirs = [d for d in ("/tmp", "/var/tmp", "/dev/shm") if Path(d).is_dir()]
    made = [Path(tempfile.mkdtemp(prefix="runner-reset-job-", dir=d)) for d in dirs]
    theirs = Path(tempfile.mkdtemp(prefix="runner-reset-root-", dir="/var/tmp"))  # not the job user's: kept
    try:
        for path in made:
            (path / "f").write_text("x")
            give_to_job(path)
        proc = as_job_user(["bash", str(installed(job_home))], job_home, RESET_TMP_DIRS=None)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert [p for p in made if p.exists()] == [] and theirs.exists()
    finally:
        for path in (*made, theirs):
            shutil.rmtree(path, ignore_errors=True)


def test_the_documented_execstartpre_takes_home_from_the_password_database(job_home: Path) -> None:
    # docs/admin.md: ExecStartPre=-+/usr/sbin/runuser -u runner -- /usr/bin/env -i PATH=... runner-reset.sh
    (job_home / ".cache").mkdir()
    give_to_job(job_home / ".cache")
    proc = with_account(job_home, f'runuser -u "$NAME" -- /usr/bin/env -i PATH={SYSTEM_PATH} RESET_TMP_DIRS="$TMPD"'
                                  ' "$RESET"; echo "reset exit $?"')  # fmt: skip
    assert "reset exit 0" in proc.stdout and f"reset {job_home} " in proc.stdout, proc.stdout + proc.stderr
    assert sorted(p.name for p in job_home.iterdir()) == ["actions-runner"]
    # Without HOME and without an account, nothing to fall back to: refused, not "/".
    proc = as_job_user(["/usr/bin/env", "-i", str(installed(job_home))], job_home)
    assert proc.returncode == 2 and "refusing" in proc.stderr, proc.stdout + proc.stderr


def test_crontab_and_at_jobs_are_removed(job_home: Path) -> None:
    has = {tool: shutil.which(tool, path=SYSTEM_PATH) is not None for tool in ("crontab", "at", "atq", "atrm")}
    if not has["crontab"] and not all(has[t] for t in ("at", "atq", "atrm")):
        pytest.skip("neither crontab nor at/atq/atrm is installed: nothing to test (the reset skips them too)")
    # Their spools, replaced for the test: Debian's crontabs, atjobs and atspool, or Red Hat's cron and at.
    crontabs = "/var/spool/cron/crontabs" if Path("/var/spool/cron/crontabs").is_dir() else "/var/spool/cron"
    spools = [*([crontabs] if has["crontab"] else []), "/var/spool/cron/atjobs", "/var/spool/cron/atspool",
              "/var/spool/at"]  # fmt: skip
    spools = [d for d in dict.fromkeys(spools) if Path(d).is_dir()]
    script = f"""
        as_job() {{ runuser -u "$NAME" -- /usr/bin/env -i PATH={SYSTEM_PATH} RESET_TMP_DIRS="$TMPD" "$@"; }}
        if command -v crontab > /dev/null; then
          as_job bash -c 'echo "0 0 1 1 * true" | crontab -' && as_job crontab -l > /dev/null && echo "crontab set"
        fi
        if command -v at > /dev/null; then
          echo true | as_job at now + 1 hour 2> /dev/null
          [[ -n "$(as_job atq)" ]] && echo "at job set"
        fi
        as_job "$RESET" --dry-run
        as_job "$RESET"; echo "reset exit $?"
        as_job crontab -l > /dev/null 2>&1 && echo "crontab left"
        [[ -n "$(as_job atq 2> /dev/null)" ]] && echo "at job left"
        true
    """
    proc = with_account(job_home, script, tuple(spools))
    out = proc.stdout + proc.stderr
    assert "reset exit 0" in proc.stdout and "left" not in proc.stdout, out
    if has["crontab"]:
        assert "crontab set" in proc.stdout and "would remove the crontab" in proc.stdout, out
    if all(has[t] for t in ("at", "atq", "atrm")):
        assert "at job set" in proc.stdout and "would remove at jobs" in proc.stdout, out
