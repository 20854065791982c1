"""Sparse-decode kernels side by side on one GPU: plain torch, SIMT, MMA and the roofline.

H=64, top-k 512, 64K tokens of context per request, cold L2 (each timed graph walks through several
index sets over a cache far larger than L2), CUDA-graph replay timed with CUDA events.

    python benchmarks/scripts/kernel_decode_perf.py [--batches 1,16,64,128] [--topk 512] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mla_kernels import LAST_LAUNCH, make_decode_inputs, sparse_mla_decode  # noqa: E402
from mla_kernels.testing import check_decode  # noqa: E402


def measure_ceilings() -> dict[str, float]:
    """Copy bandwidth (bytes read + written) and dense bf16 matmul rate of this GPU: the asv suites'
    ceilings (``benchmarks/_roofline.py``, measured once per device and cached), so both agree."""
    from benchmarks._roofline import ceilings

    c = ceilings(torch.device("cuda"))
    return {"copy_gbps": c["copy_gbps"], "bf16_tflops": c["matmul_tflops"]}


def time_graph(fn: Callable[[], object], reps: int = 20, inner: int = 1) -> float:
    """Median ms of one replay of a graph holding ``inner`` calls of fn, divided by ``inner``."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / inner)
    return statistics.median(times)


def decode_cost(batch: int, heads: int, topk: int) -> tuple[float, float]:
    bytes_moved = batch * topk * 584 + 2 * batch * heads * 512 * 2 + batch * heads * 4
    flops = batch * heads * topk * 2048
    return bytes_moved, flops


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--context", type=int, default=65536, help="tokens of context per request")
    ap.add_argument("--impls", default="torch,simt,mma")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2

    props = torch.cuda.get_device_properties(0)
    import triton

    ceil = measure_ceilings()
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    print(f"# {props.name} sm_{props.major}{props.minor} {props.multi_processor_count} SMs, torch {torch.__version__}, "
          f"triton {triton.__version__}; copy {ceil['copy_gbps']:.0f} GB/s, bf16 mm {ceil['bf16_tflops']:.0f} TFLOP/s")
    impls = args.impls.split(",")
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        bytes_moved, flops = decode_cost(batch, args.heads, args.topk)
        sets = max(2, min(64, math.ceil(3 * l2 / (batch * args.topk * 584))))
        inp = make_decode_inputs(batch, args.heads, args.topk, num_tokens=batch * args.context, device="cuda",
                                 seed=batch, num_index_sets=sets)
        ref = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
        row: dict[str, object] = {"batch": batch, "index_sets": sets}
        for impl in impls:
            out, lse = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl=impl)  # warm-up / autotune
            if impl != "torch":
                check_decode(out, lse, *ref)
            row[f"{impl}_config"] = dict(LAST_LAUNCH)
            state = {"i": 0}

            def call(impl: str = impl, inp: object = inp, state: dict = state, sets: int = sets) -> None:
                sparse_mla_decode(inp.q, inp.kv_cache, inp.index_sets[state["i"] % sets], impl=impl)
                state["i"] += 1

            row[f"{impl}_us"] = 1e3 * time_graph(call, reps=15, inner=sets)
        roof = max(bytes_moved / (ceil["copy_gbps"] * 1e9), flops / (ceil["bf16_tflops"] * 1e12)) * 1e6
        row["roofline_us"] = roof
        rows.append(row)
        cells = "  ".join(f"{impl} {row[f'{impl}_us']:9.1f}" for impl in impls)
        extra = ""
        if "mma" in impls:
            extra = f"  mma/roof {row['mma_us'] / roof:5.2f}x"
            if "simt" in impls:
                extra += f"  simt/mma {row['simt_us'] / row['mma_us']:6.1f}x"
            if "torch" in impls:
                extra += f"  torch/mma {row['torch_us'] / row['mma_us']:5.1f}x"
            cfg = row["mma_config"]
            extra += (f"  [BH {cfg.get('BLOCK_H')} BN {cfg.get('BLOCK_N')} S {cfg.get('NUM_SPLITS')} "
                      f"w {cfg.get('num_warps')} regs {cfg.get('n_regs')} spills {cfg.get('n_spills')}]")
        print(f"B={batch:4d}  {cells}  roof {roof:7.2f} us{extra}", flush=True)
        torch.cuda.empty_cache()
    result = {"device": props.name, "torch": torch.__version__, "triton": triton.__version__,
              "heads": args.heads, "topk": args.topk, "context": args.context, **ceil, "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
