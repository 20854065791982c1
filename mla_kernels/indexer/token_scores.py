"""The bf16 indexer's scores kernel with tokens as the MMA's rows (``[BLOCK_T, 128] x [128, H]``).

Programs stride over each request's real length, the page-table walk fused into the tile loads, ``-inf``
for a token on an unmapped page. With tokens as rows, the weighted sum over heads runs along the
accumulator's columns, which one warp holds (a few shuffles), instead of across the warps that hold the
heads (shared memory and a barrier every tile, the head-major layout this kernel replaced); the FP8 keys
are the left operand, converted to bf16 in registers.

``ZERO_WS``: the first program of each request zeroes its radix workspace row (``ws_ptr``), which the
select's passes then fill: no memset launch before them.

``HIST``: the kernel also runs pass 0 of the global radix select (``radix_kernels``) on the logits it
holds: each program histograms the top byte of its tokens' order keys in registers and adds them to the
request's workspace row (``ws_ptr``), the last one finds the bucket, so the select starts at pass 1.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Absolute: the oracle test loads a mutated copy of this file as a module of its own.
from mla_kernels.indexer.kernels import _order_key
from mla_kernels.indexer.radix_kernels import _byte_hist, _flush_hist, _zero_ws_row


@triton.jit
def _bf16_scores_kernel_t(
    q_ptr, w_ptr, cache_ptr, bt_ptr, seq_ptr, logits_ptr, ws_ptr,
    stride_qb, stride_qh, stride_wb, stride_page, stride_btb, stride_lb, stride_ws,
    H, num_pages, max_ctx, topk,
    BLOCK_H: tl.constexpr, BLOCK_T: tl.constexpr, FP32_MATH: tl.constexpr, HIST: tl.constexpr,
    ZERO_WS: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    b = tl.program_id(1)
    if ZERO_WS:
        if pid == 0:  # every request has a program 0, an empty one too
            _zero_ws_row(ws_ptr + b * stride_ws)
    step = tl.num_programs(0) * BLOCK_T
    n = tl.minimum(tl.load(seq_ptr + b), max_ctx)
    if pid * BLOCK_T < n:  # idle programs skip even the q load
        hh = tl.arange(0, BLOCK_H)
        d = tl.arange(0, 128)
        tt = tl.arange(0, BLOCK_T)
        q = tl.load(
            q_ptr + b * stride_qb + hh[:, None] * stride_qh + d[None, :], mask=hh[:, None] < H, other=0.0
        )
        w = tl.load(w_ptr + b * stride_wb + hh, mask=hh < H, other=0.0)
        if FP32_MATH:  # the interpreter gets bf16 products wrong; fp32 there is exact
            q = q.to(tl.float32)
        qt = tl.trans(q)  # [128, BLOCK_H]
        h = tl.zeros([256], dtype=tl.int32)
        for t0 in range(pid * BLOCK_T, n, step):
            t = t0 + tt
            page = tl.load(bt_ptr + b * stride_btb + t0 // 256)  # BLOCK_T divides 256: a block is in one page
            ok = t < tl.where((page >= 0) & (page < num_pages), n, 0)  # out-of-range pages are never read
            base = cache_ptr + page.to(tl.int64) * stride_page
            off = t % 256
            kb = tl.load(base + off[:, None] * 128 + d[None, :], mask=ok[:, None], other=0)
            scale = tl.load((base + 256 * 128).to(tl.pointer_type(tl.float32)) + off, mask=ok, other=0.0)
            k = kb.to(tl.float8e4nv, bitcast=True)
            if FP32_MATH:
                s = tl.dot(k.to(tl.float32), qt)
            else:
                s = tl.dot(k.to(tl.bfloat16), qt)  # e4m3 -> bf16 is exact; fp32 accumulate
            s = tl.maximum(s * scale[:, None], 0.0)  # [BLOCK_T, BLOCK_H]
            logit = tl.where(ok, tl.sum(s * w[None, :], axis=1), float("-inf"))  # unmapped page: ranks last
            tl.store(logits_ptr + b * stride_lb + t, logit, mask=t < n)
            if HIST:
                h += _byte_hist(_order_key(logit), t < n, 24)
        if HIST:
            if n > topk:  # else every token is selected: nothing to resolve
                _flush_hist(ws_ptr + b * stride_ws, h, tl.minimum(tl.num_programs(0), tl.cdiv(n, BLOCK_T)), topk, 0)
