"""The sparse-MLA decode in Triton's Gluon dialect: each FP8 value dequantized once for all 64 heads.

Triton's ``tl.dot`` on mma.sync needs the KV tile in a dot-operand layout whose threads each hold a
slice replicated per 16-head block, so the MMA kernel (``kernels.py``) converts every FP8 byte once
per 16 heads. Here the layouts are explicit: one CTA per (request, 64-head block, split of top-k)
gathers a tile of ``BLOCK_N`` tokens in a blocked layout (every byte loaded and converted by one
thread), writes it once to shared memory as bf16 ``[8 chunks x N, 64]`` (7 nope groups, then the
rope), and both products read it from there on tensor cores (``mma_v2``: sm_80+, so the same kernel
runs on sm_90 and sm_120). With ``PREFETCH`` the next tile's raw bytes are loaded into registers
before this tile's MMAs and dequantized after them, so the gather is in flight while the tensor cores
work; without it the next tile is loaded after the MMAs (fewer registers, no overlap). The softmax runs
online in base 2; with more than one split the partials go through ``_combine_kernel`` like the MMA kernel's.

Gluon's API moves between Triton releases: ``AVAILABLE`` says whether this Triton is one the kernel is
built for (``SUPPORTED_TRITON``) and has what it uses; the launcher falls back to the MMA kernel elsewhere.
"""

from __future__ import annotations

import triton

from mla_kernels import cache

# Gluon's API moves between releases: the kernel is built for these Triton minor versions (3.6: the GPU
# image's, run there; 3.9: CI's, compiled for sm_90 and sm_120 in the tests). Elsewhere the launcher
# falls back to the MMA kernel and records it.
SUPPORTED_TRITON = ((3, 6), (3, 9))


