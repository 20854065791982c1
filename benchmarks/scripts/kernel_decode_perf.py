"""Sparse-decode kernels side by side on one GPU: plain torch, SIMT, the MMA kernel with this GPU's own
configs (``mma``), the MMA kernel limited to what an sm_120 GPU keeps (``mma_sm120``, the users'
runner's code path), the roofline, and the gather ceiling: the fastest of ``gather_ceiling``'s ways
to fetch exactly the decode's 584-byte rows at the same random slots (no math), the practical limit.

H=64, top-k 512, 64K tokens of context per request, cold L2 (each timed graph walks through several
index sets over a cache far larger than L2), CUDA-graph replay timed with CUDA events.

    python -m benchmarks.scripts.kernel_decode_perf [--batches 1,16,64,128] [--topk 512] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mla_kernels import LaunchRecord

# impl column -> (sparse_mla_decode impl, arch_profile)
COLUMNS = {
    "torch": ("torch", None),
    "simt": ("simt", None),
    "mma": ("mma", "native"),
    "mma_sm120": ("mma", "sm_120"),
    "gluon": ("gluon", "native"),
    "gluon_sm120": ("gluon", "sm_120"),
}


def measure_ceilings() -> dict[str, float]:
    """Copy bandwidth (bytes read + written) and dense bf16 matmul rate of this GPU: the asv suites'
    ceilings (``benchmarks/_roofline.py``, measured once per device and cached), so both agree."""
    import torch

    from benchmarks._roofline import ceilings

    c = ceilings(torch.device("cuda"))
    return {"copy_gbps": c["copy_gbps"], "bf16_tflops": c["matmul_tflops"]}


def graph_ms(fn: Callable[[], object], reps: int = 20, inner: int = 1) -> float:
    """Median ms of one replay of a CUDA graph holding ``inner`` calls of fn, divided by ``inner``."""
    import torch

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


def index_sets_for_cold_l2(batch: int, topk: int, l2_bytes: int) -> int:
    """Index sets to rotate through so one graph touches about three L2s' worth of KV bytes."""
    return max(2, min(64, math.ceil(3 * l2_bytes / (batch * topk * 584))))


def decode_cost(batch: int, heads: int, topk: int) -> tuple[int, int]:
    """(bytes, flops) of one call: the asv suites' model (``benchmarks/_roofline.py``)."""
    from benchmarks._roofline import decode_model

    return decode_model(batch, heads, topk)


def roofline_us(batch: int, heads: int, topk: int, copy_gbps: float, bf16_tflops: float) -> float:
    bytes_moved, flops = decode_cost(batch, heads, topk)
    return max(bytes_moved / (copy_gbps * 1e9), flops / (bf16_tflops * 1e12)) * 1e6


def _config_label(record: LaunchRecord) -> str:
    if record.impl not in ("mma", "gluon"):
        return ""
    from mla_kernels.decode import launch_label

    return f"{launch_label(record)} regs {record.registers} spill {record.spill_bytes} B"


