"""Tests of the float64 decode oracle (``benchmarks/_oracle.py``) and of everything judged by it.
Kernels run on the GPU when CUDA is present, else on the CPU under the Triton interpreter."""

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
