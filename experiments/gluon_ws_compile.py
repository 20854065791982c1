#!/usr/bin/env python
"""Does a warp-specialized (producer/consumer) Gluon decode fit the register file with ``mma_v2``?

A producer partition gathers and dequantizes tiles into a ring of ``STAGES`` shared-memory slots (nope
[8 x N, 64] with chunk 7 unused, the rope [N, 64] beside it); the default partition (the consumers) runs
the MMAs and the softmax of ``mla_kernels.decode.gluon_kernels`` on the slot the producer filled. Two
mbarriers a slot, ``full`` and ``empty``; Gluon lowers an arrive to a partition barrier plus one thread's
arrive, so both count 1. Each config (``BLOCK_N x consumer warps x STAGES x producer warps x producer
registers``) is compiled for sm_90 and sm_120 without a GPU, and its registers, spills and shared memory
printed: the answer behind ``docs/gluon-decode.md`` (every config spills, so the product keeps the
single-partition kernel). Nothing here runs a kernel.

    python -m experiments.gluon_ws_compile [--configs 16x8x3x4x64,32x8x3x4x128] [--arch 90,120]
"""

from __future__ import annotations

import argparse
import sys

DEFAULT_CONFIGS = ("32x8x3x4x128,16x8x3x4x64,16x8x4x4x80,32x8x3x4x64,16x8x3x2x96,32x8x2x2x80,16x8x3x2x48,"
                   "16x8x2x1x56,16x8x3x4x40")  # fmt: skip


