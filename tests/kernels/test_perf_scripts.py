"""The kernel measurement scripts in ``benchmarks/scripts`` run as modules and answer --help (they need a GPU
to measure anything)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["kernel_decode_perf", "kernel_step_perf", "gather_ceiling", "indexer_perf"])
def test_scripts_run_as_modules_with_help(script: str) -> None:
    res = subprocess.run([sys.executable, "-m", f"benchmarks.scripts.{script}", "--help"], capture_output=True,
                         text=True, cwd=REPO)  # fmt: skip
    assert res.returncode == 0 and f"usage: python -m benchmarks.scripts.{script}" in res.stdout