def _gather_column(row: dict[str, object], batch: int, args: argparse.Namespace) -> str:
    from benchmarks.scripts.gather_ceiling import measure

    g = measure(batch, args.topk, args.context)
    row["gather_ceiling_us"], row["gather_variant"] = g["best_us"], g["best"]
    return f"  gather {g['best_us']:6.2f} us"


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str], list[int]]:
    """The arguments, the impl columns and the batches (bad ones exit 2 naming the option)."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.scripts.kernel_decode_perf",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128", help="concurrencies (default 1..128)")
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--context", type=int, default=65536, help="tokens of context per request")
    ap.add_argument("--impls", default=",".join(COLUMNS), help=f"columns, a subset of {','.join(COLUMNS)}")
    ap.add_argument("--json", type=Path, help="write every row (times, configs) to this file")
    ap.add_argument("--no-gather", action="store_true", help="skip the gather-ceiling probe")
    args = ap.parse_args(argv)
    impls = [c for c in args.impls.split(",") if c]
    unknown = [c for c in impls if c not in COLUMNS]
    if unknown:
        ap.error(f"--impls: unknown {', '.join(unknown)} (known: {', '.join(COLUMNS)})")
    try:
        batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        ap.error(f"--batches must be comma-separated integers, got {args.batches!r}")
    return args, impls, batches


def _measure_batch(batch: int, args: argparse.Namespace, impls: list[str], l2: int
                   ) -> tuple[dict[str, object], dict[str, LaunchRecord]]:
    """One batch's row (each impl's time and config, checked against the reference first) and records."""
    from mla_kernels import make_decode_inputs, sparse_mla_decode, sparse_mla_decode_with_record
    from mla_kernels.testing import check_decode

    sets = index_sets_for_cold_l2(batch, args.topk, l2)
    inp = make_decode_inputs(batch, args.heads, args.topk, num_tokens=batch * args.context, device="cuda",
                             seed=batch, num_index_sets=sets)
    ref = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    row: dict[str, object] = {"batch": batch, "index_sets": sets}
    records: dict[str, LaunchRecord] = {}
    for col in impls:
        impl, profile = COLUMNS[col]
        out, lse, record = sparse_mla_decode_with_record(inp.q, inp.kv_cache, inp.indices, impl=impl,
                                                         arch_profile=profile)  # fmt: skip
        if impl != "torch":  # warm-up / autotune, and a fast wrong kernel is a failure
            check_decode(out, lse, *ref)
        records[col] = record
        row[f"{col}_config"] = record.as_dict()
        state = {"i": 0}

        def call(impl: str = impl, profile: str | None = profile, inp: object = inp, state: dict = state,
                 sets: int = sets) -> None:
            sparse_mla_decode(inp.q, inp.kv_cache, inp.index_sets[state["i"] % sets], impl=impl,
                              arch_profile=profile)
            state["i"] += 1

        row[f"{col}_us"] = 1e3 * graph_ms(call, reps=15, inner=sets)
    return row, records


def _print_row(row: dict[str, object], records: dict[str, LaunchRecord], impls: list[str], roof: float,
               gather: str) -> None:
    """One batch's line (times, roofline, gather ceiling, ratios) and its impls' configs."""
    cells = "  ".join(f"{col} {row[f'{col}_us']:8.1f}" for col in impls)
    ratios = ""
    if "mma" in impls and "mma_sm120" in impls:
        ratios += f"  sm120/mma {row['mma_sm120_us'] / row['mma_us']:4.2f}x"
    if "mma" in impls and "gluon" in impls:
        ratios += f"  mma/gluon {row['mma_us'] / row['gluon_us']:4.2f}x"
    if "gluon" in impls and "gluon_sm120" in impls:
        ratios += f"  sm120/gluon {row['gluon_sm120_us'] / row['gluon_us']:4.2f}x"
    if "simt" in impls and "mma_sm120" in impls:
        ratios += f"  simt/sm120 {row['simt_us'] / row['mma_sm120_us']:5.1f}x"
    if "simt" in impls and "mma" in impls:
        ratios += f"  simt/mma {row['simt_us'] / row['mma_us']:5.1f}x"
    print(f"B={row['batch']:4d}  {cells}  roof {roof:6.2f} us{gather}{ratios}", flush=True)
    for col in impls:
        label = _config_label(records[col])
        if label:
            print(f"        {col}: {label}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args, impls, batches = _parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton

    props = torch.cuda.get_device_properties(0)
    ceil = measure_ceilings()
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    print(f"# {props.name} sm_{props.major}{props.minor} {props.multi_processor_count} SMs, "
          f"torch {torch.__version__}, triton {triton.__version__}; copy {ceil['copy_gbps']:,.0f} GB/s, "
          f"bf16 mm {ceil['bf16_tflops']:.0f} TFLOP/s; H={args.heads}, top-k {args.topk}, cold L2, graph replay",
          flush=True)
    rows = []
    for batch in batches:
        row, records = _measure_batch(batch, args, impls, l2)
        roof = roofline_us(batch, args.heads, args.topk, ceil["copy_gbps"], ceil["bf16_tflops"])
        row["roofline_us"] = roof
        gather = "" if args.no_gather else _gather_column(row, batch, args)
        rows.append(row)
        _print_row(row, records, impls, roof, gather)
        torch.cuda.empty_cache()
    result = {"device": props.name, "capability": f"{props.major}.{props.minor}", "torch": torch.__version__,
              "triton": triton.__version__, "heads": args.heads, "topk": args.topk, "context": args.context,
              **ceil, "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
