"""The service loop, end to end: nights of the nightly workflow and a pull request, on the CPU; and a hostile
pull request on a reused runner, whose plants later pull-request and nightly jobs never run.

The same scripts the workflows call (scripts/nightly.sh, scripts/pr.sh) run over a scratch git repository
with a tiny asv suite. The store is a SQLite file outside the workspace, and the workspace is cleaned with
`git clean -ffdx` before every night, as actions/checkout does: whatever "already measured" means must
come from the store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
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
    planned = [p["sha"] for p in service.night(budget=3)]
    # Not yet suspect (three differences of CPU timings on a shared machine may not show the step), it can be
    # found once round 1 adds c1's run, and round 2 confirms it then.
    assert planned == [c5, c1] if suspect else planned in ([c1], [c1, c5])
    assert service.runs([c1, c5]) == {c1: 1, c5: 2 if c5 in planned else 1}

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


# --- a hostile pull request on a runner that is reused ----------------------------------------------

PLANT = """

def _plant():
    \"\"\"The hostile part: leave code that later jobs on this runner would run.\"\"\"
    import os, pathlib, shutil, subprocess, sys
    site = ".local/lib/python%d.%d/site-packages" % sys.version_info[:2]
    for home in (@HOME@, os.path.expanduser("~")):  # the runner user's real home, and whatever HOME says
        (pathlib.Path(home) / site).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(home) / site / "zz_evil.pth").write_text(
            "import os; open(" + repr(@MARKERS@ + "/pth") + ", 'a').write('pth' + chr(10))" + chr(10))
        cache = pathlib.Path(home) / ".triton" / "cache" / "0123abcd"
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copy(@SO@, cache / "__triton_launcher.so")
    git_dir = pathlib.Path(@WORKSPACE@) / ".git"
    for hook in ("post-checkout", "pre-commit"):
        (git_dir / "hooks" / hook).write_text("#!/bin/sh" + chr(10) + "echo hook >> " + @MARKERS@ + "/hook" + chr(10))
        (git_dir / "hooks" / hook).chmod(0o755)
    monitor = pathlib.Path(@HOME@) / ".fsmonitor"
    monitor.write_text("#!/bin/sh" + chr(10) + "echo x >> " + @MARKERS@ + "/fsmonitor" + chr(10))
    monitor.chmod(0o755)
    subprocess.run(["git", "config", "--file", str(git_dir / "config"), "core.fsmonitor", str(monitor)], check=True)
