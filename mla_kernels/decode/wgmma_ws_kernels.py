"""The warp-specialized sparse-MLA decode on Hopper's warpgroup MMA (sm_90), in Triton's Gluon dialect.

``wgmma_kernels``' decode with its two halves on their own warps (``warp_specialize``): a producer warpgroup
copies q, then gathers the raw FP8 rows of the coming tiles with ``cp.async`` into a ring and dequantizes each
tile once, ``DQ_ROWS`` rows a step, into one of ``KEY_BUFFERS`` bf16 key buffers, while two consumer warpgroups (the
default partition) run ``S = Q K^T``, the online softmax and ``O += P V`` on the buffer before. The sides
hand buffers over through mbarriers (``ready``: keys written; ``free``: both products done with them). The
producer runs on ``PRODUCER_REGS`` registers a thread (``setmaxnreg``), which leaves the consumers the O
accumulator's 128. Shared memory, copies, dequant, softmax and output are ``wgmma_kernels``' own functions; split-K
partials go through the MMA kernel's LSE combine. Why 16 rows a step and 88 registers, and how it compares
with the unspecialized kernel: ``docs/gluon-decode.md``.
"""

from __future__ import annotations

from mla_kernels.decode import wgmma_kernels

AVAILABLE = wgmma_kernels.AVAILABLE
NUM_WARPS = wgmma_kernels.NUM_WARPS  # the consumers: two warpgroups, each half of the [64, 512] output
PRODUCER_WARPS = 4  # one warpgroup: register reallocation (setmaxnreg) works a warpgroup at a time
PRODUCER_REGS = 88  # 16 rows a dequant step; 56 registers held 8, 88 beat 80 and 96 (docs/gluon-decode.md)
DQ_ROWS = 16

