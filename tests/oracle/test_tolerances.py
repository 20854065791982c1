"""One closeness rule: ``mla_kernels.testing`` (the package's tests) carries a copy of the gate's table and
rule (``benchmarks/_gate.py``, which the commit under test cannot change); the two must never differ."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import _gate
from benchmarks.scripts import decode_errors
from mla_kernels import testing
from mla_kernels.decode import CANDIDATES

ROOT = Path(__file__).resolve().parents[2]


def test_same_table() -> None:
    for tier in ("interpreter", "gpu"):
        for tensor in ("out", "lse"):
            t = _gate.TOLERANCES[tier][tensor]
            assert testing.TOLERANCES[tier][tensor] == (t.atol, t.rtol, t.cos), (tier, tensor)
    assert set(testing.TOLERANCES) == {"interpreter", "gpu"}


def _verdict(check, *args) -> bool:  # noqa: ANN001 - a callable and its arguments
    try:
        check(*args)
    except AssertionError:
        return False
    return True


def test_same_verdicts() -> None:
    """Both rules judge a battery of perturbations of the same tensors the same way."""
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(2, 16, 64, generator=g, dtype=torch.float64) * 0.1
    ref[0, 0, :4] = torch.tensor([0.0, 1e-9, -1e-9, 5.0])
    noise = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    nan, inf = ref.clone(), ref.clone()
    nan[1, 1, 1] = float("nan")
    inf[1, 1, 1] = float("inf")
    candidates = [ref + s * noise for s in (0.0, 1e-9, 1e-8, 1e-6, 1e-4, 1e-3)]
    candidates += [ref * (1 + r) for r in (1 / 256, 1 / 64, 1 / 32, 1e-3)] + [nan, inf]
    pairs = [(actual, ref) for actual in candidates] + [(ref, nan)]  # (actual, expected); NaN expected fails too
    grid = itertools.product((1e-8, 1e-6, 8e-4), (4e-7, 2 / 128), (1e-12, 5e-6, 1.0))
    tols = [_gate.Tol(a, r, c) for a, r, c in grid]
    verdicts = set()
    for (actual, expected), tol in itertools.product(pairs, tols):
        gate = _verdict(_gate.assert_close, "x", actual, expected, tol)
        package = _verdict(testing.assert_close, "x", actual, expected, tol.atol, tol.rtol, tol.cos)
        assert gate == package, (tol, float((actual - expected).abs().nan_to_num().max()))
        verdicts.add(gate)
    assert verdicts == {True, False}  # the battery holds passes and failures


@pytest.mark.parametrize("tier", ["interpreter", "gpu"])
def test_tier_names(tier: str) -> None:
    dev = torch.device("cuda" if tier == "gpu" else "cpu")
    assert testing.tolerance_tier(dev) == tier


def test_the_measuring_script_enumerates_its_cases_and_configs() -> None:
    """``decode_errors`` (the measurements behind the table) still builds every case and run: nothing runs."""
    res = subprocess.run([sys.executable, "-m", "benchmarks.scripts.decode_errors", "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert res.returncode == 0 and "usage: python -m benchmarks.scripts.decode_errors" in res.stdout
    for tier in ("interpreter", "gpu"):
        cases = list(decode_errors._cases(tier, quick=False))
        assert len({name for name, _, _ in cases}) == len(cases) and all(callable(b) for _, b, _ in cases)
        pinned = [runs[0][0] for _, _, runs in cases if runs is not None]
        assert len(pinned) == len(testing.PINNED_MMA_CONFIGS), pinned  # the kernel tests' pinned configs
    assert [label for label, _ in decode_errors._runs("interpreter")] == ["simt", "mma", "mma sm_90", "mma sm_120"]
    # every fused candidate with 1 and 3 splits, every two-pass candidate once
    fused = sum(1 for cfg in CANDIDATES if not cfg.block_d)
    assert len(decode_errors._config_runs(64)) == 2 * fused + (len(CANDIDATES) - fused)
