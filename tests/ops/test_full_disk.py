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

from scratch import MLAPERF, make_scratch

from tests.db.test_readonly import in_mount_namespace


def _in_workspace(script: str, workspace: Path, home: Path) -> subprocess.CompletedProcess:
    """``script`` in a mount namespace of its own, from ``workspace``, with no store and no PYTHONPATH of ours."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLAPERF_DB", "PYTHONPATH")}
    return in_mount_namespace(script, cwd=workspace, env={**env, "HOME": str(home)})


def test_a_full_disk_is_an_error_of_the_machine_not_of_mlaperf(tmp_path: Path) -> None:
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
    proc = _in_workspace(script, scratch.path, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == [
        "mlaperf: error: No space left on device (make room on that disk, or write elsewhere, and run it again)"
    ], proc.stderr
    # The state is rewritten in place in the page it had, so it is whole; the plan file needed a page of its own.
    assert json.loads((tmp_path / "after.json").read_text())["planned"][0]["sha"] == head


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
