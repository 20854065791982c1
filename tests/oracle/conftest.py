"""Tests of the float64 decode oracle (``benchmarks/_oracle.py``) and of everything judged by it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # ``benchmarks`` is not installed
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU-marked tests of this folder skip without CUDA."""
    if torch.cuda.is_available():
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") and here in Path(str(item.fspath)).parents:
            item.add_marker(skip)
