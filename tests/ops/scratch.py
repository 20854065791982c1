"""Helpers of the service tests (a module name of its own: `from conftest import` is ambiguous across folders).

A scratch git repository with its own tiny asv suite, for driving the service's steps in seconds:
``pkg/work.py`` holds the code under test (a loop whose size a commit can change, a result a commit can
break); ``benchmarks/bench_work.py`` times it and, like the real suites, checks the result first, so a
wrong result is a failed benchmark (asv records null), not a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MLAPERF = Path(sys.executable).with_name("mlaperf")


# --- processes and servers (the signal and demo tests) ---------------------------------------------


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (Linux /proc; none once it has exited)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def serving(url: str) -> bool:
    """Whether a Streamlit server answers its health check at ``url``."""
    try:
        return urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200
    except OSError:
        return False


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@dataclass
class FakeGitHub:
    """Where the fake GitHub API of tests/ops/fake_github.py listens, and the file holding its issues."""

    url: str
    state_file: Path

    def env(self) -> dict[str, str]:
        return {"GITHUB_API_URL": self.url, "GITHUB_REPOSITORY": "acme/kernels", "GITHUB_TOKEN": "test-token",
                "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "42"}  # fmt: skip

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text()) if self.state_file.exists() else {"issues": {}, "comments": []}

ASV_CONF = {
    "version": 1,
    "project": "scratch",
    "repo": ".",
    "branches": ["main"],
    "environment_type": "existing",
    "benchmark_dir": "benchmarks",
    "results_dir": ".asv/results",
    "env_dir": ".asv/env",
    "html_dir": ".asv/html",
}

BENCH = '''
from pkg import work


class Work:
    params = [[1, 2]]
    param_names = ["scale"]
    number = 1
    repeat = 12
    rounds = 1
    warmup_time = 0.0
    min_run_count = 2
    version = "work-1"

    def setup(self, scale):
        n = work.SIZE * scale
        if work.work(n) != sum(i * i for i in range(n)):
            raise ValueError("work() is wrong")  # the correctness gate: a wrong result is a failure

    def time_work(self, scale):
        work.work(work.SIZE * scale)
'''

WORK = '''SIZE = {size}


def work(n):
    return sum(i * i for i in range(n)){bug}
'''


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Scratch:
    path: Path

    def commit(self, message: str, *, size: int = 20000, broken: bool = False) -> str:
        """Commit pkg/work.py with loop ``size``; ``broken`` makes work() return a wrong value."""
        work = self.path / "pkg" / "work.py"
        work.write_text(WORK.format(size=size, bug=" + 1" if broken else ""))
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.path, "rev-parse", "HEAD")


def make_scratch(path: Path) -> Scratch:
    path.mkdir(parents=True)
    (path / "asv.conf.json").write_text(json.dumps(ASV_CONF, indent=2))
    (path / ".gitignore").write_text(".asv/\n__pycache__/\nartifacts/\n")
    (path / "benchmarks").mkdir()
    (path / "benchmarks" / "__init__.py").write_text("")
    (path / "benchmarks" / "bench_work.py").write_text(BENCH)
    (path / "pkg").mkdir()
    (path / "pkg" / "__init__.py").write_text("")
    git(path, "init", "-q", "-b", "main")
    return Scratch(path)
