"""Sparse decode: every implementation against the fp32 reference (interpreter on CPU, GPU when present)."""

from __future__ import annotations

import math

import pytest
import torch

from mla_kernels import make_decode_inputs, quantize_kv_cache, sparse_mla_decode, sparse_mla_decode_with_record
from mla_kernels._common import interpreting
from mla_kernels.decode import CANDIDATES, MmaConfig, combine_launch, decode_with_config
from mla_kernels.testing import PINNED_MMA_CONFIGS, check_decode, pinned_mma_config, random_kv

KERNELS = ["simt", "mma"]


def _check(q, kv_cache, indices, impl, sm_scale=None, arch_profile=None):
    ref_out, ref_lse = sparse_mla_decode(q, kv_cache, indices, sm_scale, impl="reference")
    out, lse, record = sparse_mla_decode_with_record(q, kv_cache, indices, sm_scale, impl=impl,
                                                     arch_profile=arch_profile)  # fmt: skip
    assert out.shape == q.shape and out.dtype == torch.bfloat16
    assert lse.shape == q.shape[:2] and lse.dtype == torch.float32
    assert (record.op, record.impl) == ("decode", impl)  # the implementation asked for is the one that ran
    check_decode(out, lse, ref_out, ref_lse)
    plain = sparse_mla_decode(q, kv_cache, indices, sm_scale, impl=impl, arch_profile=arch_profile)
    assert isinstance(plain, tuple) and len(plain) == 2  # the public entry keeps returning (out, lse)
    return out, lse, record


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize(("batch", "heads", "topk"), [(2, 16, 40), (1, 32, 33)])
def test_matches_reference_ragged_topk(device, impl, batch, heads, topk):
    inp = make_decode_inputs(batch, heads, topk, num_tokens=700, device=device, seed=topk, invalid_frac=0.1)
    _check(inp.q, inp.kv_cache, inp.indices, impl)


@pytest.mark.parametrize("impl", KERNELS)
def test_invalid_tiles_rows_duplicates_and_out_of_range(device, impl):
    inp = make_decode_inputs(3, 16, 48, num_tokens=512, device=device, seed=7)
    idx = inp.indices.clone()
    idx[0, :32] = -1  # whole leading tiles invalid
    idx[1, :] = -1  # a row with no valid slot: out 0, lse +inf
    idx[2, 10:20] = idx[2, 0]  # duplicate slots count twice
    idx[2, 40] = 512 * 10  # beyond the cache: treated as invalid
    out, lse, _ = _check(inp.q, inp.kv_cache, idx, impl)
    assert torch.isinf(lse[1]).all() and (lse[1] > 0).all()
    assert (out[1] == 0).all()
    assert not torch.isnan(out).any()


@pytest.mark.parametrize("impl", KERNELS)
def test_padded_page_stride_and_custom_scale(device, impl):
    kv = random_kv(600, device=device, seed=11)
    big = quantize_kv_cache(kv, page_stride=149_760)
    idx = torch.randperm(600, generator=torch.Generator().manual_seed(0))[:64].view(2, 32).to(torch.int32)
    q = torch.randn(2, 16, 512, generator=torch.Generator().manual_seed(1)).bfloat16()
    _check(q.to(device), big, idx.to(device), impl, sm_scale=0.02)


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("q_scale", [1e-3, 400.0])
def test_tiny_values_and_peaky_softmax(device, impl, q_scale):
    # q_scale 400 makes scores span hundreds: softmax is one-hot-like (peaky), exp must not overflow.
    inp = make_decode_inputs(1, 16, 64, num_tokens=300, device=device, seed=5, q_scale=q_scale)
    _check(inp.q, inp.kv_cache, inp.indices, impl)


@pytest.mark.parametrize("impl", KERNELS)
def test_large_magnitudes(device, impl):
    kv = random_kv(256, device="cpu", seed=9) * 1e4
    kv[:, 448:] = kv[:, 448:].clamp(-3e4, 3e4)
    cache = quantize_kv_cache(kv).to(device)
    q = (torch.randn(1, 16, 512, generator=torch.Generator().manual_seed(2)) * 1e-4).bfloat16().to(device)
    idx = torch.arange(32, dtype=torch.int32).view(1, 32).to(device)
    ref_out, ref_lse = sparse_mla_decode(q, cache, idx, impl="reference")
    out, lse = sparse_mla_decode(q, cache, idx, impl=impl)
    # The table's out atol is for unit-scale values (FlashMLA's); out is a mix of values of ~1e4, so it is
    # compared in those units (bf16 rounding of a near-zero mix of 1e4-sized values is ~1 in absolute terms).
    check_decode(out.float() / 1e4, lse, ref_out / 1e4, ref_lse)


