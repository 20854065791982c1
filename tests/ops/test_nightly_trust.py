"""The nightly's plan trusts only the default branch: a suspect step on a commit that is not an ancestor of
HEAD is never re-measured, and listing the suite (which imports benchmark code) never sees MLAPERF_DB.
`mlaperf nightly plan` runs as a subprocess over a scratch git repository with its own asv suite."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from scratch import MLAPERF, ROOT, git, make_scratch

SPY = '''
import os as _os
_seen = _os.environ.get("MLAPERF_DB")
if _seen:
    open({path!r}, "a").write(_seen + "\\n")
'''


def plan(workspace: Path, regressions: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MLAPERF), "nightly", "plan", "--regressions", str(regressions), "--state", str(out.with_suffix(".state")),
         "--out", str(out), "--machine", "ci", "--tier", "cpu"],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_suspects_off_the_default_branch_are_not_remeasured_and_discovery_sees_no_store(tmp_path: Path) -> None:
    scratch = make_scratch(tmp_path / "workspace")
    seen = tmp_path / "seen-db.txt"
    bench = scratch.path / "benchmarks" / "bench_work.py"
    bench.write_text(SPY.format(path=str(seen)) + bench.read_text())
    c1 = scratch.commit("c1")
    c2 = scratch.commit("c2")
    git(scratch.path, "checkout", "-q", "-b", "side", c1)
    side = scratch.commit("side: a pull request's commit that reached the store")
    git(scratch.path, "checkout", "-q", "main")
    records = [{"status": "suspect", "commit": sha, "machine": "ci-cpu", "group": i, "parent": c1,
                "benchmark": "bench_work.Work.time_work", "params": {"scale": "1"}, "before": 1e-3, "after": 2e-3,
                "ratio": 2.0, "unit": "seconds", "new": True} for i, sha in enumerate((side, c2))]  # fmt: skip
    regressions = tmp_path / "regressions.json"
    regressions.write_text(json.dumps(records))

    store = f"sqlite:///{tmp_path / 'store.sqlite'}"
    env = {**os.environ, "MLAPERF_DB": store, "HOME": str(tmp_path)}
    (tmp_path / ".asv-machine.json").write_text(json.dumps({"version": 1, "ci-cpu": {
        "machine": "ci-cpu", "arch": "x86_64", "cpu": "", "num_cpu": "2", "os": "Linux", "ram": ""}}))  # fmt: skip
    env.pop("PYTHONPATH", None)
    # One stored run of machine ci-cpu: the plan then asks asv for the suite's versions (imports the suite).
    results = tmp_path / "results" / "ci-cpu"
    results.mkdir(parents=True)
    (results / "machine.json").write_text(json.dumps({"machine": "ci-cpu", "version": 1}))
    (results / f"{c1[:8]}-existing-py3.11.json").write_text(json.dumps({
        "commit_hash": c1, "env_name": "existing-py3.11", "date": 1_700_000_000_000,
        "params": {"machine": "ci-cpu", "python": "3.11"}, "python": "3.11", "requirements": {}, "env_vars": {},
        "result_columns": ["result", "params", "version"], "durations": {}, "version": 2,
        "results": {"bench_work.Work.time_work": [[1e-3, 2e-3], [["1", "2"]], "work-1"]}}))  # fmt: skip
    ingest = subprocess.run([str(MLAPERF), "ingest", str(tmp_path / "results"), "--repo", str(scratch.path)], env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    out = tmp_path / "plan.txt"
    proc = plan(scratch.path, regressions, out, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    planned = out.read_text().split()
    assert side not in planned, "a commit off the default branch is never measured by the nightly"
    assert planned[0] == c2 and "confirm suspect step" in proc.stdout
    assert "note:" not in proc.stdout, proc.stdout  # the suite was listed (its benchmark code imported)
    assert not seen.exists(), f"benchmark code saw MLAPERF_DB while the suite was listed: {seen.read_text()}"


def _result(commit: str, machine: str) -> str:
    return json.dumps({
        "commit_hash": commit, "env_name": "existing-py3.11", "date": 1_700_000_000_000,
        "params": {"machine": machine, "python": "3.11"}, "python": "3.11", "requirements": {}, "env_vars": {},
        "result_columns": ["result", "params", "version"], "durations": {}, "version": 2,
        "results": {"bench_work.Work.time_work": [[1e-3, 2e-3], [["1", "2"]], "work-1"]}})  # fmt: skip


def test_record_stores_only_the_planned_commits_of_this_machine(tmp_path: Path) -> None:
    """The measure job runs the measured commits' code, which can leave any file in results-ROUND: a file of a
    commit the night did not plan, or of another machine, is refused by name and never stored (a security review:
    two forged files were stored and raised 37 regressions, and counted as measured); the planned file is, and the
    night goes on with an error annotation (a review: one refused file skipped round 2 and the issues)."""
    from sqlalchemy import create_engine, select

    from db.models import Commit, Run

    scratch = make_scratch(tmp_path / "workspace")
    c1, c2, c3 = (scratch.commit(f"c{i}") for i in (1, 2, 3))
    night = tmp_path / "night"
    results = night / "results-1" / "ci-cpu"
    results.mkdir(parents=True)
    (night / "plan-1.txt").write_text(f"{c2}\n")
    (results / "machine.json").write_text(json.dumps({"machine": "ci-cpu", "version": 1}))
    (results / f"{c2[:8]}-planned.json").write_text(_result(c2, "ci-cpu"))
    (results / f"{c3[:8]}-forged.json").write_text(_result(c3, "ci-cpu"))  # a commit tonight did not plan
    (results / f"{c2[:8]}-elsewhere.json").write_text(_result(c2, "other"))  # another machine's series
    store = tmp_path / "store.sqlite"
    env = {**os.environ, "MLAPERF_DB": f"sqlite:///{store}", "MLAPERF": str(MLAPERF), "MLAPERF_NIGHT_DIR": str(night),
           "MLAPERF_MACHINE": "ci-cpu", "HOME": str(tmp_path)}  # fmt: skip
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "nightly.sh"), "record", "1"], cwd=scratch.path, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert f"REFUSED {results / f'{c3[:8]}-forged.json'}" in log and "is not one of the 1 expected" in log, log
    assert f"{c2[:8]}-elsewhere.json: its machine 'other' is not the expected 'ci-cpu'" in log, log
    assert "::error::nightly: round 1: the results files named REFUSED above were not stored" in log, log
    assert (night / "regressions.json").exists()  # detection ran on what was stored
    with create_engine(f"sqlite:///{store}").connect() as conn:
        stored = set(conn.scalars(select(Commit.sha).join(Run, Run.commit_id == Commit.id)))
    assert stored == {c2}, stored
    assert c1  # the first commit exists only to give the others a parent
    # The name the record step expects is the plan's, and a named tier needs no device (the store runner has none).
    for tier, name in (("gpu", "h200"), ("cpu", "h200-cpu")):
        proc = subprocess.run([str(MLAPERF), "nightly", "machine", "--machine", "h200", "--tier", tier], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert (proc.returncode, proc.stdout) == (0, f"{name}\n"), proc.stderr


def test_only_commits_names_a_bad_file_before_any_store(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.txt"
    plan_file.write_text(f"# tonight\n{'a' * 40}\n{'b' * 64}\n\nHEAD~1\n")  # SHA-1 and SHA-256 commits
    store = tmp_path / "store.sqlite"
    missing = tmp_path / "missing.txt"
    cases = [(["--only-commits", str(plan_file)], f"--only-commits {plan_file}: line 5 is not a full commit SHA"),
             (["--only-commits", str(missing)], f"--only-commits {missing}: cannot be read"),
             (["--only-machine", ""], "--only-machine is empty (an unset variable?)")]  # fmt: skip
    for given, message in cases:
        proc = subprocess.run([str(MLAPERF), "ingest", str(tmp_path), "--db", f"sqlite:///{store}", *given],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert not store.exists()
