"""Triton kernels of the sparse-MLA decode: per-head SIMT, head-batched MMA (fused, or two passes), LSE combine.

Math (fp32): s = (q . k) * sm_scale over valid slots, lse = ln(sum exp(s)), out = softmax(s) @ k[:, :512],
softmax online in base 2 (scores pre-multiplied by log2(e)), over ``mla_kernels.cache``'s byte layout.
"""

from __future__ import annotations

import triton
import triton.language as tl

from mla_kernels import cache  # absolute: profiling scripts compile copies of this module
from mla_kernels.pdl import wait_prior_grid

# The cache layout (``mla_kernels.cache``) as compile-time constants; each kernel asserts, at compile
# time, the layout facts its column chunks rely on (``tl.static_assert``, which ``python -O`` keeps).
PAGE_TOKENS = tl.constexpr(cache.TOKENS_PER_PAGE)  # 256
NOPE_DIM = tl.constexpr(cache.NOPE_DIM)  # 448 FP8 values, 7 groups of 64 with one UE8M0 scale each
ROPE_DIM = tl.constexpr(cache.ROPE_DIM)  # 64 bf16 values
DATA_BYTES = tl.constexpr(cache.DATA_BYTES)  # 576 data bytes per token
SCALE_BYTES = tl.constexpr(cache.SCALE_BYTES)  # 8 scale bytes per token
SCALE_AREA = tl.constexpr(cache.SCALE_OFFSET)  # 147,456: where a page's scale rows start
GROUP = tl.constexpr(cache.GROUP_SIZE)  # 64


@triton.jit
def _assert_layout():
    """The layout every kernel here is written for: 7 nope groups of 64 (8 with the rope, as one
    ``tl.arange(0, 8)``), chunked 256 + 128 + 64, the rope right after the nope bytes."""
    tl.static_assert(NOPE_DIM == 7 * GROUP and ROPE_DIM == GROUP and NOPE_DIM == 256 + 128 + 64,
                     "decode kernels: nope must be 7 groups of 64 (chunks 256 + 128 + 64), rope 64 values")
    tl.static_assert(DATA_BYTES == NOPE_DIM + 2 * ROPE_DIM and SCALE_BYTES == 8,
                     "decode kernels: a token's data is its fp8 nope bytes then its bf16 rope; 8 scale bytes")
    tl.static_assert(SCALE_AREA == PAGE_TOKENS * DATA_BYTES,
                     "decode kernels: a page's scale rows must start after its 256 data rows")


