"""Two restructurings of the MMA decode for mma.sync GPUs (the sm_120 code path), timed against the
production kernel on one GPU (cold L2, graph replay) and compiled ahead of time for sm_120.

The production kernel under the sm_120 profile keeps 16-head blocks: Triton's mma.sync layout puts the
4 warps side by side along the score tile's columns, so every warp holds all 16 x 512 of Q (128 registers)
and dequantizes its share of the tile for 16 heads only. Each variant tests one idea against that:

- ``batched``: the scores as one batched dot over QSPLIT column chunks (``[QSPLIT, BH, 512/QSPLIT]``, a
  chunk per warp) summed across warps, so a warp holds 1/QSPLIT of Q; the tile is one [N, 512] operand.
- ``group8``: the tile as 8 groups of 64 columns (7 fp8 nope groups and the bf16 rope), independent score
  products summed, 8 accumulators; ``QRELOAD=1`` reads each Q group per tile (L1) instead of keeping Q in
  registers across the loop.

    python -m experiments.kernel_decode_sm120_probe [--batches 32,64,128] [--variants default]

``--variants``: ``default`` or ``name:BHxBNxWARPSxSTAGESxPREFETCH[:KEY=V]...`` separated by commas, name one
of production, batched, group8 (e.g. ``batched:16x32x4x2x0:QSPLIT=4``). Every variant is checked against the
reference first. The measured result is in docs/kernel-record.md and ``docs/measurements/``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

DEFAULT_VARIANTS = (
    "production:16x32x4x1x2,production:32x32x8x1x2,"
    "batched:16x32x4x1x2:QSPLIT=4,batched:16x32x4x2x0:QSPLIT=4,batched:32x32x8x2x0:QSPLIT=8,"
    "group8:16x32x4x1x2:QRELOAD=0,group8:16x32x4x1x2:QRELOAD=1,group8:16x32x4x2x0:QRELOAD=1,"
    "group8:32x32x8x1x2:QRELOAD=1"
)


@functools.cache
def kernels() -> dict[str, object]:
    """The probe's Triton kernels by variant name (built on first use: importing this script needs only
    the standard library, as asv's discovery of ``benchmarks/`` requires). Module globals, not closures:
    Triton's interpreter looks a kernel's helpers up in its globals."""
    global triton, tl, _load_raw_tile, _slot_tile, _ue8m0, _tile_k, _batched_qk_kernel
    global _g_raw, _g_tile, _g_deq, _g_q, _group8_kernel
    import triton
    import triton.language as tl

    from mla_kernels.decode.kernels import _load_raw_tile, _slot_tile, _ue8m0

    @triton.jit
    def _tile_k(raw, exps, rope, BLOCK_N: tl.constexpr, DT: tl.constexpr):
        """[N, 8, 64] fp8 bytes (group 7 padding) + scales + bf16 rope [N, 64] -> K [N, 512] in DT."""
        g = tl.arange(0, 8)
        vals = raw.to(tl.float8e4nv, bitcast=True).to(DT) * _ue8m0(exps).to(DT)[:, :, None]
        vals = tl.where((g == 7)[None, :, None], rope.to(DT)[:, None, :], vals)
        return tl.reshape(vals, (BLOCK_N, 512))


    @triton.jit(do_not_specialize=["num_splits"])
    def _batched_qk_kernel(
        q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr, opart_ptr, lpart_ptr,
        stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
        total_tokens, topk, qk_scale, num_heads, num_splits, split_len,
        BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, DOT_F32: tl.constexpr,
        PREFETCH: tl.constexpr, QSPLIT: tl.constexpr = 4,
    ):
        # Scores as a batched dot over QSPLIT column chunks (one per warp), summed across warps: each warp
        # holds 1/QSPLIT of Q instead of all of it.
        pid_b = tl.program_id(0).to(tl.int64)
        pid_h = tl.program_id(1)
        pid_s = tl.program_id(2)
        DT: tl.constexpr = tl.float32 if DOT_F32 else tl.bfloat16
        KC: tl.constexpr = 512 // QSPLIT
        offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
        c512 = tl.arange(0, 512)
        oc = tl.arange(0, QSPLIT)[:, None, None] * KC + tl.arange(0, KC)[None, None, :]
        q3 = tl.load(q_ptr + pid_b * stride_qb + offs_h[None, :, None] * stride_qh + oc).to(DT)  # [QS, BH, KC]
        idx_row = idx_ptr + pid_b * stride_ib
        start_n = pid_s * split_len
        end_n = tl.minimum(start_n + split_len, topk)

        m_i = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
        acc = tl.zeros([BLOCK_H, 512], dtype=tl.float32)
        if PREFETCH == 2:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            valid, page_base, off = _slot_tile(idx_row, offs_n, end_n, total_tokens, stride_page)
            raw, exps, rope = _load_raw_tile(cache_ptr, cache16_ptr, page_base, off, valid)
        for start in range(start_n, end_n, BLOCK_N):
            offs_x = start + BLOCK_N + tl.arange(0, BLOCK_N)
            if PREFETCH == 2:
                valid_x, page_base_x, off_x = _slot_tile(idx_row, offs_x, end_n, total_tokens, stride_page)
                tile_x = _load_raw_tile(cache_ptr, cache16_ptr, page_base_x, off_x, valid_x)
            else:
                offs_n = start + tl.arange(0, BLOCK_N)
                valid, page_base, off = _slot_tile(idx_row, offs_n, end_n, total_tokens, stride_page)
                raw, exps, rope = _load_raw_tile(cache_ptr, cache16_ptr, page_base, off, valid)
            k = _tile_k(raw, exps, rope, BLOCK_N, DT)  # [N, 512]
            kt3 = tl.permute(tl.reshape(k, (BLOCK_N, QSPLIT, KC)), (1, 2, 0))  # [QS, KC, N]
            s = tl.sum(tl.dot(q3, kt3), axis=0)  # [BH, N] fp32
            s = tl.where(valid[None, :], s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = tl.dot(p.to(DT), k, acc * alpha[:, None])
            m_i = m_new
            if PREFETCH == 2:
                raw, exps, rope = tile_x
                valid = valid_x

        has = l_i > 0.0
        inv = tl.where(has, 1.0 / tl.where(has, l_i, 1.0), 0.0)[:, None]
        lse2 = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
        if SPLIT:
            row = (pid_b * num_splits + pid_s) * num_heads + offs_h
            o_rows = opart_ptr + row[:, None] * 512
            tl.store(lpart_ptr + row, lse2)
        else:
            o_rows = out_ptr + pid_b * stride_ob + offs_h[:, None] * stride_oh
            tl.store(lse_ptr + pid_b * stride_lb + offs_h, tl.where(has, lse2 * 0.6931471805599453, float("inf")))
        tl.store(o_rows + c512[None, :], (acc * inv).to(o_rows.dtype.element_ty))



    @triton.jit
    def _g_raw(cache_ptr, row, valid, G: tl.constexpr):
        c64 = tl.arange(0, 64)
        return tl.load(cache_ptr + row[:, None] + G * 64 + c64[None, :], mask=valid[:, None], other=0)  # [N, 64] u8


    @triton.jit
    def _g_tile(cache_ptr, cache16_ptr, page_base, off, valid):
        row = page_base + off.to(tl.int64) * 576
        srow = page_base + 147456 + off.to(tl.int64) * 8
        r0 = _g_raw(cache_ptr, row, valid, 0)
        r1 = _g_raw(cache_ptr, row, valid, 1)
        r2 = _g_raw(cache_ptr, row, valid, 2)
        r3 = _g_raw(cache_ptr, row, valid, 3)
        r4 = _g_raw(cache_ptr, row, valid, 4)
        r5 = _g_raw(cache_ptr, row, valid, 5)
        r6 = _g_raw(cache_ptr, row, valid, 6)
        g8 = tl.arange(0, 8)
        gmask = valid[:, None] & (g8 < 7)[None, :]
        ex = tl.load(cache_ptr + srow[:, None] + g8[None, :], mask=gmask, other=0)  # [N, 8]
        c64 = tl.arange(0, 64)
        rope = tl.load(cache16_ptr + ((row + 448) // 2)[:, None] + c64[None, :], mask=valid[:, None], other=0.0)
        return r0, r1, r2, r3, r4, r5, r6, ex, rope


    @triton.jit
    def _g_deq(r, ex, G: tl.constexpr, DT: tl.constexpr):
        g8 = tl.arange(0, 8)
        e = tl.sum(tl.where((g8 == G)[None, :], ex.to(tl.int32), 0), axis=1)  # [N]
        return r.to(tl.float8e4nv, bitcast=True).to(DT) * _ue8m0(e).to(DT)[:, None]


    @triton.jit
    def _g_q(q_rows, zoff, G: tl.constexpr, DT: tl.constexpr):
        c64 = tl.arange(0, 64)
        return tl.load(q_rows + zoff + G * 64 + c64[None, :]).to(DT)


    @triton.jit(do_not_specialize=["num_splits"])
    def _group8_kernel(
        q_ptr, cache_ptr, cache16_ptr, idx_ptr, out_ptr, lse_ptr, opart_ptr, lpart_ptr,
        stride_qb, stride_qh, stride_page, stride_ib, stride_ob, stride_oh, stride_lb,
        total_tokens, topk, qk_scale, num_heads, num_splits, split_len,
        BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, DOT_F32: tl.constexpr,
        PREFETCH: tl.constexpr, QRELOAD: tl.constexpr = 1,
    ):
        # 8 column groups of 64 (7 fp8 nope groups + the bf16 rope), Q chunks read per tile (L1) so they
        # do not occupy registers across the loop.
        pid_b = tl.program_id(0).to(tl.int64)
        pid_h = tl.program_id(1)
        pid_s = tl.program_id(2)
        DT: tl.constexpr = tl.float32 if DOT_F32 else tl.bfloat16
        offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
        c64 = tl.arange(0, 64)
        q_rows = q_ptr + pid_b * stride_qb + offs_h[:, None] * stride_qh
        idx_row = idx_ptr + pid_b * stride_ib
        start_n = pid_s * split_len
        end_n = tl.minimum(start_n + split_len, topk)
        m_i = tl.zeros([BLOCK_H], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
        a0 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        a1 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        a2 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        a3 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        a4 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        a5 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        a6 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        a7 = tl.zeros([BLOCK_H, 64], dtype=tl.float32)
        if QRELOAD == 0:
            q0 = _g_q(q_rows, 0, 0, DT)
            q1 = _g_q(q_rows, 0, 1, DT)
            q2 = _g_q(q_rows, 0, 2, DT)
            q3 = _g_q(q_rows, 0, 3, DT)
            q4 = _g_q(q_rows, 0, 4, DT)
            q5 = _g_q(q_rows, 0, 5, DT)
            q6 = _g_q(q_rows, 0, 6, DT)
            q7 = _g_q(q_rows, 0, 7, DT)
        if PREFETCH == 2:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            valid, page_base, off = _slot_tile(idx_row, offs_n, end_n, total_tokens, stride_page)
            r0, r1, r2, r3, r4, r5, r6, ex, rope = _g_tile(cache_ptr, cache16_ptr, page_base, off, valid)
        for start in range(start_n, end_n, BLOCK_N):
            if PREFETCH == 2:
                offs_x = start + BLOCK_N + tl.arange(0, BLOCK_N)
                valid_x, page_base_x, off_x = _slot_tile(idx_row, offs_x, end_n, total_tokens, stride_page)
                tile_x = _g_tile(cache_ptr, cache16_ptr, page_base_x, off_x, valid_x)
            else:
                offs_n = start + tl.arange(0, BLOCK_N)
                valid, page_base, off = _slot_tile(idx_row, offs_n, end_n, total_tokens, stride_page)
                r0, r1, r2, r3, r4, r5, r6, ex, rope = _g_tile(cache_ptr, cache16_ptr, page_base, off, valid)
            zoff = (start >> 30) * 64
            if QRELOAD == 1:
                q0 = _g_q(q_rows, zoff, 0, DT)
                q1 = _g_q(q_rows, zoff, 1, DT)
                q2 = _g_q(q_rows, zoff, 2, DT)
                q3 = _g_q(q_rows, zoff, 3, DT)
                q4 = _g_q(q_rows, zoff, 4, DT)
                q5 = _g_q(q_rows, zoff, 5, DT)
                q6 = _g_q(q_rows, zoff, 6, DT)
                q7 = _g_q(q_rows, zoff, 7, DT)
            k0 = _g_deq(r0, ex, 0, DT)
            k1 = _g_deq(r1, ex, 1, DT)
            k2 = _g_deq(r2, ex, 2, DT)
            k3 = _g_deq(r3, ex, 3, DT)
            k4 = _g_deq(r4, ex, 4, DT)
            k5 = _g_deq(r5, ex, 5, DT)
            k6 = _g_deq(r6, ex, 6, DT)
            k7 = rope.to(DT)
            s = tl.dot(q0, tl.trans(k0)) + tl.dot(q1, tl.trans(k1))
            s += tl.dot(q2, tl.trans(k2)) + tl.dot(q3, tl.trans(k3))
            s += tl.dot(q4, tl.trans(k4)) + tl.dot(q5, tl.trans(k5))
            s += tl.dot(q6, tl.trans(k6)) + tl.dot(q7, tl.trans(k7))
            s = tl.where(valid[None, :], s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            p = p.to(DT)
            a0 = tl.dot(p, k0, a0 * alpha[:, None])
            a1 = tl.dot(p, k1, a1 * alpha[:, None])
            a2 = tl.dot(p, k2, a2 * alpha[:, None])
            a3 = tl.dot(p, k3, a3 * alpha[:, None])
            a4 = tl.dot(p, k4, a4 * alpha[:, None])
            a5 = tl.dot(p, k5, a5 * alpha[:, None])
            a6 = tl.dot(p, k6, a6 * alpha[:, None])
            a7 = tl.dot(p, k7, a7 * alpha[:, None])
            m_i = m_new
            if PREFETCH == 2:
                r0, r1, r2, r3, r4, r5, r6, ex, rope = tile_x
                valid = valid_x

        has = l_i > 0.0
        inv = tl.where(has, 1.0 / tl.where(has, l_i, 1.0), 0.0)[:, None]
        lse2 = tl.where(has, m_i + tl.log2(tl.where(has, l_i, 1.0)), float("-inf"))
        if SPLIT:
            row = (pid_b * num_splits + pid_s) * num_heads + offs_h
            o_rows = opart_ptr + row[:, None] * 512
            tl.store(lpart_ptr + row, lse2)
        else:
            o_rows = out_ptr + pid_b * stride_ob + offs_h[:, None] * stride_oh
            tl.store(lse_ptr + pid_b * stride_lb + offs_h, tl.where(has, lse2 * 0.6931471805599453, float("inf")))
        odt = o_rows.dtype.element_ty
        tl.store(o_rows + c64[None, :], (a0 * inv).to(odt))
        tl.store(o_rows + 64 + c64[None, :], (a1 * inv).to(odt))
        tl.store(o_rows + 128 + c64[None, :], (a2 * inv).to(odt))
        tl.store(o_rows + 192 + c64[None, :], (a3 * inv).to(odt))
        tl.store(o_rows + 256 + c64[None, :], (a4 * inv).to(odt))
        tl.store(o_rows + 320 + c64[None, :], (a5 * inv).to(odt))
        tl.store(o_rows + 384 + c64[None, :], (a6 * inv).to(odt))
        tl.store(o_rows + 448 + c64[None, :], (a7 * inv).to(odt))


    return {"batched": _batched_qk_kernel, "group8": _group8_kernel}
DEFAULTS = {"production": {}, "batched": {"QSPLIT": 4}, "group8": {"QRELOAD": 1}}


def parse_variants(text: str) -> list[tuple[str, tuple[int, ...], dict[str, int]]]:
    """``name:BHxBNxWxSxP[:KEY=V]...,...`` -> (name, spec, constexprs) with every constexpr given."""
    out = []
    for item in (DEFAULT_VARIANTS if text == "default" else text).split(","):
        name, spec, *extra = item.split(":")
        parts = spec.split("x")
        if name not in DEFAULTS or len(parts) != 5 or not all(p.isdigit() for p in parts):
            raise ValueError(f"variant {item!r} is not NAME:BHxBNxWARPSxSTAGESxPREFETCH[:KEY=V] (NAME: "
                             f"{', '.join(DEFAULTS)})")
        given = dict(kv.split("=", 1) for kv in extra)
        if set(given) - set(DEFAULTS[name]):
            raise ValueError(f"variant {item!r}: {name} takes {sorted(DEFAULTS[name]) or 'no options'}")
        out.append((name, tuple(int(p) for p in parts), {**DEFAULTS[name], **{k: int(v) for k, v in given.items()}}))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.kernel_decode_sm120_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--batches", default="32,64,128")
    ap.add_argument("--variants", default="default")
    ap.add_argument("--json", type=Path, help="write every row to this file")
    args = ap.parse_args(argv)
    try:
        variants = parse_variants(args.variants)
        batches = [int(b) for b in args.batches.split(",")]
    except ValueError as exc:
        ap.error(str(exc))
    import torch
    import triton

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from benchmarks.scripts.kernel_decode_perf import graph_ms, index_sets_for_cold_l2
    from mla_kernels import aot, make_decode_inputs, sparse_mla_decode
    from mla_kernels.decode import MmaConfig, mma_launches, split_counts
    from mla_kernels.testing import check_decode

    heads, topk, scale = 64, 512, 512**-0.5
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}, torch {torch.__version__}, triton {triton.__version__}; H={heads} top-k {topk}, "
          "cold L2, graph replay", flush=True)  # fmt: skip
    rows = []
    for batch in batches:
        sets = index_sets_for_cold_l2(batch, topk, props.L2_cache_size)
        inp = make_decode_inputs(batch, heads, topk, num_tokens=batch * 65536, device="cuda", seed=batch,
                                 num_index_sets=sets)  # fmt: skip
        ref = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
        meta = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
                for t in (inp.q, inp.kv_cache, inp.indices)]  # fmt: skip
        for name, spec, extra in variants:
            bh, bn, warps, stages, prefetch = spec
            for splits in split_counts(batch, heads, bh, topk, bn, props.multi_processor_count):
                cfg = MmaConfig(bh, bn, warps, stages, splits, prefetch, source="fixed")
                opts = " ".join(f"{k}={v}" for k, v in extra.items())
                head = f"B={batch:4d} {name:10s} {'x'.join(map(str, spec))} {opts:9s} S{splits:2d}"

                def build(q, cache, idx, cfg=cfg, name=name, extra=extra):  # noqa: ANN001, ANN202
                    launches, out, lse = mma_launches(q, cache, idx, scale, cfg, kernels().get(name))
                    launches[0].constexprs.update(extra)
                    return launches, out, lse

                try:
                    s120 = aot.compile_launch(build(*meta)[0][0], 120)
                    launches, out, lse = build(inp.q, inp.kv_cache, inp.indices)
                    compiled = [launch.run() for launch in launches][0]
                    check_decode(out, lse, *ref)
                    state = {"i": 0}

                    def call(build=build, state=state, inp=inp, sets=sets) -> None:  # noqa: ANN001
                        for launch in build(inp.q, inp.kv_cache, inp.index_sets[state["i"] % sets])[0]:
                            launch.run()
                        state["i"] += 1

                    us = 1e3 * graph_ms(call, reps=10, inner=sets)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"{head}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                    continue
                rows.append({"batch": batch, "variant": name, "spec": list(spec), "options": extra, "splits": splits,
                             "us": us, "regs": compiled.n_regs, "spills": compiled.n_spills,
                             "sm120": {"registers": s120.registers, "spill_bytes": s120.spill_bytes,
                                       "shared": s120.shared}})  # fmt: skip
                print(f"{head} {us:8.1f} us  here regs {compiled.n_regs} spills {compiled.n_spills}  sm_120 regs "
                      f"{s120.registers} spill {s120.spill_bytes} B smem {s120.shared:,} B", flush=True)
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps({"device": props.name, "torch": torch.__version__,
                                         "triton": triton.__version__, "rows": rows}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
