"""The sparse-MLA decode on Hopper's warpgroup MMA (sm_90), in Triton's Gluon dialect.

One CTA of two warpgroups per (request, 64 heads, split of top-k). The raw FP8 rows of the next
``STAGES - 1`` tiles are copied with ``cp.async`` into a ring in shared memory (no registers held while
they fly); each tile is dequantized once, shared memory to shared memory, into a bf16 key buffer, and
both products read it there with ``warpgroup_mma``: ``S = Q K^T`` (Q in shared memory, each warpgroup
half of the tile's tokens) and ``O += P V`` (P from registers, V the same keys, each warpgroup half of
the 512 output columns). With two key buffers (``KEY_BUFFERS``) a tile's P V runs on the tensor cores
while the next tile is dequantized; with one the P V finishes first (half the shared memory, so tiles
twice as long). Online softmax in base 2; split-K partials go through the MMA kernel's LSE combine.
``warpgroup_mma`` is sm_90's alone: the tuner offers this kernel there only (``tuning.WGMMA_CANDIDATES``).
Measured against the MMA kernel, and why it is not faster: ``docs/gluon-decode.md``.
"""

from __future__ import annotations

from mla_kernels import cache
from mla_kernels.decode import gluon_kernels

AVAILABLE = gluon_kernels.AVAILABLE
NUM_WARPS = 8  # two warpgroups: each holds half of the [64, 512] fp32 output accumulator (128 registers)