def _kernel():  # noqa: ANN202 - a Gluon kernel object, built only where Gluon exists
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.ampere import mbarrier

    from mla_kernels.decode import gluon_kernels as gk

    @gluon.jit
    def _producer(nope_ring, rope_ring, full, empty, cache_ptr, cache16_ptr, idx_row, start_n, end_n,
                  total_tokens, stride_page, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                  PRODUCER_WARPS: gl.constexpr):  # fmt: skip
        L3: gl.constexpr = gk._gather_layouts(BLOCK_N, PRODUCER_WARPS)[0]
        LR: gl.constexpr = gk._gather_layouts(BLOCK_N, PRODUCER_WARPS)[1]
        tiles = gl.cdiv(end_n - start_n, BLOCK_N)
        raw, exps, rope = gk._load_tile(cache_ptr, cache16_ptr, idx_row, start_n, end_n, total_tokens,
                                        stride_page, BLOCK_N, L3, LR)  # fmt: skip
        for t in range(tiles):
            slot = t % STAGES
            # The next tile's loads go out before this one is converted: two tiles in flight.
            raw_x, exps_x, rope_x = gk._load_tile(cache_ptr, cache16_ptr, idx_row, start_n + (t + 1) * BLOCK_N,
                                                  end_n, total_tokens, stride_page, BLOCK_N, L3, LR)  # fmt: skip
            keys = gk._chunk_rows(gk._dequant(raw, exps), BLOCK_N)
            mbarrier.wait(empty.index(slot), ((t // STAGES) & 1) ^ 1)  # the first pass finds every slot free
            nope_ring.index(slot).store(keys)
            rope_ring.index(slot).store(rope)
            mbarrier.arrive(full.index(slot))
            raw, exps, rope = raw_x, exps_x, rope_x

    @gluon.jit
    def _consumer(q_smem, nope_ring, rope_ring, full, empty, idx_row, start_n, end_n, total_tokens, qk_scale,
                  BLOCK_N: gl.constexpr, STAGES: gl.constexpr, NUM_WARPS: gl.constexpr):  # fmt: skip
        m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7 = gk._fresh_state(NUM_WARPS)
        for t in range(gl.cdiv(end_n - start_n, BLOCK_N)):
            slot = t % STAGES
            mbarrier.wait(full.index(slot), (t // STAGES) & 1)
            m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7 = gk._attend(
                q_smem, nope_ring.index(slot), rope_ring.index(slot), idx_row, start_n + t * BLOCK_N, end_n,
                total_tokens, qk_scale, m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7, BLOCK_N, NUM_WARPS)  # fmt: skip
            mbarrier.arrive(empty.index(slot))
        return m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7  # a tuple: triton 3.6 needs one from the default partition

    @gluon.jit(do_not_specialize=["num_splits"])
    def _gluon_ws_decode_kernel(
        q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr, opart_ptr, lpart_ptr,
        stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
        total_tokens, topk, qk_scale, num_heads, num_splits, split_len,
        BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, SPLIT: gl.constexpr, NUM_WARPS: gl.constexpr,
        STAGES: gl.constexpr, PRODUCER_WARPS: gl.constexpr, PRODUCER_REGS: gl.constexpr,
    ):  # fmt: skip
        gk._assert_shapes(BLOCK_H)
        pid_b = gl.program_id(0).to(gl.int64)
        pid_h = gl.program_id(1)
        pid_s = gl.program_id(2)
        idx_row = idx_ptr + pid_b * stride_ib
        start_n = pid_s * split_len
        end_n = gl.minimum(start_n + split_len, topk)
        q_smem = gk._stage_q(q_ptr, pid_b, pid_h, stride_qb, stride_qh, NUM_WARPS)
        nope_ring = gl.allocate_shared_memory(gl.bfloat16, [STAGES, 8 * BLOCK_N, 64], gk._SMEM)
        rope_ring = gl.allocate_shared_memory(gl.bfloat16, [STAGES, BLOCK_N, 64], gk._SMEM)
        full = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(full.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        gk._cta_barrier()  # q and the initialized barriers, before either partition starts
        m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7 = gl.warp_specialize(
            [(_consumer, (q_smem, nope_ring, rope_ring, full, empty, idx_row, start_n, end_n, total_tokens,
                          qk_scale, BLOCK_N, STAGES, NUM_WARPS)),
             (_producer, (nope_ring, rope_ring, full, empty, cache_ptr, cache16_ptr, idx_row, start_n, end_n,
                          total_tokens, stride_page, BLOCK_N, STAGES, PRODUCER_WARPS))],
            [PRODUCER_WARPS], [PRODUCER_REGS])  # fmt: skip
        gk._write_out(out_ptr, lse_ptr, opart_ptr, lpart_ptr, pid_b, pid_h, pid_s, stride_ob, stride_oh, stride_lb,
                      num_heads, num_splits, m_i, l_i, o0, o1, o2, o3, o4, o5, o6, o7, SPLIT, NUM_WARPS)  # fmt: skip

    return _gluon_ws_decode_kernel


def compile_config(kernel: object, spec: str, capability: int) -> dict[str, object]:
    """Compile one ``BLOCK_NxWARPSxSTAGESxPRODUCER_WARPSxPRODUCER_REGS`` config (B 64, H 64, top-k 512, 4
    splits) for ``sm_<capability>``: its registers, spill bytes and shared memory."""
    import torch

    from mla_kernels import aot
    from mla_kernels._common import KernelLaunch
    from mla_kernels.cache import PAGE_BYTES

    bn, warps, stages, pw, regs = (int(v) for v in spec.split("x"))
    meta = torch.device("meta")
    q = torch.empty(64, 64, 512, dtype=torch.bfloat16, device=meta)
    kv = torch.empty(1000, PAGE_BYTES, dtype=torch.uint8, device=meta)
    idx = torch.empty(64, 512, dtype=torch.int32, device=meta)
    out = torch.empty(64, 64, 512, dtype=torch.bfloat16, device=meta)
    lse = torch.empty(64, 64, dtype=torch.float32, device=meta)
    opart = torch.empty(64, 4, 64, 512, dtype=torch.float32, device=meta)
    lpart = torch.empty(64, 4, 64, dtype=torch.float32, device=meta)
    launch = KernelLaunch(
        "gluon_ws", kernel, (64, 1, 4),
        (q, kv, kv.view(torch.bfloat16), idx, out, lse, opart, lpart, q.stride(0), q.stride(1), kv.stride(0),
         idx.stride(0), out.stride(0), out.stride(1), lse.stride(0), 256_000, 512, 0.06, 64, 4, 128),
        {"BLOCK_H": 64, "BLOCK_N": bn, "SPLIT": True, "NUM_WARPS": warps, "STAGES": stages,
         "PRODUCER_WARPS": pw, "PRODUCER_REGS": regs}, num_warps=warps,
    )  # fmt: skip
    stats = aot.compile_uncached(launch, capability)
    return {"config": spec, "arch": f"sm_{capability}", "registers": stats.registers,
            "spill_bytes": stats.spill_bytes, "shared": stats.shared}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.gluon_ws_compile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--configs", default=DEFAULT_CONFIGS,
                    help="BLOCK_NxWARPSxSTAGESxPRODUCER_WARPSxPRODUCER_REGS,... (default: the nine in the docs)")
    ap.add_argument("--arch", default="90,120", help="compute capabilities to compile for (default 90,120)")
    args = ap.parse_args(argv)
    specs = [c for c in args.configs.split(",") if c]
    if any(len(c.split("x")) != 5 or not all(v.isdigit() for v in c.split("x")) for c in specs):
        ap.error(f"--configs: each is BLOCK_NxWARPSxSTAGESxPRODUCER_WARPSxPRODUCER_REGS, got {args.configs!r}")
    from mla_kernels.decode import gluon_kernels

    if not gluon_kernels.AVAILABLE:
        print(f"this Triton has no Gluon decode (supported: {gluon_kernels.SUPPORTED_TRITON})", file=sys.stderr)
        return 2
    kernel = _kernel()
    for capability in (int(a) for a in args.arch.split(",")):
        for spec in specs:
            row = compile_config(kernel, spec, capability)
            print(f"{row['arch']} {spec:14s} registers {row['registers']:3d}  spill {row['spill_bytes']:5,d} B/thread"
                  f"  shared {row['shared']:,} B", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
