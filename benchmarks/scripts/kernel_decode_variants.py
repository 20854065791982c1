"""Time MMA decode configs one by one (cold L2, graph replay) with registers / spills / shared memory.

    python benchmarks/scripts/kernel_decode_variants.py [--batches 64,128] [--topk 512]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_decode_perf import decode_cost, time_graph  # noqa: E402

from mla_kernels import LAST_LAUNCH, make_decode_inputs, sparse_mla_decode  # noqa: E402
from mla_kernels.decode import _mma_decode  # noqa: E402
from mla_kernels.testing import check_decode  # noqa: E402
from mla_kernels.tuning import _BASE, MmaConfig, split_counts  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--configs", default=",".join("x".join(str(int(v)) for v in c) for c in _BASE),
                    help="BLOCK_HxBLOCK_NxwarpsxstagesxPREFETCH,... (default: the autotuner's candidates)")
    args = ap.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch in (int(b) for b in args.batches.split(",")):
        sets = max(2, min(64, math.ceil(3 * 60e6 / (batch * args.topk * 584))))
        inp = make_decode_inputs(batch, args.heads, args.topk, num_tokens=batch * 65536, device="cuda",
                                 seed=batch, num_index_sets=sets)
        ref = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
        bytes_moved, flops = decode_cost(batch, args.heads, args.topk)
        for spec in args.configs.split(","):
            bh, bn, warps, stages, prefetch = (int(x) for x in spec.split("x"))
            for splits in split_counts(batch, args.heads, bh, args.topk, bn, sms):
                cfg = MmaConfig(bh, bn, warps, stages, splits, prefetch)
                try:
                    out, lse = _mma_decode(inp.q, inp.kv_cache, inp.indices, 512**-0.5, cfg)
                    check_decode(out, lse, *ref)
                    stats = dict(LAST_LAUNCH)
                    state = {"i": 0}

                    def call(cfg: MmaConfig = cfg, inp: object = inp, state: dict = state, sets: int = sets) -> None:
                        _mma_decode(inp.q, inp.kv_cache, inp.index_sets[state["i"] % sets], 512**-0.5, cfg)
                        state["i"] += 1

                    us = 1e3 * time_graph(call, reps=10, inner=sets)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"B={batch} {cfg}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
                    continue
                print(f"B={batch:4d} BH {bh:2d} BN {bn:2d} w {warps} st {stages} S {stats['NUM_SPLITS']:2d} "
                      f"pf {prefetch} {us:8.1f} us {bytes_moved / us / 1e3:7.0f} GB/s {flops / us / 1e6:6.1f} TFLOP/s  "
                      f"regs {stats.get('n_regs')} spills {stats.get('n_spills')} smem {stats.get('shared')}",
                      flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