if AVAILABLE:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

    # 3.6 calls the cp.async copy async_copy_global_to_shared, later releases async_load.
    _cp_async = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared
    _cta_barrier = gluon_kernels._cta_barrier
    _assert_shapes = gluon_kernels._assert_shapes
    _online_softmax = gluon_kernels._online_softmax
    _split_range = gluon_kernels._split_range

    _PAGE_TOKENS = gl.constexpr(cache.TOKENS_PER_PAGE)
    _NOPE = gl.constexpr(cache.NOPE_DIM)
    _DATA_BYTES = gl.constexpr(cache.DATA_BYTES)
    _SCALE_BYTES = gl.constexpr(cache.SCALE_BYTES)
    _SCALE_AREA = gl.constexpr(cache.SCALE_OFFSET)
    _WARPS = gl.constexpr(NUM_WARPS)

    # Operands of the tensor cores: 128-byte swizzled rows, the layout wgmma reads.
    _MMA_SMEM = gl.constexpr(gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2))
    # The raw ring: plain rows, each thread reads back 8 contiguous bytes.
    _RAW2 = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    _RAW3 = gl.constexpr(gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0]))

    @gluon.constexpr_function
    def _layouts(block_n):
        """(S, O, P operand) of the products, two warpgroups."""
        s = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, block_n // 2, 16])
        o = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 256, 16])
        return s, o, gl.DotOperandLayout(operand_index=0, parent=o, k_width=2)

    @gluon.constexpr_function
    def _copy_layouts(warps):
        """(the copies of nope bytes / rope / scales, the dequant) over ``warps`` warps: the whole CTA here,
        the producer warpgroup in ``wgmma_ws_kernels``."""
        return (gl.BlockedLayout([1, 1, 16], [1, 8, 4], [warps, 1, 1], [2, 1, 0]),  # a warp: one row's 512 B
                gl.BlockedLayout([1, 8], [4, 8], [warps, 1], [1, 0]),  # 16 B a thread of a 128-B rope
                gl.BlockedLayout([1, 8], [32, 1], [warps, 1], [1, 0]),  # one token's 8 scale bytes a thread
                gl.BlockedLayout([1, 1, 8], [1, 4, 8], [warps, 1, 1], [2, 1, 0]))  # 8 FP8 bytes a thread

    @gluon.jit
    def _tile_indices(idx_row, start, end_n, BLOCK_N: gl.constexpr):
        """A tile's slot indices (-1 past the split), once in each layout ``_issue_tile`` addresses with
        (three cached loads instead of layout conversions, each a CTA barrier); loaded one iteration
        before they are used, so the gather does not wait on this round trip."""
        CL: gl.constexpr = _copy_layouts(gl.num_warps())[0]
        RL: gl.constexpr = _copy_layouts(gl.num_warps())[1]
        EL: gl.constexpr = _copy_layouts(gl.num_warps())[2]
        offs_c = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, gl.SliceLayout(2, CL)))
        offs_r = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, RL))
        offs_e = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, EL))
        return (gl.load(idx_row + offs_c, mask=offs_c < end_n, other=-1),
                gl.load(idx_row + offs_r, mask=offs_r < end_n, other=-1),
                gl.load(idx_row + offs_e, mask=offs_e < end_n, other=-1))

    @gluon.jit
    def _slot(idx, total_tokens, stride_page, ROW_BYTES: gl.constexpr, AREA: gl.constexpr):
        # (byte offset of a slot's row in the area starting AREA bytes into its page, whether it is valid)
        valid = (idx >= 0) & (idx < total_tokens)
        slot = gl.where(valid, idx, 0)
        row = (slot // _PAGE_TOKENS).to(gl.int64) * stride_page + AREA + (slot % _PAGE_TOKENS).to(gl.int64) * ROW_BYTES
        return row, valid

    @gluon.jit
    def _issue_tile(raw_smem, rope_smem, exp_smem, cache_ptr, cache16_ptr, idx_c, idx_r, idx_e, total_tokens,
                    stride_page, BLOCK_N: gl.constexpr):  # fmt: skip
        """cp.async one tile's bytes into one ring stage: FP8 nope [N, 8, 64] (group 7 not copied), bf16
        rope [N, 64], UE8M0 scales [N, 8]; an invalid slot copies nothing (its score is masked)."""
        CL: gl.constexpr = _copy_layouts(gl.num_warps())[0]
        RL: gl.constexpr = _copy_layouts(gl.num_warps())[1]
        EL: gl.constexpr = _copy_layouts(gl.num_warps())[2]
        row, valid = _slot(idx_c, total_tokens, stride_page, _DATA_BYTES, 0)
        g = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, CL)))
        c = gl.arange(0, 64, layout=gl.SliceLayout(0, gl.SliceLayout(1, CL)))
        g3 = gl.expand_dims(gl.expand_dims(g, 0), 2)  # [1, 8, 1]
        offs = gl.expand_dims(gl.expand_dims(row, 1), 2) + g3 * 64 + gl.expand_dims(gl.expand_dims(c, 0), 1)
        _cp_async(raw_smem, cache_ptr + offs, mask=gl.expand_dims(gl.expand_dims(valid, 1), 2) & (g3 < 7))
        rrow, rvalid = _slot(idx_r, total_tokens, stride_page, _DATA_BYTES, 0)
        rcols = gl.arange(0, 64, layout=gl.SliceLayout(0, RL))
        _cp_async(rope_smem, cache16_ptr + gl.expand_dims((rrow + _NOPE) // 2, 1) + gl.expand_dims(rcols, 0),
                  mask=gl.expand_dims(rvalid, 1))
        erow, evalid = _slot(idx_e, total_tokens, stride_page, _SCALE_BYTES, _SCALE_AREA)
        ecols = gl.arange(0, 8, layout=gl.SliceLayout(0, EL))
        _cp_async(exp_smem, cache_ptr + gl.expand_dims(erow, 1) + gl.expand_dims(ecols, 0),
                  mask=gl.expand_dims(evalid, 1))

    @gluon.jit
    def _scaled_keys(raw, e):
        """FP8 bytes [R, G, 64] x 2**(e - 127) per group (``e`` [R, G], UE8M0) in bf16. The power of two is
        applied in bf16 (exact: e4m3 values need 4 of bf16's 8 bits): one packed multiply a pair instead of
        two fp32 ones; 1-4% faster at 128 requests (docs/gluon-decode.md)."""
        scale = (e.to(gl.int32) << 23).to(gl.float32, bitcast=True).to(gl.bfloat16)
        return raw.to(gl.float8e4nv, bitcast=True).to(gl.float32).to(gl.bfloat16) * gl.expand_dims(scale, 2)

    @gluon.jit
    def _dequant_tile(raw_smem, rope_smem, exp_smem, k_smem, BLOCK_N: gl.constexpr):
        """One stage of the ring -> bf16 keys [N, 512] in ``k_smem``: group g's FP8 bytes x 2**(e_g - 127)
        (exact in bf16), group 7 the rope; one store (every store to it costs a CTA barrier). The
        unspecialized kernel's; the warp-specialized producer runs ``_dequant_rows``."""
        DL: gl.constexpr = _copy_layouts(gl.num_warps())[3]
        raw = raw_smem.load(DL)  # [N, 8, 64] u8
        e = exp_smem.load(gl.SliceLayout(2, DL))  # [N, 8] u8
        rope = rope_smem.load(gl.SliceLayout(1, DL))  # [N, 64] bf16
        g = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, DL)))
        keys = gl.where(gl.expand_dims(gl.expand_dims(g, 0), 2) < 7, _scaled_keys(raw, e), gl.expand_dims(rope, 1))
        k_smem.store(gl.reshape(keys, [BLOCK_N, 512]))

    @gluon.constexpr_function
    def _group_layout(groups, warps):
        """8 FP8 bytes a thread over ``groups`` (1, 2 or 4) 64-byte groups: a warp's lanes cover
        32 // (8 * groups) rows of them."""
        return gl.BlockedLayout([1, 1, 8], [32 // (8 * groups), groups, 8], [warps, 1, 1], [2, 1, 0])

    @gluon.jit
    def _group_keys(raw_smem, exp_smem, G0: gl.constexpr, NG: gl.constexpr, ROWS: gl.constexpr):
        """FP8 groups [G0, G0 + NG) of ``ROWS`` rows x 2**(e - 127): keys [R, 64 NG] in bf16."""
        L: gl.constexpr = _group_layout(NG, gl.num_warps())
        raw = raw_smem.slice(G0, NG, dim=1).load(L)  # [R, NG, 64] u8
        e = exp_smem.slice(G0, NG, dim=1).load(gl.SliceLayout(2, L))  # [R, NG] u8
        return gl.reshape(_scaled_keys(raw, e), [ROWS, NG * 64])

    @gluon.jit
    def _dequant_rows(raw_smem, rope_smem, exp_smem, k_smem, BLOCK_N: gl.constexpr, ROWS: gl.constexpr):
        """``_dequant_tile`` without work on the eighth group, which is never copied: the seven FP8 groups as
        4 + 2 + 1 (shapes are powers of two) and the rope moved as it is, 16 bytes a thread, then the four
        stores back to back (each store after the first waits at a barrier of the warps: the column slices
        share one buffer). The warp-specialized producer's dequant: 3% faster at 128 requests than the
        whole tile, and 2% slower with each store right after its values (docs/gluon-decode.md)."""
        RL: gl.constexpr = _copy_layouts(gl.num_warps())[1]
        for r in gl.static_range(0, BLOCK_N, ROWS):
            raw, exps, keys = raw_smem.slice(r, ROWS), exp_smem.slice(r, ROWS), k_smem.slice(r, ROWS)
            a = _group_keys(raw, exps, 0, 4, ROWS)
            b = _group_keys(raw, exps, 4, 2, ROWS)
            c = _group_keys(raw, exps, 6, 1, ROWS)
            rope = rope_smem.slice(r, ROWS).load(RL)
            keys.slice(0, 256, dim=1).store(a)
            keys.slice(256, 128, dim=1).store(b)
            keys.slice(384, 64, dim=1).store(c)
            keys.slice(448, 64, dim=1).store(rope)

    @gluon.jit
    def _rings(STAGES: gl.constexpr, BLOCK_N: gl.constexpr, KEY_BUFFERS: gl.constexpr):
        """The shared memory of both wgmma kernels: the raw ring (FP8 nope, bf16 rope, UE8M0 scales;
        ``STAGES`` tiles) and the bf16 key buffers the products read."""
        return (gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 8, 64], _RAW3),
                gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_N, 64], _RAW2),
                gl.allocate_shared_memory(gl.uint8, [STAGES, BLOCK_N, 8], _RAW2),
                gl.allocate_shared_memory(gl.bfloat16, [KEY_BUFFERS, BLOCK_N, 512], _MMA_SMEM))

    @gluon.jit
    def _prime_ring(raw_ring, rope_ring, exp_ring, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens,
                    stride_page, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):  # fmt: skip
        """The first ``STAGES - 1`` tiles' copies in flight before anything waits; returns the indices of
        the tile after them (the next one to issue)."""
        for j in gl.static_range(STAGES - 1):
            idx_c, idx_r, idx_e = _tile_indices(idx_row, start_n + j * BLOCK_N, end_n, BLOCK_N)
            _issue_tile(raw_ring.index(j), rope_ring.index(j), exp_ring.index(j), cache_ptr, cache16_ptr,
                        idx_c, idx_r, idx_e, total_tokens, stride_page, BLOCK_N)  # fmt: skip
            async_copy.commit_group()
        return _tile_indices(idx_row, start_n + (STAGES - 1) * BLOCK_N, end_n, BLOCK_N)

    @gluon.jit
    def _q_ptrs(q_ptr, pid_b, stride_qb, head0, stride_qh):
        """The addresses of q [64 heads, 512] from head ``head0`` of request ``pid_b``, 16 bytes a thread of
        the calling warps (both wgmma kernels' q, loaded or copied)."""
        QL: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
        heads = head0 + gl.arange(0, 64, layout=gl.SliceLayout(1, QL))
        cols = gl.arange(0, 512, layout=gl.SliceLayout(0, QL))
        return q_ptr + pid_b * stride_qb + gl.expand_dims(heads * stride_qh, 1) + gl.expand_dims(cols, 0)

    @gluon.jit
    def _stage_q(q_ptr, pid_b, pid_h, stride_qb, stride_qh):
        """q [64 heads, 512] of one head block into shared memory, wgmma's A operand."""
        q = gl.load(_q_ptrs(q_ptr, pid_b, stride_qb, pid_h * 64, stride_qh))
        return gl.allocate_shared_memory(gl.bfloat16, [64, 512], _MMA_SMEM, q)

    @gluon.jit
    def _score_indices(idx_row, start, end_n, BLOCK_N: gl.constexpr):
        """A tile's slot indices in the scores' column layout (cached: ``_tile_indices`` read them)."""
        S_L: gl.constexpr = _layouts(BLOCK_N)[0]
        offs_n = start + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, S_L))
        return gl.load(idx_row + offs_n, mask=offs_n < end_n, other=-1)

    @gluon.jit
    def _softmax_tile(s, idx, total_tokens, qk_scale, m_i, l_acc):
        """Mask and scale one tile's scores, update the running max and the running sums; returns (p, alpha,
        m, sums). The sums stay per score column ([64, N], summed over the columns once at the end): a row
        sum each tile would be another exchange between the two warpgroups."""
        p, alpha, m_new = _online_softmax(s, idx, total_tokens, qk_scale, m_i)
        return p, alpha, m_new, l_acc * gl.expand_dims(alpha, 1) + p

    @gluon.jit
    def _write_out(out_ptr, lse_ptr, opart_ptr, lpart_ptr, pid_b, pid_h, pid_s, stride_ob, stride_oh, stride_lb,
                   num_heads, num_splits, m_i, l_i, o, SPLIT: gl.constexpr, BLOCK_N: gl.constexpr):  # fmt: skip
        # out = o / l and the natural-log LSE (+inf for a row with no valid slot, whose output is 0), or
        # with split-K the fp32 partials and their log2-domain LSEs for ``_combine_kernel``.
        O_L: gl.constexpr = _layouts(BLOCK_N)[1]
        has = l_i > 0.0
        lse2 = gl.where(has, m_i + gl.log2(gl.where(has, l_i, 1.0)), float("-inf"))
        inv = gl.convert_layout(gl.where(has, 1.0 / gl.where(has, l_i, 1.0), 0.0), gl.SliceLayout(1, O_L))
        offs_h = pid_h * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, O_L))
        cols = gl.expand_dims(gl.arange(0, 512, layout=gl.SliceLayout(0, O_L)), 0)
        lse_h = pid_h * 64 + gl.arange(0, 64, layout=lse2.type.layout)
        if SPLIT:
            prow = (pid_b * num_splits + pid_s) * num_heads + offs_h  # rows of [B, S, H, 512]
            gl.store(lpart_ptr + (pid_b * num_splits + pid_s) * num_heads + lse_h, lse2)
            gl.store(gl.expand_dims(opart_ptr + prow * 512, 1) + cols, o * gl.expand_dims(inv, 1))
        else:
            gl.store(lse_ptr + pid_b * stride_lb + lse_h, gl.where(has, lse2 * 0.6931471805599453, float("inf")))
            rows = gl.expand_dims(out_ptr + pid_b * stride_ob + offs_h * stride_oh, 1)
            gl.store(rows + cols, (o * gl.expand_dims(inv, 1)).to(out_ptr.dtype.element_ty))

    @gluon.jit(do_not_specialize=["num_splits"])
    def _wgmma_decode_kernel(
        q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr, opart_ptr, lpart_ptr,
        stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
        total_tokens, topk, qk_scale, num_heads, num_splits, split_len,
        BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, SPLIT: gl.constexpr, STAGES: gl.constexpr,
        KEY_BUFFERS: gl.constexpr,
    ):  # fmt: skip
        _assert_shapes(BLOCK_H)  # the mma_v2 kernel's: 64 heads a CTA, the cache layout both are written for
        gl.static_assert(STAGES >= 2, "wgmma decode: at least two ring stages")
        gl.static_assert(KEY_BUFFERS == 1 or KEY_BUFFERS == 2, "wgmma decode: one or two key buffers")
        S_L: gl.constexpr = _layouts(BLOCK_N)[0]
        O_L: gl.constexpr = _layouts(BLOCK_N)[1]
        P_OP: gl.constexpr = _layouts(BLOCK_N)[2]
        pid_b, pid_h, pid_s, idx_row, start_n, end_n = _split_range(idx_ptr, stride_ib, topk, split_len)

        raw_ring, rope_ring, exp_ring, k_bufs = _rings(STAGES, BLOCK_N, KEY_BUFFERS)
        idx_c, idx_r, idx_e = _prime_ring(raw_ring, rope_ring, exp_ring, cache_ptr, cache16_ptr, idx_row, start_n,
                                          end_n, total_tokens, stride_page, BLOCK_N, STAGES)  # fmt: skip
        q_smem = _stage_q(q_ptr, pid_b, pid_h, stride_qb, stride_qh)

        m_i = gl.full([64], float("-inf"), gl.float32, gl.SliceLayout(1, S_L))
        l_acc = gl.zeros([64, BLOCK_N], gl.float32, S_L)
        s = gl.zeros([64, BLOCK_N], gl.float32, S_L)
        o = gl.zeros([64, 512], gl.float32, O_L)
        p = gl.zeros([64, BLOCK_N], gl.bfloat16, P_OP)  # the previous tile's P
        if KEY_BUFFERS == 2:  # the first iteration's P V reads this buffer: zeros, not stale NaN patterns
            ZL: gl.constexpr = _copy_layouts(_WARPS)[1]
            k_bufs.index(1).store(gl.zeros([BLOCK_N, 512], gl.bfloat16, ZL))
            fence_async_shared()
            _cta_barrier()
        it = 0
        for start in range(start_n, end_n, BLOCK_N):
            if KEY_BUFFERS == 2:  # the previous tile's P V, in flight during this tile's dequant and scores
                acc = warpgroup_mma(p, k_bufs.index((it + 1) % 2), o, is_async=True)
            stage = it % STAGES
            async_copy.wait_group(STAGES - 2)  # this tile's copies (this thread's) have landed
            _cta_barrier()  # everyone's have; everyone is done with the stage and key buffer reused below
            sidx = _score_indices(idx_row, start, end_n, BLOCK_N)  # in flight during the dequant
            k_smem = k_bufs.index(it % KEY_BUFFERS)
            _dequant_tile(raw_ring.index(stage), rope_ring.index(stage), exp_ring.index(stage), k_smem, BLOCK_N)
            fence_async_shared()  # the generic stores above, before the tensor cores read them
            _cta_barrier()
            # use_acc=False over the last tile's scores: zeroing registers while a P V is in flight would
            # make ptxas serialize every wgmma (C7515).
            s = warpgroup_mma(q_smem, k_smem.permute([1, 0]), s, use_acc=False, is_async=True)
            # While the scores run: the copies of tile it + STAGES - 1 into the stage tile it - 1 left.
            nxt = (it + STAGES - 1) % STAGES
            _issue_tile(raw_ring.index(nxt), rope_ring.index(nxt), exp_ring.index(nxt), cache_ptr, cache16_ptr,
                        idx_c, idx_r, idx_e, total_tokens, stride_page, BLOCK_N)  # fmt: skip
            async_copy.commit_group()
            idx_c, idx_r, idx_e = _tile_indices(idx_row, start + STAGES * BLOCK_N, end_n, BLOCK_N)
            if KEY_BUFFERS == 2:
                s, o, p = warpgroup_mma_wait(0, deps=[s, acc, p])
            else:
                s = warpgroup_mma_wait(0, deps=[s])
            pf, alpha, m_i, l_acc = _softmax_tile(s, sidx, total_tokens, qk_scale, m_i, l_acc)
            o = o * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, O_L)), 1)
            p = gl.convert_layout(pf.to(gl.bfloat16), P_OP)
            if KEY_BUFFERS == 1:  # one key buffer: the next tile's keys overwrite it
                o = warpgroup_mma(p, k_smem, o)
            it += 1
        if KEY_BUFFERS == 2:  # the last tile's P V
            o = warpgroup_mma(p, k_bufs.index((it + 1) % 2), o)
        async_copy.wait_group(0)
        _write_out(out_ptr, lse_ptr, opart_ptr, lpart_ptr, pid_b, pid_h, pid_s, stride_ob, stride_oh, stride_lb,
                   num_heads, num_splits, m_i, gl.sum(l_acc, axis=1), o, SPLIT, BLOCK_N)  # fmt: skip
