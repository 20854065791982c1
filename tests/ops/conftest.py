"""Fixtures of the service tests: a fake GitHub API (a real server process on 127.0.0.1)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from scratch import FakeGitHub

HERE = Path(__file__).parent


@pytest.fixture
def github_server(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], FakeGitHub]]:
    """Starts the fake GitHub API seeded with a state (pull requests, settings...); stopped after the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(seed: dict[str, Any]) -> FakeGitHub:
        state = tmp_path / f"github-state-{len(procs)}.json"
        state.write_text(json.dumps(seed))
        proc = subprocess.Popen([sys.executable, str(HERE / "fake_github.py"), str(state)], stdout=subprocess.PIPE,
                                text=True)  # fmt: skip
        procs.append(proc)
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        return FakeGitHub(f"http://127.0.0.1:{port}", state)

    try:
        yield start
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture
def fake_github(github_server: Callable[[dict[str, Any]], FakeGitHub]) -> FakeGitHub:
    return github_server({})
