"""A fixed MMA decode launch for Nsight Compute to profile (no autotuning, so the kernel is the same
every run). Its 3rd launch is the warm one to profile:

    ncu --clock-control none --kernel-name regex:_mma_decode_kernel --launch-skip 2 --launch-count 1 \\
        --set full --import-source yes -o decode python -m experiments.kernel_decode_ncu
    python -m experiments.kernel_decode_ncu --summarize decode.ncu-rep

--summarize prints what bounds the kernel: issue activity, eligible warps, pipe utilisation and the
sampled reasons warps were stalled.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
from pathlib import Path

# (label, raw metric) pairs --summarize prints, in this order.
_METRICS = (
    ("duration us", "gpu__time_duration.sum"),
    ("registers / thread", "launch__registers_per_thread"),
    ("shared KB / block", "launch__shared_mem_per_block_dynamic"),
    ("warps active / scheduler", "smsp__warps_active.avg.per_cycle_active"),
    ("warps eligible / scheduler", "smsp__warps_eligible.avg.per_cycle_active"),
    ("issue slots busy %", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    ("DRAM throughput %", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("tensor pipe %", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
    ("ALU pipe %", "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"),
    ("XU pipe (conversions) %", "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
    ("FMA pipe %", "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"),
    ("shared-memory wavefronts %", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"),
)
_STALL = "smsp__pcsamp_warps_issue_stalled_"


def summarize(report: Path) -> int:
    ncu = shutil.which("ncu")
    if ncu is None:
        print("--summarize needs Nsight Compute's ncu on PATH", file=sys.stderr)
        return 2
    if not report.exists():
        print(f"--summarize: no such report {report}", file=sys.stderr)
        return 2
    raw = subprocess.run([ncu, "--import", str(report), "--page", "raw", "--csv"],
                         capture_output=True, text=True, check=True).stdout
    rows = list(csv.reader(raw.splitlines()))
    header, kernels = rows[0], rows[2:]  # rows[1] holds the units
    for values in kernels:
        metric = dict(zip(header, values, strict=False))
        name = metric.get("Kernel Name", "?")
        print(f"{name} grid {metric.get('Grid Size', '?')} block {metric.get('Block Size', '?')}")
        for label, key in _METRICS:
            print(f"  {label:28s} {metric.get(key, 'n/a')}")
        stalls = {k[len(_STALL):]: float(v.replace(",", "")) for k, v in metric.items()
                  if k.startswith(_STALL) and "not_issued" not in k and v.replace(",", "").replace(".", "").isdigit()}
        total = sum(stalls.values()) or 1.0
        print("  warp states sampled (share of samples):")
        for reason, n in sorted(stalls.items(), key=lambda kv: -kv[1])[:8]:
            print(f"    {reason:22s} {100 * n / total:5.1f}%")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.kernel_decode_ncu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--config", default="64x64x8x2x0",
                    help="BLOCK_HxBLOCK_NxwarpsxstagesxPREFETCH[xBLOCK_D] (default: the H200's pick at B=128)")
    ap.add_argument("--splits", type=int, default=1, help="split-K count of a fused config")
    ap.add_argument("--launches", type=int, default=3)
    ap.add_argument("--summarize", type=Path, metavar="REPORT", help="summarize an ncu report instead of launching")
    args = ap.parse_args(argv)
    if args.summarize:
        return summarize(args.summarize)
    import torch

    from mla_kernels import make_decode_inputs
    from mla_kernels.decode import MmaConfig, decode_with_config

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    try:
        cfg = MmaConfig.parse(args.config, num_splits=args.splits)
    except ValueError as exc:
        ap.error(f"--config: {exc}")
    inp = make_decode_inputs(args.batch, args.heads, args.topk, num_tokens=args.batch * 65536, device="cuda")
    for _ in range(args.launches):
        decode_with_config(inp.q, inp.kv_cache, inp.indices, cfg)
    torch.cuda.synchronize()
    print(f"{args.launches} launches of {cfg.label} S{cfg.num_splits}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