@pytest.mark.parametrize(("block_h", "splits", "prefetch"), PINNED_MMA_CONFIGS)
def test_mma_every_head_block_and_split(device, block_h, splits, prefetch):
    inp = make_decode_inputs(2, 64, 70, num_tokens=512, device=device, seed=block_h + splits, invalid_frac=0.2)
    ref_out, ref_lse = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    cfg = pinned_mma_config(block_h, splits, prefetch, gpu=device.type == "cuda")
    out, lse, record = decode_with_config(inp.q, inp.kv_cache, inp.indices, cfg)
    assert record.config["BLOCK_H"] == block_h and record.kernels[0].config["BLOCK_H"] == block_h
    assert record.config["NUM_SPLITS"] == record.kernels[0].grid[2] and record.kernels[0].grid[1] == 64 // block_h
    assert record.kernel == "_mma_decode_kernel" + ("+_combine_kernel" if record.config["NUM_SPLITS"] > 1 else "")
    check_decode(out, lse, ref_out, ref_lse)


@pytest.mark.parametrize(("heads", "block_h", "block_n", "block_d"),
                         [(64, 64, 16, 64), (64, 64, 32, 128), (128, 64, 16, 256), (32, 16, 16, 512)])
def test_two_pass_every_column_slice(device, heads, block_h, block_n, block_d):
    # Ragged top-k (a partial last tile), invalid slots, a row with none valid, an all-invalid tile.
    inp = make_decode_inputs(3, heads, 70, num_tokens=600, device=device, seed=block_d, invalid_frac=0.2)
    idx = inp.indices.clone()
    idx[1, :] = -1
    idx[2, :block_n] = -1
    ref_out, ref_lse = sparse_mla_decode(inp.q, inp.kv_cache, idx, impl="reference")
    warps = 8 if device.type == "cuda" else 4
    cfg = MmaConfig(block_h, block_n, warps, 1, 1, block_d=block_d, source="fixed")
    out, lse, record = decode_with_config(inp.q, inp.kv_cache, idx, cfg)
    assert record.kernel == "_scores_pass_kernel+_output_pass_kernel" and record.config["BLOCK_D"] == block_d
    check_decode(out, lse, ref_out, ref_lse)
    assert torch.isinf(lse[1]).all() and (out[1] == 0).all()


def test_combine_empty_splits_and_heads(device):
    # The LSE combine over 3 of 4 splits (one empty) and a head with no split at all (lse inf, output 0).
    gen = torch.Generator().manual_seed(0)
    batch, splits, heads = 2, 4, 16
    opart = torch.randn(batch, splits, heads, 512, generator=gen).to(device)
    lpart = (torch.randn(batch, splits, heads, generator=gen) * 4).to(device)
    lpart[:, 1] = float("-inf")
    lpart[1, :, 3] = float("-inf")
    out = torch.zeros(batch, heads, 512, dtype=torch.bfloat16, device=device)
    lse = torch.zeros(batch, heads, device=device)
    combine_launch(opart, lpart, out, lse, splits).run()
    w = torch.softmax(lpart.double() * math.log(2), dim=1).nan_to_num(0.0)  # [B, S, H]
    ref = (w[..., None] * opart.double()).sum(1)  # [B, H, 512]
    ref_lse = torch.logsumexp(lpart.double() * math.log(2), dim=1)
    ref_lse[1, 3] = float("inf")
    check_decode(out, lse, ref.to(torch.bfloat16), ref_lse.float())
    assert (out[1, 3] == 0).all()


def test_kernels_assert_the_cache_layout(monkeypatch):
    """The layout the kernels are written for is checked where they are compiled (``tl.static_assert``,
    kept under ``python -O``): a layout module that moved the scale rows stops every decode kernel."""
    import triton.language as tl

    from mla_kernels.decode import kernels

    if not interpreting():
        pytest.skip("the interpreter reads the constants at call time; compiled kernels are cached")
    inp = make_decode_inputs(1, 16, 16, num_tokens=256, device="cpu")
    monkeypatch.setattr(kernels, "SCALE_AREA", tl.constexpr(kernels.SCALE_AREA + 8))
    for impl in KERNELS:
        with pytest.raises(Exception, match="scale rows must start after its 256 data rows"):
            sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl=impl)


def test_two_pass_bad_column_slice_names_it(device):
    inp = make_decode_inputs(1, 64, 16, num_tokens=256, device=device)
    with pytest.raises(ValueError, match="BLOCK_D=96 must be a multiple of 64 that divides 512"):
        decode_with_config(inp.q, inp.kv_cache, inp.indices, MmaConfig(64, 16, 4, 1, 1, block_d=96))


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("profile", ["native", "sm_90", "sm_120"])
def test_arch_profile_is_recorded(device, impl, profile, monkeypatch):
    inp = make_decode_inputs(1, 32, 40, num_tokens=256, device=device, seed=3)
    monkeypatch.delenv("MLAPERF_ARCH_PROFILE", raising=False)
    record = _check(inp.q, inp.kv_cache, inp.indices, impl, arch_profile=profile)[2]
    assert record.arch_profile == profile
    if device.type == "cuda" and impl == "simt" and profile == "sm_120":
        assert (record.config["BLOCK_N"], record.config["num_warps"]) == (16, 4)  # the runner's spill-free tile
    monkeypatch.setenv("MLAPERF_ARCH_PROFILE", profile)  # the environment is the default
    assert sparse_mla_decode_with_record(inp.q, inp.kv_cache, inp.indices, impl=impl)[2].arch_profile == profile


