"""One closeness rule: ``mla_kernels.testing`` (the package's tests) carries a copy of the gate's table and
rule (``benchmarks/_gate.py``, which the commit under test cannot change); the two must never differ."""

from __future__ import annotations

import itertools

import pytest
import torch

from benchmarks import _gate
from mla_kernels import testing


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
