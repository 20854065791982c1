"""A command on a runner whose disk is full: `mlaperf nightly plan` writing its plan and state on a filled tmpfs (in a
mount namespace of its own) exits 2 with one line that says so, not 3 (an internal error: a bug of mlaperf's). The
store's side of a full disk is in tests/db/test_store_faults.py."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from scratch import MLAPERF, make_scratch

from tests.db.test_readonly import need_mount_namespace


def test_a_full_disk_is_an_error_of_the_machine_not_of_mlaperf(tmp_path: Path) -> None:
    need_mount_namespace()
    scratch = make_scratch(tmp_path / "workspace")
    head = scratch.commit("c1")
    disk = tmp_path / "disk"
    disk.mkdir()
    before = {"budget": 5, "planned": [], "cache": {}}
    (tmp_path / "state.json").write_text(json.dumps(before, indent=2) + "\n")
    state, out = disk / "state.json", disk / "plan.txt"
    plan = [str(MLAPERF), "nightly", "plan", "--state", str(state), "--out", str(out), "--round", "1",
            "--machine", "ci", "--tier", "cpu"]  # fmt: skip
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} && cp {tmp_path / 'state.json'} {state} && "
              f"(cat /dev/zero > {disk / 'filler'} 2>/dev/null; true) && {shlex.join(plan)}; rc=$?; "
              f"cp {state} {tmp_path / 'after.json'}; exit $rc")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("MLAPERF_DB", "PYTHONPATH")}
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                          cwd=scratch.path, env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == [
        "mlaperf: error: No space left on device (make room on that disk, or write elsewhere, and run it again)"
    ], proc.stderr
    # The state is rewritten in place in the page it had, so it is whole; the plan file needed a page of its own.
    assert json.loads((tmp_path / "after.json").read_text())["planned"][0]["sha"] == head