if AVAILABLE:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import async_copy
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        warpgroup_mma,
        warpgroup_mma_wait,
    )

    W = wgmma_kernels
    _cta_barrier = W._cta_barrier  # inside a partition: a barrier of that partition's warps
    _PRODUCER_WARPS = gl.constexpr(PRODUCER_WARPS)

    @gluon.jit
    def _producer(q_smem, q_row, stride_qh, raw_ring, rope_ring, exp_ring, k_bufs, ready, free, cache_ptr,
                  cache16_ptr, idx_row, start_n, end_n, total_tokens, stride_page, BLOCK_N: gl.constexpr,
                  STAGES: gl.constexpr, KEY_BUFFERS: gl.constexpr, DQ_ROWS: gl.constexpr):  # fmt: skip
        """Copy q, then gather ``STAGES`` tiles ahead; dequantize tile t into key buffer t % KEY_BUFFERS once
        the consumers have freed it, then mark it ready. q's copies go out first, in flight with the first
        tiles' (the first ``ready`` covers them): the first keys are ready 0.8-0.9 us sooner than with q
        staged by the CTA before the partitions start, 2-5% of the whole kernel (docs/gluon-decode.md)."""
        W._cp_async(q_smem, W._q_ptrs(q_row, 0, 0, 0, stride_qh))  # q from its head block's row: own copy group
        async_copy.commit_group()
        idx_c, idx_r, idx_e = W._prime_ring(raw_ring, rope_ring, exp_ring, cache_ptr, cache16_ptr, idx_row, start_n,
                                            end_n, total_tokens, stride_page, BLOCK_N, STAGES)  # fmt: skip
        it = 0
        for start in range(start_n, end_n, BLOCK_N):
            # Tile it + STAGES - 1 into the stage tile it - 1 left (every producer thread is done with it).
            nxt = (it + STAGES - 1) % STAGES
            W._issue_tile(raw_ring.index(nxt), rope_ring.index(nxt), exp_ring.index(nxt), cache_ptr, cache16_ptr,
                          idx_c, idx_r, idx_e, total_tokens, stride_page, BLOCK_N)  # fmt: skip
            async_copy.commit_group()
            idx_c, idx_r, idx_e = W._tile_indices(idx_row, start + STAGES * BLOCK_N, end_n, BLOCK_N)
            async_copy.wait_group(STAGES - 1)  # tile it's copies (this thread's) have landed
            _cta_barrier()  # everyone's have
            buf = it % KEY_BUFFERS
            # Phase parity of the buffer's previous release; a fresh barrier passes parity 1 at once.
            mbarrier.wait(free.index(buf), ((it // KEY_BUFFERS) & 1) ^ 1)
            stage = it % STAGES
            W._dequant_rows(raw_ring.index(stage), rope_ring.index(stage), exp_ring.index(stage), k_bufs.index(buf),
                            BLOCK_N, DQ_ROWS)  # fmt: skip
            fence_async_shared()  # the generic stores above, before the tensor cores read them
            _cta_barrier()  # every producer thread's stores, and its reads of this stage, are done
            mbarrier.arrive(ready.index(buf), count=1)
            it += 1
        async_copy.wait_group(0)

    @gluon.jit
    def _consumer(q_smem, k_bufs, ready, free, idx_row, start_n, end_n, total_tokens, qk_scale,
                  BLOCK_N: gl.constexpr, KEY_BUFFERS: gl.constexpr):  # fmt: skip
        """S, the online softmax and P V of each tile as its keys become ready; returns (m, row sums, o)."""
        S_L: gl.constexpr = W._layouts(BLOCK_N)[0]
        O_L: gl.constexpr = W._layouts(BLOCK_N)[1]
        P_OP: gl.constexpr = W._layouts(BLOCK_N)[2]
        m_i = gl.full([64], float("-inf"), gl.float32, gl.SliceLayout(1, S_L))
        l_acc = gl.zeros([64, BLOCK_N], gl.float32, S_L)
        s = gl.zeros([64, BLOCK_N], gl.float32, S_L)
        o = gl.zeros([64, 512], gl.float32, O_L)
        sidx = W._score_indices(idx_row, start_n, end_n, BLOCK_N)
        it = 0
        for start in range(start_n, end_n, BLOCK_N):
            buf = it % KEY_BUFFERS
            nidx = W._score_indices(idx_row, start + BLOCK_N, end_n, BLOCK_N)  # in flight during this tile
            mbarrier.wait(ready.index(buf), (it // KEY_BUFFERS) & 1)
            k_smem = k_bufs.index(buf)
            s = warpgroup_mma(q_smem, k_smem.permute([1, 0]), s, use_acc=False, is_async=True)
            s = warpgroup_mma_wait(0, deps=[s])
            pf, alpha, m_i, l_acc = W._softmax_tile(s, sidx, total_tokens, qk_scale, m_i, l_acc)
            o = o * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, O_L)), 1)
            p = gl.convert_layout(pf.to(gl.bfloat16), P_OP)
            o = warpgroup_mma(p, k_smem, o)
            _cta_barrier()  # both warpgroups' products are done with this buffer
            mbarrier.arrive(free.index(buf), count=1)
            sidx = nidx
            it += 1
        return m_i, gl.sum(l_acc, axis=1), o

    @gluon.jit(do_not_specialize=["num_splits"])
    def _wgmma_ws_decode_kernel(
        q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr, opart_ptr, lpart_ptr,
        stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
        total_tokens, topk, qk_scale, num_heads, num_splits, split_len,
        BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, SPLIT: gl.constexpr, STAGES: gl.constexpr,
        KEY_BUFFERS: gl.constexpr, PRODUCER_REGS: gl.constexpr, DQ_ROWS: gl.constexpr,
    ):  # fmt: skip
        W._assert_shapes(BLOCK_H)
        gl.static_assert(STAGES >= 2, "wgmma ws decode: at least two ring stages")
        gl.static_assert(BLOCK_N % DQ_ROWS == 0, "wgmma ws decode: tiles of whole dequant steps")
        pid_b, pid_h, pid_s, idx_row, start_n, end_n = W._split_range(idx_ptr, stride_ib, topk, split_len)

        raw_ring, rope_ring, exp_ring, k_bufs = W._rings(STAGES, BLOCK_N, KEY_BUFFERS)
        ready = gl.allocate_shared_memory(gl.int64, [KEY_BUFFERS, 1], mbarrier.MBarrierLayout())
        free = gl.allocate_shared_memory(gl.int64, [KEY_BUFFERS, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(KEY_BUFFERS):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(free.index(i), count=1)
        q_smem = gl.allocate_shared_memory(gl.bfloat16, [64, 512], W._MMA_SMEM)  # the producer copies q
        _cta_barrier()  # the barriers' initialization, before either side starts

        m_i, l_i, o = gl.warp_specialize([
            (_consumer, (q_smem, k_bufs, ready, free, idx_row, start_n, end_n, total_tokens, qk_scale, BLOCK_N,
                         KEY_BUFFERS)),
            (_producer, (q_smem, q_ptr + pid_b * stride_qb + pid_h * 64 * stride_qh, stride_qh, raw_ring, rope_ring,
                         exp_ring, k_bufs, ready, free, cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens,
                         stride_page, BLOCK_N, STAGES, KEY_BUFFERS, DQ_ROWS)),
        ], [_PRODUCER_WARPS], [PRODUCER_REGS])  # fmt: skip
        W._write_out(out_ptr, lse_ptr, opart_ptr, lpart_ptr, pid_b, pid_h, pid_s, stride_ob, stride_oh, stride_lb,
                     num_heads, num_splits, m_i, l_i, o, SPLIT, BLOCK_N)  # fmt: skip