"""
# What Triton does when a launcher's cache key matches: load the cached .so from its cache directory.
PROBE = ("import ctypes, glob, os\nfrom triton import knobs\n"
         "for so in glob.glob(os.path.join(knobs.cache.dir, '**', '*.so'), recursive=True):\n    ctypes.CDLL(so)\n")
SO_SOURCE = '#include <stdio.h>\n__attribute__((constructor)) static void run(void) {\n' \
            '  FILE *f = fopen(MARKER, "a"); if (f) { fputs("so\\n", f); fclose(f); }\n}\n'  # fmt: skip


def forget_step(workflow: str, job: str) -> str:
    """The `run` of the first step of a self-hosted job, as the workflow on the default branch has it."""
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())
    step = wf["jobs"][job]["steps"][0]
    assert step["name"] == "Forget earlier jobs (before any checkout)"
    return str(step["run"])


class Runner:
    """A self-hosted runner as GitHub drives it: one user (its home), `_work/_temp` (RUNNER_TEMP, emptied
    after every job) and one workspace that jobs reuse; a job is its steps run as subprocesses."""

    def __init__(self, tmp: Path, origin: Path, python: Path) -> None:
        self.home, self.temp, self.workspace = tmp / "runner-home", tmp / "_work" / "_temp", tmp / "_work" / "ws"
        for d in (self.home, self.temp, self.workspace):
            d.mkdir(parents=True)
        self.origin, self.python, self.mlaperf = origin, python, tmp / "bin" / "mlaperf"
        self.mlaperf.parent.mkdir()
        self.mlaperf.write_text(f'#!/bin/sh\nexec "{python}" -m mlaperf.cli "$@"\n')
        self.mlaperf.chmod(0o755)
        self.base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MLAPERF", "GITHUB", "GIT_"))}
        self.base.update(HOME=str(self.home), MLAPERF=str(self.mlaperf), MLAPERF_RUN_TIER="cpu", MLAPERF_MACHINE="ci")

    def start(self, role: str, run_id: int, *, forget: bool = True) -> tuple[int, str, dict[str, str]]:
        """A job's first step (GitHub's shell: bash -eo pipefail); returns its status, log and the job's env."""
        shutil.rmtree(self.temp)
        self.temp.mkdir()
        env = {**self.base, "RUNNER_TEMP": str(self.temp), "GITHUB_WORKSPACE": str(self.workspace),
               "RUNNER_WORKSPACE": str(self.temp.parent / "repo"),  # _work/<repo>: the marker's second home, _work
               "GITHUB_ENV": str(self.temp / "github_env"), "GITHUB_RUN_ID": str(run_id), "MLAPERF_JOB_ROLE": role}
        if not forget:
            return 0, "", env
        workflow, job = ("pr-benchmarks.yml", "benchmark") if role == "pr" else ("nightly.yml", "measure1")
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", forget_step(workflow, job)],
                              cwd=self.workspace, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        github_env = self.temp / "github_env"
        if github_env.exists():
            env.update(line.split("=", 1) for line in github_env.read_text().splitlines() if "=" in line)
        return proc.returncode, proc.stdout + proc.stderr, env

    def step(self, env: dict[str, str], *cmd: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(cmd), cwd=self.workspace, env=env, capture_output=True, text=True, timeout=600)

    def checkout(self, env: dict[str, str], sha: str) -> None:
        """What actions/checkout does: init, fetch, force-checkout (in the workspace as the job left it)."""
        fetch = ["git", "fetch", "-q", str(self.origin), "+refs/heads/*:refs/remotes/origin/*"]
        for cmd in (["git", "init", "-q"], fetch, ["git", "checkout", "-q", "--force", "-B", "main", "origin/main"],
                    ["git", "checkout", "-q", "--force", "--detach", sha], ["git", "status", "--short"]):  # fmt: skip
            proc = self.step(env, *cmd)
            assert proc.returncode == 0, proc.stderr

    def probe(self, env: dict[str, str]) -> None:
        proc = self.step(env, str(self.python), "-c", PROBE)
        assert proc.returncode == 0, proc.stderr


def runner_python(tmp: Path) -> Path:
    """A venv like scripts/setup.sh makes on a GPU runner (--system-site-packages: the user site is on),
    seeing this checkout's installed packages."""
    venv = tmp / "runner-venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)  # fmt: skip
    site = next(venv.glob("lib/python3*/site-packages"))
    ours = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
    (site / "_mlaperf_deps.pth").write_text(f"import site; site.addsitedir({str(ours)!r})\n")
    return venv / "bin" / "python"


@pytest.mark.slow
def test_a_container_jobs_marker_outlives_its_emptied_home(tmp_path: Path) -> None:
    """In a container job the runner gives the job a home it empties after every job, so the marker there never
    reached the next job; the work folder is the host's, mounted, and holds the marker too (security review). A
    nightly after the pull-request job on the same unreset host stops at its first step."""
    runner = Runner(tmp_path, tmp_path, Path(sys.executable))
    rc, log, _ = runner.start("pr", 201)
    assert rc == 0, log
    shutil.rmtree(runner.home)  # what the runner does to a container job's home
    runner.home.mkdir()
    for role in ("nightly", "pr"):
        rc, log, _ = runner.start(role, 202)
        assert rc == 1 and "run 201" in log and "was not reset" in log, log


