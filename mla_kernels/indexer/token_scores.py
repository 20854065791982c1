"""The bf16 indexer's scores kernel with tokens as the MMA's rows (``[BLOCK_T, 128] x [128, H]``).

Programs stride over each request's real length, the page-table walk fused into the tile loads, ``-inf``
for a token on an unmapped page. With tokens as rows, the weighted sum over heads runs along the
accumulator's columns, which one warp holds (a few shuffles), instead of across the warps that hold the
heads (shared memory and a barrier every tile, the head-major layout this kernel replaced); the FP8 keys
are the left operand, converted to fp16 in registers, against queries scaled per head into fp16's range
(``_load_q``): the same exact products as bf16's, for less conversion work.

``ZERO_WS``: the first program of each request zeroes its radix workspace row (``ws_ptr``), which the
select's passes then fill: no memset launch before them.

``HIST``: the kernel also runs pass 0 of the global radix select (``radix_kernels``): after its tiles, each
program histograms the top byte of the order keys of the logits it stored and adds them to the request's
workspace row (``ws_ptr``), the last one finds the bucket, so the select starts at pass 1.

``_coop_topk_kernel``: scores and the whole global radix select in one launch, for a few requests. Its
grid is small enough for every program to be resident at once, so its phases (scores; pass 0; pass 1;
compaction, whose last program finishes the select) are separated by grid barriers on the workspace row
instead of kernel boundaries, and every program resolves each bucket itself from the merged histogram (no
program finds it for the others). Under the interpreter, which runs programs one after another, each
phase is a launch of its own (``PHASE``).
"""

from __future__ import annotations

import triton
import triton.language as tl

# Absolute: the oracle test loads a mutated copy of this file as a module of its own.
from mla_kernels.indexer.kernels import _order_key, _request_len
from mla_kernels.indexer.radix_kernels import (
    HIST_BINS,
    ST_SYNC,
    ST_TICKET,
    _active,
    _add_hist,
    _arrive,
    _block_hist,
    _block_keys,
    _byte_hist,
    _compact_block,
    _compact_keys,
    _compaction_ticket,
    _final_select,
    _flush_hist,
    _grid_sync,
    _keys_hist,
    _pad_row,
    _round,
    _slots,
    _wait_all,
    _zero_ws_row,
)
from mla_kernels.pdl import wait_prior_grid


@triton.jit
def _pow2(e):
    # 2**e as fp32 for integer e in [-126, 127], built from its exponent bits (exact; no exp2 rounding).
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _load_q(q_ptr, w_ptr, b, stride_qb, stride_qh, stride_wb, H, BLOCK_H: tl.constexpr, FP32_MATH: tl.constexpr):
    # A request's queries, transposed for the MMA ([128, BLOCK_H]) in fp16, so that the FP8 keys need one
    # conversion instruction per two values (e4m3 -> bf16 takes several: 23-27% of the kernel's time at 64
    # requests and 16K-64K tokens, docs/measurements/scores_fp16_session18.log).
    # Each head is first scaled by the power of two 2**-e that puts its largest |q| in [2**14, 2**15), where
    # fp16 holds every bf16 value exactly (down to 2**-28 of the largest: smaller ones round to fp16's
    # subnormals, an error under 2**-32 of the largest product). The head weights ([BLOCK_H]) come back
    # times 2**e, which undoes the scaling after the ReLU (a positive factor) at no cost in the tile loop;
    # exact while |w| * 2**e stays a normal fp32 number.
    hh = tl.arange(0, BLOCK_H)
    d = tl.arange(0, 128)
    q = tl.load(q_ptr + b * stride_qb + hh[:, None] * stride_qh + d[None, :], mask=hh[:, None] < H, other=0.0)
    w = tl.load(w_ptr + b * stride_wb + hh, mask=hh < H, other=0.0)
    q = q.to(tl.float32)
    top = (tl.max(tl.abs(q), axis=1).to(tl.int32, bitcast=True) >> 23) - 127  # floor(log2 max|q|) per head
    e = tl.minimum(tl.maximum(top - 14, -112), 113)  # a zero or tiny head: any scale; both powers stay normal
    q = q * _pow2(-e)[:, None]
    if not FP32_MATH:  # the interpreter gets half-precision products wrong; fp32 there is exact
        q = q.to(tl.float16)
    return tl.trans(q), w * _pow2(e)


