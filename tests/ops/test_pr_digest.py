"""The rendered comment reaches the pull request only as the render job wrote it. The benchmark job runs the pull
request's code and may reach ACTIONS_RUNTIME_TOKEN, so it may replace the comment's artifact (its nonce shows in
the run's artifact list); the render job hashes comment.md and status.json into its job outputs and the poster
posts no other bytes. The render job's steps and the post step run here as pr-benchmarks.yml writes them, their
`${{ }}` values taken from the jobs' outputs as GitHub passes them, against the fake GitHub API over real HTTP."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from scratch import ROOT, FakeGitHub

from mlaperf.pr_post import CHANGED, NO_RENDER
from regressions.report import MARKER
from settings.pr_contract import BOT_LOGIN, COMMENT_DIGEST_ENV, CONTEXT, FORK_CONTEXT, RENDER_JOB, STATUS_DIGEST_ENV

Server = Callable[[dict[str, Any]], FakeGitHub]
BASE, HEAD = "a" * 40, "c" * 40
API = "/repos/acme/kernels"
RENDER_LOG = "https://github.example/acme/kernels/actions/runs/42/job/9001"
OLD = {"issue": 7, "id": 1, "user": BOT_LOGIN, "body": f"{MARKER}\nthe last report\n"}
JOBS = yaml.safe_load((ROOT / ".github" / "workflows" / "pr-benchmarks.yml").read_text())["jobs"]
ROW = {"benchmark": "bench_decode.SparseDecode.time_decode", "params": {"impl": "'mma'"}, "machine": "h200",
       "unit": "seconds", "direction": "up_is_worse", "threshold": 0.05, "status": "unchanged", "base_status": "ok",
       "head_status": "ok", "base": 4.0e-5, "head": 4.02e-5, "ratio": 1.005, "slowdown": 1.005,
       "significant": False, "regression": False, "method": "mann-whitney", "p_value": 0.4}  # fmt: skip


def step_of(job: str, predicate: Callable[[dict[str, Any]], bool]) -> tuple[int, dict[str, Any]]:
    [found] = [(i, s) for i, s in enumerate(JOBS[job]["steps"]) if predicate(s)]
    return found


def RENDER_STEP(step: dict[str, Any]) -> bool:  # noqa: N802 - named as the constants they stand beside
    return "regressions.pr_render" in step.get("run", "")


def DIGEST_STEP(step: dict[str, Any]) -> bool:  # noqa: N802
    return step.get("id") == "digest"


def POST_STEP(step: dict[str, Any]) -> bool:  # noqa: N802
    return "mlaperf.pr_post" in step.get("run", "")


def resolve(values: dict[str, str], known: dict[str, str]) -> dict[str, str]:
    """A step's env (or a job's outputs) as GitHub fills them: each `${{ name }}` from ``known``."""
    return {k: re.sub(r"\$\{\{ ([\w.-]+) \}\}", lambda m: known[m.group(1)], str(v)) for k, v in values.items()}


class Run:
    """One workflow run of pr-benchmarks.yml past the gate: GitHub-hosted jobs' steps as bash subprocesses."""

    def __init__(self, tmp: Path, fork: bool = False) -> None:
        self.temp = tmp / "_temp"
        (self.temp / "pr-data").mkdir(parents=True)
        self.known = {"needs.gate.outputs.number": "7", "needs.gate.outputs.base_sha": BASE,
                      "needs.gate.outputs.head_sha": HEAD, "needs.gate.outputs.fork": str(fork).lower(),
                      "needs.benchmark.result": "success", "github.token": "test-token"}  # fmt: skip
        self.base = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB")}
        self.base.update({"RUNNER_TEMP": str(self.temp), "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
                          "GITHUB_SERVER_URL": "https://github.example", "GITHUB_REPOSITORY": "acme/kernels",
                          "GITHUB_RUN_ID": "42"})  # fmt: skip
        self.out = tmp / "github_output"

    def step(self, step: dict[str, Any], extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """A `run` step as the runner runs it (bash -e, GitHub's default shell); `python3` and the render job's
        venv are this interpreter."""
        script = str(step["run"]).replace(".venv/bin/python", shlex.quote(sys.executable))
        script = re.sub(r"^python3 ", shlex.quote(sys.executable) + " ", script)
        self.out.write_text("")
        env = {**self.base, **(extra or {}), **resolve(step.get("env", {}), self.known),
               "GITHUB_OUTPUT": str(self.out)}  # fmt: skip
        return subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip

    def render(self, report: list[dict[str, Any]] | None) -> None:
        """The render job from its render step: the digest step's outputs become the job's outputs."""
        if report is not None:
            (self.temp / "pr-data" / "report.json").write_text(json.dumps(report))
        proc = self.step(step_of("render", RENDER_STEP)[1])
        assert proc.returncode == 0, proc.stderr
        proc = self.step(step_of("render", DIGEST_STEP)[1])
        assert proc.returncode == 0, proc.stderr
        outputs = dict(line.split("=", 1) for line in self.out.read_text().splitlines())
        self.known |= {f"steps.digest.outputs.{k}": v for k, v in outputs.items()}
        self.known["steps.nonce.outputs.nonce"] = "0" * 32
        jobs_outputs = resolve(JOBS["render"]["outputs"], self.known)
        self.known |= {f"needs.render.outputs.{k}": v for k, v in jobs_outputs.items()}

    @property
    def files(self) -> tuple[Path, Path]:
        return self.temp / "pr-comment" / "comment.md", self.temp / "pr-comment" / "status.json"

    def post(self, github: FakeGitHub) -> subprocess.CompletedProcess[str]:
        """The post job's last step (its download put the artifact where render wrote it)."""
        return self.step(step_of("post", POST_STEP)[1], github.env())


def seeded(github_server: Server) -> FakeGitHub:
    listed = [{"name": "Benchmark the pull request (PR runner)", "html_url": RENDER_LOG[:-4] + "8999"},
              {"name": RENDER_JOB, "html_url": RENDER_LOG}]  # fmt: skip
    jobs = {f"{API}/actions/runs/42/jobs": {"total_count": 2, "jobs": listed}}
    return github_server({"comments": [OLD], "get": jobs})


@pytest.mark.parametrize(("fork", "report"), [(False, [ROW]), (True, [ROW]), (False, None)],
                         ids=["report", "fork", "no-report"])  # fmt: skip
def test_the_render_jobs_own_files_are_posted(tmp_path: Path, github_server: Server, fork: bool,
                                              report: list[dict[str, Any]] | None) -> None:  # fmt: skip
    run = Run(tmp_path, fork=fork)
    run.render(report)
    comment, status = run.files
    github = seeded(github_server)
    proc = run.post(github)
    assert proc.returncode == 0 and "updated comment 1" in proc.stdout, proc.stderr
    assert github.state()["comments"] == [{**OLD, "body": comment.read_text()}]
    written = json.loads(status.read_text())
    [posted] = github.state()["statuses"]
    assert (posted["state"], posted["description"], posted["context"]) == (
        written["state"], written["description"], FORK_CONTEXT if fork else CONTEXT)  # fmt: skip
    assert posted["state"] == ("success" if report else "error")


FORGED_COMMENT = f"{MARKER}\n## mlaperf benchmarks: no regression\n\nAll clear, approved by @maintainers.\n"
FORGED_STATUS = {"state": "success", "description": "no regression (1 series)", "context": CONTEXT, "marker": MARKER}


@pytest.mark.parametrize("forged", ["comment", "status", "both", "one byte"])
def test_files_that_are_not_the_render_jobs_are_not_posted(tmp_path: Path, github_server: Server,
                                                          forged: str) -> None:  # fmt: skip
    """Each file is replaced by one of the shape the poster accepts (marker, fixed state and context): only the
    digest tells it apart. The sticky comment keeps the last report and the status is the fixed error."""
    run = Run(tmp_path)
    run.render(None)  # "no report": an error status the forger would turn into success
    comment, status = run.files
    if forged in ("comment", "both"):
        comment.write_text(FORGED_COMMENT)
    if forged in ("status", "both"):
        status.write_text(json.dumps(FORGED_STATUS) + "\n")
    if forged == "one byte":
        comment.write_bytes(comment.read_bytes() + b" ")
    github = seeded(github_server)
    proc = run.post(github)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert github.state()["comments"] == [OLD], "nothing of the files is posted"
    [posted] = github.state()["statuses"]
    assert (posted["state"], posted["description"], posted["context"]) == ("error", CHANGED, CONTEXT)
    assert posted["target_url"] == RENDER_LOG, "linked as a render failure: the render job's log"
    named = {"comment": "comment.md", "status": "status.json", "both": "comment.md", "one byte": "comment.md"}
    assert f"{named[forged]}: sha256 " in proc.stderr and len(CHANGED) <= 140


@pytest.mark.parametrize(
    "digests",
    [
        ("", ""),  # the outputs of a render job that failed before hashing
        ("0" * 64, ""),
        ("not-a-digest", "0" * 64),
        None,  # no digest in the environment at all
    ],
    ids=["empty", "one-empty", "malformed", "unset"],
)
def test_files_without_the_render_jobs_digests_are_no_rendered_report(
    tmp_path: Path, github_server: Server, digests: tuple[str, str] | None
) -> None:
    """Files that may be the render job's but come with no digest to check them by: today's render failure."""
    run = Run(tmp_path)
    run.render([ROW])
    github = seeded(github_server)
    step = step_of("post", POST_STEP)[1]
    if digests is None:
        env = {k: v for k, v in step["env"].items() if k not in (COMMENT_DIGEST_ENV, STATUS_DIGEST_ENV)}
        proc = run.step({**step, "env": env}, github.env())
    else:
        run.known["needs.render.outputs.comment_sha256"], run.known["needs.render.outputs.status_sha256"] = digests
        proc = run.post(github)
    assert proc.returncode == 1 and "no digest from the render job" in proc.stderr, proc.stderr
    assert github.state()["comments"] == [OLD]
    [posted] = github.state()["statuses"]
    assert (posted["state"], posted["description"], posted["target_url"]) == ("error", NO_RENDER, RENDER_LOG)


def test_the_digest_step_fails_without_its_files(tmp_path: Path) -> None:
    """Where the render step wrote nothing (it failed), the digest step sets no output and fails: no artifact."""
    run = Run(tmp_path)
    (run.temp / "pr-comment").mkdir()
    (run.temp / "pr-comment" / "comment.md").write_text(f"{MARKER}\nx\n")
    proc = run.step(step_of("render", DIGEST_STEP)[1])
    assert proc.returncode != 0 and run.out.read_text() == ""


def test_the_digests_travel_from_the_render_step_to_the_poster() -> None:
    """Hashed right after rendering, before the upload; passed to the poster by job outputs, never by a file."""
    steps = JOBS["render"]["steps"]
    rendered, digest = step_of("render", RENDER_STEP)[0], step_of("render", DIGEST_STEP)[0]
    upload = step_of("render", lambda s: s.get("uses", "").startswith("actions/upload-artifact@"))[0]
    assert digest == rendered + 1 < upload and "if" not in steps[digest]
    assert JOBS["render"]["outputs"]["comment_sha256"] == "${{ steps.digest.outputs.comment_sha256 }}"
    assert JOBS["render"]["outputs"]["status_sha256"] == "${{ steps.digest.outputs.status_sha256 }}"
    env = step_of("post", POST_STEP)[1]["env"]
    assert env[COMMENT_DIGEST_ENV] == "${{ needs.render.outputs.comment_sha256 }}"
    assert env[STATUS_DIGEST_ENV] == "${{ needs.render.outputs.status_sha256 }}"
    header = (ROOT / ".github" / "workflows" / "pr-benchmarks.yml").read_text().split("\nname:", 1)[0]
    assert "ACTIONS_RUNTIME_TOKEN" in header and "Never add an actions/cache step" in header
