"""Triton kernels of the split top-k select: one request's logits spread over many programs.

Where the plan holds every request in one chunk (``_request_topk_kernel``, one program a request), that
program writes the request's row of slots. Otherwise stage 1 (``_chunk_topk_kernel``, one program per
(chunk, request)): a chunk of ``CHUNK`` logits is held in registers, its k-th largest order key found by
a bitwise search (two bits a round, three counts packed into one int64 reduction, stopping once exactly k
keys pass), and its top-k written as candidates (order key, token position). A request that fits one chunk
is finished there: its row of slots is written directly. Stage 2 (``_merge_topk_kernel``, one program per
request): the same in-register select over the candidates of every chunk of a longer request. Every count
is a reduction over registers: no histogram atomics, no pass over the logits in global memory after the
first load (but in the one-program kernel's fallback for a request past a wrong length hint).
"""

from __future__ import annotations

import triton
import triton.language as tl

from mla_kernels.pdl import wait_prior_grid

from .kernels import _order_key, _radix_select_row, _request_len
from .radix_kernels import _kth_largest_radix, _pad_row, _page_slots, _slots


@triton.jit
def _kth_largest(key, k, n_full):
    # key: uint32 with 0 on empty lanes (a real key is never 0); n_full: at least the full lanes (where it is at
    # most k, every full lane is taken and no round runs). Returns (T, exact): exact when exactly k
    # lanes are at or above T; else T is the largest with count(key >= T) >= k (the k-th largest key, ties at
    # it), or 0 when fewer than k lanes are full. The rounds stop once exactly k lanes pass: at the first bit
    # where the k-th and (k+1)-th keys differ (4-14 of 16 rounds, mostly 8-10, on the benchmarks' synthetic
    # logits: docs/measurements/split_rounds_session42.log).
    thr = tl.zeros([], dtype=tl.uint32)
    one = tl.full([], 1, tl.uint32)
    n_at = tl.full([], -1, tl.int32)  # count(key >= thr) once a round has raised thr
    # A loop that stops once exactly k keys pass. Unrolled, each round behind a uniform branch (4f79b73), it was
    # within 0.4 us at one request of 4K and at 64 of 4K-8K but 7.4 us slower at one request of 8K (28.7-28.9
    # against 21.3-21.4 us) on the H100 (docs/measurements/session44_h100.log), though a looped round takes 140
    # instructions a thread against an unrolled one's 61 (triton 3.6, sm_90).
    r = tl.where(n_full <= k, 16, 0).to(tl.uint32)
    while (r < 16) & (n_at != k):
        lo = one << (30 - 2 * r)
        hi = one << (31 - 2 * r)
        c1 = thr | lo
        c2 = thr | hi
        c3 = c2 | lo
        packed = (
            (key >= c1).to(tl.int64)
            + ((key >= c2).to(tl.int64) << 21)
            + ((key >= c3).to(tl.int64) << 42)
        )
        s = tl.sum(packed, axis=0)
        n1 = (s & 0x1FFFFF).to(tl.int32)
        n2 = ((s >> 21) & 0x1FFFFF).to(tl.int32)
        n3 = (s >> 42).to(tl.int32)
        thr = tl.where(n3 >= k, c3, tl.where(n2 >= k, c2, tl.where(n1 >= k, c1, thr)))
        n_at = tl.where(n3 >= k, n3, tl.where(n2 >= k, n2, tl.where(n1 >= k, n1, n_at)))
        r += 1
    return thr, n_at == k


@triton.jit
def _select_positions(key, k, n_full, RADIX: tl.constexpr):
    # Which lanes hold the top k full lanes, and each one's place in [0, min(k, full lanes)): every key
    # above the threshold, then the first ties at it (any choice among equal keys is right). n_full: at least
    # the full lanes (a chunk's or request's tokens; the block where unknown). RADIX: the threshold in four
    # byte rounds (histograms) instead of up to sixteen two-bit rounds.
    if RADIX:
        thr = _kth_largest_radix(key, k)
        exact = thr != thr  # False: the byte rounds return the k-th key itself, whose ties get ranked
    else:
        thr, exact = _kth_largest(key, k, n_full)
    if exact:  # the usual case: no ties to rank, one reduction and one scan fewer
        take = key >= thr
    else:
        gt = key > thr  # thr 0 (fewer than k full lanes): every full lane
        eq = (key == thr) & (thr > 0)
        n_gt = tl.sum(gt.to(tl.int32), axis=0)
        eq_rank = tl.cumsum(eq.to(tl.int32), axis=0) - 1
        # A comparison, not ``gt | (...)``: the interpreter keeps bitwise-or of masks as integers.
        take = (gt.to(tl.int32) + (eq & (eq_rank < k - n_gt)).to(tl.int32)) > 0
    pos = tl.cumsum(take.to(tl.int32), axis=0) - 1
    return take, pos


@triton.jit
def _write_slots(out_row, slot, take, pos, n_sel, topk, OUT_BLOCK: tl.constexpr):
    # The taken lanes' slots at their places, then -1 past n_sel.
    tl.store(out_row + pos, slot, mask=take & (pos < topk))
    _pad_row(out_row, n_sel, topk, OUT_BLOCK)


