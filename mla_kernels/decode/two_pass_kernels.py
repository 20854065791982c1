"""Triton kernels of the two-pass MMA decode, for GPUs whose tensor cores cannot hold a [64, 512] fp32
accumulator in registers (mma.sync: sm_8x, sm_120). The fused kernel there must use 16- or 32-head blocks, and
every block dequantizes the same KV tile again (4x at H=64). Here each FP8 byte is dequantized once per pass
with all heads of a block: pass 1 scores one KV tile per program (accumulator [BH, N]), pass 2 sums one slice
of the output columns per program (accumulator [BH, BLOCK_D]).

``PREFETCH`` (the config's prefetch level) issues loads ahead: from 1 the output pass reads every tile's row
max and row sum in one load and loads the next tile's indices during this one (no dependent read of the
indices before each tile's bytes); from 2 the scores pass also unrolls its eight column groups, so their loads
can go out together. Measured on the H200 (docs/measurements/decode_two_pass_session28.log).
"""

from __future__ import annotations

import triton
import triton.language as tl

from mla_kernels.pdl import wait_prior_grid

from .kernels import (
    DATA_BYTES,
    NOPE_DIM,
    SCALE_AREA,
    SCALE_BYTES,
    _assert_layout,
    _slot_address,
    _slot_tile,
    _ue8m0,
)


