"""The service loop, end to end: nights of the nightly workflow and a pull request, on the CPU.

The same scripts the workflows call (scripts/nightly.sh, scripts/pr.sh) run over a scratch git repository
with a tiny asv suite. The store is a SQLite file outside the workspace, and the workspace is cleaned with
`git clean -ffdx` before every night, as actions/checkout does: whatever "already measured" means must
come from the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from scratch import MLAPERF, ROOT, Scratch, git, make_scratch
from sqlalchemy.orm import Session

from db.engine import make_engine
from mlaperf.measured import covering_runs

NIGHTLY = ["detect", "plan 1", "measure 1", "record 1", "plan 2", "measure 2", "record 2"]


class Service:
    def __init__(self, tmp: Path, scratch: Scratch) -> None:
        self.scratch = scratch
        self.store = f"sqlite:///{tmp / 'store' / 'mlaperf.sqlite'}"
        (tmp / "store").mkdir()
        (tmp / "home").mkdir()
        self.env = {**os.environ, "HOME": str(tmp / "home"), "MLAPERF": str(MLAPERF), "MLAPERF_DB": self.store,
                    "MLAPERF_RUN_TIER": "cpu", "MLAPERF_MACHINE": "ci"}  # fmt: skip
        for key in ("MLAPERF_NIGHT_DIR", "MLAPERF_PR_DIR", "GITHUB_STEP_SUMMARY", "PYTHONPATH"):
            self.env.pop(key, None)

    def step(self, script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(ROOT / "scripts" / script), *args], cwd=self.scratch.path,
                              env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=300)  # fmt: skip

    def night(self, budget: int, steps: list[str] = NIGHTLY) -> list[dict[str, str]]:
        """One night: a clean workspace, then the workflow's steps in order; returns what it planned."""
        git(self.scratch.path, "clean", "-ffdxq")
        for step in steps:
            proc = self.step("nightly.sh", *step.split(), env={"MLAPERF_NIGHT_BUDGET": str(budget)})
            assert proc.returncode == 0, f"{step}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        state = json.loads((self.scratch.path / "artifacts" / "nightly" / "state.json").read_text())
        return state["planned"]

    def runs(self, shas: list[str]) -> dict[str, int]:
        engine = make_engine(self.store, readonly=True)
        try:
            with Session(engine) as session:
                return covering_runs(session, "ci-cpu", shas, None)
        finally:
            engine.dispose()

    def regressions(self) -> list[dict[str, object]]:
        return json.loads((self.scratch.path / "artifacts" / "nightly" / "regressions.json").read_text())["regressions"]


@pytest.mark.slow
def test_nights_and_a_pull_request(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    scratch = make_scratch(tmp_path / "workspace")
    service = Service(tmp_path, scratch)
    c1, c2, c3, c4 = (scratch.commit(f"c{i}") for i in range(1, 5))

    # Night 1: four commits, budget three: the newest three, one before and two after the first record.
    planned = service.night(budget=3)
    assert [(p["sha"], p["round"]) for p in planned] == [(c4, "1"), (c3, "2"), (c2, "2")]
    assert service.runs([c1, c2, c3, c4]) == {c2: 1, c3: 1, c4: 1}

    # Night 2: one new commit (5x slower) and budget one: exactly that commit, not the older gap.
    c5 = scratch.commit("c5: slower", size=100000)
    assert [p["sha"] for p in service.night(budget=1)] == [c5]
    assert service.runs([c1, c2, c3, c4, c5]) == {c2: 1, c3: 1, c4: 1, c5: 1}
    suspect = any(r["commit"] == c5 and r["status"] == "suspect" for r in service.regressions())

    # Night 3, nothing new: a suspect step is re-measured first (a re-run ingests as a second run), then the gap.
    planned = service.night(budget=3)
    assert [p["sha"] for p in planned] == ([c5, c1] if suspect else [c1])
    assert service.runs([c1, c5]) == {c1: 1, c5: 2 if suspect else 1}

    # Night 4, nothing new and nothing suspect left to confirm: nothing is measured.
    assert service.night(budget=3, steps=["detect", "plan 1"]) == []

    # A pull request whose head is 5x slower at scale 1 and wrong at scale 2 (the correctness gate fails).
    git(scratch.path, "checkout", "-q", "-b", "topic", c4)
    (scratch.path / "pkg" / "work.py").write_text(
        "SIZE = 100000\n\n\ndef work(n):\n    return sum(i * i for i in range(n)) + (n > 100000)\n"
    )
    git(scratch.path, "commit", "-qam", "topic: slower, wrong at scale 2")
    head = git(scratch.path, "rev-parse", "HEAD")
    git(scratch.path, "clean", "-ffdxq")
    proc = service.step("pr.sh", c4, head)
    out = scratch.path / "artifacts" / "pr"
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    reports = sorted(p.name for p in out.iterdir() if p.suffix in (".md", ".json"))
    assert reports == ["report-full.md", "report.json", "report.md"]
    report = (out / "report.md").read_text()
    assert report.startswith("<!-- mlaperf-benchmark-report -->")
    rows = {row["params"]["scale"]: row for row in json.loads((out / "report.json").read_text())}
    assert rows["1"]["regression"] and rows["1"]["ratio"] > 2
    assert rows["2"]["head"] is None and "failed" in report
    print(f"service loop: {time.perf_counter() - t0:.0f} s")


def test_pr_script_reports_a_side_without_results(tmp_path: Path) -> None:
    """No comparison because a side produced no result: pr.sh writes a short report saying so, exit 1.

    A stand-in `mlaperf` (any install, no interpreter beside it): head's run fails, compare finds nothing."""
    fake = tmp_path / "bin" / "mlaperf"
    fake.parent.mkdir()
    fake.write_text('#!/usr/bin/env bash\ncase "$1" in\n  run) [[ "$2" == b* ]] && exit 1; exit 0 ;;\n'
                    '  compare) exit 2 ;;\nesac\nexit 3\n')  # fmt: skip
    fake.chmod(0o755)
    env = {**os.environ, "MLAPERF": str(fake), "MLAPERF_PR_DIR": str(tmp_path / "pr")}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "pr.sh"), "a" * 40, "b" * 40], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = (tmp_path / "pr" / "report.md").read_text()
    assert report.startswith("## mlaperf benchmarks: failed")
    assert "no result at head (`aaaaaaaaaa` .. `bbbbbbbbbb`)" in report