@triton.jit
def _store_slots(out_row, bt_row, t, take, pos, n_sel, topk, num_pages, OUT_BLOCK: tl.constexpr):
    # Token positions -> physical slots (-1 for a token on an unmapped page), then -1 past n_sel.
    _write_slots(out_row, _slots(bt_row, t, take, num_pages), take, pos, n_sel, topk, OUT_BLOCK)


@triton.jit
def _select_row(x, page, t, out_row, n, topk, num_pages, OUT_BLOCK: tl.constexpr, RADIX: tl.constexpr):
    # A request's final row of slots from its logits ``x`` at lanes ``t`` and their page-table entries, both
    # already loaded (lanes at or past n are ignored, whatever they hold).
    key = tl.where(t < n, _order_key(x), 0)
    take, pos = _select_positions(key, topk, n, RADIX)
    _write_slots(out_row, _page_slots(page, t, num_pages), take, pos, tl.minimum(n, topk), topk, OUT_BLOCK)


@triton.jit
def _short_request(row, out_row, bt_row, n, topk, num_pages, BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr,
                   RADIX: tl.constexpr):  # fmt: skip
    # A request of at most BLOCK tokens, whole in one program: its final row of slots. Every lane's page entry
    # is loaded beside its logit, not after the rounds for the taken lanes: one dependent load fewer at the end.
    t = tl.arange(0, BLOCK)
    valid = t < n
    x = tl.load(row + t, mask=valid, other=0.0)
    page = tl.load(bt_row + t // 256, mask=valid, other=0)
    _select_row(x, page, t, out_row, n, topk, num_pages, OUT_BLOCK, RADIX)


@triton.jit
def _request_topk_kernel(
    logits_ptr, bt_ptr, seq_ptr, out_ptr,
    stride_lb, stride_btb, stride_ob,
    topk, max_ctx, num_pages,
    BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr, RADIX: tl.constexpr, LONG_BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # One program a request, the whole request in BLOCK lanes (the plan's longest request). A longer one (a
    # wrong length hint) is still selected right, by the single-program radix select, LONG_BLOCK at a time.
    b = tl.program_id(0)
    row = logits_ptr + b * stride_lb
    out_row = out_ptr + b * stride_ob
    bt_row = bt_ptr + b * stride_btb
    # The block's logits and page entries go out beside the length's load, masked by the rows' capacity
    # (max_ctx tokens), not after its round trip: 0.4-1.2 us off the indexer at 1 and 64 requests of 2K-4K on
    # the H100 (docs/measurements/session51_h100.log).
    t = tl.arange(0, BLOCK)
    x = tl.load(row + t, mask=t < max_ctx, other=0.0)
    page = tl.load(bt_row + t // 256, mask=t < max_ctx, other=0)
    n = _request_len(seq_ptr, b, max_ctx)
    if n <= BLOCK:
        _select_row(x, page, t, out_row, n, topk, num_pages, OUT_BLOCK, RADIX)
    else:
        _radix_select_row(row, out_row, bt_row, n, topk, num_pages, LONG_BLOCK)


@triton.jit
def _chunk_topk_kernel(
    logits_ptr, bt_ptr, seq_ptr, ckey_ptr, cpos_ptr, out_ptr,
    stride_lb, stride_btb, stride_cb, stride_ob,
    topk, max_ctx, num_pages,
    CHUNK: tl.constexpr, OUT_BLOCK: tl.constexpr, RADIX: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    c = tl.program_id(0)
    b = tl.program_id(1)
    n = _request_len(seq_ptr, b, max_ctx)
    start = c * CHUNK
    row = logits_ptr + b * stride_lb
    out_row = out_ptr + b * stride_ob
    bt_row = bt_ptr + b * stride_btb
    if n <= CHUNK:  # the whole request in chunk 0 (which also writes the all -1 row of an empty one)
        if c == 0:
            if n <= CHUNK // 2:  # half the lanes: half the work per count
                _short_request(row, out_row, bt_row, n, topk, num_pages, CHUNK // 2, OUT_BLOCK, RADIX)
            else:
                _short_request(row, out_row, bt_row, n, topk, num_pages, CHUNK, OUT_BLOCK, RADIX)
    elif start < n:  # candidates of this chunk; a longer request has topk of them in every full chunk
        t = start + tl.arange(0, CHUNK)
        valid = t < n
        key = tl.where(valid, _order_key(tl.load(row + t, mask=valid, other=0.0)), 0)
        take, pos = _select_positions(key, topk, n - start, RADIX)  # a request's last chunk may hold <= topk
        seg = b * stride_cb + c * topk + pos
        tl.store(ckey_ptr + seg, key.to(tl.int32, bitcast=True), mask=take)
        tl.store(cpos_ptr + seg, t, mask=take)


@triton.jit
def _merge_row(ckey_row, cpos_row, out_row, bt_row, n, topk, num_pages,
               CHUNK: tl.constexpr, BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr, RADIX: tl.constexpr):  # fmt: skip
    # Candidate j belongs to chunk j // topk; a chunk holds min(topk, its tokens) of them.
    j = tl.arange(0, BLOCK)
    c = j // topk
    valid = (j % topk) < tl.minimum(topk, n - c * CHUNK)
    key = tl.load(ckey_row + j, mask=valid, other=0).to(tl.uint32, bitcast=True)
    key = tl.where(valid, key, 0)
    take, pos = _select_positions(key, topk, BLOCK, RADIX)  # a merged request has over topk candidates
    t = tl.load(cpos_row + j, mask=take, other=0)
    _store_slots(out_row, bt_row, t, take, pos, tl.minimum(n, topk), topk, num_pages, OUT_BLOCK)


@triton.jit
def _merge_piece(ckey_row, cpos_row, lane0, dst, n, topk, CHUNK: tl.constexpr, BLOCK: tl.constexpr,
                OUT_BLOCK: tl.constexpr, RADIX: tl.constexpr):  # fmt: skip
    # The top-k of candidate lanes [lane0, lane0 + BLOCK) written to lanes [dst, dst + topk) of the same
    # row, lanes already read (dst + topk <= BLOCK for the first piece, below lane0 for the others); key 0
    # marks the unused tail. Barriers on both sides keep the pieces apart.
    j = lane0 + tl.arange(0, BLOCK)
    c = j // topk
    valid = (j % topk) < tl.minimum(topk, n - c * CHUNK)
    key = tl.where(valid, tl.load(ckey_row + j, mask=valid, other=0).to(tl.uint32, bitcast=True), 0)
    n_valid = tl.sum(valid.to(tl.int32), axis=0)
    n_take = tl.minimum(n_valid, topk)
    take, pos = _select_positions(key, topk, n_valid, RADIX)
    t = tl.load(cpos_row + j, mask=take, other=0)  # after the select: not live through it
    tl.debug_barrier()  # every lane of this half is in registers before any is overwritten
    tl.store(ckey_row + dst + pos, key.to(tl.int32, bitcast=True), mask=take)
    tl.store(cpos_row + dst + pos, t, mask=take)
    o = tl.arange(0, OUT_BLOCK)
    for s0 in range(0, topk, OUT_BLOCK):
        tl.store(ckey_row + dst + s0 + o, tl.zeros([OUT_BLOCK], tl.int32), mask=(s0 + o >= n_take) & (s0 + o < topk))
    tl.debug_barrier()


@triton.jit
def _merge_topk_kernel(
    ckey_ptr, cpos_ptr, bt_ptr, seq_ptr, out_ptr,
    stride_cb, stride_btb, stride_ob,
    topk, max_ctx, num_pages,
    CHUNK: tl.constexpr, MERGE_BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr, RADIX: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # Requests of one chunk were finished by stage 1. A request's candidates take a quarter-, half- or
    # full-size block (less work per count for a shorter one); past MERGE_BLOCK (up to twice that, the plan
    # sees to it), each of four half-block pieces is reduced to its top-k first, then the 4 * topk winners.
    b = tl.program_id(0)
    n = _request_len(seq_ptr, b, max_ctx)
    if n > CHUNK:
        cand = tl.cdiv(n, CHUNK) * topk
        ckey_row = ckey_ptr + b * stride_cb
        cpos_row = cpos_ptr + b * stride_cb
        out_row = out_ptr + b * stride_ob
        bt_row = bt_ptr + b * stride_btb
        if cand <= MERGE_BLOCK // 4:
            _merge_row(ckey_row, cpos_row, out_row, bt_row, n, topk, num_pages, CHUNK, MERGE_BLOCK // 4, OUT_BLOCK,
                       RADIX)  # fmt: skip
        elif cand <= MERGE_BLOCK // 2:
            _merge_row(ckey_row, cpos_row, out_row, bt_row, n, topk, num_pages, CHUNK, MERGE_BLOCK // 2, OUT_BLOCK,
                       RADIX)  # fmt: skip
        elif cand <= MERGE_BLOCK:
            _merge_row(ckey_row, cpos_row, out_row, bt_row, n, topk, num_pages, CHUNK, MERGE_BLOCK, OUT_BLOCK, RADIX)
        else:
            for piece in tl.static_range(4):  # half-block pieces: a full block would spill here
                _merge_piece(ckey_row, cpos_row, piece * (MERGE_BLOCK // 2), piece * topk, n, topk, CHUNK,
                            MERGE_BLOCK // 2, OUT_BLOCK, RADIX)  # fmt: skip
            j = tl.arange(0, MERGE_BLOCK // 4)  # the plan keeps 4 * topk within a quarter block
            key = tl.load(ckey_row + j, mask=j < 4 * topk, other=0).to(tl.uint32, bitcast=True)
            take, pos = _select_positions(key, topk, 4 * topk, RADIX)  # key 0 (an unused lane) is never taken
            t = tl.load(cpos_row + j, mask=take, other=0)
            _store_slots(out_row, bt_row, t, take, pos, topk, topk, num_pages, OUT_BLOCK)