@triton.jit
def _scores_group(q_rows, cache_ptr, cache16_ptr, row, srow, valid, s, g, DT: tl.constexpr):
    # Column group g of the scores: 64 q columns against the tile's 64 key columns (fp8 group g < 7, the rope
    # at 7), accumulated into s [BH, N].
    offs_c = tl.arange(0, 64)
    qg = tl.load(q_rows + g * 64 + offs_c[None, :]).to(DT)  # [BH, 64]
    nope = valid & (g < 7)
    raw = tl.load(cache_ptr + row[:, None] + g * 64 + offs_c[None, :], mask=nope[:, None], other=0)
    e = tl.load(cache_ptr + srow + g, mask=nope, other=0)  # [N]
    rope = tl.load(cache16_ptr + ((row + NOPE_DIM) // 2)[:, None] + offs_c[None, :],
                   mask=(valid & (g == 7))[:, None], other=0.0)  # [N, 64]
    k = tl.where(g < 7, raw.to(tl.float8e4nv, bitcast=True).to(DT) * _ue8m0(e).to(DT)[:, None], rope.to(DT))
    return tl.dot(qg, tl.trans(k), s)  # [BH, N] fp32


@triton.jit
def _scores_pass_kernel(
    q_ptr, cache_ptr, cache16_ptr, idx_ptr, p_ptr, mpart_ptr, lpart_ptr,
    stride_qb, stride_qh, stride_page, stride_ib, stride_pb, stride_ph,
    total_tokens, topk, qk_scale, num_heads, num_tiles,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr, PREFETCH: tl.constexpr = 0,
    PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # One program per (request, head block, KV tile): p = 2**(s - m) with the tile's own row max m,
    # stored with m and the row sums l; pass 2 rescales the tiles to their common max. The 576 key
    # columns go 64 at a time (7 fp8 groups, then the rope), so only one chunk of q and k is live.
    _assert_layout()
    pid_b = tl.program_id(0).to(tl.int64)
    pid_h = tl.program_id(1)
    pid_t = tl.program_id(2)
    DT: tl.constexpr = tl.float32 if DOT_F32 else tl.bfloat16
    offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_n = pid_t * BLOCK_N + tl.arange(0, BLOCK_N)
    valid, page_base, off = _slot_tile(idx_ptr + pid_b * stride_ib, offs_n, topk, total_tokens, stride_page)
    row = page_base + off.to(tl.int64) * DATA_BYTES  # [N] byte offset of each token's data row
    srow = page_base + SCALE_AREA + off.to(tl.int64) * SCALE_BYTES  # [N] byte offset of its scale row
    q_rows = q_ptr + pid_b * stride_qb + offs_h[:, None] * stride_qh
    s = tl.zeros([BLOCK_H, BLOCK_N], dtype=tl.float32)
    if PREFETCH >= 2:  # unrolled: every group's loads can be issued ahead
        for g in tl.static_range(8):
            s = _scores_group(q_rows, cache_ptr, cache16_ptr, row, srow, valid, s, g, DT)
    else:  # one group's q and keys live at a time (fewer registers)
        for g in range(0, 8):
            s = _scores_group(q_rows, cache_ptr, cache16_ptr, row, srow, valid, s, g, DT)
    s = tl.where(valid[None, :], s * qk_scale, float("-inf"))
    m = tl.max(s, axis=1)
    m_safe = tl.where(m == float("-inf"), 0.0, m)  # an all-invalid tile: p = 0, l = 0
    p = tl.exp2(s - m_safe[:, None])
    p_rows = p_ptr + pid_b * stride_pb + offs_h[:, None] * stride_ph
    tl.store(p_rows + offs_n[None, :], p.to(p_ptr.dtype.element_ty))
    row = (pid_b * num_tiles + pid_t) * num_heads + offs_h  # [BH] rows of [B, T, H]
    tl.store(mpart_ptr + row, m)
    tl.store(lpart_ptr + row, tl.sum(p, axis=1))


@triton.jit
def _tile_stats(part, lpart, num_tiles, num_heads, BLOCK_H: tl.constexpr, PREFETCH: tl.constexpr,
                TILES_P2: tl.constexpr):  # fmt: skip
    # The row max over every tile's max (m_safe: 0 where no tile has a valid token) and, from PREFETCH 1, the
    # row sum rescaled to it, each tile's in one [T, BH] load; below, the sum is taken in the main loop (0 here).
    if PREFETCH >= 1:
        offs_t = tl.arange(0, TILES_P2)
        tmask = (offs_t < num_tiles)[:, None]
        m_t = tl.load(part[None, :] + offs_t[:, None] * num_heads, mask=tmask, other=float("-inf"))  # [T, BH]
        l_t = tl.load(lpart[None, :] + offs_t[:, None] * num_heads, mask=tmask, other=0.0)
        m_all = tl.max(m_t, axis=0)
        m_safe = tl.where(m_all == float("-inf"), 0.0, m_all)
        l_all = tl.sum(l_t * tl.exp2(m_t - m_safe[None, :]), axis=0)  # an all-invalid tile adds 0
    else:
        m_all = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
        for t in range(0, num_tiles):
            m_all = tl.maximum(m_all, tl.load(part + t * num_heads))
        m_safe = tl.where(m_all == float("-inf"), 0.0, m_all)
        l_all = tl.zeros([BLOCK_H], dtype=tl.float32)
    return m_safe, l_all


@triton.jit
def _output_pass_kernel(
    cache_ptr, cache16_ptr, idx_ptr, p_ptr, mpart_ptr, lpart_ptr, out_ptr, lse_ptr,
    stride_page, stride_ib, stride_pb, stride_ph, stride_ob, stride_oh, stride_lb,
    total_tokens, topk, num_heads, num_tiles,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, DOT_F32: tl.constexpr,
    PREFETCH: tl.constexpr = 0, TILES_P2: tl.constexpr = 1, PDL: tl.constexpr = False,
):  # fmt: skip
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # One program per (request, head block, BLOCK_D output columns): out = sum_t 2**(m_t - M) p_t @ v_t / L.
    # Columns 0..447 are the fp8 nope groups (one UE8M0 scale per 64), 448..511 the bf16 rope.
    _assert_layout()
    pid_b = tl.program_id(0).to(tl.int64)
    pid_h = tl.program_id(1)
    pid_c = tl.program_id(2)
    DT: tl.constexpr = tl.float32 if DOT_F32 else tl.bfloat16
    G: tl.constexpr = BLOCK_D // 64
    offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    groups = pid_c * G + tl.arange(0, G)  # [G] 64-column groups of this slice; group 7 is the rope
    nope = groups < 7
    offs_c = tl.arange(0, 64)
    part = mpart_ptr + pid_b * num_tiles * num_heads + offs_h
    lpart = lpart_ptr + pid_b * num_tiles * num_heads + offs_h
    m_safe, l_all = _tile_stats(part, lpart, num_tiles, num_heads, BLOCK_H, PREFETCH, TILES_P2)
    idx_row = idx_ptr + pid_b * stride_ib
    p_rows = p_ptr + pid_b * stride_pb + offs_h[:, None] * stride_ph
    acc = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    offs_b = tl.arange(0, BLOCK_N)
    if PREFETCH >= 1:
        idx = tl.load(idx_row + offs_b, mask=offs_b < topk, other=-1)  # [N] the first tile's indices
    for t in range(0, num_tiles):
        offs_n = t * BLOCK_N + offs_b
        if PREFETCH >= 1:  # this tile's indices came with the last one; the next tile's go out now
            valid, page_base, off = _slot_address(idx, total_tokens, stride_page)
            idx = tl.load(idx_row + BLOCK_N + offs_n, mask=BLOCK_N + offs_n < topk, other=-1)
        else:
            valid, page_base, off = _slot_tile(idx_row, offs_n, topk, total_tokens, stride_page)
        row = page_base + off.to(tl.int64) * DATA_BYTES  # [N] byte offset of each token's data row
        vmask = valid[:, None, None] & nope[None, :, None]
        raw = tl.load(cache_ptr + row[:, None, None] + (groups * 64)[None, :, None] + offs_c[None, None, :],
                      mask=vmask, other=0)  # [N, G, 64]
        e = tl.load(cache_ptr + (page_base + SCALE_AREA + off.to(tl.int64) * SCALE_BYTES)[:, None] + groups[None, :],
                    mask=valid[:, None] & nope[None, :], other=0)  # [N, G]
        rope_ptrs = (cache16_ptr + ((row + NOPE_DIM) // 2)[:, None, None] + offs_c[None, None, :]
                     + 0 * groups[None, :, None])
        rope = tl.load(rope_ptrs, mask=valid[:, None, None] & (groups == 7)[None, :, None], other=0.0)  # [N, G, 64]
        nope_vals = raw.to(tl.float8e4nv, bitcast=True).to(DT) * _ue8m0(e).to(DT)[:, :, None]
        v = tl.where(nope[None, :, None], nope_vals, rope.to(DT))
        v = tl.reshape(v, (BLOCK_N, BLOCK_D))
        m_t = tl.load(part + t * num_heads)
        f = tl.exp2(m_t - m_safe)  # 0 for an all-invalid tile
        if PREFETCH < 1:
            l_all += tl.load(lpart + t * num_heads) * f
        p = tl.load(p_rows + offs_n[None, :]).to(DT)  # [BH, N]
        acc += tl.dot(p, v) * f[:, None]

    has = l_all > 0.0
    inv = tl.where(has, 1.0 / tl.where(has, l_all, 1.0), 0.0)[:, None]
    cols = pid_c * BLOCK_D + tl.arange(0, BLOCK_D)
    o_rows = out_ptr + pid_b * stride_ob + offs_h[:, None] * stride_oh
    tl.store(o_rows + cols[None, :], (acc * inv).to(out_ptr.dtype.element_ty))
    if pid_c == 0:
        lse = tl.where(has, (m_safe + tl.log2(tl.where(has, l_all, 1.0))) * 0.6931471805599453, float("inf"))
        tl.store(lse_ptr + pid_b * stride_lb + offs_h, lse)
