"""scripts/free_space.sh on real filesystems: small tmpfs mounts in a private mount namespace stand for a full
runner disk (the temporary directory, or the one the clone lies on), and scripts/test.sh stops on its line before
it installs anything."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from scratch import ROOT

from tests.db.test_readonly import in_mount_namespace

SCRIPT = ROOT / "scripts" / "free_space.sh"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLAPERF_NEED_GIB", "TMPDIR")}
    return {**env, **extra}


def _in_mounts(mounts: dict[Path, str], command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Runs command with a tmpfs of each size mounted at each path, in a mount namespace of its own."""
    for path in mounts:
        path.mkdir(parents=True, exist_ok=True)
    script = "".join(f"mount -t tmpfs -o size={size} tmpfs '{path}' && " for path, size in mounts.items())
    return in_mount_namespace(script + '"$@"', *command, env=env, timeout=60)


def test_help_prints_the_comment_block() -> None:
    lines = SCRIPT.read_text().splitlines()[1:]
    block = [re.sub(r"^# ?", "", x) for x in lines[: next(i for i, x in enumerate(lines) if not x.startswith("#"))]]
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.splitlines() == block, proc.stdout
    proc = subprocess.run(["bash", str(SCRIPT), "extra"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "got 'extra'" in proc.stderr, proc.stderr


def test_a_small_temporary_directory_is_named(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    proc = _in_mounts({tmp: "64m"}, ["bash", str(SCRIPT)], _env(TMPDIR=str(tmp)))
    assert proc.returncode == 2, proc.stderr
    assert f"0.1 GiB free on {tmp} (the temporary directory {tmp})" in proc.stderr, proc.stderr
    assert "needs about 1.0 GiB there" in proc.stderr and "set TMPDIR" in proc.stderr, proc.stderr
    # The same mount with room passes (a tmpfs size is a limit, not memory taken).
    proc = _in_mounts({tmp: "2g"}, ["bash", str(SCRIPT)], _env(TMPDIR=str(tmp)))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_clone_without_its_venv_needs_more_than_one_with_it(tmp_path: Path) -> None:
    clone, tmp = tmp_path / "clone", tmp_path / "tmp"
    copy = clone / "scripts" / "free_space.sh"  # made inside the mount, which hides what lay there before
    command = ["bash", "-c", f"mkdir {copy.parent} && cp {SCRIPT} {copy} && bash {copy}"]
    proc = _in_mounts({clone: "1g", tmp: "2g"}, command, _env(TMPDIR=str(tmp)))
    assert proc.returncode == 2, proc.stderr
    assert f"GiB free on {clone} (the repository {clone}); the test suite needs about 3.0 GiB" in proc.stderr
    venv = f"mkdir -p {clone}/.venv/bin && cp {shutil.which('true')} {clone}/.venv/bin/python && "
    proc = _in_mounts({clone: "1g", tmp: "2g"}, ["bash", "-c", venv + command[2]], _env(TMPDIR=str(tmp)))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_one_filesystem_adds_both_needs_and_the_override_is_checked() -> None:
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env=_env(MLAPERF_NEED_GIB="1000000"))  # fmt: skip
    assert proc.returncode == 2 and "needs about 1000000.0 GiB" in proc.stderr, proc.stderr
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env=_env(MLAPERF_NEED_GIB="5G"))  # fmt: skip
    assert proc.returncode == 2 and "MLAPERF_NEED_GIB must be a whole number" in proc.stderr, proc.stderr
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env=_env(MLAPERF_NEED_GIB="0"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_the_test_command_stops_before_installing_anything() -> None:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh")], capture_output=True, text=True, timeout=60,
                          env=_env(MLAPERF_NEED_GIB="1000000"))  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.startswith("free_space: "), proc.stderr
    assert "installing" not in proc.stdout + proc.stderr, proc.stdout
