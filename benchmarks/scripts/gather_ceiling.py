#!/usr/bin/env python
"""Gather ceiling: the fastest way found to fetch the decode's 584-byte token rows at random slots.

Each request's top-k tokens are fetched from the FP8 KV cache exactly as the decode reads them (the
576-byte data row and the 8-byte scales of each token, pages of 256 tokens) and folded into one
checksum per program, so no byte is left unread. Variants: rows per program, warps, and rows in flight
per program (a loop over row groups that Triton may pipeline with ``num_stages``). Timed by CUDA-graph
replay over index sets that walk three L2s' worth of bytes (cold L2), like ``kernel_decode_perf``.
The best variant's time is the practical limit that ``kernel_decode_perf`` prints beside the roofline.

    python -m benchmarks.scripts.gather_ceiling [--batches 1,16,64,128] [--topk 512]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# (rows per program, warps, row groups per program, stages)
VARIANTS = tuple(
    (rows, warps, groups, stages)
    for rows in (16, 32, 64)
    for warps in (4, 8)
    for groups, stages in ((1, 1), (4, 2), (4, 3))
)


def measure(batch: int, topk: int, context: int, heads: int = 64) -> dict[str, object]:
    """Median us of every variant at one concurrency, and the best one: the cache and index sets are
    ``kernel_decode_perf``'s for the same arguments (same seed, same slots, same cold-L2 rotation)."""
    import torch
    import triton

    from benchmarks.scripts.kernel_decode_perf import graph_ms, index_sets_for_cold_l2
    from mla_kernels import make_decode_inputs
    from mla_kernels.cache import TOKEN_BYTES
    from mla_kernels.gather_probe import gather_rows

    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    sets = index_sets_for_cold_l2(batch, topk, l2)
    inp = make_decode_inputs(batch, heads, topk, num_tokens=batch * context, device="cuda", seed=batch,
                             num_index_sets=sets)  # fmt: skip
    cache = inp.kv_cache
    idx = [s.reshape(-1).contiguous() for s in inp.index_sets]
    n = batch * topk
    times: dict[str, float] = {}
    for rows, warps, groups, stages in VARIANTS:
        progs = triton.cdiv(n, rows * groups)
        out = torch.empty(progs * rows, dtype=torch.int32, device="cuda")
        state = {"i": 0}

        def call(rows: int = rows, warps: int = warps, groups: int = groups, stages: int = stages,
                 out: torch.Tensor = out, progs: int = progs, state: dict = state) -> None:  # fmt: skip
            gather_rows(cache, idx[state["i"] % sets], out, rows=rows, groups=groups, num_stages=stages,
                        num_warps=warps)  # fmt: skip
            state["i"] += 1

        times[f"r{rows} w{warps} g{groups} s{stages}"] = 1e3 * graph_ms(call, reps=15, inner=sets)
    best = min(times, key=times.__getitem__)
    return {"batch": batch, "best": best, "best_us": times[best], "gbps": n * TOKEN_BYTES / times[best] / 1e3,
            "variants_us": times}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scripts.gather_ceiling", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--batches", default="1,16,64,128")
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--context", type=int, default=65536, help="tokens of cache per request")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    for b in (int(x) for x in args.batches.split(",")):
        row = measure(b, args.topk, args.context)
        rows.append(row)
        print(f"B={b:4d}  gather ceiling {row['best_us']:7.2f} us ({row['gbps']:6.0f} GB/s) with {row['best']}",
              flush=True)  # fmt: skip
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
