"""Commands on a runner whose disk is full (a filled tmpfs in a mount namespace of its own): `mlaperf nightly plan`
exits 2 with one line that says so, not 3 (an internal error: a bug of mlaperf's), and `mlaperf run` stops on a full
results folder instead of calling each commit a failed benchmark. The store's side of a full disk is in
tests/db/test_store_faults.py, the static site's in tests/dashboard/test_publish.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from scratch import MLAPERF, make_scratch

from tests.db.test_readonly import in_mount_namespace


def _in_workspace(script: str, workspace: Path, home: Path) -> subprocess.CompletedProcess:
    """``script`` in a mount namespace of its own, from ``workspace``, with no store and no PYTHONPATH of ours."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLAPERF_DB", "PYTHONPATH")}
    return in_mount_namespace(script, cwd=workspace, env={**env, "HOME": str(home)})


def test_a_full_disk_is_an_error_of_the_machine_not_of_mlaperf(tmp_path: Path) -> None:
    scratch = make_scratch(tmp_path / "workspace")
    scratch.commit("c1")
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
    proc = _in_workspace(script, scratch.path, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == [
        "mlaperf: error: No space left on device (make room on that disk, or write elsewhere, and run it again)"
    ], proc.stderr
    # The plan file is written first and needed a page of its own: the state is left as it was, so the round is
    # planned again once there is room, not skipped as planned.
    assert json.loads((tmp_path / "after.json").read_text()) == before


def _page_of_state() -> str:
    """A state file that fills most of one 4 KiB page (a long suite-version cache), so adding a planned commit
    needs a second page: its rewrite on a full disk fails half-written."""
    state = {"budget": 5, "planned": [], "cache": {"versions": ""}}
    size = len(json.dumps(state, indent=2)) + 1
    state["cache"]["versions"] = "v" * (4000 - size)
    return json.dumps(state, indent=2) + "\n"


@pytest.mark.parametrize("state_before", ["", _page_of_state()], ids=["no-state-yet", "state-of-a-page"])
def test_a_plan_whose_state_cannot_be_written_is_not_left_behind(tmp_path: Path, state_before: str) -> None:
    """The other order of failure: the plan file (last night's, rewritten in the page it has) fits and the state
    does not. Before, the plan stayed with no state counting its commits, beside a half-written state where there was
    one; now the plan is removed and the state is as it was. A run after making room writes both."""
    scratch = make_scratch(tmp_path / "workspace")
    head = scratch.commit("c1")
    disk = tmp_path / "disk"
    disk.mkdir()
    state, out = disk / "state.json", disk / "plan.txt"
    saved = tmp_path / "state-before.json"
    saved.write_text(state_before)
    keep = f"cp {saved} {state} && " if state_before else ""
    plan = [str(MLAPERF), "nightly", "plan", "--state", str(state), "--out", str(out), "--round", "1",
            "--machine", "ci", "--tier", "cpu"]  # fmt: skip
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} && echo 0000000000 > {out} && {keep}"
              f"(cat /dev/zero > {disk / 'filler'} 2>/dev/null; true) && {shlex.join(plan)}; "
              f"echo $? > {tmp_path / 'rc1'}; ls {disk} > {tmp_path / 'ls1'}; cp {state} {tmp_path / 'failed.json'}; "
              f"rm {disk / 'filler'} && {shlex.join(plan)}; rc=$?; cp {state} {out} {tmp_path}/; exit $rc")  # fmt: skip
    proc = _in_workspace(script, scratch.path, tmp_path)
    assert (tmp_path / "rc1").read_text().strip() == "2", proc.stderr
    # Neither the plan nor a half-written state: the state that was there, byte for byte, or none.
    assert (tmp_path / "ls1").read_text().split() == ["filler", *(["state.json"] if state_before else [])]
    if state_before:
        assert (tmp_path / "failed.json").read_text() == state_before
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert (tmp_path / "plan.txt").read_text() == f"{head}\n"
    assert [p["sha"] for p in json.loads((tmp_path / "state.json").read_text())["planned"]] == [head]


FILL_BENCH = '''
class Fill:
    """Fills the results folder's filesystem while it runs, as a runner's disk fills during a night."""

    number = 1
    repeat = 1
    rounds = 1
    warmup_time = 0.0

    def setup(self):
        import subprocess

        subprocess.run("cat /dev/zero > {filler}", shell=True, stderr=subprocess.DEVNULL)  # cat stops when full

    def time_fill(self):
        pass
'''


def test_run_stops_on_a_full_results_disk_instead_of_failing_every_commit(tmp_path: Path) -> None:
    """`mlaperf run` whose results folder fills while asv runs: asv leaves an empty results file. Before, the run said
    "some benchmarks failed" (exit 1) and every later run skipped the commit as measured. Now: exit 2 with one line
    naming the folder and the commit, the empty file removed, and a run on the still-full disk stops before asv."""
    scratch = make_scratch(tmp_path / "workspace")
    results = scratch.path / ".asv" / "results"
    results.mkdir(parents=True)
    bench = scratch.path / "benchmarks" / "bench_fill.py"
    bench.write_text(FILL_BENCH.format(filler=str(results / "filler")))
    head = scratch.commit("c1")
    run = [str(MLAPERF), "run", "--tier", "cpu", "--machine", "ci", "--bench", "Fill"]
    script = (f"mount -t tmpfs -o size=4m tmpfs {results} && {shlex.join(run)} > {tmp_path / 'out1'} "
              f"2> {tmp_path / 'err1'}; echo $? > {tmp_path / 'rc1'}; {shlex.join(run)} > {tmp_path / 'out2'} "
              f"2> {tmp_path / 'err2'}; echo $? > {tmp_path / 'rc2'}")  # fmt: skip
    proc = _in_workspace(script, scratch.path, tmp_path)
    assert proc.returncode == 0, proc.stderr
    err1 = (tmp_path / "err1").read_text().splitlines()
    assert (tmp_path / "rc1").read_text().strip() == "2", (tmp_path / "out1").read_text() + "\n".join(err1)
    assert re.fullmatch(
        rf"mlaperf: error: asv could not save the results of {head[:8]} \(removed the file it could not finish, "
        rf"{head[:8]}-existing-py\S+\.json\): 0 bytes free in the results folder {re.escape(str(results))}; make room "
        r"there and run it again \(the commits measured already are skipped\)", err1[-1]), err1[-1]
    assert (tmp_path / "rc2").read_text().strip() == "2"
    assert (tmp_path / "err2").read_text().splitlines() == [
        f"mlaperf: error: 0 bytes free in the results folder {results}; make room there and run it again (the "
        "commits measured already are skipped)"
    ]
    assert "[1/1]" not in (tmp_path / "out2").read_text(), "asv never started on the full disk"
    assert f"skip {head[:8]}" not in (tmp_path / "out2").read_text(), "the commit is still to be measured"