def test_bad_arch_profile_names_it(device, monkeypatch):
    inp = make_decode_inputs(1, 16, 16, num_tokens=256, device=device)
    with pytest.raises(ValueError, match="arch_profile must be one of native, sm_90, sm_120"):
        sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, arch_profile="sm_100")
    monkeypatch.setenv("MLAPERF_ARCH_PROFILE", "blackwell")
    with pytest.raises(ValueError, match="MLAPERF_ARCH_PROFILE='blackwell'"):
        sparse_mla_decode(inp.q, inp.kv_cache, inp.indices)


def test_torch_baseline_is_close(device):
    inp = make_decode_inputs(2, 16, 64, num_tokens=512, device=device, seed=3)
    ref_out, ref_lse = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    out, lse = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="torch")
    # bf16 probabilities: error relative to the output's scale, not per element
    scale = ref_out.float().abs().max().item()
    torch.testing.assert_close(out.float(), ref_out.float(), atol=2e-2 * scale, rtol=2e-2)
    torch.testing.assert_close(lse, ref_lse, atol=1e-2, rtol=1e-2)  # scores come back in bf16


def test_empty_batch(device):
    inp = make_decode_inputs(1, 16, 16, num_tokens=256, device=device)
    q = inp.q[:0]
    out, lse = sparse_mla_decode(q, inp.kv_cache, inp.indices[:0], impl="mma")
    assert out.shape == (0, 16, 512) and lse.shape == (0, 16)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda a: a.update(q=a["q"].float()), "q must have dtype"),
        (lambda a: a.update(q=a["q"][:, :, :448]), "head dim"),
        (lambda a: a.update(q=a["q"][:, :8]), "multiple of 16"),
        (lambda a: a.update(indices=a["indices"].long()), "indices must have dtype"),
        (lambda a: a.update(indices=a["indices"][:1]), "batch"),
        (lambda a: a.update(kv_cache=a["kv_cache"][:, :1000]), "kv_cache"),
        (lambda a: a.update(kv_cache=a["kv_cache"].float()), "kv_cache"),
        (lambda a: a.update(impl="flash"), "impl must be one of"),
        (lambda a: a.update(sm_scale=float("nan")), "sm_scale"),
        (lambda a: a.update(q=a["q"].transpose(1, 2).contiguous().transpose(1, 2)), "contiguous"),
    ],
)
def test_bad_input_names_the_argument(device, change, match):
    inp = make_decode_inputs(2, 16, 16, num_tokens=256, device=device)
    args = {"q": inp.q, "kv_cache": inp.kv_cache, "indices": inp.indices, "sm_scale": None, "impl": "mma"}
    change(args)
    with pytest.raises(ValueError, match=match):
        sparse_mla_decode(**args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only check")
def test_cpu_tensors_need_the_interpreter(monkeypatch):
    inp = make_decode_inputs(1, 16, 16, num_tokens=256, device="cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="CUDA tensor"):
        sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="simt")


# ---- GPU: production shapes, CUDA graphs -------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("heads", [64, 128])
@pytest.mark.parametrize("topk", [128, 512, 2048])
@pytest.mark.parametrize("batch", [1, 7, 32, 128])
def test_gpu_production_shapes(impl, heads, topk, batch):
    if impl == "simt" and batch * heads * topk > 32 * 64 * 2048:
        pytest.skip("SIMT at this size only costs time; covered by smaller batches")
    inp = make_decode_inputs(batch, heads, topk, num_tokens=max(batch * 4096, 65536), device="cuda",
                             seed=batch + topk, invalid_frac=0.05)
    _check(inp.q, inp.kv_cache, inp.indices, impl)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [c for c in CANDIDATES if c.block_d], ids=lambda c: c.label)
@pytest.mark.parametrize(("batch", "topk"), [(1, 2048), (32, 512), (128, 512), (5, 100)])
def test_gpu_two_pass_candidates(cfg, batch, topk):
    inp = make_decode_inputs(batch, 64, topk, num_tokens=max(batch * 4096, 65536), device="cuda",
                             seed=batch + topk, invalid_frac=0.05)
    ref_out, ref_lse = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    out, lse, _ = decode_with_config(inp.q, inp.kv_cache, inp.indices, cfg)
    check_decode(out, lse, ref_out, ref_lse)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", KERNELS)
def test_gpu_graph_replay_equals_eager(impl):
    inp = make_decode_inputs(16, 64, 512, num_tokens=16 * 8192, device="cuda", seed=1, num_index_sets=2)
    idx = inp.indices.clone()
    eager = sparse_mla_decode(inp.q, inp.kv_cache, idx, impl=impl)  # warm-up resolves autotuning
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = sparse_mla_decode(inp.q, inp.kv_cache, idx, impl=impl)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured[0], eager[0]) and torch.equal(captured[1], eager[1])
    idx.copy_(inp.index_sets[1])  # new inputs through the same graph
    graph.replay()
    fresh = sparse_mla_decode(inp.q, inp.kv_cache, idx, impl=impl)
    torch.cuda.synchronize()
    assert torch.equal(captured[0], fresh[0]) and torch.equal(captured[1], fresh[1])
