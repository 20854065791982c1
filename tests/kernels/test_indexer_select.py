"""The bf16 indexer's top-k select paths (``launch.SELECTS``): the global radix select and the split select
with byte-histogram rounds, alone on awkward logits and end to end through ``indexer_topk``, plus the A/B
experiment that times them (``experiments.indexer_select_ab``).

Small shapes run on the CPU under the Triton interpreter (slices of 64 tokens, so requests cross slice
edges), on the GPU where there is one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # must precede the first triton import
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from mla_kernels._common import interpreting, num_sms  # noqa: E402
from mla_kernels.indexer import (  # noqa: E402
    IndexerInputs,
    check_indexer_output,
    coop,  # noqa: E402
    dequantize_index_cache,
    indexer_logits_reference,
    indexer_topk,
    indexer_topk_with_record,
    indexer_workspace,
    make_indexer_inputs,
    quantize_index_cache,
    select_rule,
)
from mla_kernels.indexer import launch as ix_launch  # noqa: E402
from mla_kernels.indexer import radix as ix_radix  # noqa: E402
from mla_kernels.indexer import split as ix_split  # noqa: E402
from mla_kernels.indexer.checks import _Dims  # noqa: E402
from mla_kernels.indexer.radix_kernels import (  # noqa: E402
    ST_COUNTS,
    ST_DONE,
    ST_FINAL,
    ST_NGT,
    ST_PREFIX,
    WS_WIDTH,
    _final_select,
)
from mla_kernels.indexer.split_kernels import _kth_largest  # noqa: E402

GPU = torch.cuda.is_available() and not interpreting()
DEV = torch.device("cuda" if GPU else "cpu")
REPO = Path(__file__).resolve().parents[2]
NEW_PATHS = [p for p in select_rule.SELECTS if p != "split"]  # "split" is covered by test_indexer.py


def _awkward_logits(lens: list[int], ctx: int) -> torch.Tensor:
    # Negatives, +-0, huge values, heavy duplicates (ties across slices), tiny values, -inf rows and NaN.
    g = torch.Generator().manual_seed(13)
    logits = torch.randn((len(lens), ctx), generator=g) * 10
    logits[1] = -0.0
    logits[5, ::3] = 0.0
    logits[5, 1::7] = -1e30
    logits[6] = torch.randint(-4, 4, (ctx,), generator=g).float()
    logits[7, : ctx // 2] = torch.linspace(-1e-30, 1e-30, ctx // 2)
    logits[8, : 3 * ctx // 4] = 1.0  # one key for most of the row: the final select is all ties
    logits[9, torch.randperm(lens[9], generator=g)[:100]] = float("-inf")
    logits[10] = float("-inf")  # every token on an unmapped page
    logits[11, 3:: 97] = float("nan")  # NaN ranks above every number in the order key
    return logits.to(DEV)


LENS = [0, 5, 16, 17, 64, 65, 300, 1024, 700, 1000, 999, 1023]


def _check_against_topk(logits: torch.Tensor, out: torch.Tensor, lens: list[int], topk: int, ctx: int) -> None:
    for b, n in enumerate(lens):
        row = out[b].cpu()
        k = min(n, topk)
        assert bool((row[k:] == -1).all()) and bool((row[:k] >= 0).all()), (b, row)
        t = row[:k].long() - b * ctx
        assert len(set(t.tolist())) == k and bool(((t >= 0) & (t < n)).all()), b
        got = logits[b].cpu()[t]
        want = torch.topk(logits[b, :n].cpu(), k).values
        if bool(torch.isnan(logits[b, :n]).any()):  # the NaNs first, then the top of the rest
            nans = int(torch.isnan(logits[b, :n]).sum())
            assert int(torch.isnan(got).sum()) == min(nans, k), b
            got = got[~torch.isnan(got)]
            want = torch.topk(torch.nan_to_num(logits[b, :n].cpu(), nan=float("-inf")), k - min(nans, k)).values
        assert torch.equal(torch.sort(got).values, torch.sort(want).values), b


def _identity_pages(batch: int, ctx: int) -> tuple[torch.Tensor, _Dims]:
    bt = torch.arange(batch * ctx // 256, dtype=torch.int32, device=DEV).reshape(batch, -1)  # slot = b * ctx + t
    return bt, _Dims(batch, 16, ctx // 256, bt.numel())


@pytest.mark.parametrize(("block", "programs", "warps"), [(None, None, 4), (128, 2, 8), (1024, 1, 4), (16, 5, 4)])
@pytest.mark.parametrize("topk", [16, 64])
def test_radix_select_against_torch_topk(block: int | None, programs: int | None, warps: int, topk: int) -> None:
    # Programs stride over each request's real length: several blocks a program, one, or none at all.
    ctx = 1024
    logits = _awkward_logits(LENS, ctx)
    bt, d = _identity_pages(len(LENS), ctx)
    p = replace(ix_radix.plan(d, topk, DEV, block=block, per_sm=programs), warps=warps)
    if interpreting():  # on a GPU the programs come from its SM count (test_radix_plan_spreads_one_request)
        assert p.programs == (programs or ix_radix.INTERP_PROGRAMS) and p.block == (block or ix_radix.INTERP_BLOCK)
    out = torch.full((len(LENS), topk), -7, dtype=torch.int32, device=DEV)
    runs = ix_radix.radix_select(logits, bt, torch.tensor(LENS, dtype=torch.int32, device=DEV), out, topk, d, p)
    assert [r.name for r in runs] == ["_radix_pass_kernel", "_radix_pass_kernel", "_radix_compact_kernel"]
    assert all(r.grid == (p.programs, len(LENS)) for r in runs)
    _check_against_topk(logits, out, LENS, topk, ctx)


@pytest.mark.parametrize("two_level", [False, True])
def test_split_radix_select_against_torch_topk(two_level: bool) -> None:
    # The split select with byte-histogram thresholds, in chunks of 256 and a merge (in pieces: two_level).
    topk, chunk = 16, 256
    ctx = 24 * chunk
    lens = [0, 5, 16, 17, chunk, chunk + 1, 3 * chunk + 17, ctx, 9 * chunk + 5, 7 * chunk, 17 * chunk + 5, 2 * chunk]
    logits = _awkward_logits(lens, ctx)
    bt, d = _identity_pages(len(lens), ctx)
    plan = ix_split.plan(d, topk, chunk=chunk, merge_cap=16 * topk if two_level else ix_split.MAX_MERGE_BLOCK,
                         radix=True)  # fmt: skip
    assert plan is not None and plan.radix and (plan.chunks * topk > plan.merge_block) == two_level
    out = torch.full((len(lens), topk), -7, dtype=torch.int32, device=DEV)
    ix_split.split_select(logits, bt, torch.tensor(lens, dtype=torch.int32, device=DEV), out, topk, d, plan)
    _check_against_topk(logits, out, lens, topk, ctx)


def test_fused_pass0_equals_the_pass_kernel() -> None:
    # The scores kernel's pass 0 leaves the very workspace the pass-0 kernel would (histogram and state).
    inp = make_indexer_inputs(3, [700, 40, 1000], max_context=1024, num_heads=16, topk=64, device=DEV, seed=3)
    d = ix_launch._check_args(*inp.args(), "bf16")
    q, w, cache, bt, sl, topk = inp.args()
    logits = torch.empty((3, d.max_context), dtype=torch.float32, device=DEV)
    fused, _ = ix_radix.workspace(d, DEV)
    ix_launch._run_scores(q, w, cache, bt, sl, logits, d, topk, fused)
    plain, cand = ix_radix.workspace(d, DEV)
    p = ix_radix.plan(d, topk, DEV)
    out = torch.empty((3, topk), dtype=torch.int32, device=DEV)
    ix_radix.launches(logits, bt, sl, out, topk, d, p, plain, cand)[0].run()
    hist = slice(0, 256)
    assert torch.equal(fused[:, hist], plain[:, hist]) and int(fused[0, hist].sum()) == 700
    assert int(fused[1].abs().sum()) == 0  # 40 tokens <= topk: nothing to resolve, nothing written
    state = slice(ST_PREFIX.value, ST_DONE.value + 1)  # prefix, keys above the bucket, done (not the tickets)
    assert torch.equal(fused[:, state], plain[:, state])


def test_compaction_counters_in_64_bit_words() -> None:
    # The winners' and candidates' counters share one 64-bit word, the compaction's ticket and its candidate
    # total another (8-byte aligned in every row): after a select they agree with each other and the state,
    # which the compaction leaves in place when told to (else it zeroes the row: checked last).
    assert WS_WIDTH % 2 == 0 and ST_COUNTS.value % 2 == 0 and ST_FINAL.value % 2 == 0
    inp = make_indexer_inputs(3, [700, 40, 1000], max_context=1024, num_heads=16, topk=64, device=DEV, seed=3)
    d = ix_launch._check_args(*inp.args(), "bf16")
    q, w, cache, bt, sl, topk = inp.args()
    logits = torch.empty((3, d.max_context), dtype=torch.float32, device=DEV)
    ix_launch._run_scores(q, w, cache, bt, sl, logits, d, topk)
    ws, cand = ix_radix.workspace(d, DEV)
    p = ix_radix.plan(d, topk, DEV)
    out = torch.empty((3, topk), dtype=torch.int32, device=DEV)
    *passes, compact = ix_radix.launches(logits, bt, sl, out, topk, d, p, ws, cand)
    for launch in (*passes, replace(compact, constexprs={**compact.constexprs, "LEAVE_ZEROED": False})):
        launch.run()
    for b, n in enumerate([700, 40, 1000]):
        wins, cands = int(ws[b, ST_COUNTS.value]), int(ws[b, ST_COUNTS.value + 1])
        assert int(ws[b, ST_FINAL.value]) == min(p.programs, -(-n // p.block))  # a ticket per program with tokens
        assert int(ws[b, ST_FINAL.value + 1]) == cands
        if n <= topk or int(ws[b, ST_DONE.value]):  # every token, or exactly {key >= prefix}: no candidates
            assert (wins, cands) == (min(n, topk), 0)
        else:
            assert wins == int(ws[b, ST_NGT.value]) and wins < topk <= wins + cands
    ix_radix.radix_select(logits, bt, sl, out, topk, d, p, (ws.zero_(), cand))
    assert int(ws.abs().sum()) == 0
    ref = indexer_logits_reference(*inp.args()[:5])
    assert check_indexer_output(out, ref, inp.block_table, inp.seq_lens, topk)["recall_min"] == 1.0


@triton.jit
def _kth_largest_probe_kernel(key_ptr, out_ptr, k, n_full, BLOCK: tl.constexpr):
    key = tl.load(key_ptr + tl.arange(0, BLOCK)).to(tl.uint32, bitcast=True)
    thr, exact = _kth_largest(key, k, n_full)
    tl.store(out_ptr, thr.to(tl.int32, bitcast=True))
    tl.store(out_ptr + 1, exact.to(tl.int32))


def _kth_largest_of(keys: list[int], k: int, n_full: int | None = None) -> tuple[int, bool]:
    # keys: uint32 values (0 an empty lane), run through the two-bit rounds (n_full: the bound on full lanes the
    # kernels pass, default the block); the threshold as uint32, and whether exactly k keys pass it.
    as_i32 = torch.tensor([x - (1 << 32) if x >= 1 << 31 else x for x in keys], dtype=torch.int32, device=DEV)
    out = torch.zeros(2, dtype=torch.int32, device=DEV)
    _kth_largest_probe_kernel[(1,)](as_i32, out, k, len(keys) if n_full is None else n_full, BLOCK=len(keys))
    thr, exact = out.tolist()
    return thr & 0xFFFFFFFF, bool(exact)


def test_kth_largest_stops_once_exactly_k_keys_pass() -> None:
    # The top k keys start with bits 11, the rest with 10: the first round already leaves exactly k lanes at or
    # above 0xC0000000, so the search stops there rather than resolving the k-th key's lower bits.
    g = torch.Generator().manual_seed(5)
    low = torch.randint(1, 1 << 30, (256,), generator=g).tolist()
    k = 40
    keys = [(0b11 << 30 if i < k else 0b10 << 30) | x for i, x in enumerate(low)]
    assert _kth_largest_of(keys, k) == (0xC0000000, True)
    # Distinct keys anywhere: a threshold with exactly k keys at or above it, above the (k+1)-th key.
    keys = [x | 1 << 31 for x in torch.randint(1, 1 << 31, (256,), generator=g).tolist()]
    (thr, exact), ranked = _kth_largest_of(keys, k), sorted(keys, reverse=True)
    assert exact and sum(x >= thr for x in keys) == k and ranked[k] < thr <= ranked[k - 1]
    # A tie at the k-th key never reaches exactly k: every round runs and the threshold is that key.
    keys = [0xC0000001] * 10 + [0xB0000003] * 60 + [0x90000000 + x for x in range(1, 187)]
    assert _kth_largest_of(keys, k) == (0xB0000003, False)
    # Fewer than k full lanes (0 marks an empty one): 0, after every round where the caller's bound is the block;
    # with a bound of at most k no round runs (0 whatever the keys: here they break the bound on purpose).
    few = [0xC0000000 + x for x in range(1, 31)] + [0] * 226
    assert _kth_largest_of(few, k) == (0, False) and _kth_largest_of(few, k, 30) == (0, False)
    assert _kth_largest_of(keys, k, k) == (0, False)


@triton.jit
def _final_select_probe_kernel(cand_ptr, out_ptr, m, prefix, n_gt0, topk, FBLOCK: tl.constexpr):
    _final_select(m, prefix.to(tl.uint32, bitcast=True), n_gt0, cand_ptr, out_ptr, topk, FBLOCK)


@pytest.mark.parametrize("spread", [False, True])
@pytest.mark.parametrize("m", [5, 200, 600])  # the 128-lane block, the FBLOCK block, the list path
def test_final_select_takes_the_largest_candidates(m: int, spread: bool) -> None:
    # Candidates share the prefix's high 16 bits; their low bits repeat (ties at the k-th key), or (spread)
    # their bits 8-15 differ, so the first low byte round settles the selection where each bin holds one key
    # (m up to 256). The slots written at [n_gt0, topk) carry exactly the k_rem largest keys, each candidate
    # at most once.
    g = torch.Generator().manual_seed(m)
    prefix, n_gt0 = 0x3F800000, 7
    topk = n_gt0 + max(1, (2 * m) // 3)
    low = torch.randint(0, 60, (m,), generator=g, dtype=torch.int64)
    if spread:
        low = ((torch.randperm(m, generator=g) % 256) << 8) + low
    keys = prefix + low
    slots = 1000 + torch.randperm(m, generator=g).to(torch.int64)
    cand = ((keys << 32) | slots).to(DEV)
    out = torch.full((topk,), -7, dtype=torch.int32, device=DEV)
    _final_select_probe_kernel[(1,)](cand, out, m, prefix, n_gt0, topk, FBLOCK=256)
    got = out.cpu()
    assert (got[:n_gt0] == -7).all()  # the sure winners' places are not touched
    picked = got[n_gt0:].to(torch.int64)
    assert len(set(picked.tolist())) == topk - n_gt0 and set(picked.tolist()) <= set(slots.tolist())
    key_of = dict(zip(slots.tolist(), keys.tolist(), strict=True))
    want = sorted(keys.tolist(), reverse=True)[: topk - n_gt0]
    assert sorted((key_of[s] for s in picked.tolist()), reverse=True) == want


def test_scores_kernel_zeroes_the_workspace_the_select_then_uses() -> None:
    # The radix path leaves its workspace unzeroed for the scores kernel (ZERO_WS): stale counts from an
    # earlier call (here: every word 7) must not reach the select, an empty request's row included.
    inp = make_indexer_inputs(3, [700, 0, 1000], max_context=1024, num_heads=16, topk=64, device=DEV, seed=4)
    d = ix_launch._check_args(*inp.args(), "bf16")
    q, w, cache, bt, sl, topk = inp.args()
    logits = torch.empty((3, d.max_context), dtype=torch.float32, device=DEV)
    ws, cand = ix_radix.workspace(d, DEV, zeroed=False)
    ws.fill_(7)
    with pytest.raises(ValueError, match="not both"):
        ix_launch._run_scores(q, w, cache, bt, sl, logits, d, topk, ws, zero_ws=ws)
    run = ix_launch._run_scores(q, w, cache, bt, sl, logits, d, topk, zero_ws=ws)
    assert run.config["ZERO_WS"] and not run.config["HIST"]
    assert int(ws.abs().sum()) == 0
    out = torch.full((3, topk), -7, dtype=torch.int32, device=DEV)
    ix_radix.radix_select(logits, bt, sl, out, topk, d, ix_radix.plan(d, topk, DEV), (ws, cand))
    # The kernel's own logits (no rounding at the k-th), past each request's length unwritten.
    past = torch.arange(d.max_context, device=DEV)[None, :] >= sl[:, None]
    want = ix_launch._topk_slots(logits.masked_fill(past, float("-inf")), bt, topk)
    assert torch.equal(torch.sort(out, 1).values, torch.sort(want, 1).values)


@pytest.fixture(params=NEW_PATHS)
def select_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(select_rule, "SELECT", request.param)
    return request.param


@pytest.mark.parametrize(
    ("heads", "lens", "topk", "max_context"),
    [
        (64, [1000, 37, 0], 64, 2048),  # shorter than topk, empty, not a multiple of 256
        (16, [2000, 512, 256], 16, 2048),  # exact page multiples
        (48, [700, 1, 300], 64, 1024),  # H a multiple of 16 but not a power of two
        (16, [768, 5, 0], 32, 768),  # a request filling a capacity of three pages (blocks past it hold no row)
    ],
)
def test_paths_match_reference(select_path: str, heads: int, lens: list[int], topk: int, max_context: int) -> None:
    inp = make_indexer_inputs(len(lens), lens, max_context=max_context, num_heads=heads, topk=topk, device=DEV,
                              seed=heads)  # fmt: skip
    ref = indexer_logits_reference(*inp.args()[:5])
    out, record = indexer_topk_with_record(*inp.args(), impl="bf16")
    assert check_indexer_output(out, ref, inp.block_table, inp.seq_lens, topk)["recall_min"] == 1.0
    assert record.config["select"] == select_path
    names = [r.name for r in record.kernels]
    if select_path == "coop":  # one launch; one per phase under the interpreter
        assert names == ["_coop_topk_kernel"] * (coop.PHASES if DEV.type == "cpu" else 1)
        assert [r.config["PHASE"] for r in record.kernels] == (list(range(coop.PHASES)) if DEV.type == "cpu" else [-1])
    elif select_path.startswith("radix"):
        passes = 1 if select_path == "radix_fused" else 2
        assert names == ["_bf16_scores_kernel_t", *["_radix_pass_kernel"] * passes, "_radix_compact_kernel"]
        assert record.kernels[0].config["HIST"] == (select_path == "radix_fused")
        if interpreting():  # per request: INTERP_PROGRAMS, at most one per 64-token block
            want = min(ix_radix.INTERP_PROGRAMS, -(-max_context // 64))
        else:  # the GPU's SMs over the batch, at most one per FEW_BLOCK tokens of capacity (a few requests)
            block = ix_radix.FEW_BLOCK if len(lens) <= ix_radix.FEW_REQUESTS else ix_radix.BLOCK
            want = min(-(-num_sms(DEV) * ix_radix.PROGRAMS_PER_SM // len(lens)), -(-max_context // block))
        assert record.config["select_programs"] == want
    else:
        # one program a request where the capacity fits one chunk (the GPU's 4,096 tokens), else chunks
        assert names[1] in ("_chunk_topk_kernel", "_request_topk_kernel")
        assert all(r.config["RADIX"] for r in record.kernels[1:])


def test_paths_exact_ties(select_path: str) -> None:
    # Request 0: one key for all tokens; request 1: three keys: any choice among equal keys, the right count.
    inp = make_indexer_inputs(2, [700, 600], max_context=768, num_heads=16, topk=64, device=DEV, seed=2)
    keys = dequantize_index_cache(inp.index_cache)
    base = torch.randn((3, 128), generator=torch.Generator().manual_seed(9)).to(DEV)
    for p in inp.block_table[0, :3].long().tolist():
        keys[p * 256 : (p + 1) * 256] = base[0]
    for p in inp.block_table[1, :3].long().tolist():
        keys[p * 256 : (p + 1) * 256] = base[torch.arange(256, device=DEV) % 3]
    inp.index_cache = quantize_index_cache(keys)
    ref = indexer_logits_reference(*inp.args()[:5])
    out = indexer_topk(*inp.args(), impl="bf16")
    check_indexer_output(out, ref, inp.block_table, inp.seq_lens, 64)
    for b in range(2):
        slot_to_logit = {int(inp.block_table[b, t // 256]) * 256 + t % 256: float(ref[b, t])
                         for t in range(int(inp.seq_lens[b]))}  # fmt: skip
        got = sorted(slot_to_logit[s] for s in out[b].tolist())
        assert got == sorted(torch.topk(ref[b], 64).values.tolist())


def test_paths_unmapped_pages_garbage_table_and_short_rows(select_path: str) -> None:
    # seq_lens past the mapped pages: those tokens rank last, come back -1, never a bogus slot.
    inp = make_indexer_inputs(2, [200, 300], max_context=1024, num_heads=16, topk=64, device=DEV, seed=7)
    inp.seq_lens[0] = 700
    out = indexer_topk(*inp.args(), impl="bf16")
    page = int(inp.block_table[0, 0])
    assert all(s == -1 or page * 256 <= s < page * 256 + 256 for s in out[0].tolist())
    assert sum(s >= 0 for s in out[0].tolist()) == 64 and all(s >= 0 for s in out[1].tolist())
    # Entries past a request's pages may be anything; top-k beyond the capacity pads with -1.
    inp = make_indexer_inputs(2, [300, 40], max_context=1024, num_heads=16, topk=32, device=DEV, seed=4)
    inp.block_table[0, 2:] = torch.tensor([10**6, -5], dtype=torch.int32)
    inp.block_table[1, 1:] = torch.tensor([-(10**6), 10**7, 2**31 - 1], dtype=torch.int32)
    clean = torch.full_like(inp.block_table, -1)
    clean[0, :2], clean[1, :1] = inp.block_table[0, :2], inp.block_table[1, :1]
    ref = indexer_logits_reference(inp.q_idx, inp.weights, inp.index_cache, clean, inp.seq_lens)
    assert check_indexer_output(indexer_topk(*inp.args()), ref, inp.block_table, inp.seq_lens, 32)["recall_min"] == 1
    wide = make_indexer_inputs(3, [200, 256, 0], max_context=256, num_heads=16, topk=300, device=DEV)
    assert [int((r >= 0).sum()) for r in indexer_topk(*wide.args())] == [200, 256, 0]


@pytest.mark.parametrize("select", ["coop", "radix", "radix_fused"])
def test_a_reused_workspace_gives_the_same_answers(select: str) -> None:
    # One caller-owned workspace over calls of different lengths (longer than top-k, shorter, empty): each
    # answer is right, and every select that uses it leaves it zeroed for the next call (radix_fused then
    # needs no memset: it runs pass 0 in the scores kernel straight into the caller's workspace). The path is
    # the call's own argument: the module's rule is untouched by it.
    rule = select_rule.SELECT
    inp = make_indexer_inputs(3, [1024] * 3, max_context=1024, num_heads=16, topk=64, device=DEV, seed=3)
    ws = indexer_workspace(3, DEV)
    for lens in ([1000, 37, 0], [0, 1024, 300], [64, 65, 1000]):
        inp.seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        ref = indexer_logits_reference(*inp.args()[:5])
        out, record = indexer_topk_with_record(*inp.args(), impl="bf16", workspace=ws, select=select)
        assert record.config["select"] == select
        assert check_indexer_output(out, ref, inp.block_table, inp.seq_lens, 64)["recall_min"] == 1.0, lens
        assert int(ws.abs().sum()) == 0, lens
    assert select_rule.SELECT == rule and select_rule.select_rule_text(select) == select


def test_a_bad_select_is_named() -> None:
    inp = make_indexer_inputs(2, [100, 10], max_context=256, num_heads=16, topk=4, device=DEV)
    with pytest.raises(ValueError, match="select must be one of split, split_radix, radix, radix_fused, coop"):
        indexer_topk(*inp.args(), select="nope")


def test_workspace_is_checked() -> None:
    inp = make_indexer_inputs(2, [100, 10], max_context=256, num_heads=16, topk=4, device=DEV)
    with pytest.raises(ValueError, match=r"workspace must have shape \[B, 522\] = \[2, 522\]"):
        indexer_topk(*inp.args(), workspace=indexer_workspace(3, DEV))
    with pytest.raises(ValueError, match="workspace must have dtype torch.int32"):
        indexer_topk(*inp.args(), workspace=indexer_workspace(2, DEV).float())
    with pytest.raises(ValueError, match="batch must be a non-negative int"):
        indexer_workspace(-1, DEV)


def test_select_path_is_checked() -> None:
    inp = make_indexer_inputs(1, [10], max_context=256, num_heads=16, topk=4, device=DEV)
    d = ix_launch._check_args(*inp.args(), "bf16")
    logits = torch.zeros((1, 256), device=DEV)
    with pytest.raises(ValueError, match="select path must be one of"):
        ix_launch._select(logits, inp.block_table, inp.seq_lens, torch.empty((1, 4), dtype=torch.int32), 4, d, "x")


def test_select_by_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = ((1, "radix_fused"), (16, "split_radix"), (1 << 30, "split"))
    assert [select_rule.select_path(b, rule) for b in (1, 2, 16, 64)] == ["radix_fused", "split_radix", "split_radix",
                                                                         "split"]  # fmt: skip
    assert select_rule.select_path(7, "radix") == "radix"
    for bad in ("nope", ((4, "radix"),)):  # an unknown path; a rule not covering the batch
        with pytest.raises(ValueError, match="select path must be one of"):
            select_rule.select_path(8, bad)
    monkeypatch.setattr(select_rule, "SELECT", ((1, "radix_fused"), (1 << 30, "split_radix")))
    for batch, path in ((1, "radix_fused"), (2, "split_radix")):
        inp = make_indexer_inputs(batch, 300, max_context=512, num_heads=16, topk=16, device=DEV, seed=batch)
        out, record = indexer_topk_with_record(*inp.args())
        assert record.config["select"] == path
        check_indexer_output(out, indexer_logits_reference(*inp.args()[:5]), inp.block_table, inp.seq_lens, 16)


def _paths_by_hint(lens: list[int], seed: int, cases: tuple[tuple[int | None, str], ...]) -> IndexerInputs:
    """End to end through indexer_topk on small inputs: each (hint, path) runs that path (the record names it)
    and returns the reference's slots."""
    inp = make_indexer_inputs(len(lens), lens, max_context=512, num_heads=16, topk=16, device=DEV, seed=seed)
    ref = indexer_logits_reference(*inp.args()[:5])
    for hint, path in cases:
        out, record = indexer_topk_with_record(*inp.args(), max_seq_len=hint)
        assert record.config["select"] == path, hint
        check_indexer_output(out, ref, inp.block_table, inp.seq_lens, 16)
    return inp


