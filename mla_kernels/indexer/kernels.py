"""Triton kernels of the indexer: the fp32 SIMT baseline over max_context, the order key every select
shares, and the single-program radix select (see ``mla_kernels.indexer``; the bf16 scores kernel is in
``token_scores``, the split and global selects in ``split_kernels`` and ``radix_kernels``)."""

from __future__ import annotations

import triton
import triton.language as tl

from mla_kernels.pdl import wait_prior_grid


@triton.jit
def _fp32_maxctx_scores_kernel(
    q_ptr, w_ptr, cache_ptr, bt_ptr, seq_ptr, logits_ptr,
    stride_qb, stride_qh, stride_wb, stride_page, stride_btb, stride_lb,
    H, num_pages,
    BLOCK_T: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # The baseline: every (request, block) of the block table's capacity does the full fp32 work.
    j = tl.program_id(0)
    b = tl.program_id(1)
    t = j * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.arange(0, 128)
    raw_page = tl.load(bt_ptr + b * stride_btb + (j * BLOCK_T) // 256)
    # Capacity past the request: read a real page anyway (the baseline's work), mask afterwards.
    page = tl.minimum(tl.maximum(raw_page, 0), num_pages - 1)
    base = cache_ptr + page.to(tl.int64) * stride_page
    off = t % 256
    kb = tl.load(base + off[:, None] * 128 + d[None, :])
    scale = tl.load((base + 256 * 128).to(tl.pointer_type(tl.float32)) + off)
    k = kb.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale[:, None]
    acc = tl.zeros([BLOCK_T], dtype=tl.float32)
    for h in range(H):
        qh = tl.load(q_ptr + b * stride_qb + h * stride_qh + d).to(tl.float32)
        wh = tl.load(w_ptr + b * stride_wb + h)
        s = tl.sum(k * qh[None, :], axis=1)
        acc += wh * tl.maximum(s, 0.0)
    n = tl.load(seq_ptr + b)
    # Tokens past seq_lens, or on an unmapped page (seq_lens beyond the request's pages), rank last.
    acc = tl.where(t < tl.where((raw_page >= 0) & (raw_page < num_pages), n, 0), acc, float("-inf"))
    tl.store(logits_ptr + b * stride_lb + t, acc)


@triton.jit
def _request_len(seq_ptr, b, max_ctx):
    # Request b's length as every select kernel reads it: seq_lens clamped to [0, max_ctx] (the block table's
    # capacity), so a bad length neither reads past the table nor goes negative.
    return tl.minimum(tl.maximum(tl.load(seq_ptr + b), 0), max_ctx)


@triton.jit
def _order_key(x):
    # fp32 -> uint32 whose unsigned order is the float order (negatives flipped, positives get the top bit).
    bits = x.to(tl.uint32, bitcast=True)
    return tl.where((bits >> 31) != 0, ~bits, bits | 0x80000000)


@triton.jit
def _radix_select_kernel(
    logits_ptr, bt_ptr, seq_ptr, out_ptr,
    stride_lb, stride_btb, stride_ob,
    topk, max_ctx, num_pages,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # One program per request.
    b = tl.program_id(0)
    n = _request_len(seq_ptr, b, max_ctx)
    _radix_select_row(logits_ptr + b * stride_lb, out_ptr + b * stride_ob, bt_ptr + b * stride_btb, n, topk,
                      num_pages, BLOCK)  # fmt: skip


@triton.jit
def _radix_select_row(row, out_row, bt_row, n, topk, num_pages, BLOCK: tl.constexpr):
    # One request's top-k slots by one program, any length, BLOCK logits at a time: find the k-th largest
    # key digit by digit (up to 4 x 8 bits, one pass over the logits each), then compact.
    idx = tl.arange(0, BLOCK)
    bins = tl.arange(0, 256)
    # done: the selection is exactly {key >= prefix}. True at once for a short request (prefix 0 keeps
    # all), or after a pass whose k-th bucket is taken whole (the remaining passes are skipped).
    done = (n <= topk).to(tl.int32)
    prefix = tl.zeros([], dtype=tl.uint32)
    k_rem = topk + tl.zeros([], dtype=tl.int32)
    for p in tl.static_range(4):
        shift = 24 - 8 * p  # constexpr: p is a static_range index
        hist = tl.zeros([256], dtype=tl.int32)
        for start in range(0, tl.where(done > 0, 0, n), BLOCK):
            t = start + idx
            valid = t < n
            key = _order_key(tl.load(row + t, mask=valid, other=0.0))
            if p == 0:
                match = valid
            else:
                match = valid & ((key >> (shift + 8)) == (prefix >> (shift + 8)))
            digit = tl.where(match, (key >> shift) & 0xFF, 0).to(tl.int32)
            # Non-matching lanes were counted in bin 0; take them out (no reliance on histogram masks).
            misses = BLOCK - tl.sum(match.to(tl.int32), axis=0)
            hist += tl.histogram(digit, 256) - tl.where(bins == 0, misses, 0)
        total = tl.sum(hist, axis=0)
        count_gt = total - tl.cumsum(hist, 0)  # matching keys with a larger digit
        count_ge = count_gt + hist
        d_star = tl.sum((count_ge >= k_rem).to(tl.int32), axis=0) - 1
        new_k = k_rem - tl.sum(tl.where(bins == d_star, count_gt, 0), axis=0)
        in_bucket = tl.sum(tl.where(bins == d_star, hist, 0), axis=0)
        new_prefix = prefix | (d_star.to(tl.uint32) << shift)
        prefix = tl.where(done > 0, prefix, new_prefix)
        k_rem = tl.where(done > 0, k_rem, new_k)
        done = tl.where(in_bucket == new_k, 1, done)
    # Not done: prefix is the k-th largest key; k_rem of the keys equal to it are taken (first come first).
    k_eq = tl.where(done > 0, 0, k_rem)
    n_sel = tl.minimum(n, topk)
    n_gt = n_sel - k_eq
    base_gt = tl.zeros([], dtype=tl.int32)
    base_eq = tl.zeros([], dtype=tl.int32)
    for start in range(0, n, BLOCK):
        t = start + idx
        valid = t < n
        key = _order_key(tl.load(row + t, mask=valid, other=0.0))
        gt = valid & tl.where(done > 0, key >= prefix, key > prefix)
        eq = valid & (key == prefix)  # when done, k_eq = 0 takes none of these
        gt_i = gt.to(tl.int32)
        eq_i = eq.to(tl.int32)
        gt_pos = base_gt + tl.cumsum(gt_i, 0) - 1
        eq_rank = base_eq + tl.cumsum(eq_i, 0) - 1
        take = gt | (eq & (eq_rank < k_eq))
        pos = tl.where(gt, gt_pos, n_gt + eq_rank)
        page = tl.load(bt_row + t // 256, mask=take, other=0)
        slot = tl.where((page >= 0) & (page < num_pages), page * 256 + t % 256, -1)  # never a bogus slot
        tl.store(out_row + pos, slot, mask=take & (pos < topk))  # belt and braces
        base_gt += tl.sum(gt_i, axis=0)
        base_eq += tl.sum(eq_i, axis=0)
    for start in range(0, topk, BLOCK):
        o = start + idx
        tl.store(out_row + o, tl.full([BLOCK], -1, tl.int32), mask=(o >= n_sel) & (o < topk))