@triton.jit
def _load_raw_tile(cache_ptr, cache16_ptr, page_base, off, valid):
    """Issue the loads of one SIMT tile: fp8 nope bytes [N, 8, 64] (group 7 is padding), UE8M0 bytes
    [N, 8], bf16 rope [N, 64]."""
    offs_g = tl.arange(0, 8)
    offs_c = tl.arange(0, 64)
    offs_r = tl.arange(0, 64)
    gmask = offs_g < 7
    row = page_base + off.to(tl.int64) * DATA_BYTES  # [N] byte offset of each token's data row
    ptrs = cache_ptr + row[:, None, None] + (offs_g * 64)[None, :, None] + offs_c[None, None, :]
    raw = tl.load(ptrs, mask=valid[:, None, None] & gmask[None, :, None], other=0)
    srow = page_base + SCALE_AREA + off.to(tl.int64) * SCALE_BYTES  # [N] byte offset of its scale row
    exps = tl.load(cache_ptr + srow[:, None] + offs_g[None, :], mask=valid[:, None] & gmask[None, :], other=0)
    rope = tl.load(cache16_ptr + ((row + NOPE_DIM) // 2)[:, None] + offs_r[None, :], mask=valid[:, None], other=0.0)
    return raw, exps, rope


@triton.jit
def _ue8m0(e):
    return (e.to(tl.int32) << 23).to(tl.float32, bitcast=True)  # 2**(e - 127), exact


@triton.jit
def _dequant_nope(raw, exps, BLOCK_N: tl.constexpr):
    """fp8 bytes x 2**(e - 127) -> fp32 [N, 512] (cols >= 448 are 0)."""
    vals = raw.to(tl.float8e4nv, bitcast=True).to(tl.float32) * _ue8m0(exps)[:, :, None]
    return tl.reshape(vals, (BLOCK_N, 512))


@triton.jit
def _slot_tile(idx_ptr, offs_n, end_n, total_tokens, stride_page):
    idx = tl.load(idx_ptr + offs_n, mask=offs_n < end_n, other=-1)
    return _slot_address(idx, total_tokens, stride_page)


@triton.jit
def _slot_address(idx, total_tokens, stride_page):
    valid = (idx >= 0) & (idx < total_tokens)
    slot = tl.where(valid, idx, 0)
    page_base = (slot // PAGE_TOKENS).to(tl.int64) * stride_page
    return valid, page_base, slot % PAGE_TOKENS


@triton.jit
def _simt_decode_kernel(
    q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr,
    stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
    total_tokens, topk, qk_scale, BLOCK_N: tl.constexpr, PDL: tl.constexpr = False,
):
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # One program per (request, head): scalar FMAs, the KV tile is re-read for every head.
    _assert_layout()
    pid_b = tl.program_id(0).to(tl.int64)
    pid_h = tl.program_id(1)
    offs_d = tl.arange(0, 512)
    offs_r = tl.arange(0, 64)
    q_row = q_ptr + pid_b * stride_qb + pid_h * stride_qh
    q_nope = tl.load(q_row + offs_d, mask=offs_d < NOPE_DIM, other=0.0).to(tl.float32)  # [512]
    q_rope = tl.load(q_row + NOPE_DIM + offs_r).to(tl.float32)  # [64]
    idx_row = idx_ptr + pid_b * stride_ib

    m_i = tl.zeros([], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([], dtype=tl.float32)
    acc_nope = tl.zeros([512], dtype=tl.float32)
    acc_rope = tl.zeros([64], dtype=tl.float32)
    for start in range(0, topk, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        valid, page_base, off = _slot_tile(idx_row, offs_n, topk, total_tokens, stride_page)
        raw, exps, rope = _load_raw_tile(cache_ptr, cache16_ptr, page_base, off, valid)
        k_nope = _dequant_nope(raw, exps, BLOCK_N)  # [N, 512] fp32
        k_rope = rope.to(tl.float32)  # [N, 64]
        s = tl.sum(k_nope * q_nope[None, :], axis=1) + tl.sum(k_rope * q_rope[None, :], axis=1)
        s = tl.where(valid, s * qk_scale, float("-inf"))  # [N]
        m_new = tl.maximum(m_i, tl.max(s, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all-invalid so far: avoid inf - inf
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        acc_nope = acc_nope * alpha + tl.sum(p[:, None] * k_nope, axis=0)
        acc_rope = acc_rope * alpha + tl.sum(p[:, None] * k_rope, axis=0)
        m_i = m_new

    has = l_i > 0.0
    inv = tl.where(has, 1.0 / tl.where(has, l_i, 1.0), 0.0)
    o_row = out_ptr + pid_b * stride_ob + pid_h * stride_oh
    tl.store(o_row + offs_d, (acc_nope * inv).to(out_ptr.dtype.element_ty), mask=offs_d < NOPE_DIM)
    tl.store(o_row + NOPE_DIM + offs_r, (acc_rope * inv).to(out_ptr.dtype.element_ty))
    lse = tl.where(has, (m_i + tl.log2(tl.where(has, l_i, 1.0))) * 0.6931471805599453, float("inf"))
    tl.store(lse_ptr + pid_b * stride_lb + pid_h, lse)


@triton.jit
def _load_mma_nope(cache_ptr, page_base, off, valid):
    """Issue the loads of one tile's 448 fp8 nope bytes as column chunks of 256 / 128 / 64 (powers of
    two, so nothing is padded)."""
    offs_c = tl.arange(0, 64)
    g0 = tl.arange(0, 4)
    g1 = 4 + tl.arange(0, 2)
    row = page_base + off.to(tl.int64) * DATA_BYTES  # [N] byte offset of each token's data row
    raw0 = tl.load(cache_ptr + row[:, None, None] + (g0 * 64)[None, :, None] + offs_c[None, None, :],
                   mask=valid[:, None, None], other=0)  # [N, 4, 64]
    raw1 = tl.load(cache_ptr + row[:, None, None] + (g1 * 64)[None, :, None] + offs_c[None, None, :],
                   mask=valid[:, None, None], other=0)  # [N, 2, 64]
    raw2 = tl.load(cache_ptr + row[:, None] + 384 + offs_c[None, :], mask=valid[:, None], other=0)  # [N, 64]
    return raw0, raw1, raw2


@triton.jit
def _load_mma_scales(cache_ptr, page_base, off, valid):
    """The UE8M0 scale bytes of one tile's nope groups: [N, 4], [N, 2], [N]."""
    g0 = tl.arange(0, 4)
    g1 = 4 + tl.arange(0, 2)
    srow = page_base + SCALE_AREA + off.to(tl.int64) * SCALE_BYTES  # [N] byte offset of its scale row
    e0 = tl.load(cache_ptr + srow[:, None] + g0[None, :], mask=valid[:, None], other=0)  # [N, 4]
    e1 = tl.load(cache_ptr + srow[:, None] + g1[None, :], mask=valid[:, None], other=0)  # [N, 2]
    e2 = tl.load(cache_ptr + srow + 6, mask=valid, other=0)  # [N]
    return e0, e1, e2


@triton.jit
def _load_mma_rope(cache16_ptr, page_base, off, valid):
    """The bf16 rope [N, 64] of one tile."""
    offs_c = tl.arange(0, 64)
    row = page_base + off.to(tl.int64) * DATA_BYTES
    return tl.load(cache16_ptr + ((row + NOPE_DIM) // 2)[:, None] + offs_c[None, :], mask=valid[:, None],
                   other=0.0)


@triton.jit
def _load_mma_tile(cache_ptr, cache16_ptr, page_base, off, valid):
    """All of one tile's loads, in the order the H200 figures were measured with (it changes the
    schedule: issuing the rope before the scales cost 7% at B=1, top-k 2048)."""
    raw0, raw1, raw2 = _load_mma_nope(cache_ptr, page_base, off, valid)
    e0, e1, e2 = _load_mma_scales(cache_ptr, page_base, off, valid)
    rope = _load_mma_rope(cache16_ptr, page_base, off, valid)
    return raw0, raw1, raw2, e0, e1, e2, rope


@triton.jit
def _dequant_groups(raw, e, BLOCK_N: tl.constexpr, GROUPS: tl.constexpr, DT: tl.constexpr):
    """[N, GROUPS, 64] fp8 bytes x per-group scales -> [N, GROUPS * 64] in DT (exact in bf16: the
    scale is a power of two)."""
    vals = raw.to(tl.float8e4nv, bitcast=True).to(DT) * _ue8m0(e).to(DT)[:, :, None]
    return tl.reshape(vals, (BLOCK_N, GROUPS * 64))


@triton.jit
def _attend_tile(q0, q1, q2, qr, raw0, raw1, raw2, e0, e1, e2, rope, valid, qk_scale,
                 m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N: tl.constexpr, DT: tl.constexpr):
    """One KV tile of the online softmax for a block of heads: scores on tensor cores (chunks 256 + 128 +
    64 nope + 64 rope), then p @ k into the four accumulators. Returns the updated state."""
    k0 = _dequant_groups(raw0, e0, BLOCK_N, 4, DT)  # [N, 256]
    k1 = _dequant_groups(raw1, e1, BLOCK_N, 2, DT)  # [N, 128]
    k2 = raw2.to(tl.float8e4nv, bitcast=True).to(DT) * _ue8m0(e2).to(DT)[:, None]  # [N, 64]
    kr = rope.to(DT)  # [N, 64]
    s = tl.dot(q0, tl.trans(k0))
    s = tl.dot(q1, tl.trans(k1), s)
    s = tl.dot(q2, tl.trans(k2), s)
    s = tl.dot(qr, tl.trans(kr), s)  # [BH, N] fp32
    s = tl.where(valid[None, :], s * qk_scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # all-invalid so far: avoid inf - inf
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    p = p.to(DT)
    acc0 = tl.dot(p, k0, acc0 * alpha[:, None])
    acc1 = tl.dot(p, k1, acc1 * alpha[:, None])
    acc2 = tl.dot(p, k2, acc2 * alpha[:, None])
    accr = tl.dot(p, kr, accr * alpha[:, None])
    return m_new, l_i, acc0, acc1, acc2, accr


# An iteration must not wait on a chain of memory round trips (indices, then the bytes they address).
# Triton's pipeliner turns the data loads into cp.async one tile ahead (num_stages 2), but not the 1- and
# 2-byte scale loads, which cp.async cannot do. Hence four loops over a split's tiles, one per PREFETCH
# level, each carrying (m_i, l_i, acc0, acc1, acc2, accr) through ``_attend_tile``.


@triton.jit
def _tiles_no_prefetch(q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens,
                       stride_page, qk_scale, m_i, l_i, acc0, acc1, acc2, accr,
                       BLOCK_N: tl.constexpr, DT: tl.constexpr):
    """PREFETCH 0: each tile loads its indices, then its bytes."""
    for start in range(start_n, end_n, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        valid, page_base, off = _slot_tile(idx_row, offs_n, end_n, total_tokens, stride_page)
        raw0, raw1, raw2, e0, e1, e2, rope = _load_mma_tile(cache_ptr, cache16_ptr, page_base, off, valid)
        m_i, l_i, acc0, acc1, acc2, accr = _attend_tile(q0, q1, q2, qr, raw0, raw1, raw2, e0, e1, e2, rope, valid,
                                                        qk_scale, m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)
    return m_i, l_i, acc0, acc1, acc2, accr


@triton.jit
def _tiles_prefetch_indices(q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens,
                            stride_page, qk_scale, m_i, l_i, acc0, acc1, acc2, accr,
                            BLOCK_N: tl.constexpr, DT: tl.constexpr):
    """PREFETCH 1: the next tile's indices are loaded one iteration ahead."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    idx = tl.load(idx_row + offs_n, mask=offs_n < end_n, other=-1)
    for start in range(start_n, end_n, BLOCK_N):
        offs_x = start + BLOCK_N + tl.arange(0, BLOCK_N)  # the next tile's slots
        valid, page_base, off = _slot_address(idx, total_tokens, stride_page)
        raw0, raw1, raw2, e0, e1, e2, rope = _load_mma_tile(cache_ptr, cache16_ptr, page_base, off, valid)
        idx = tl.load(idx_row + offs_x, mask=offs_x < end_n, other=-1)
        m_i, l_i, acc0, acc1, acc2, accr = _attend_tile(q0, q1, q2, qr, raw0, raw1, raw2, e0, e1, e2, rope, valid,
                                                        qk_scale, m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)
    return m_i, l_i, acc0, acc1, acc2, accr


@triton.jit
def _tiles_prefetch_tile(q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens,
                         stride_page, qk_scale, m_i, l_i, acc0, acc1, acc2, accr,
                         BLOCK_N: tl.constexpr, DT: tl.constexpr):
    """PREFETCH 2: the next tile's indices and all its bytes are loaded one iteration ahead (costs
    registers)."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    idx = tl.load(idx_row + offs_n, mask=offs_n < end_n, other=-1)
    valid, page_base, off = _slot_address(idx, total_tokens, stride_page)
    raw0, raw1, raw2, e0, e1, e2, rope = _load_mma_tile(cache_ptr, cache16_ptr, page_base, off, valid)
    for start in range(start_n, end_n, BLOCK_N):
        offs_x = start + BLOCK_N + tl.arange(0, BLOCK_N)  # the next tile's slots
        valid_x, page_base_x, off_x = _slot_tile(idx_row, offs_x, end_n, total_tokens, stride_page)
        tile_x = _load_mma_tile(cache_ptr, cache16_ptr, page_base_x, off_x, valid_x)
        m_i, l_i, acc0, acc1, acc2, accr = _attend_tile(q0, q1, q2, qr, raw0, raw1, raw2, e0, e1, e2, rope, valid,
                                                        qk_scale, m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)
        raw0, raw1, raw2, e0, e1, e2, rope = tile_x
        valid = valid_x
    return m_i, l_i, acc0, acc1, acc2, accr


@triton.jit
def _tiles_prefetch_scales(q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens,
                           stride_page, qk_scale, m_i, l_i, acc0, acc1, acc2, accr,
                           BLOCK_N: tl.constexpr, DT: tl.constexpr):
    """PREFETCH 3: the next tile's indices and scale bytes are loaded one iteration ahead; its data
    loads are left to the pipeliner."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    idx = tl.load(idx_row + offs_n, mask=offs_n < end_n, other=-1)
    valid, page_base, off = _slot_address(idx, total_tokens, stride_page)
    e0, e1, e2 = _load_mma_scales(cache_ptr, page_base, off, valid)
    for start in range(start_n, end_n, BLOCK_N):
        offs_x = start + BLOCK_N + tl.arange(0, BLOCK_N)  # the next tile's slots
        raw0, raw1, raw2 = _load_mma_nope(cache_ptr, page_base, off, valid)
        rope = _load_mma_rope(cache16_ptr, page_base, off, valid)
        valid_x, page_base_x, off_x = _slot_tile(idx_row, offs_x, end_n, total_tokens, stride_page)
        scales_x = _load_mma_scales(cache_ptr, page_base_x, off_x, valid_x)
        m_i, l_i, acc0, acc1, acc2, accr = _attend_tile(q0, q1, q2, qr, raw0, raw1, raw2, e0, e1, e2, rope, valid,
                                                        qk_scale, m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)
        e0, e1, e2 = scales_x
        valid, page_base, off = valid_x, page_base_x, off_x
    return m_i, l_i, acc0, acc1, acc2, accr


# num_splits: one compile for every split count (it only addresses the partial rows).
@triton.jit(do_not_specialize=["num_splits"])
def _mma_decode_kernel(
    q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr, opart_ptr, lpart_ptr,
    stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
    total_tokens, topk, qk_scale, num_heads, num_splits, split_len,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, DOT_F32: tl.constexpr,
    PREFETCH: tl.constexpr, PDL: tl.constexpr = False,
):
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # One program per (request, block of BLOCK_H heads, split of top-k): each KV tile is read once
    # for all its heads and both products run on tensor cores. The 512 key columns are handled as
    # chunks 256 + 128 + 64 (nope) + 64 (rope), so no multiply-accumulate is spent on padding.
    _assert_layout()
    tl.static_assert(PREFETCH >= 0 and PREFETCH <= 3, "PREFETCH is 0, 1, 2 or 3")
    pid_b = tl.program_id(0).to(tl.int64)
    pid_h = tl.program_id(1)
    pid_s = tl.program_id(2)
    # The interpreter gets bf16 dots wrong; fp32 dots are exact there.
    DT: tl.constexpr = tl.float32 if DOT_F32 else tl.bfloat16
    offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    c256 = tl.arange(0, 256)
    c128 = tl.arange(0, 128)
    c64 = tl.arange(0, 64)
    q_rows = q_ptr + pid_b * stride_qb + offs_h[:, None] * stride_qh
    q0 = tl.load(q_rows + c256[None, :]).to(DT)  # [BH, 256]
    q1 = tl.load(q_rows + 256 + c128[None, :]).to(DT)  # [BH, 128]
    q2 = tl.load(q_rows + 384 + c64[None, :]).to(DT)  # [BH, 64]
    qr = tl.load(q_rows + NOPE_DIM + c64[None, :]).to(DT)  # [BH, 64]
    idx_row = idx_ptr + pid_b * stride_ib
    start_n = pid_s * split_len
    end_n = tl.minimum(start_n + split_len, topk)

    m_i = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc0 = tl.zeros([BLOCK_H, 256], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK_H, 128], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
    accr = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
    if PREFETCH == 0:
        m_i, l_i, acc0, acc1, acc2, accr = _tiles_no_prefetch(
            q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens, stride_page, qk_scale,
            m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)
    elif PREFETCH == 1:
        m_i, l_i, acc0, acc1, acc2, accr = _tiles_prefetch_indices(
            q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens, stride_page, qk_scale,
            m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)
    elif PREFETCH == 2:
        m_i, l_i, acc0, acc1, acc2, accr = _tiles_prefetch_tile(
            q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens, stride_page, qk_scale,
            m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)
    else:
        m_i, l_i, acc0, acc1, acc2, accr = _tiles_prefetch_scales(
            q0, q1, q2, qr, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens, stride_page, qk_scale,
            m_i, l_i, acc0, acc1, acc2, accr, BLOCK_N, DT)

    has = l_i > 0.0
    inv = tl.where(has, 1.0 / tl.where(has, l_i, 1.0), 0.0)[:, None]
    lse2 = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))  # log2 domain
    if SPLIT:
        row = (pid_b * num_splits + pid_s) * num_heads + offs_h  # [BH] rows of [B, S, H, 512]
        o_rows = opart_ptr + row[:, None] * 512
        tl.store(lpart_ptr + row, lse2)
    else:
        o_rows = out_ptr + pid_b * stride_ob + offs_h[:, None] * stride_oh
        tl.store(lse_ptr + pid_b * stride_lb + offs_h, tl.where(has, lse2 * 0.6931471805599453, float("inf")))
    odt = o_rows.dtype.element_ty
    tl.store(o_rows + c256[None, :], (acc0 * inv).to(odt))
    tl.store(o_rows + 256 + c128[None, :], (acc1 * inv).to(odt))
    tl.store(o_rows + 384 + c64[None, :], (acc2 * inv).to(odt))
    tl.store(o_rows + NOPE_DIM + c64[None, :], (accr * inv).to(odt))


# Two passes for GPUs whose tensor cores cannot hold a [64, 512] fp32 accumulator in registers
# (mma.sync: sm_8x, sm_120). The fused kernel there must use 16- or 32-head blocks, and every block
# dequantizes the same KV tile again (4x at H=64). Here each FP8 byte is dequantized once per pass
# with all heads of a block: pass 1 scores one KV tile per program (accumulator [BH, N]), pass 2 sums
# one slice of the output columns per program (accumulator [BH, BLOCK_D]).
@triton.jit
def _scores_pass_kernel(
    q_ptr, cache_ptr, cache16_ptr, idx_ptr, p_ptr, mpart_ptr, lpart_ptr,
    stride_qb, stride_qh, stride_page, stride_ib, stride_pb, stride_ph,
    total_tokens, topk, qk_scale, num_heads, num_tiles,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, DOT_F32: tl.constexpr, PDL: tl.constexpr = False,
):
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
    offs_c = tl.arange(0, 64)
    offs_n = pid_t * BLOCK_N + tl.arange(0, BLOCK_N)
    valid, page_base, off = _slot_tile(idx_ptr + pid_b * stride_ib, offs_n, topk, total_tokens, stride_page)
    row = page_base + off.to(tl.int64) * DATA_BYTES  # [N] byte offset of each token's data row
    srow = page_base + SCALE_AREA + off.to(tl.int64) * SCALE_BYTES  # [N] byte offset of its scale row
    q_rows = q_ptr + pid_b * stride_qb + offs_h[:, None] * stride_qh
    s = tl.zeros([BLOCK_H, BLOCK_N], dtype=tl.float32)
    for g in range(0, 8):
        qg = tl.load(q_rows + g * 64 + offs_c[None, :]).to(DT)  # [BH, 64]
        nope = valid & (g < 7)
        raw = tl.load(cache_ptr + row[:, None] + g * 64 + offs_c[None, :], mask=nope[:, None], other=0)
        e = tl.load(cache_ptr + srow + g, mask=nope, other=0)  # [N]
        rope = tl.load(cache16_ptr + ((row + NOPE_DIM) // 2)[:, None] + offs_c[None, :],
                       mask=(valid & (g == 7))[:, None], other=0.0)  # [N, 64]
        k = tl.where(g < 7, raw.to(tl.float8e4nv, bitcast=True).to(DT) * _ue8m0(e).to(DT)[:, None], rope.to(DT))
        s = tl.dot(qg, tl.trans(k), s)  # [BH, N] fp32
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
def _output_pass_kernel(
    cache_ptr, cache16_ptr, idx_ptr, p_ptr, mpart_ptr, lpart_ptr, out_ptr, lse_ptr,
    stride_page, stride_ib, stride_pb, stride_ph, stride_ob, stride_oh, stride_lb,
    total_tokens, topk, num_heads, num_tiles,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, DOT_F32: tl.constexpr,
    PDL: tl.constexpr = False,
):
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
    m_all = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
    for t in range(0, num_tiles):
        m_all = tl.maximum(m_all, tl.load(part + t * num_heads))
    m_safe = tl.where(m_all == float("-inf"), 0.0, m_all)
    l_all = tl.zeros([BLOCK_H], dtype=tl.float32)
    idx_row = idx_ptr + pid_b * stride_ib
    p_rows = p_ptr + pid_b * stride_pb + offs_h[:, None] * stride_ph
    acc = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    for t in range(0, num_tiles):
        offs_n = t * BLOCK_N + tl.arange(0, BLOCK_N)
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