@triton.jit
def _tile_page(bt_row, t0, n):
    # The page-table entry of the tile at ``t0`` (BLOCK_T divides 256: a tile is in one page); -1 past the
    # request, so nothing of it is read.
    return tl.load(bt_row + t0 // 256, mask=t0 < n, other=-1)


@triton.jit
def _tile_ok(page, t0, n, num_pages, BLOCK_T: tl.constexpr):
    # The tile's tokens and which of them are read: in the request, on a mapped page.
    t = t0 + tl.arange(0, BLOCK_T)
    return t, t < tl.where((page >= 0) & (page < num_pages), n, 0)


@triton.jit
def _tile_scales(cache_ptr, page, t0, n, num_pages, stride_page, BLOCK_T: tl.constexpr):
    # The fp32 scales of the tile at ``t0`` on ``page`` ([BLOCK_T]; 0 where nothing is read).
    t, ok = _tile_ok(page, t0, n, num_pages, BLOCK_T)
    base = cache_ptr + page.to(tl.int64) * stride_page
    return tl.load((base + 256 * 128).to(tl.pointer_type(tl.float32)) + t % 256, mask=ok, other=0.0)


@triton.jit
def _score_tile(qt, w, cache_ptr, page, scale, t0, n, num_pages, stride_page,
                BLOCK_T: tl.constexpr, FP32_MATH: tl.constexpr):  # fmt: skip
    # The logits of tokens [t0, t0 + BLOCK_T) ([BLOCK_T]; -inf on an unmapped page) and their positions,
    # from the tile's page entry and scales (loaded a tile ahead by ``_score_tiles``).
    t, ok = _tile_ok(page, t0, n, num_pages, BLOCK_T)
    d = tl.arange(0, 128)
    base = cache_ptr + page.to(tl.int64) * stride_page
    kb = tl.load(base + (t % 256)[:, None] * 128 + d[None, :], mask=ok[:, None], other=0)
    k = kb.to(tl.float8e4nv, bitcast=True)
    if FP32_MATH:
        s = tl.dot(k.to(tl.float32), qt)
    else:
        s = tl.dot(k.to(tl.float16), qt)  # e4m3 -> fp16 is exact; fp32 accumulate
    # relu(c * s) = c * relu(s) for the token's scale c >= 0 (amax / 448, the layout's), so c multiplies the
    # sum over heads, one product a token instead of one a head (2-8 us of 61-228 at 64 requests and 16K-64K:
    # docs/measurements/indexer_ahead_session32.log); the sum rounds differently, within fp32's error.
    logit = tl.sum(tl.maximum(s, 0.0) * w[None, :], axis=1) * scale  # [BLOCK_T]
    return t, tl.where(ok, logit, float("-inf"))  # unmapped page: ranks last


@triton.jit
def _prefetch_l2(ptrs, mask):
    # Ask L2 for the lines at ``ptrs`` where ``mask``: no registers for the data, nothing waits for it.
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.b32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
        "=r,l,r", [ptrs.to(tl.int64), mask.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit
def _first_tile(cache_ptr, bt_row, start, max_ctx, num_pages, stride_page, BLOCK_T: tl.constexpr):
    # The page entry and scales of a program's first tile, bounded by the rows' capacity (max_ctx tokens), not
    # the request's length: issued beside the length's load instead of after its round trip (with the queries:
    # 0.2-0.9 us off the indexer at one request of 2K-16K on the H100, docs/measurements/session51_h100.log).
    # Past the request, ``_score_tile`` masks what they hold.
    page = _tile_page(bt_row, start, max_ctx)
    return page, _tile_scales(cache_ptr, page, start, max_ctx, num_pages, stride_page, BLOCK_T)


@triton.jit
def _score_tiles(qt, w, cache_ptr, bt_row, row, start, step, n, num_pages, stride_page, page_n, scale_n,
                 BLOCK_T: tl.constexpr, FP32_MATH: tl.constexpr, PREFETCH: tl.constexpr):  # fmt: skip
    # One program's tiles start, start + step, ... below n: logits stored to ``row``; ``page_n`` and ``scale_n``
    # are the first tile's (``_first_tile``). The next tile's page entry and scales are loaded at the top of each
    # tile and carried: loaded where used, the scales waited on the keys' copy and the page entry held up the
    # next copy, and Triton's pipeline kept one tile in flight (with them carried it keeps num_stages - 1;
    # docs/measurements/indexer_ahead_session32.log). PREFETCH: the next tile's keys are also asked of L2 (inline
    # PTX: not under the interpreter).
    for t0 in range(start, n, step):
        page = page_n
        scale = scale_n
        page_n = _tile_page(bt_row, t0 + step, n)
        scale_n = _tile_scales(cache_ptr, page_n, t0 + step, n, num_pages, stride_page, BLOCK_T)
        if PREFETCH:
            tn, okn = _tile_ok(page_n, t0 + step, n, num_pages, BLOCK_T)
            _prefetch_l2(cache_ptr + page_n.to(tl.int64) * stride_page + (tn % 256) * 128, okn)
        t, logit = _score_tile(qt, w, cache_ptr, page, scale, t0, n, num_pages, stride_page, BLOCK_T, FP32_MATH)
        tl.store(row + t, logit, mask=t < n)


@triton.jit
def _own_hist(row, start, step, n, BLOCK_T: tl.constexpr):
    # Pass 0's histogram of the logits this program stored (tiles start, start + step, ...), read back 1,024 at
    # a time: one histogram a tile inside the scores loop cost more than the pass it saves.
    tl.debug_barrier()  # every thread's stores are visible to the others (a CTA barrier orders global memory)
    GROUP: tl.constexpr = 1024 // BLOCK_T
    lane = tl.arange(0, GROUP * BLOCK_T)
    h = tl.zeros([256], dtype=tl.int32)
    for g0 in range(start, n, step * GROUP):
        t = g0 + (lane // BLOCK_T) * step + lane % BLOCK_T
        h += _byte_hist(_order_key(tl.load(row + t, mask=t < n, other=0.0)), t < n, 24)
    return h


@triton.jit
def _bf16_scores_kernel_t(
    q_ptr, w_ptr, cache_ptr, bt_ptr, seq_ptr, logits_ptr, ws_ptr,
    stride_qb, stride_qh, stride_wb, stride_page, stride_btb, stride_lb, stride_ws,
    H, num_pages, max_ctx, topk,
    BLOCK_H: tl.constexpr, BLOCK_T: tl.constexpr, FP32_MATH: tl.constexpr, HIST: tl.constexpr,
    ZERO_WS: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    pid = tl.program_id(0)
    b = tl.program_id(1)
    if ZERO_WS:
        if pid == 0:  # every request has a program 0, an empty one too
            _zero_ws_row(ws_ptr + b * stride_ws)
    step = tl.num_programs(0) * BLOCK_T
    bt_row = bt_ptr + b * stride_btb
    n = tl.minimum(tl.load(seq_ptr + b), max_ctx)
    # Issued beside the length's load (idle programs load them for nothing): _first_tile says why.
    page0, scale0 = _first_tile(cache_ptr, bt_row, pid * BLOCK_T, max_ctx, num_pages, stride_page, BLOCK_T)
    qt, w = _load_q(q_ptr, w_ptr, b, stride_qb, stride_qh, stride_wb, H, BLOCK_H, FP32_MATH)
    if pid * BLOCK_T < n:
        row = logits_ptr + b * stride_lb
        _score_tiles(qt, w, cache_ptr, bt_row, row, pid * BLOCK_T, step, n, num_pages, stride_page, page0, scale0,
                     BLOCK_T, FP32_MATH, False)  # fmt: skip
        if HIST:
            if n > topk:  # else every token is selected: nothing to resolve
                _flush_hist(ws_ptr + b * stride_ws, _own_hist(row, pid * BLOCK_T, step, n, BLOCK_T),
                            _active(n, tl.num_programs(0), BLOCK_T), topk, 0)


@triton.jit
def _merged_hist(ws_row, PASS: tl.constexpr):
    # Pass PASS's merged histogram (complete: after a grid barrier; in L2, where the atomics landed).
    return tl.load(ws_row + PASS * HIST_BINS + tl.arange(0, 256), cache_modifier=".cg")


@triton.jit
def _coop_topk_kernel(
    q_ptr, w_ptr, cache_ptr, bt_ptr, seq_ptr, logits_ptr, ws_ptr, cand_ptr, out_ptr,
    stride_qb, stride_qh, stride_wb, stride_page, stride_btb, stride_lb, stride_ws, stride_cb, stride_ob,
    H, num_pages, max_ctx, topk,
    BLOCK_H: tl.constexpr, BLOCK_T: tl.constexpr, FP32_MATH: tl.constexpr, PHASE: tl.constexpr,
    SEL_BLOCK: tl.constexpr, FBLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr, L2_PREFETCH: tl.constexpr,
):  # fmt: skip
    # No PDL here (``mla_kernels.pdl``): launched early, beside the previous kernel's last programs, this
    # grid-barrier kernel made the one-request decode step slower at 64K tokens (30.5 against 28.5 us), and again
    # in session 48 at 3K-64K, 0-1.7 us (docs/measurements/session48_h100.log, call G).
    # PHASE -1: every phase, grid barriers between them (the GPU); 0-3: that phase alone (the interpreter).
    # L2_PREFETCH: each score tile asks L2 for the next one's keys (inline PTX: not under the interpreter).
    pid = tl.program_id(0)
    b = tl.program_id(1)
    programs = tl.num_programs(0)
    n = _request_len(seq_ptr, b, max_ctx)
    ws_row = ws_ptr + b * stride_ws
    out_row = out_ptr + b * stride_ob
    bt_row = bt_ptr + b * stride_btb
    if PHASE <= 0:  # issued beside the length's load: _first_tile says why
        page0, scale0 = _first_tile(cache_ptr, bt_row, pid * BLOCK_T, max_ctx, num_pages, stride_page, BLOCK_T)
        qt, w = _load_q(q_ptr, w_ptr, b, stride_qb, stride_qh, stride_wb, H, BLOCK_H, FP32_MATH)
    row = logits_ptr + b * stride_lb
    active = _active(n, programs, BLOCK_T)  # programs with tokens to score
    # Programs with a select block: the others arrive at the scores' barrier and leave, so the select's
    # barriers and ticket count only these.
    selecting = _active(n, programs, SEL_BLOCK)
    resolve = n > topk  # else every token is selected
    # The select's blocks: a program's first (``t1``) is loaded once after the scores and kept in registers
    # through both passes and the compaction (one block a program up to programs x SEL_BLOCK tokens); any
    # further ones from ``rest`` are loaded where used.
    t1 = pid * SEL_BLOCK + tl.arange(0, SEL_BLOCK)
    step = programs * SEL_BLOCK
    rest = pid * SEL_BLOCK + step
    if PHASE <= 0:  # scores
        if pid == 0:
            _pad_row(out_row, tl.minimum(n, topk), topk, OUT_BLOCK)
        if pid < active:
            # Tiles of 128 tokens do without the L2 prefetch: at 8 warps and 3 stages their registers (Triton
            # 3.6, sm_120) would leave one block an SM.
            _score_tiles(qt, w, cache_ptr, bt_row, row, pid * BLOCK_T, programs * BLOCK_T, n, num_pages, stride_page,
                         page0, scale0, BLOCK_T, FP32_MATH, L2_PREFETCH and BLOCK_T <= 64)  # fmt: skip
            if PHASE < 0:
                arrived = _arrive(ws_row + ST_TICKET)
                if pid < selecting:
                    _wait_all(ws_row + ST_TICKET, arrived, active)
    if PHASE != 0:
        key1 = _block_keys(row, t1, n)  # all lanes masked off where the program has no block
        if PHASE != 1 and PHASE != 2:  # its slots, walked here, off the compaction's chain of round trips
            slot1 = _slots(bt_row, t1, t1 < n, num_pages)
    if PHASE < 0 or PHASE == 1:  # byte pass 0
        if (pid < selecting) & resolve:
            h = _keys_hist(key1, t1 < n, 0, 0)
            for t0 in range(rest, n, step):
                h += _block_hist(row, t0 + tl.arange(0, SEL_BLOCK), n, 0, 0)
            _add_hist(ws_row, h)
            if PHASE < 0:
                _grid_sync(ws_row + ST_TICKET + 1, selecting)
    zero = tl.zeros([], dtype=tl.int32)
    # Pass 0's bucket, found by byte pass 1 and kept in registers for the compaction (which finds it again
    # when it is a launch of its own).
    p0 = zero.to(tl.uint32)
    g0 = zero
    done0 = zero != 0
    if PHASE < 0 or PHASE == 2:  # byte pass 1
        if (pid < selecting) & resolve:
            p0, g0, done0 = _round(_merged_hist(ws_row, 0), zero.to(tl.uint32), zero, topk, 24)
            if done0 == 0:
                h = _keys_hist(key1, t1 < n, p0, 1)
                for t0 in range(rest, n, step):
                    h += _block_hist(row, t0 + tl.arange(0, SEL_BLOCK), n, p0, 1)
                _add_hist(ws_row + HIST_BINS, h)
            if PHASE < 0:
                _grid_sync(ws_row + ST_SYNC, selecting)
    if PHASE < 0 or PHASE == 3:  # compaction; its last program selects among the candidates
        if pid < selecting:
            if PHASE == 3:
                p0, g0, done0 = _round(_merged_hist(ws_row, 0), zero.to(tl.uint32), zero, topk, 24)
            # Pass 1's histogram is all zeros where pass 0 settled the bucket (done0).
            p1, g1, done1 = _round(_merged_hist(ws_row, 1), p0, g0, topk, 16)
            # n <= topk: prefix 0, done, keeps every token
            prefix = tl.where(resolve, tl.where(done0, p0, p1), zero.to(tl.uint32))
            n_gt = tl.where(resolve, tl.where(done0, g0, g1), 0)
            done = tl.where(resolve, (done0 | done1).to(tl.int32), 1)
            cand_row = cand_ptr + b * stride_cb
            cands = _compact_keys(key1, t1, n, prefix, done, ws_row, out_row, bt_row, cand_row, topk, num_pages, slot1)
            for t0 in range(rest, n, step):
                cands += _compact_block(row, t0 + tl.arange(0, SEL_BLOCK), n, prefix, done, ws_row, out_row, bt_row,
                                        cand_row, topk, num_pages)  # fmt: skip
            ticket, m = _compaction_ticket(ws_row, cands)
            if ticket == selecting - 1:
                # Every other program is past its last use of the row (its ticket came after its last
                # barrier and atomic), and the final select does not read it: leave it zeroed, so a caller's
                # workspace needs no memset next time. Before the select, its stores drain while it runs (two
                # requests at 64K: the step 0.3-0.4 us faster; docs/measurements/indexer_zero_first_session29.log).
                _zero_ws_row(ws_row)
                if done == 0:
                    _final_select(m, prefix, n_gt, cand_row, out_row, topk, FBLOCK)