def supported(version: str) -> bool:
    """Whether a Triton version string (``3.6.0``, ``3.9.0+git...``) is within ``SUPPORTED_TRITON``."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return False
    return SUPPORTED_TRITON[0] <= (major, minor) <= SUPPORTED_TRITON[1]


try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import mma_v2

    # 3.6 names the CTA barrier thread_barrier, later releases barrier.
    _cta_barrier = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier
    AVAILABLE = supported(triton.__version__)
except (ImportError, AttributeError):  # a Triton without Gluon: the launcher never picks this kernel
    AVAILABLE = False

HEADS = 64  # heads per CTA: every KV value is dequantized once for all of them
CHUNKS = 8  # 64-column chunks of a key: 7 FP8 nope groups (one UE8M0 scale each), then the bf16 rope


if AVAILABLE:
    _PAGE_TOKENS = gl.constexpr(cache.TOKENS_PER_PAGE)
    _NOPE = gl.constexpr(cache.NOPE_DIM)
    _DATA_BYTES = gl.constexpr(cache.DATA_BYTES)
    _SCALE_BYTES = gl.constexpr(cache.SCALE_BYTES)
    _SCALE_AREA = gl.constexpr(cache.SCALE_OFFSET)

    @gluon.jit
    def _load_tile(cache_ptr, cache16_ptr, idx_row, start, end_n, total_tokens, stride_page,
                   BLOCK_N: gl.constexpr, L3: gl.constexpr, LR: gl.constexpr):  # fmt: skip
        """Issue one tile's loads: FP8 bytes [N, 8, 64] (chunk 7 empty) and UE8M0 bytes [N, 8] in layout
        L3, the bf16 rope [N, 64] in LR (every element held once); zeros for an invalid slot (its score
        is masked anyway). Nothing here waits for the loads: ``_dequant`` uses them."""
        l2: gl.constexpr = gl.SliceLayout(2, L3)
        raw_row, srow, valid = _slot_rows(idx_row, start, end_n, total_tokens, stride_page, BLOCK_N,
                                          gl.SliceLayout(1, l2))  # fmt: skip
        g2 = gl.arange(0, 8, layout=gl.SliceLayout(0, l2))  # [8]
        c3 = gl.arange(0, 64, layout=gl.SliceLayout(0, gl.SliceLayout(1, L3)))  # [64]
        g3 = gl.expand_dims(gl.expand_dims(g2, 0), 2)  # [1, 8, 1]
        c3 = gl.expand_dims(gl.expand_dims(c3, 0), 1)  # [1, 1, 64]
        row3 = gl.expand_dims(gl.expand_dims(raw_row, 1), 2)  # [N, 1, 1]
        v3 = gl.expand_dims(gl.expand_dims(valid, 1), 2)
        raw = gl.load(cache_ptr + row3 + g3 * 64 + c3, mask=v3 & (g3 < 7), other=0)  # [N, 8, 64] u8
        exps = gl.load(cache_ptr + gl.expand_dims(srow, 1) + gl.expand_dims(g2, 0),
                       mask=gl.expand_dims(valid, 1) & gl.expand_dims(g2 < 7, 0), other=0)  # [N, 8]
        rope_row, _, rvalid = _slot_rows(idx_row, start, end_n, total_tokens, stride_page, BLOCK_N,
                                         gl.SliceLayout(1, LR))  # fmt: skip
        cr = gl.arange(0, 64, layout=gl.SliceLayout(0, LR))
        rope = gl.load(cache16_ptr + gl.expand_dims((rope_row + _NOPE) // 2, 1) + gl.expand_dims(cr, 0),
                       mask=gl.expand_dims(rvalid, 1), other=0.0)  # [N, 64] bf16
        return raw, exps, rope

    @gluon.jit
    def _slot_rows(idx_row, start, end_n, total_tokens, stride_page, BLOCK_N: gl.constexpr, LN: gl.constexpr):
        # Byte offsets of a tile's data rows and scale rows, and which slots are valid, in layout LN.
        offs_n = start + gl.arange(0, BLOCK_N, layout=LN)
        idx = gl.load(idx_row + offs_n, mask=offs_n < end_n, other=-1)
        valid = (idx >= 0) & (idx < total_tokens)
        slot = gl.where(valid, idx, 0)
        page_base = (slot // _PAGE_TOKENS).to(gl.int64) * stride_page
        off = (slot % _PAGE_TOKENS).to(gl.int64)
        return page_base + off * _DATA_BYTES, page_base + _SCALE_AREA + off * _SCALE_BYTES, valid

    @gluon.jit
    def _dequant(raw, exps):
        # FP8 group g x 2**(e_g - 127), exact in bf16; chunk 7 (no bytes, scale 0) comes out 0.
        scale = (exps.to(gl.int32) << 23).to(gl.float32, bitcast=True)
        return (raw.to(gl.float8e4nv, bitcast=True).to(gl.float32) * gl.expand_dims(scale, 2)).to(gl.bfloat16)

    @gluon.jit
    def _store_keys(k_smem, raw, exps, rope, BLOCK_N: gl.constexpr):
        # The nope chunks (chunk 7 written as zeros), then the rope over chunk 7: a barrier between the two
        # writers of chunk 7, and after them before any warp reads the tile.
        k_smem.store(_chunk_rows(_dequant(raw, exps), BLOCK_N))
        _cta_barrier()
        k_smem.slice(7 * BLOCK_N, BLOCK_N).store(rope)
        _cta_barrier()

    @gluon.jit
    def _chunk_rows(x, ROWS: gl.constexpr):
        # [ROWS, 8, 64] -> [8 * ROWS, 64]: chunk g is rows g * ROWS ...; shared buffers are 2-D so that
        # a chunk is a row slice of them.
        return gl.reshape(gl.permute(x, [1, 0, 2]), [8 * ROWS, 64])

    @gluon.jit
    def _pv(p, k_smem, o, i: gl.constexpr, BLOCK_N: gl.constexpr, B_OP: gl.constexpr):
        return mma_v2(p, k_smem.slice(i * BLOCK_N, BLOCK_N).load(B_OP), o)

    @gluon.jit
    def _store_chunk(rows, o, inv, i: gl.constexpr, cols):
        gl.store(rows + i * 64 + cols, (o * inv).to(rows.dtype.element_ty))

    @gluon.constexpr_function
    def _mma_layout(num_warps):
        # 4 warps down the 64 heads (m16 tiles), the rest across tokens / output columns.
        return gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, num_warps // 4], instr_shape=[16, 8])

    @gluon.constexpr_function
    def _gather_layouts(block_n, num_warps):
        # The gather's: a warp reads one token's 512 key bytes, 16 a thread ([N, 8, 64]); the rope [N, 64]
        # spread so that every value is held by one thread.
        per_thread = 2 * block_n // num_warps
        return (gl.BlockedLayout([1, 1, 16], [1, 8, 4], [num_warps, 1, 1], [2, 1, 0]),
                gl.BlockedLayout([1, per_thread], [32 * per_thread // 64, 64 // per_thread], [num_warps, 1], [1, 0]))

    # Shared memory in 128-byte swizzled rows (conflict-free ldmatrix).
    _SMEM = gl.constexpr(gl.SwizzledSharedLayout(8, 1, 8, [1, 0]))

    @gluon.jit
    def _stage_q(q_ptr, pid_b, pid_h, stride_qb, stride_qh, NUM_WARPS: gl.constexpr):
        """q [64 heads, 512] of one block -> shared [8 x 64 heads, 64]: chunk g holds columns 64 g ..."""
        QL: gl.constexpr = gl.BlockedLayout([1, 1, 8], [1, 4, 8], [NUM_WARPS, 1, 1], [2, 1, 0])
        qh = gl.arange(0, 64, layout=gl.SliceLayout(1, gl.SliceLayout(2, QL)))
        qg = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, QL)))
        qc = gl.arange(0, 64, layout=gl.SliceLayout(0, gl.SliceLayout(1, QL)))
        q_off = (gl.expand_dims(gl.expand_dims((pid_h * 64 + qh) * stride_qh, 1), 2)
                 + gl.expand_dims(gl.expand_dims(qg * 64, 0), 2) + gl.expand_dims(gl.expand_dims(qc, 0), 1))
        q = gl.load(q_ptr + pid_b * stride_qb + q_off)  # [64, 8, 64]
        return gl.allocate_shared_memory(gl.bfloat16, [8 * 64, 64], _SMEM, _chunk_rows(q, 64))

    @gluon.jit
    def _fresh_state(NUM_WARPS: gl.constexpr):
        """The online softmax's start for 64 heads: row max -inf, row sum 0, eight [64, 64] accumulators 0."""
        MMA: gl.constexpr = _mma_layout(NUM_WARPS)
        zero = gl.zeros([64, 64], gl.float32, MMA)
        return (gl.full([64], float("-inf"), gl.float32, gl.SliceLayout(1, MMA)),
                gl.zeros([64], gl.float32, gl.SliceLayout(1, MMA)), zero, zero, zero, zero, zero, zero, zero, zero)

    @gluon.jit
    def _online_softmax(s, idx, total_tokens, qk_scale, m_i):
        """One tile of the base-2 online softmax, both Gluon kernels': scores of invalid slots masked to -inf,
        the running row max updated; returns (p, alpha, new max), the sums left to the caller's layout."""
        valid = (idx >= 0) & (idx < total_tokens)
        s = gl.where(gl.expand_dims(valid, 0), s * qk_scale, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)  # all-invalid so far: avoid inf - inf
        alpha = gl.exp2(m_i - m_safe)
        return gl.exp2(s - gl.expand_dims(m_safe, 1)), alpha, m_new

    @gluon.jit
    def _attend(q_smem, kn, kr, idx_row, start, end_n, total_tokens, qk_scale, m_i, l_i,
                o0, o1, o2, o3, o4, o5, o6, o7, BLOCK_N: gl.constexpr, NUM_WARPS: gl.constexpr):  # fmt: skip
        """One tile of the online softmax for 64 heads, keys in shared memory: nope chunks 0-6 of ``kn``
        [8 x N, 64], the rope in ``kr`` [N, 64]. Returns the updated state."""
        MMA: gl.constexpr = _mma_layout(NUM_WARPS)
        A_OP: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=MMA, k_width=2)
        B_OP: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=MMA, k_width=2)
        s = mma_v2(q_smem.slice(7 * 64, 64).load(A_OP), kr.permute([1, 0]).load(B_OP),
                   gl.zeros([64, BLOCK_N], gl.float32, MMA))  # fmt: skip
        for i in gl.static_range(7):
            k_t = kn.slice(i * BLOCK_N, BLOCK_N).permute([1, 0]).load(B_OP)  # [64, N]
            s = mma_v2(q_smem.slice(i * 64, 64).load(A_OP), k_t, s)
        offs_n = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, MMA))
        idx = gl.load(idx_row + offs_n, mask=offs_n < end_n, other=-1)
        p, alpha, m_new = _online_softmax(s, idx, total_tokens, qk_scale, m_i)
        l_i = l_i * alpha + gl.sum(p, axis=1)
        a2 = gl.expand_dims(alpha, 1)
        p = gl.convert_layout(p.to(gl.bfloat16), A_OP)
        o0 = _pv(p, kn, o0 * a2, 0, BLOCK_N, B_OP)
        o1 = _pv(p, kn, o1 * a2, 1, BLOCK_N, B_OP)
        o2 = _pv(p, kn, o2 * a2, 2, BLOCK_N, B_OP)
        o3 = _pv(p, kn, o3 * a2, 3, BLOCK_N, B_OP)
        o4 = _pv(p, kn, o4 * a2, 4, BLOCK_N, B_OP)
        o5 = _pv(p, kn, o5 * a2, 5, BLOCK_N, B_OP)
        o6 = _pv(p, kn, o6 * a2, 6, BLOCK_N, B_OP)
        o7 = mma_v2(p, kr.load(B_OP), o7 * a2)
        return m_new, l_i, o0, o1, o2, o3, o4, o5, o6, o7

    @gluon.jit
    def _write_out(out_ptr, lse_ptr, opart_ptr, lpart_ptr, pid_b, pid_h, pid_s, stride_ob, stride_oh, stride_lb,
                   num_heads, num_splits, m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7,
                   SPLIT: gl.constexpr, NUM_WARPS: gl.constexpr):  # fmt: skip
        # out = acc / l and the natural-log LSE (+inf for a row with no valid slot, whose output is 0), or
        # with split-K the fp32 partials and their log2-domain LSEs for ``_combine_kernel``.
        MMA: gl.constexpr = _mma_layout(NUM_WARPS)
        has = l_i > 0.0
        inv = gl.expand_dims(gl.where(has, 1.0 / gl.where(has, l_i, 1.0), 0.0), 1)
        lse2 = gl.where(has, m_i + gl.log2(gl.where(has, l_i, 1.0)), float("-inf"))
        offs_h = pid_h * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, MMA))
        cols = gl.expand_dims(gl.arange(0, 64, layout=gl.SliceLayout(0, MMA)), 0)
        if SPLIT:
            prow = (pid_b * num_splits + pid_s) * num_heads + offs_h  # rows of [B, S, H, 512]
            rows = gl.expand_dims(opart_ptr + prow * 512, 1)
            gl.store(lpart_ptr + prow, lse2)
        else:
            rows = gl.expand_dims(out_ptr + pid_b * stride_ob + offs_h * stride_oh, 1)
            gl.store(lse_ptr + pid_b * stride_lb + offs_h, gl.where(has, lse2 * 0.6931471805599453, float("inf")))
        _store_chunk(rows, o0, inv, 0, cols)
        _store_chunk(rows, o1, inv, 1, cols)
        _store_chunk(rows, o2, inv, 2, cols)
        _store_chunk(rows, o3, inv, 3, cols)
        _store_chunk(rows, o4, inv, 4, cols)
        _store_chunk(rows, o5, inv, 5, cols)
        _store_chunk(rows, o6, inv, 6, cols)
        _store_chunk(rows, o7, inv, 7, cols)

    @gluon.jit
    def _split_range(idx_ptr, stride_ib, topk, split_len):
        """This CTA's (request, head block, split), its request's index row and its top-k range
        [start_n, end_n): the grid both Gluon kernels run on."""
        pid_b = gl.program_id(0).to(gl.int64)
        pid_h = gl.program_id(1)
        pid_s = gl.program_id(2)
        idx_row = idx_ptr + pid_b * stride_ib
        start_n = pid_s * split_len
        return pid_b, pid_h, pid_s, idx_row, start_n, gl.minimum(start_n + split_len, topk)

    @gluon.jit
    def _assert_shapes(BLOCK_H: gl.constexpr):
        gl.static_assert(BLOCK_H == 64, "gluon decode: one CTA holds all 64 heads of a block")
        gl.static_assert(_NOPE == 7 * 64 and _DATA_BYTES == _NOPE + 128 and _SCALE_BYTES == 8,
                         "gluon decode: 7 FP8 groups of 64, a 64-value bf16 rope, 8 scale bytes per token")

    @gluon.jit(do_not_specialize=["num_splits"])
    def _gluon_decode_kernel(
        q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr, opart_ptr, lpart_ptr,
        stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
        total_tokens, topk, qk_scale, num_heads, num_splits, split_len,
        BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, SPLIT: gl.constexpr, NUM_WARPS: gl.constexpr,
        PREFETCH: gl.constexpr,
    ):  # fmt: skip
        # One partition: the same warps gather, dequantize and multiply; a tile in shared memory at a time.
        _assert_shapes(BLOCK_H)
        L3: gl.constexpr = _gather_layouts(BLOCK_N, NUM_WARPS)[0]
        LR: gl.constexpr = _gather_layouts(BLOCK_N, NUM_WARPS)[1]
        pid_b, pid_h, pid_s, idx_row, start_n, end_n = _split_range(idx_ptr, stride_ib, topk, split_len)
        q_smem = _stage_q(q_ptr, pid_b, pid_h, stride_qb, stride_qh, NUM_WARPS)
        k_smem = gl.allocate_shared_memory(gl.bfloat16, [8 * BLOCK_N, 64], _SMEM)
        kr = k_smem.slice(7 * BLOCK_N, BLOCK_N)

        raw, exps, rope = _load_tile(cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens, stride_page,
                                     BLOCK_N, L3, LR)  # fmt: skip
        _store_keys(k_smem, raw, exps, rope, BLOCK_N)
        m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7 = _fresh_state(NUM_WARPS)
        for start in range(start_n, end_n, BLOCK_N):
            if PREFETCH:  # the next tile's bytes in flight during this tile's MMAs (masked off past the split)
                raw, exps, rope = _load_tile(cache_ptr, cache16_ptr, idx_row, start + BLOCK_N, end_n, total_tokens,
                                             stride_page, BLOCK_N, L3, LR)  # fmt: skip
            m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7 = _attend(
                q_smem, k_smem, kr, idx_row, start, end_n, total_tokens, qk_scale, m_i, l_i,
                o0, o1, o2, o3, o4, o5, o6, o7, BLOCK_N, NUM_WARPS)  # fmt: skip
            if not PREFETCH:  # fewest registers: the next tile is loaded after the MMAs
                raw, exps, rope = _load_tile(cache_ptr, cache16_ptr, idx_row, start + BLOCK_N, end_n, total_tokens,
                                             stride_page, BLOCK_N, L3, LR)  # fmt: skip
            _cta_barrier()  # every warp is done with this tile's keys
            _store_keys(k_smem, raw, exps, rope, BLOCK_N)
        _write_out(out_ptr, lse_ptr, opart_ptr, lpart_ptr, pid_b, pid_h, pid_s, stride_ob, stride_oh, stride_lb,
                   num_heads, num_splits, m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7, SPLIT, NUM_WARPS)  # fmt: skip
