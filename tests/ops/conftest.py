"""Fixtures of the service tests: a fake GitHub API (a real server process on 127.0.0.1)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from scratch import FakeGitHub

HERE = Path(__file__).parent


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
