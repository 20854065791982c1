"""Lightning indexer + top-k: each implementation against the torch reference.

Small shapes run on the CPU under the Triton interpreter (or on the GPU when there is one); the
production-shape tests need CUDA. Selections may differ from the reference only at near-ties:
``check_indexer_output`` checks that every selected token's reference logit reaches the k-th best
(minus a small tolerance), and on well-separated random data recall must be exactly 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # must precede the first triton import
    os.environ.setdefault("TRITON_INTERPRET", "1")

from mla_kernels import indexer as ix  # noqa: E402
from mla_kernels._common import interpreting, next_pow2, pdl_enabled  # noqa: E402
from mla_kernels.indexer import (  # noqa: E402
    check_indexer_output,
    dequantize_index_cache,
    indexer_logits_reference,
    indexer_reference,
    indexer_topk,
    indexer_topk_with_record,  # noqa: E402
    make_indexer_inputs,
    quantize_index_cache,
    select_rule,
)
from mla_kernels.indexer import kernels as ix_kernels  # noqa: E402
from mla_kernels.indexer import launch as ix_launch  # noqa: E402
from mla_kernels.indexer import split as ix_split  # noqa: E402

GPU = torch.cuda.is_available() and not interpreting()  # MLAPERF_FORCE_INTERPRET=1 keeps to the CPU
DEV = torch.device("cuda" if GPU else "cpu")
TRITON_IMPLS = ["fp32_maxctx", "bf16"]
REPO = Path(__file__).resolve().parents[2]
needs_cuda = pytest.mark.skipif(not GPU, reason="needs a CUDA device (and no forced interpreter)")


def _run_and_check(inp: ix.IndexerInputs, impl: str) -> dict[str, float]:
    ref_logits = indexer_logits_reference(*inp.args()[:5])
    out = indexer_topk(*inp.args(), impl=impl)
    return check_indexer_output(out, ref_logits, inp.block_table, inp.seq_lens, inp.topk)


# ---------------------------------------------------------------------------------------------- cache
def test_quantize_layout_and_roundtrip() -> None:
    g = torch.Generator().manual_seed(3)
    keys = torch.randn((300, 128), generator=g) * torch.linspace(0.01, 5, 300)[:, None]
    keys[7] = 0.0  # a zero key: scale 0, zero bytes
    cache = quantize_index_cache(keys)
    assert cache.dtype == torch.uint8 and tuple(cache.shape) == (2, 256 * 132)
    # token 257 = page 1, offset 1: key bytes at 128, its scale at 32768 + 4
    scale = float(cache[1, 32768 + 4 : 32768 + 8].view(torch.float32))
    assert scale == pytest.approx(float(keys[257].abs().max()) / 448, rel=1e-6)
    fp8 = cache[1, 128:256].view(torch.float8_e4m3fn).float()
    assert torch.equal(fp8, (keys[257] / scale).to(torch.float8_e4m3fn).float())
    assert float(cache[0, 32768 + 28 : 32768 + 32].view(torch.float32)) == 0.0
    assert int(cache[0, 7 * 128 : 8 * 128].sum()) == 0
    # the unused tail of the last page is zero
    assert int(cache[1, 44 * 128 : 32768].sum()) == 0 and int(cache[1, 32768 + 4 * 44 :].sum()) == 0
    back = dequantize_index_cache(cache)
    assert tuple(back.shape) == (512, 128)
    err = (back[:300] - keys).abs() / keys.abs().amax(1, keepdim=True).clamp_min(1e-30)
    assert float(err.max()) <= 2**-4  # e4m3: 3 mantissa bits, values up to amax
    assert torch.equal(back[7], torch.zeros(128))


def test_quantize_padded_stride_and_bf16() -> None:
    keys = torch.randn((256, 128)).to(torch.bfloat16)
    plain = quantize_index_cache(keys)
    padded = quantize_index_cache(keys, page_stride=256 * 132 + 64)
    assert tuple(padded.shape) == (1, 256 * 132 + 64)
    assert torch.equal(padded[:, : 256 * 132], plain) and int(padded[:, 256 * 132 :].sum()) == 0
    assert torch.equal(dequantize_index_cache(padded), dequantize_index_cache(plain))


@pytest.mark.parametrize(
    ("keys", "kwargs", "match"),
    [
        (torch.randn(4, 64), {}, "keys must have shape"),
        (torch.randn(4, 128, 1), {}, "keys must have 2 dimensions"),
        (torch.ones(4, 128, dtype=torch.int32), {}, "keys must have dtype"),
        (torch.randn(0, 128), {}, "at least one token"),
        (torch.full((4, 128), float("nan")), {}, "finite"),
        (torch.randn(4, 128), {"page_stride": 1000}, "page_stride"),
        (torch.randn(4, 128), {"page_stride": 256 * 132 + 2}, "page_stride"),
        (torch.randn(4, 128), {"page_stride": 33792.0}, "page_stride"),
    ],
)
def test_quantize_bad_input(keys: torch.Tensor, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        quantize_index_cache(keys, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------- selection
@pytest.mark.parametrize("impl", TRITON_IMPLS)
@pytest.mark.parametrize(
    ("heads", "lens", "topk", "max_context"),
    [
        (64, [1000, 37, 0], 64, 2048),  # shorter than topk, empty, not a multiple of 256
        (16, [2000, 512, 256], 16, 2048),  # exact page multiples
        (48, [700, 1, 300], 64, 1024),  # H a multiple of 16 but not a power of two
    ],
)
def test_matches_reference(impl: str, heads: int, lens: list[int], topk: int, max_context: int) -> None:
    if impl == "fp32_maxctx" and heads == 48 and DEV.type == "cpu":
        pytest.skip("covered by the other cases; the SIMT baseline is slow under the interpreter")
    inp = make_indexer_inputs(
        len(lens), lens, max_context=max_context, num_heads=heads, topk=topk, device=DEV, seed=heads
    )
    stats = _run_and_check(inp, impl)
    assert stats["recall_min"] == 1.0  # well-separated random data: the very same set
    record = indexer_topk_with_record(*inp.args(), impl=impl)[1]
    assert (record.op, record.impl) == ("indexer", impl)


def test_reference_selection_and_padding() -> None:
    inp = make_indexer_inputs(2, [300, 5], max_context=512, num_heads=16, topk=8, device=DEV, seed=1)
    out = indexer_reference(*inp.args())
    logits = indexer_logits_reference(*inp.args()[:5])
    assert out.dtype == torch.int32 and tuple(out.shape) == (2, 8)
    # row 1 holds its 5 tokens (valid first) and three -1
    assert torch.equal(out[1, 5:], torch.full((3,), -1, dtype=torch.int32, device=DEV))
    page = int(inp.block_table[1, 0])
    assert sorted(out[1, :5].tolist()) == [page * 256 + t for t in range(5)]
    # row 0: brute force over positions
    best = torch.topk(logits[0, :300], 8).indices
    want = {int(inp.block_table[0, int(t) // 256]) * 256 + int(t) % 256 for t in best}
    assert set(out[0].tolist()) == want
    assert bool(torch.isneginf(logits[0, 300:]).all()) and bool(torch.isneginf(logits[1, 5:]).all())


def test_reference_logits_formula() -> None:
    inp = make_indexer_inputs(1, [20], max_context=256, num_heads=16, topk=4, device=DEV, seed=5)
    keys = dequantize_index_cache(inp.index_cache).double()
    page = int(inp.block_table[0, 0])
    k = keys[page * 256 : page * 256 + 20]
    s = (inp.q_idx[0].double() @ k.T).clamp_min(0)  # [H, 20]
    want = (inp.weights[0].double()[:, None] * s).sum(0).float()
    got = indexer_logits_reference(*inp.args()[:5])[0, :20]
    assert torch.allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("impl", TRITON_IMPLS)
def test_exact_ties(impl: str) -> None:
    # Every token of request 0 has the same key, request 1 has three distinct keys: the radix select
    # must still return exactly topk distinct slots of the best group(s).
    inp = make_indexer_inputs(2, [700, 600], max_context=768, num_heads=16, topk=64, device=DEV, seed=2)
    keys = dequantize_index_cache(inp.index_cache)
    base = torch.randn((3, 128), generator=torch.Generator().manual_seed(9)).to(DEV)
    pages0 = inp.block_table[0, :3].long()
    pages1 = inp.block_table[1, :3].long()
    for p in pages0.tolist():
        keys[p * 256 : (p + 1) * 256] = base[0]
    for j, p in enumerate(pages1.tolist()):
        keys[p * 256 : (p + 1) * 256] = base[torch.arange(256, device=DEV) % 3]
        keys[p * 256 + 5 * j] = 0.0
    inp.index_cache = quantize_index_cache(keys)
    _run_and_check(inp, impl)
    # Within tie groups any choice is right, but the multiset of chosen reference logits is fixed.
    ref_logits = indexer_logits_reference(*inp.args()[:5])
    out = indexer_topk(*inp.args(), impl=impl)
    for b in range(2):
        slot_to_logit = {
            int(inp.block_table[b, t // 256]) * 256 + t % 256: float(ref_logits[b, t])
            for t in range(int(inp.seq_lens[b]))
        }
        got = sorted(slot_to_logit[s] for s in out[b].tolist())
        assert got == sorted(torch.topk(ref_logits[b], 64).values.tolist())


def test_radix_select_against_torch_topk() -> None:
    # The selection kernel alone, on awkward logits: negatives, +-0, huge values, duplicates.
    g = torch.Generator().manual_seed(11)
    lens = [0, 5, 64, 65, 1500, 3000, 2048, 2000]
    batch, ctx, topk = len(lens), 3072, 64
    logits = torch.randn((batch, ctx), generator=g) * 10
    logits[1] = -0.0
    logits[4, ::3] = 0.0
    logits[4, 1::7] = -1e30
    logits[5] = torch.randint(-4, 4, (ctx,), generator=g).float()  # heavy duplicates
    logits[6, :2048] = torch.linspace(-1e-30, 1e-30, 2048)
    logits[7] = 1.0  # the top 64 fill one first-digit bucket exactly: selection ends after one pass
    logits[7, torch.randperm(2000, generator=g)[:64]] = 100.0 + torch.rand(64, generator=g)
    logits = logits.to(DEV)
    # identity pages: slot = b * ctx + t
    bt = torch.arange(batch * ctx // 256, dtype=torch.int32, device=DEV).reshape(batch, -1)
    seq = torch.tensor(lens, dtype=torch.int32, device=DEV)
    out = torch.full((batch, topk), -7, dtype=torch.int32, device=DEV)
    blk = ix_launch._INTERP_SELECT_BLOCK
    kernel = ix_kernels._radix_select_kernel[(batch,)] if DEV.type == "cpu" else ix_launch._tuned_select()[(batch,)]
    extra = {"BLOCK": blk} if DEV.type == "cpu" else {}
    kernel(
        logits, bt, seq, out, logits.stride(0), bt.stride(0), out.stride(0), topk, ctx, bt.numel(), **extra
    )
    for b, n in enumerate(lens):
        row = out[b].cpu()
        k = min(n, topk)
        assert bool((row[k:] == -1).all()) and bool((row[:k] >= 0).all()), (b, row)
        t = row[:k].long() - b * ctx
        assert len(set(t.tolist())) == k and bool(((t >= 0) & (t < n)).all())
        got = torch.sort(logits[b].cpu()[t]).values
        want = torch.sort(torch.topk(logits[b, :n].cpu(), k).values).values
        assert torch.equal(got, want), b


@pytest.mark.parametrize("impl", TRITON_IMPLS)
def test_garbage_block_table_past_pages(impl: str) -> None:
    # Entries past a request's pages may be anything: never dereferenced out of bounds.
    inp = make_indexer_inputs(2, [300, 40], max_context=1024, num_heads=16, topk=32, device=DEV, seed=4)
    inp.block_table[0, 2:] = torch.tensor([10**6, -5], dtype=torch.int32)
    inp.block_table[1, 1:] = torch.tensor([-(10**6), 10**7, 2**31 - 1], dtype=torch.int32)
    ref = torch.full_like(inp.block_table, -1)
    ref[0, :2], ref[1, :1] = inp.block_table[0, :2], inp.block_table[1, :1]
    ref_logits = indexer_logits_reference(inp.q_idx, inp.weights, inp.index_cache, ref, inp.seq_lens)
    out = indexer_topk(*inp.args(), impl=impl)
    stats = check_indexer_output(out, ref_logits, inp.block_table, inp.seq_lens, inp.topk)
    assert stats["recall_min"] == 1.0


def test_padded_stride_strided_q_and_clamped_seq_lens() -> None:
    inp = make_indexer_inputs(
        2, [500, 256], max_context=512, num_heads=32, topk=32, device=DEV, seed=6, page_stride=256 * 132 + 128
    )
    q_big = torch.zeros((2, 64, 128), dtype=torch.bfloat16, device=DEV)
    q_big[:, 16:48] = inp.q_idx
    inp.q_idx = q_big[:, 16:48]  # non-contiguous batch stride
    assert not inp.q_idx.is_contiguous()
    assert _run_and_check(inp, "bf16")["recall_min"] == 1.0
    # Past the block table's capacity (row 0 maps both pages): the Triton path clamps, the reference refuses.
    long = inp.seq_lens.clone()
    long[0] = 10_000
    out = indexer_topk(inp.q_idx, inp.weights, inp.index_cache, inp.block_table, long, 32)
    capped = long.clamp_max(512)
    ref_logits = indexer_logits_reference(inp.q_idx, inp.weights, inp.index_cache, inp.block_table, capped)
    assert check_indexer_output(out, ref_logits, inp.block_table, capped, 32)["recall_min"] == 1.0
    with pytest.raises(ValueError, match=r"seq_lens\[0\] = 10000"):
        indexer_reference(inp.q_idx, inp.weights, inp.index_cache, inp.block_table, long, 32)


@pytest.mark.parametrize("impl", TRITON_IMPLS)
def test_seq_lens_past_mapped_pages_never_yield_bogus_slots(impl: str) -> None:
    # Caller error the kernels cannot see without a host sync: tokens on unmapped (-1) pages rank
    # last and come back as -1, never as a slot computed from a bad page.
    inp = make_indexer_inputs(2, [200, 300], max_context=1024, num_heads=16, topk=64, device=DEV, seed=7)
    inp.seq_lens[0] = 700  # pages 1 and 2 of row 0 are -1
    out = indexer_topk(*inp.args(), impl=impl)
    row = out[0].tolist()
    page = int(inp.block_table[0, 0])
    assert all(s == -1 or page * 256 <= s < page * 256 + 256 for s in row)
    assert sum(s >= 0 for s in row) == 64  # the 256 tokens of the mapped page outrank the unmapped ones
    assert all(s >= 0 for s in out[1].tolist())


def test_reference_rejects_bad_used_page() -> None:
    inp = make_indexer_inputs(1, [300], max_context=512, num_heads=16, topk=8, device=DEV)
    inp.block_table[0, 1] = inp.index_cache.shape[0]
    with pytest.raises(ValueError, match=r"block_table\[0, 1\]"):
        indexer_reference(*inp.args())


def test_check_indexer_output_catches_wrong_selection() -> None:
    inp = make_indexer_inputs(1, [600], max_context=768, num_heads=16, topk=16, device=DEV, seed=8)
    ref_logits = indexer_logits_reference(*inp.args()[:5])
    good = indexer_reference(*inp.args())
    check_indexer_output(good, ref_logits, inp.block_table, inp.seq_lens, 16)
    worst = torch.topk(-ref_logits[0, :600], 1).indices
    bad = good.clone()
    bad[0, 0] = int(inp.block_table[0, int(worst) // 256]) * 256 + int(worst) % 256
    with pytest.raises(AssertionError, match="below the k-th best"):
        check_indexer_output(bad, ref_logits, inp.block_table, inp.seq_lens, 16)
    dup = good.clone()
    dup[0, 1] = dup[0, 0]
    with pytest.raises(AssertionError, match="duplicate"):
        check_indexer_output(dup, ref_logits, inp.block_table, inp.seq_lens, 16)
    short = good.clone()
    short[0, 3] = -1
    with pytest.raises(AssertionError, match="valid slots"):
        check_indexer_output(short, ref_logits, inp.block_table, inp.seq_lens, 16)


def test_empty_batch_and_topk_beyond_capacity() -> None:
    inp = make_indexer_inputs(2, [200, 256], max_context=256, num_heads=16, topk=300, device=DEV)
    for impl in ("reference", "bf16"):
        out = indexer_topk(*inp.args(), impl=impl)
        assert tuple(out.shape) == (2, 300)
        assert [int((r >= 0).sum()) for r in out] == [200, 256]
    empty = make_indexer_inputs(0, [], max_context=256, num_heads=16, topk=4, device=DEV)
    assert tuple(indexer_topk(*empty.args()).shape) == (0, 4)


def test_launch_record_of_bf16_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    inp = make_indexer_inputs(1, [100], max_context=256, num_heads=16, topk=8, device=DEV)
    out, record = indexer_topk_with_record(*inp.args(), impl="bf16")
    assert torch.equal(out, indexer_topk(*inp.args(), impl="bf16"))  # the public entry returns the slots alone
    # One request: the default rule runs scores and select in one launch (launch.SELECT; one launch per
    # phase under the interpreter), and the record says so; three requests run the global radix select.
    assert record.kernel == "+".join(["_coop_topk_kernel"] * (4 if interpreting() else 1))
    assert record.config["select"] == "coop" and record.config["BLOCK_T"] == record.kernels[0].config["BLOCK_T"]
    three = make_indexer_inputs(3, [100, 7, 0], max_context=256, num_heads=16, topk=8, device=DEV)
    _, record = indexer_topk_with_record(*three.args(), impl="bf16")
    assert record.kernel == "_bf16_scores_kernel_t+_radix_pass_kernel+_radix_pass_kernel+_radix_compact_kernel"
    assert record.config["select"] == "radix"
    monkeypatch.setattr(select_rule, "SELECT", "split")
    out, record = indexer_topk_with_record(*inp.args(), impl="bf16")
    assert record.kernel == "_bf16_scores_kernel_t+_request_topk_kernel"  # one chunk: one program a request
    scores, select = record.kernels
    assert record.config["BLOCK_T"] == scores.config["BLOCK_T"] in (32, 64, 128)
    assert record.config["SELECT_BLOCK"] == select.config["BLOCK"] and select.grid == (1,)
    assert record.config["programs_per_request"] == scores.grid[0] and scores.grid[1] == 1
    assert record.interpreted == interpreting() and (record.registers is None) == interpreting()
    chunk = ix_split.plan(ix.checks._Dims(1, 16, 64, 64), 8).chunk  # type: ignore[union-attr]
    long = make_indexer_inputs(1, [chunk + 1], max_context=4 * chunk, num_heads=16, topk=8, device=DEV)
    chunked, record = indexer_topk_with_record(*long.args(), impl="bf16")
    assert record.kernel == "_bf16_scores_kernel_t+_chunk_topk_kernel+_merge_topk_kernel"
    assert record.config["chunks"] == 4 and record.kernels[1].grid == (4, 1)
    # A length hint: one program a request, however large the table. Both hints here are short of the
    # request (wrong): the same slots all the same (the kernel's fallback).
    for hint in (chunk // 2 + 1, chunk):
        out, record = indexer_topk_with_record(*long.args(), impl="bf16", max_seq_len=hint)
        assert record.kernel == "_bf16_scores_kernel_t+_request_topk_kernel"
        assert record.config["chunks"] == 1 and record.kernels[1].config["BLOCK"] == next_pow2(hint)
        assert torch.equal(torch.sort(out, 1).values, torch.sort(chunked, 1).values)
    # Candidates past one merge program's registers: the single-program radix select, recorded as such.
    assert ix_split.plan(ix.checks._Dims(1, 16, 4096, 4096), 4 * chunk) is None
    # A 262,144-token block table at top-k 512: twice a merge block of candidates, reduced in pieces.
    wide = ix_split.plan(ix.checks._Dims(1, 64, 1024, 1024), 512)
    assert wide is not None and wide.chunks * 512 == 2 * wide.merge_block


@pytest.mark.parametrize("two_level", [False, True])
def test_split_select_against_torch_topk(two_level: bool) -> None:
    # The chunk and merge kernels alone, on awkward logits across chunk edges: negatives, +-0, huge
    # values, heavy duplicates (ties straddling chunks), -inf, one chunk exactly, one token past it.
    # two_level: a merge block of 16 x topk lanes, so the longest requests reduce four pieces first (one
    # of them with a last chunk of 5 tokens, some with none).
    g = torch.Generator().manual_seed(13)
    topk = 64
    d0 = ix.checks._Dims(1, 16, 12, 12)
    chunk = ix_split.plan(d0, topk).chunk  # type: ignore[union-attr]
    ctx = 24 * chunk
    lens = [0, 5, 64, 65, chunk, chunk + 1, 3 * chunk + 17, ctx, 9 * chunk + 5, 7 * chunk, 17 * chunk + 5]
    logits = _awkward_logits(g, len(lens), ctx, zero=1, mixed=5, ints=6)
    logits[7, : 2 * chunk] = torch.linspace(-1e-30, 1e-30, 2 * chunk)
    logits[8, : 12 * chunk] = 1.0  # ties across merge pieces
    logits[9, torch.randperm(7 * chunk, generator=g)[:100]] = float("-inf")
    logits = logits.to(DEV)
    bt, seq, out, d = _identity_rows(lens, ctx, topk)
    plan = ix_split.plan(d, topk, chunk=chunk, merge_cap=16 * topk if two_level else ix_split.MAX_MERGE_BLOCK)
    assert plan is not None and plan.merge_block > 0
    assert (plan.chunks * topk > plan.merge_block) == two_level
    ix_split.split_select(logits, bt, seq, out, topk, d, plan)
    _check_rows_against_torch_topk(out, logits, lens, ctx, topk)


@pytest.mark.parametrize("radix", [False, True])
def test_one_program_select_against_torch_topk(radix: bool) -> None:
    # The one-program-a-request plan the longest request's length buys (split.ONE_MAX), on awkward logits;
    # requests past that hint (a wrong one) still come back right, through the in-kernel radix fallback.
    g = torch.Generator().manual_seed(17)
    topk, longest, ctx = 32, 300, 2048
    lens = [0, 5, 32, 33, 256, 299, 300, 301, 1000, ctx]
    logits = _awkward_logits(g, len(lens), ctx, zero=2, mixed=4, ints=5)
    logits[6, torch.randperm(300, generator=g)[:100]] = float("-inf")
    logits[8, :600] = 1.0  # ties past the hint
    logits = logits.to(DEV)
    bt, seq, out, d = _identity_rows(lens, ctx, topk)
    plan = ix_split.plan(d, topk, radix=radix, longest=longest)
    assert plan is not None and (plan.chunk, plan.chunks, plan.merge_block, plan.radix) == (512, 1, 0, radix)
    (run,) = ix_split.split_select(logits, bt, seq, out, topk, d, plan)
    assert run.name == "_request_topk_kernel" and run.grid == (len(lens),)
    _check_rows_against_torch_topk(out, logits, lens, ctx, topk)
    assert ix_split.plan(d, topk, longest=ix_split.ONE_MAX + 1) == ix_split.plan(d, topk)  # past it: chunks


@pytest.mark.parametrize("form", ["one", "one_chunk", "chunks"])
def test_split_select_launches_in_stream_order_from_in_order_batch(form: str) -> None:
    # From split.IN_ORDER_BATCH requests and at IN_ORDER_FEW the one-chunk select (with the longest request's
    # length or without) is given PDL=False (stream order); elsewhere, and for the chunk + merge plan, the device
    # decides (KernelLaunch: on under PDL, absent here on the CPU).
    topk, pages = 8, {"one": 16, "one_chunk": 1, "chunks": 32}[form]  # 256-token pages
    low, high = ix_split.IN_ORDER_FEW
    assert 1 < low <= high < ix_split.IN_ORDER_BATCH - 1
    in_order = {1: False, low - 1: False, low: True, high: True, high + 1: False, ix_split.IN_ORDER_BATCH - 1: False,
                ix_split.IN_ORDER_BATCH: True, 2 * ix_split.IN_ORDER_BATCH: True}  # fmt: skip
    for batch, stream_order in in_order.items():
        d = ix.checks._Dims(batch, 16, pages, pages)
        plan = ix_split.plan(d, topk, longest=100 if form == "one" else None)
        assert plan is not None and (plan.chunks > 1) == (form == "chunks")
        assert plan.pdl == (not stream_order or form == "chunks"), batch
        logits = torch.zeros((batch, d.max_context), device=DEV)
        bt = torch.zeros((batch, pages), dtype=torch.int32, device=DEV)
        sl = torch.zeros(batch, dtype=torch.int32, device=DEV)
        out = torch.empty((batch, topk), dtype=torch.int32, device=DEV)
        launches = ix_split.launches(logits, bt, sl, out, topk, d, plan)
        assert len(launches) == (2 if form == "chunks" else 1)
        pdl = {launch.constexprs.get("PDL", False) for launch in launches}
        assert pdl == ({pdl_enabled(logits.device)} if plan.pdl else {False})


def test_split_select_keeps_pdl_for_blocks_past_in_order_max_block() -> None:
    # A one-program select of more than IN_ORDER_MAX_BLOCK lanes (98 registers at 16 warps: one program an SM)
    # keeps PDL from IN_ORDER_BATCH requests too (split.py has the figures); up to it, stream order.
    batch = 2 * ix_split.IN_ORDER_BATCH
    for longest, block, pdl in ((ix_split.IN_ORDER_MAX_BLOCK, ix_split.IN_ORDER_MAX_BLOCK, False),
                                (ix_split.IN_ORDER_MAX_BLOCK + 1, 2 * ix_split.IN_ORDER_MAX_BLOCK, True)):  # fmt: skip
        d = ix.checks._Dims(batch, 16, 64, 64)  # 16K tokens of capacity: the one-program plan by the hint
        plan = ix_split.plan(d, 512, longest=longest)
        assert plan is not None and (plan.chunk, plan.chunks, plan.pdl) == (block, 1, pdl)
    assert ix_split.one_chunk_pdl(ix_split.IN_ORDER_BATCH - 1, 16) and not ix_split.one_chunk_pdl(batch, 16)
    few = ix_split.IN_ORDER_FEW[0]
    assert not ix_split.one_chunk_pdl(few, 16) and ix_split.one_chunk_pdl(few, 2 * ix_split.IN_ORDER_MAX_BLOCK)


def test_one_program_select_runs_8_warps_up_to_one_small_block() -> None:
    # 8 warps up to split.ONE_SMALL_BLOCK lanes (faster since the select launches in stream order, split.py has the
    # figures), 16 above (8 warps at 8,192 lanes were far slower); the chunk + merge plan keeps CHUNK_WARPS.
    d = ix.checks._Dims(64, 16, 64, 64)  # 16K tokens of capacity
    small = ix_split.ONE_SMALL_BLOCK
    for longest, block, warps in ((100, 128, 8), (small, small, 8), (small + 1, 2 * small, ix_split.CHUNK_WARPS)):
        plan = ix_split.plan(d, 512, longest=longest)
        assert plan is not None and (plan.chunk, plan.chunks, plan.chunk_warps) == (block, 1, warps)
    assert ix_split.ONE_SMALL_WARPS == 8 != ix_split.CHUNK_WARPS
    chunks = ix_split.plan(d, 512, chunk=4096)
    assert chunks is not None and chunks.chunks > 1 and chunks.chunk_warps == ix_split.CHUNK_WARPS


def _awkward_logits(g: torch.Generator, batch: int, ctx: int, zero: int, mixed: int, ints: int) -> torch.Tensor:
    # randn * 10 (CPU), with a row of -0.0, one of 0.0 and -1e30 every few tokens, one of small integers (ties).
    logits = torch.randn((batch, ctx), generator=g) * 10
    logits[zero] = -0.0
    logits[mixed, ::3] = 0.0
    logits[mixed, 1::7] = -1e30
    logits[ints] = torch.randint(-4, 4, (ctx,), generator=g).float()
    return logits


def _identity_rows(
    lens: list[int], ctx: int, topk: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, ix.checks._Dims]:
    # A block table whose slots are b * ctx + t, the lengths, an output row of -7s, and their dims.
    batch = len(lens)
    bt = torch.arange(batch * ctx // 256, dtype=torch.int32, device=DEV).reshape(batch, -1)
    seq = torch.tensor(lens, dtype=torch.int32, device=DEV)
    out = torch.full((batch, topk), -7, dtype=torch.int32, device=DEV)
    return bt, seq, out, ix.checks._Dims(batch, 16, ctx // 256, bt.numel())


def _check_rows_against_torch_topk(out: torch.Tensor, logits: torch.Tensor, lens: list[int], ctx: int,
                                   topk: int) -> None:  # fmt: skip
    # Row b's slots are b * ctx + t: distinct tokens of the request, the top-k values, -1 past them.
    for b, n in enumerate(lens):
        row = out[b].cpu()
        k = min(n, topk)
        assert bool((row[k:] == -1).all()) and bool((row[:k] >= 0).all()), (b, row)
        t = row[:k].long() - b * ctx
        assert len(set(t.tolist())) == k and bool(((t >= 0) & (t < n)).all()), b
        got = torch.sort(logits[b].cpu()[t]).values
        want = torch.sort(torch.topk(logits[b, :n].cpu(), k).values).values
        assert torch.equal(got, want), b


# --------------------------------------------------------------------------------------- bad input
def _bad_cases() -> list[tuple[str, object, str]]:
    return [
        ("impl", "fp16", "impl must be one of"),
        ("topk", 0, "topk must be a positive int"),
        ("topk", 4.0, "topk must be a positive int"),
        ("topk", True, "topk must be a positive int"),
        ("q_idx", lambda i: i.q_idx.float(), "q_idx must have dtype"),
        ("q_idx", lambda i: i.q_idx[:, :, :64], r"q_idx must have shape \[B, H, 128\]"),
        ("q_idx", lambda i: i.q_idx[:, :8], "multiple of 16"),
        ("weights", lambda i: i.weights.double(), "weights must have dtype"),
        ("weights", lambda i: i.weights[:, :8], "weights must have shape"),
        ("index_cache", lambda i: i.index_cache.view(torch.int8), "index_cache must have dtype"),
        ("index_cache", lambda i: i.index_cache[:, :1000], "at least 33792 bytes"),
        ("index_cache", lambda i: i.index_cache.T, "contiguous in its last dimension"),
        ("block_table", lambda i: i.block_table.long(), "block_table must have dtype"),
        ("block_table", lambda i: i.block_table[:1], "block_table must have B = 2 rows"),
        ("seq_lens", lambda i: i.seq_lens.long(), "seq_lens must have dtype"),
        ("seq_lens", lambda i: i.seq_lens[:1], "seq_lens must have shape"),
        ("seq_lens", lambda i: i.seq_lens.to("meta"), "one device"),
        ("q_idx", "not a tensor", "q_idx must be a torch.Tensor"),
    ]


@pytest.mark.parametrize("impl", ["reference", "fp32_maxctx", "bf16"])
@pytest.mark.parametrize(("arg", "bad", "match"), _bad_cases())
def test_bad_input(impl: str, arg: str, bad: object, match: str) -> None:
    inp = make_indexer_inputs(2, [100, 50], max_context=512, num_heads=16, topk=8, device=DEV)
    kwargs: dict[str, object] = dict(
        q_idx=inp.q_idx, weights=inp.weights, index_cache=inp.index_cache, block_table=inp.block_table,
        seq_lens=inp.seq_lens, topk=8, impl=impl,
    )  # fmt: skip
    kwargs[arg] = bad(inp) if callable(bad) else bad
    with pytest.raises(ValueError, match=match):
        indexer_topk(**kwargs)  # type: ignore[arg-type]


@pytest.mark.skipif(GPU, reason="runs where the small cases use CPU tensors")
def test_cpu_tensors_refused_without_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    inp = make_indexer_inputs(1, [10], max_context=256, num_heads=16, topk=4)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="q_idx is on cpu"):
        indexer_topk(*inp.args(), impl="bf16")


# ------------------------------------------------------------------------------------ perf script
def test_perf_script_smoke() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.scripts.indexer_perf", "--smoke"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    if proc.returncode != 0 and "interpreter cannot run kernels with loops" in proc.stderr:
        # Triton 3.6 with numpy 2.4 (the H200 machine's stack): the launcher names the versions.
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["smoke"] is True and record["device"]["name"].startswith("cpu")
    assert record["select_rule"] == select_rule.select_rule_text()  # the whole rule, beside each row's path
    assert {r["launch"]["select"] for r in record["results"] if r["impl"] == "bf16"} <= set(select_rule.SELECTS)
    impls = {(r["impl"], r["context"]) for r in record["results"]}
    assert impls == {(i, c) for i in ("reference", "fp32_maxctx", "bf16") for c in record["contexts"]}
    assert all(r["median_us"] > 0 and r["recall_min"] == 1.0 for r in record["results"])
    assert "context" in proc.stdout and "bf16" in proc.stdout


def test_perf_script_batches() -> None:
    from benchmarks.scripts.indexer_perf import parse_args

    assert parse_args([]).batches == [1, 64]  # concurrency 1 and 64 at every context by default
    assert parse_args(["--batch", "8"]).batches == [8]
    assert parse_args(["--batches", "2,16"]).batches == [2, 16]
    for bad in (["--batch", "8", "--batches", "1,2"], ["--batches", "0"], ["--batches", "x"]):
        with pytest.raises(SystemExit) as exc:
            parse_args(bad)
        assert exc.value.code == 2


def test_perf_script_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.scripts.indexer_perf", "--help"],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0 and "--smoke" in proc.stdout


# ----------------------------------------------------------------------------- GPU, production shapes
@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(
    ("batch", "context"),
    [(128, 4096), (64, 16384), (128, 65536), (1, 65536), (64, 4096)],
)
@pytest.mark.parametrize("impl", TRITON_IMPLS)
def test_gpu_production_shapes(impl: str, batch: int, context: int) -> None:
    g = torch.Generator().manual_seed(batch + context)
    # Mixed real lengths around the nominal context, some not multiples of 256, one empty, one short.
    lens = torch.randint(context // 2, context + 1, (batch,), generator=g).tolist()
    if batch > 2:
        lens[0], lens[1], lens[2] = 0, 100, context
    inp = make_indexer_inputs(
        batch, lens, max_context=131072, num_heads=64, topk=512, device="cuda", seed=batch
    )
    stats = _run_and_check(inp, impl)
    assert stats["recall_min"] >= 0.998  # near-ties at 512 of 65K tokens; every pick passed the tie check
    assert stats["recall_mean"] >= 0.9995


@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("impl", TRITON_IMPLS)
def test_gpu_cuda_graph_replay_equals_eager(impl: str) -> None:
    inp = make_indexer_inputs(8, [4096, 1000, 0, 300, 70000, 512, 20, 131072], device="cuda", seed=12)
    eager = indexer_topk(*inp.args(), impl=impl)  # warm-up: compiles and resolves autotuning
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = indexer_topk(*inp.args(), impl=impl)
    captured.fill_(-9)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(torch.sort(captured, 1).values, torch.sort(eager, 1).values)
    # New lengths in the same buffers: replay follows them (no host-side shapes baked in).
    inp.seq_lens.copy_(torch.tensor([10, 4096, 600, 0, 5000, 512, 20, 2000], dtype=torch.int32))
    graph.replay()
    want = indexer_topk(*inp.args(), impl=impl)
    assert torch.equal(torch.sort(captured, 1).values, torch.sort(want, 1).values)
