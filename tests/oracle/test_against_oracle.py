"""The package's reference against the oracle, and every kernel against both (the gate's rule and table).

CPU: the Triton interpreter on small shapes; GPU (marker ``gpu``): the production shapes of the suites.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import mla_kernels as mk
from benchmarks import _gate, _oracle
from mla_kernels.testing import DecodeCase, large_magnitudes_case, padded_spread_case, random_kv

Case = DecodeCase


def _inputs(b: int, h: int, topk: int, tokens: int, seed: int, **kw: Any) -> Callable[[torch.device], Case]:
    def build(dev: torch.device) -> Case:
        inp = mk.make_decode_inputs(b, h, topk, num_tokens=tokens, device=dev, seed=seed, **kw)
        return inp.q, inp.kv_cache, inp.indices, None

    return build


def _edge_rows(dev: torch.device) -> Case:
    inp = mk.make_decode_inputs(4, 16, 48, num_tokens=512, device=dev, seed=7)
    idx = inp.indices.clone()
    idx[0, :32] = -1  # whole leading tiles invalid
    idx[1, :] = -1  # no valid slot
    idx[2, 10:20] = idx[2, 0]  # duplicates count twice
    idx[2, 40] = 512 * 10  # past the cache: invalid
    idx[3, 1:] = -1  # a single valid slot
    return inp.q, inp.kv_cache, idx, None


CASES: dict[str, Callable[[torch.device], Case]] = {
    "ragged": _inputs(2, 16, 40, 700, 40, invalid_frac=0.1),
    "edge rows": _edge_rows,
    "padded stride, spread scales, sm_scale 0.02": padded_spread_case,
    "large magnitudes": large_magnitudes_case,
    "tiny scores": _inputs(1, 16, 64, 300, 5, q_scale=1e-3),
    "peaky softmax": _inputs(1, 16, 64, 300, 5, q_scale=400.0),
    "topk 1": _inputs(3, 16, 1, 768, 3),
    "H 128": _inputs(1, 128, 33, 512, 4, invalid_frac=0.3),
}


# label -> sparse_mla_decode keyword arguments: every kernel, MMA under each non-native profile too.
KERNEL_RUNS: dict[str, dict[str, Any]] = {
    "simt": {"impl": "simt"},
    "mma": {"impl": "mma"},
    **{f"mma {p}": {"impl": "mma", "arch_profile": p} for p in mk.ARCH_PROFILES if p != "native"},
}


@pytest.mark.parametrize("case", list(CASES))
def test_reference_matches_the_oracle(device: torch.device, case: str) -> None:
    q, cache, idx, sm_scale = CASES[case](device)
    out, lse = mk.sparse_mla_decode(q, cache, idx, sm_scale, impl="reference")
    want = _oracle.decode(q, cache, idx, sm_scale)
    tol = _gate.TOLERANCES["reference"]
    _gate.assert_close("reference out", out, want[0], tol["out"])
    _gate.assert_close("reference lse", lse, want[1], tol["lse"])


def test_oracle_dequantizes_like_the_package(device: torch.device) -> None:
    cache = mk.quantize_kv_cache(random_kv(512, device=device, seed=3, spread=3.0))
    slots = torch.arange(512, device=device)
    assert torch.equal(_oracle.token_values(cache, slots), mk.dequantize_kv_cache(cache).double())


@pytest.mark.parametrize("case", ["ragged", "edge rows", "padded stride, spread scales, sm_scale 0.02"])
@pytest.mark.parametrize("run", list(KERNEL_RUNS))
def test_kernels_match_reference_and_oracle(device: torch.device, case: str, run: str) -> None:
    q, cache, idx, sm_scale = CASES[case](device)
    kwargs = KERNEL_RUNS[run]
    out, lse, record = mk.sparse_mla_decode_with_record(q, cache, idx, sm_scale, **kwargs)
    _gate.check_launch(record.as_dict(), "decode", kwargs["impl"], arch_profile=kwargs.get("arch_profile"))
    reference = mk.sparse_mla_decode(q, cache, idx, sm_scale, impl="reference")
    _gate.check_decode(out, lse, reference, _oracle.decode(q, cache, idx, sm_scale), interpreter=device.type != "cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("topk", [128, 512, 2048])
@pytest.mark.parametrize("batch", [1, 7, 32, 128])
@pytest.mark.parametrize("run", list(KERNEL_RUNS))
def test_gpu_production_shapes_against_both(run: str, batch: int, topk: int) -> None:
    if run == "simt" and batch * topk > 32 * 2048:
        pytest.skip("SIMT at this size only costs time; covered by smaller batches")
    inp = mk.make_decode_inputs(
        batch, 64, topk, num_tokens=max(batch * 4096, 65536), device="cuda", seed=batch + topk, invalid_frac=0.05
    )  # fmt: skip (the measured cases)
    kwargs = KERNEL_RUNS[run]
    out, lse = mk.sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, **kwargs)
    reference = mk.sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    _gate.check_decode(out, lse, reference, _oracle.decode(inp.q, inp.kv_cache, inp.indices), interpreter=False)