def test_a_hostile_pull_request_leaves_nothing_that_later_jobs_run(tmp_path: Path) -> None:
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler for the planted Triton-cache .so")
    markers = tmp_path / "markers"
    markers.mkdir()
    so = tmp_path / "evil.so"
    (tmp_path / "evil.c").write_text(SO_SOURCE)
    subprocess.run([cc, "-shared", "-fPIC", f'-DMARKER="{markers}/so"', "-o", str(so), str(tmp_path / "evil.c")],
                   check=True, timeout=120)  # fmt: skip
    origin = make_scratch(tmp_path / "origin")
    c1, c2 = origin.commit("c1"), origin.commit("c2")
    runner = Runner(tmp_path, origin.path, runner_python(tmp_path))
    git(origin.path, "checkout", "-q", "-b", "hostile")
    bench = origin.path / "benchmarks" / "bench_work.py"
    plant = PLANT
    for key, value in (("HOME", runner.home), ("MARKERS", markers), ("SO", so), ("WORKSPACE", runner.workspace)):
        plant = plant.replace(f"@{key}@", repr(str(value)))
    bench.write_text(bench.read_text().replace("    def setup(self, scale):\n", "    def setup(self, scale):\n"
                                               "        _plant()\n") + plant)  # fmt: skip
    hostile = origin.commit("hostile: plants a .pth, a Triton-cache .so and git hooks")
    git(origin.path, "checkout", "-q", "main")

    def fired() -> set[str]:
        return {p.name for p in markers.iterdir()}

    def clear() -> None:
        for p in markers.iterdir():
            p.unlink()

    # 1. The hostile pull request's job: its code runs (that is what a PR job is for) and plants.
    rc, log, env = runner.start("pr", 101)
    assert rc == 0, log
    runner.checkout(env, hostile)
    proc = runner.step(env, "bash", str(ROOT / "scripts" / "pr.sh"), c2, hostile)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    evil_pth = next(runner.home.glob(".local/lib/python3*/site-packages/zz_evil.pth"), None)
    assert evil_pth is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert evil_pth.exists() and (runner.home / ".triton" / "cache" / "0123abcd" / "__triton_launcher.so").exists()
    assert (runner.workspace / ".git" / "hooks" / "post-checkout").exists()
    clear()

    # Control: a job as the runner ran them before (no first step): every plant runs.
    _, _, env = runner.start("pr", 102, forget=False)
    runner.checkout(env, c2)
    runner.probe(env)
    assert fired() == {"pth", "so", "hook", "fsmonitor"}, "the plants work: a test that can fail"
    clear()

    # 2. The same runner, not reset: the next PR job and the nightly stop at their first step.
    for role in ("pr", "nightly"):
        rc, log, _ = runner.start(role, 103)
        assert rc == 1 and "already ran as" in log and "was not reset" in log, log
    assert fired() == set()

    # 3. A reset that removed only the marker: later jobs run, in the same workspace, and run none of it.
    for home in (runner.home, runner.temp.parent):  # the user's home and the work folder
        (home / ".mlaperf-pr-job").unlink()
    store = tmp_path / "store" / "mlaperf.sqlite"
    store.parent.mkdir()
    rc, log, env = runner.start("nightly", 104)
    assert rc == 0, log
    assert not (runner.workspace / ".git").exists(), "the workspace (hooks, config) is emptied before checkout"
    runner.checkout(env, c2)
    runner.probe(env)
    env = {**env, "MLAPERF_DB": f"sqlite:///{store}", "MLAPERF_NIGHT_BUDGET": "1"}
    for step in ("detect", "plan 1", "measure 1", "record 1"):
        proc = runner.step(env, "bash", str(ROOT / "scripts" / "nightly.sh"), *step.split())
        assert proc.returncode == 0, f"{step}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    assert fired() == set(), "the nightly ran something the pull request planted"

    rc, log, env = runner.start("pr", 105)
    assert rc == 0, log
    runner.checkout(env, c2)
    runner.probe(env)
    proc = runner.step(env, "bash", str(ROOT / "scripts" / "pr.sh"), c1, c2)
    assert proc.returncode in (0, 1) and "pr: exit" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert fired() == set(), "a later pull request's job ran something the hostile one planted"
    assert evil_pth.exists(), "the plants are still there: the job's settings, not a cleanup, kept them from running"
    assert env["HOME"].startswith(str(runner.temp)) and env["PYTHONNOUSERSITE"] == "1"
    assert env["TRITON_CACHE_DIR"].startswith(str(runner.temp))
