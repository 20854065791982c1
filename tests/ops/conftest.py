"""Fixtures of the service tests: a fake GitHub API (a real server process on 127.0.0.1)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
MLAPERF = Path(sys.executable).with_name("mlaperf")


@dataclass
class FakeGitHub:
    url: str
    state_file: Path

    def env(self) -> dict[str, str]:
        return {"GITHUB_API_URL": self.url, "GITHUB_REPOSITORY": "acme/kernels", "GITHUB_TOKEN": "test-token",
                "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "42"}  # fmt: skip

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text()) if self.state_file.exists() else {"issues": {}, "comments": []}


@pytest.fixture
def fake_github(tmp_path: Path) -> Iterator[FakeGitHub]:
    state = tmp_path / "github-state.json"
    proc = subprocess.Popen([sys.executable, str(HERE / "fake_github.py"), str(state)], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield FakeGitHub(f"http://127.0.0.1:{port}", state)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