def test_long_requests_leave_the_split(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch the rule gives "split" runs LONG_SELECT's path once the caller says a request is longer than
    # its bound (the last one the batch reaches); no hint, a short one, a forced path and the other paths keep
    # what the batch alone gives.
    long_path, bounds = select_rule.LONG_SELECT
    for from_batch, bound in bounds:
        batch = max(from_batch, 17)  # the batches SELECT gives the split
        assert select_rule.long_bound(batch) == bound
        assert select_rule.select_path(batch) == select_rule.select_path(batch, max_seq_len=bound) == "split"
        assert select_rule.select_path(batch, max_seq_len=bound + 1) == long_path
    assert select_rule.long_bound(bounds[-1][0] - 1) == bounds[-2][1]  # the bound steps at its batch
    assert select_rule.select_path(64, "split", max_seq_len=10**6) == "split"  # use_select's forced path
    assert select_rule.select_path(1, max_seq_len=10**6) == "coop"
    assert select_rule.select_path(8, max_seq_len=10**6) == "radix"
    # End to end through indexer_topk, on a small bound: the same slots either way, the record names the path.
    monkeypatch.setattr(select_rule, "SELECT", ((1 << 30, "split"),))
    monkeypatch.setattr(select_rule, "LONG_SELECT", ("radix", ((1, 256), (8, 512))))
    monkeypatch.setattr(select_rule, "SHORT_SELECT", ())
    monkeypatch.setattr(select_rule, "SHORT_SPLIT", ())
    assert select_rule.select_rule_text() == ("split above; the split -> radix past 256 tokens of the longest "
                                            "request (512 from 8 requests)")  # fmt: skip
    inp = _paths_by_hint([300, 90], 5, ((None, "split"), (256, "split"), (300, "radix"), (10**6, "radix")))
    for bad in (-1, True, 2.5, "300"):
        with pytest.raises(ValueError, match="max_seq_len must be None or a non-negative int"):
            indexer_topk_with_record(*inp.args(), max_seq_len=bad)


def test_short_requests_take_the_one_launch_select(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch the rule gives "radix" runs "coop" once the caller says its longest request is short enough for
    # its size (SHORT_SELECT); no hint, a longer one, other paths and a forced path keep what the batch gives.
    # (Shorter still, SHORT_SPLIT's split: its own test below.)
    monkeypatch.setattr(select_rule, "SHORT_SPLIT", ())
    (few, few_len), (more, more_len) = select_rule.SHORT_SELECT
    assert select_rule.select_path(3) == select_rule.select_path(more) == "radix"
    assert select_rule.select_path(3, max_seq_len=0) == select_rule.select_path(few, max_seq_len=few_len) == "coop"
    assert select_rule.select_path(few, max_seq_len=few_len + 1) == "radix"
    assert select_rule.select_path(few + 1, max_seq_len=few_len) == "radix"
    assert select_rule.select_path(more, max_seq_len=more_len) == "coop"
    assert select_rule.select_path(more, max_seq_len=more_len + 1) == "radix"
    assert select_rule.select_path(more + 1, max_seq_len=1) == "split"
    assert select_rule.select_path(4, "radix", max_seq_len=1) == "radix"  # use_select's forced path
    assert select_rule.select_rule_text().endswith(
        f"; the radix -> coop up to {few} requests of at most {few_len:,} tokens or {more} requests of at most "
        f"{more_len:,} tokens")
    # End to end through indexer_topk, on a small bound: the same slots either way, the record names the path.
    monkeypatch.setattr(select_rule, "SHORT_SELECT", ((4, 300),))
    _paths_by_hint([300, 90, 0], 6, ((None, "radix"), (300, "coop"), (301, "radix")))


def test_shortest_requests_take_the_split(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch the rule gives "coop" or "radix" runs the split once the caller says its longest request is within
    # SHORT_SPLIT's bound for its size (the first pair whose batch bound holds); past it, SHORT_SELECT decides.
    pairs = select_rule.SHORT_SPLIT
    one_len, (few, few_len) = pairs[0][1], pairs[-1]
    assert pairs[0][0] >= 1
    assert [select_rule.short_split_bound(b) for b in (1, few, few + 1)] == [one_len, few_len, -1]
    assert select_rule.select_path(1, max_seq_len=one_len) == select_rule.select_path(2, max_seq_len=0) == "split"
    assert select_rule.select_path(1, max_seq_len=one_len + 1) == "coop"
    assert select_rule.select_path(few, max_seq_len=few_len) == "split"
    assert select_rule.select_path(few, max_seq_len=few_len + 1) == "coop"  # SHORT_SELECT's
    assert select_rule.select_path(few + 1, max_seq_len=1) == "split"  # SELECT's own, past SHORT_SPLIT's batches
    assert select_rule.select_path(1) == "coop" and select_rule.select_path(few) == "radix"  # no hint
    assert select_rule.select_path(4, "coop", max_seq_len=1) == "coop"  # use_select's forced path
    for low, batch, longest in select_rule.short_split_ranges():  # every pair, at both ends of its batches
        for size in (low, batch):
            assert select_rule.select_path(size, max_seq_len=longest) == "split", (size, longest)
            assert select_rule.select_path(size, max_seq_len=longest + 1) != "split", (size, longest)
    monkeypatch.setattr(select_rule, "SHORT_SPLIT", ((1, 100), (3, 400), (4, 300), (16, 200)))
    assert select_rule.select_rule_text().endswith(
        "; coop or radix -> split up to 100 tokens at one request, 400 tokens at 2-3 requests, 300 tokens at 4 "
        "requests, 200 tokens at 5-16 requests")
    # End to end through indexer_topk, on a small bound: the same slots either way, the record names the path.
    monkeypatch.setattr(select_rule, "SHORT_SPLIT", ((4, 300),))
    _paths_by_hint([300, 90, 0], 7, ((None, "radix"), (300, "split"), (301, "coop")))


def test_coop_plan_moves_to_a_kept_select_block() -> None:
    # The one-launch kernel waits at grid barriers: no launch on a config the keep rule drops (one that might not
    # be resident would hang), and its tuner never prunes its one config. So the launcher picks the select block
    # first: the plan's own where kept, else another, else None (the radix select runs).
    plan = coop.gpu_plan(400, 512)
    assert plan.sel_block == 256 and len(coop.SEL_BLOCKS) == 2
    assert coop.kept_plan(plan, lambda p: True) == plan
    assert coop.kept_plan(plan, lambda p: p.sel_block != 256) == replace(plan, sel_block=512)
    assert coop.kept_plan(plan, lambda p: False) is None
    tried: list[int] = []
    coop.kept_plan(coop.gpu_plan(100, 512), lambda p: tried.append(p.sel_block) or False)
    assert tried == [512, 256]  # its own block first


def test_radix_plan_spreads_one_request() -> None:
    # On the GPU: a lone request over one program per block of its block table's capacity, a full batch over
    # PROGRAMS_PER_SM programs an SM; never more programs than blocks; a block that is no power of two named.
    with pytest.raises(ValueError, match="block must be a power of two"):
        ix_radix.plan(_Dims(64, 64, 512, 64 * 512), 512, DEV, block=96)
    if interpreting():
        pytest.skip("the interpreter's plan has a fixed number of programs (tested above)")
    one = ix_radix.plan(_Dims(1, 64, 512, 512), 512, DEV)
    assert one.programs == min(131072 // one.block, num_sms(DEV) * ix_radix.PROGRAMS_PER_SM) and one.out_block == 512
    d64 = _Dims(64, 64, 512, 64 * 512)
    assert ix_radix.plan(d64, 512, DEV).programs == -(-num_sms(DEV) * ix_radix.PROGRAMS_PER_SM // 64)
    assert ix_radix.plan(_Dims(64, 64, 1, 64), 512, DEV, block=64).programs == 4  # 256 tokens of capacity


def test_select_ab_experiment_smoke(tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    out = tmp_path / "ab.json"
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.indexer_select_ab", "--smoke", "--batches", "2", "--contexts", "300",
         "--json-out", str(out)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )  # fmt: skip
    if proc.returncode != 0 and "interpreter cannot run kernels with loops" in proc.stderr:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(out.read_text())
    (row,) = record["rows"]
    assert set(row["e2e"]) == set(select_rule.SELECTS) and all(v > 0 for v in row["e2e"].values())
    assert {"scores", "scores+hist", *select_rule.SELECTS} <= set(row["alone"])
    assert all(r == 1.0 for r in row["recall"].values())
    assert {"radix 1/SM w4", "radix 4/SM w8"} <= set(row["alone"])  # the extra grids and warp counts
    assert all(f"indexer_perf --impls bf16 --select {path}:" in proc.stdout for path in select_rule.SELECTS)
    bad = subprocess.run([sys.executable, "-m", "experiments.indexer_select_ab", "--radix-per-sm", "0"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "--radix-per-sm" in bad.stderr


def test_indexer_perf_runs_the_chosen_select() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "benchmarks.scripts.indexer_perf", "--smoke", "--impls", "bf16", "--batches", "2",
           "--contexts", "300"]  # fmt: skip
    proc = subprocess.run([*cmd, "--select", "radix_fused"], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)  # fmt: skip
    if proc.returncode != 0 and "interpreter cannot run kernels with loops" in proc.stderr:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["select"] == "radix_fused"
    (row,) = record["results"]
    assert row["launch"]["select"] == "radix_fused" and row["recall_min"] == 1.0
    bad = subprocess.run([*cmd, "--select", "nope"], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert bad.returncode == 2 and "--select must be one of split, split_radix, radix, radix_fused" in bad.stderr


needs_cuda = pytest.mark.skipif(not GPU, reason="needs a CUDA device (and no forced interpreter)")


@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize(("batch", "context"), [(1, 65536), (1, 4096), (64, 16384), (128, 4096)])
def test_gpu_paths_at_production_shapes(select_path: str, batch: int, context: int) -> None:
    g = torch.Generator().manual_seed(batch + context)
    lens = torch.randint(context // 2, context + 1, (batch,), generator=g).tolist()
    if batch > 2:
        lens[0], lens[1], lens[2] = 0, 100, context
    inp = make_indexer_inputs(batch, lens, max_context=131072, num_heads=64, topk=512, device="cuda", seed=batch)
    stats = check_indexer_output(indexer_topk(*inp.args()), indexer_logits_reference(*inp.args()[:5]),
                                 inp.block_table, inp.seq_lens, 512)  # fmt: skip
    assert stats["recall_min"] >= 0.998 and stats["recall_mean"] >= 0.9995


@needs_cuda
@pytest.mark.gpu
def test_gpu_paths_replay_in_a_graph(select_path: str) -> None:
    inp = make_indexer_inputs(8, [4096, 1000, 0, 300, 70000, 512, 20, 131072], device="cuda", seed=12)
    eager = indexer_topk(*inp.args())  # warm-up: compiles and resolves autotuning
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = indexer_topk(*inp.args())
    for _ in range(3):  # the workspace is zeroed inside the graph: every replay starts clean
        captured.fill_(-9)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(torch.sort(captured, 1).values, torch.sort(eager, 1).values)
    inp.seq_lens.copy_(torch.tensor([10, 4096, 600, 0, 5000, 512, 20, 2000], dtype=torch.int32))
    graph.replay()
    want = indexer_topk(*inp.args())
    assert torch.equal(torch.sort(captured, 1).values, torch.sort(want, 1).values)


@needs_cuda
@pytest.mark.gpu
def test_gpu_coop_workspace_reused_by_a_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    # The production shape of one and two requests: a graph captured over a caller's workspace replays
    # right every time (the kernel leaves it zeroed), also after the lengths change.
    monkeypatch.setattr(select_rule, "SELECT", "coop")
    inp = make_indexer_inputs(2, [131072, 70000], device="cuda", seed=21)
    ws = indexer_workspace(2, "cuda")
    indexer_topk(*inp.args(), workspace=ws)  # warm-up: compiles and resolves autotuning
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = indexer_topk(*inp.args(), workspace=ws)
    for lens in ([4096, 70000], [131072, 0], [100, 600], [65536, 16384], [65536, 16384]):
        inp.seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        captured.fill_(-9)
        graph.replay()
        torch.cuda.synchronize()
        ref = indexer_logits_reference(*inp.args()[:5])
        assert check_indexer_output(captured, ref, inp.block_table, inp.seq_lens, 512)["recall_min"] >= 0.998, lens
        assert int(ws.abs().sum()) == 0, lens


def test_step_perf_refuses_an_unknown_select() -> None:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.scripts.kernel_step_perf", "--select", "nope"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and "--select must be one of split, split_radix, radix, radix_fused" in proc.stderr


@pytest.mark.skipif(GPU, reason="an in-process smoke run: the kernels must have been decorated for the interpreter")
def test_select_ab_keeps_going_past_a_wrong_variant(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # noqa: ANN001
    # One GPU call: a wrong (or failing) variant is reported, the others are still measured, exit status 1.
    from experiments import indexer_select_ab as ab

    real = ix_launch._select

    def corrupt_split_radix(logits, bt, sl, out, topk, d, path, ws_cand=None, max_seq_len=None):  # noqa: ANN001, ANN202
        runs = real(logits, bt, sl, out, topk, d, path, ws_cand, max_seq_len)
        if path == "split_radix":
            out.fill_(0)  # duplicates: not a selection
        return runs

    monkeypatch.setattr(ix_launch, "_select", corrupt_split_radix)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # what main sets for --smoke, put back afterwards
    assert ab.main(["--smoke", "--batches", "1", "--contexts", "300", "--radix-per-sm", "1", "--scores-per-sm",
                    "2"]) == 1  # fmt: skip
    out, err = capsys.readouterr()
    record = json.loads(out.strip().splitlines()[-1])
    (row,) = record["rows"]
    assert set(row["errors"]) == {"split_radix e2e", "split_radix alone"}
    assert "duplicate" in row["errors"]["split_radix e2e"] and row["e2e"]["split_radix"] is None
    assert all(row["e2e"][p] > 0 and row["recall"][p] == 1.0 for p in select_rule.SELECTS if p != "split_radix")
    assert "FAIL" in out and "error: B=1 ctx 300 split_radix e2e" in err
