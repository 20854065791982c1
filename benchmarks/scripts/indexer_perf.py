#!/usr/bin/env python
"""Time the indexer implementations (reference, fp32_maxctx, bf16) on the GPU.

Each implementation is checked against the reference once per context (a fast wrong kernel is a
failure, not a result), warmed up (compiles and resolves autotuning), captured in a CUDA graph
(reference: run eagerly, it syncs with the host), then timed replay by replay with CUDA events,
the L2 cache flushed before each replay (cold L2). Every call of a case reuses one ``indexer_workspace``,
as ``DecodeStep`` does (checked again after the timed calls). Prints a table and, as its last line, one JSON
record. ``--smoke`` runs tiny shapes on the CPU under the Triton interpreter (wall-clock timing).

    python -m benchmarks.scripts.indexer_perf                 # H200 defaults: B 1 and 64, max_context 131072
    python -m benchmarks.scripts.indexer_perf --check-targets # exit 1 when a target below is missed
    python -m benchmarks.scripts.indexer_perf --smoke         # CPU, interpreter, tiny shapes
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Issue 29's goals for bf16 (one table for every script: kernel_goals): at one request, microseconds per
# context; at batch 64, times the roofline.
from benchmarks.scripts.kernel_goals import INDEXER_B1_US, INDEXER_ROOFLINE_B64

IMPLS = ("reference", "fp32_maxctx", "bf16")
BYTES_PER_TOKEN = 132  # 128 FP8 key bytes + one fp32 scale
TARGET_SPEEDUP_4096 = 17.0  # at batch 64


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def _impl_list(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in IMPLS]
    if not values or bad:
        raise argparse.ArgumentTypeError(f"--impls takes a comma-separated subset of {IMPLS}, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.scripts.indexer_perf", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--batches", type=_int_list, default=None, help="concurrent requests, each measured (default 1,64; smoke 1,2)"
    )
    p.add_argument("--batch", type=int, default=None, help="one concurrency only (same as --batches N)")
    p.add_argument(
        "--max-context", type=int, default=None, help="block-table capacity in tokens (default 131072)"
    )
    p.add_argument(
        "--contexts", type=_int_list, default=None, help="real context per request (default 4096,16384,65536)"
    )
    p.add_argument(
        "--topk", type=int, default=None, help="tokens selected per request (default 512; smoke 32)"
    )
    p.add_argument("--heads", type=int, default=None, help="indexer heads (default 64; smoke 16)")
    p.add_argument("--impls", type=_impl_list, default=list(IMPLS), help="comma-separated implementations")
    p.add_argument(
        "--select", default=None,
        help="the bf16 path's top-k select for every case (mla_kernels.indexer.select_rule.SELECTS; default: the rule)",
    )  # fmt: skip
    p.add_argument("--iters", type=int, default=None, help="timed replays per case (default 30; smoke 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON record to this file")
    p.add_argument(
        "--check-targets", action="store_true", help="exit 1 when the issue's speed-up targets fail"
    )
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU under the Triton interpreter")
    p.add_argument(
        "--flush", choices=("read", "write"), default="read",
        help="how L2 is emptied before each timed call: read a buffer twice its size (the suites' rule), or zero "
        "512 MB (what this script did before session 35: the timed kernel then writes the dirty lines back)",
    )  # fmt: skip
    args = p.parse_args(argv)
    smoke = args.smoke
    defaults = {
        "batches": [1, 2] if smoke else [1, 64],
        "max_context": 1024 if smoke else 131072,
        "contexts": [300, 700] if smoke else [4096, 16384, 65536],
        "topk": 32 if smoke else 512,
        "heads": 16 if smoke else 64,
        "iters": 1 if smoke else 30,
    }
    if args.batch is not None:
        if args.batches is not None:
            p.error("give --batch or --batches, not both")
        args.batches = [args.batch]
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if min(args.batches) <= 0:
        p.error("--batches must be positive")
    for key in ("topk", "heads", "iters", "max_context"):
        if getattr(args, key) <= 0:
            p.error(f"--{key.replace('_', '-')} must be positive")
    if args.max_context % 256:
        p.error("--max-context must be a multiple of 256 (the page size)")
    if args.heads % 16:
        p.error("--heads must be a multiple of 16")
    if max(args.contexts) > args.max_context:
        p.error(f"--contexts must not exceed --max-context ({args.max_context})")
    return args


def _device_info(torch: Any, triton: Any, device: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"torch": torch.__version__, "triton": triton.__version__}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            name=props.name,
            cc=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            cuda=torch.version.cuda,
        )
    else:
        info.update(name="cpu (Triton interpreter)", cc=None, sm_count=None, cuda=None)
    return info


def _time_gpu(torch: Any, fn: Any, iters: int, capture: bool, flush_by: str = "read") -> list[float]:
    """Per-call GPU times in microseconds, L2 flushed before each call (``flush_by``: see ``--flush``)."""
    from benchmarks._timing import L2Flush

    flush = L2Flush(torch.device("cuda")) if flush_by == "read" else \
        torch.empty(512 << 20, dtype=torch.uint8, device="cuda").zero_  # fmt: skip
    call = fn
    if capture:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        call = graph.replay
    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return times


def _device(torch: Any, smoke: bool) -> Any:
    """The device a run measures on: the CPU interpreter with ``--smoke``, else the GPU; None (after
    saying so on stderr) when there is no GPU."""
    if smoke:
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    print("error: no CUDA device; use --smoke for the CPU interpreter run", file=sys.stderr)
    return None


def _copy_bandwidth(torch: Any) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), the roofline's yardstick: the asv
    suites' measured ceiling (``benchmarks/_roofline.py``), so the two report one figure."""
    from benchmarks._roofline import ceilings

    return ceilings(torch.device("cuda"))["copy_gbps"] * 1e9


def _time_cpu(fn: Any, iters: int) -> list[float]:
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return times


def _measure_case(args: argparse.Namespace, batch: int, ctx: int, device: Any, copy_bps: float | None) -> Any:
    """The result rows of every implementation at one (batch, context), or the error message."""
    import torch

    from mla_kernels.indexer import (
        check_indexer_output,
        indexer_logits_reference,
        indexer_topk,
        indexer_topk_with_record,
        indexer_workspace,
        make_indexer_inputs,
    )

    inp = make_indexer_inputs(
        batch, ctx, max_context=args.max_context, num_heads=args.heads, topk=args.topk, device=device, seed=args.seed
    )
    ref_logits = indexer_logits_reference(*inp.args()[:5])
    rows = []
    for impl in args.impls:
        print(f"  batch {batch}, context {ctx}: {impl} ...", file=sys.stderr, flush=True)
        # One workspace for every call, as a decode step holds it (the one-launch select leaves it zeroed),
        # and the longest request, as a serving engine's metadata gives it (the select rule reads it).
        call = {"workspace": indexer_workspace(batch, device), "max_seq_len": ctx, "select": args.select}
        fn = lambda impl=impl, call=call: indexer_topk(*inp.args(), impl=impl, **call)
        out, record = indexer_topk_with_record(*inp.args(), impl=impl, **call)  # warm-up, then check
        try:
            stats = check_indexer_output(out, ref_logits, inp.block_table, inp.seq_lens, args.topk)
        except AssertionError as exc:
            return f"{impl} at batch {batch}, context {ctx} disagrees with the reference: {exc}"
        launch = record.as_json()
        graph = device.type == "cuda" and impl != "reference"
        times = _time_gpu(torch, fn, args.iters, graph, args.flush) if device.type == "cuda" else \
            _time_cpu(fn, args.iters)  # fmt: skip
        try:  # and once more after the timed calls: the reused workspace still gives the right answer
            check_indexer_output(fn(), ref_logits, inp.block_table, inp.seq_lens, args.topk)
        except AssertionError as exc:
            return f"{impl} at batch {batch}, context {ctx} disagrees with the reference after reuse: {exc}"
        total_bytes = ctx * batch * BYTES_PER_TOKEN
        med = statistics.median(times)
        rows.append({
            "batch": batch, "context": ctx, "impl": impl, "median_us": med, "min_us": min(times), "samples_us": times,
            "gbps_real_length": total_bytes / (med * 1e-6) / 1e9,
            # bytes roofline: the index keys of the real length read once at copy bandwidth
            "roofline_us": None if copy_bps is None else total_bytes / copy_bps * 1e6,
            "recall_min": stats["recall_min"], "timing": "cuda-graph replay" if graph else "eager", "launch": launch,
        })  # fmt: skip
    return rows


def _report(args: argparse.Namespace, results: list[dict[str, Any]]) -> tuple[dict[str, float], list[str]]:
    """Print the table and the targets; return the speed-ups (by 'batch/context') and the missed targets."""
    by = {(r["impl"], r["batch"], r["context"]): r for r in results}
    speedups = {
        f"{b}/{c}": by[("fp32_maxctx", b, c)]["median_us"] / by[("bf16", b, c)]["median_us"]
        for b in args.batches
        for c in args.contexts
        if ("fp32_maxctx", b, c) in by and ("bf16", b, c) in by
    }
    print(
        f"{'batch':>5} {'context':>8} {'impl':>12} {'median us':>11} {'min us':>10} {'GB/s':>8} {'roofline us':>11} "
        f"{'x roof':>7} {'recall':>7}  timing"
    )
    for r in results:
        roof = "-" if r["roofline_us"] is None else f"{r['roofline_us']:.1f}"
        ratio = "-" if r["roofline_us"] is None else f"{r['median_us'] / r['roofline_us']:.1f}"
        print(
            f"{r['batch']:>5} {r['context']:>8} {r['impl']:>12} {r['median_us']:>11.1f} {r['min_us']:>10.1f} "
            f"{r['gbps_real_length']:>8.1f} {roof:>11} {ratio:>7} {r['recall_min']:>7.4f}  {r['timing']}"
        )
    for key, s in speedups.items():
        print(f"speed-up fp32_maxctx / bf16 at batch/context {key}: {s:.1f}x")
    failures = []
    if "64/4096" in speedups and speedups["64/4096"] < TARGET_SPEEDUP_4096:
        failures.append(f"bf16 only {speedups['64/4096']:.1f}x faster than fp32_maxctx at batch 64, 4096 (< 17x)")
    for b in args.batches:
        bf16_t = [by[("bf16", b, c)]["median_us"] for c in sorted(args.contexts) if ("bf16", b, c) in by]
        if len(bf16_t) > 1 and not bf16_t[-1] > bf16_t[0]:
            failures.append(f"bf16 time does not grow with context at batch {b}")
    for c, goal in INDEXER_B1_US.items():
        r = by.get(("bf16", 1, c))
        if r is not None and r["roofline_us"] is not None and r["median_us"] > goal:
            failures.append(f"bf16 at batch 1, context {c}: {r['median_us']:.1f} us > {goal:g} us")
    for c in args.contexts:
        r = by.get(("bf16", 64, c))
        if r is not None and r["roofline_us"] and r["median_us"] > INDEXER_ROOFLINE_B64 * r["roofline_us"]:
            ratio = r["median_us"] / r["roofline_us"]
            failures.append(f"bf16 at batch 64, context {c}: {ratio:.1f}x roofline > {INDEXER_ROOFLINE_B64:g}x")
    for f in failures:
        print(f"target missed: {f}")
    return speedups, failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        from settings.env import use_interpreter

        use_interpreter()  # before the first triton import
    import torch
    import triton

    from mla_kernels.indexer import select_rule  # after TRITON_INTERPRET: kernels decorate on import
    from mla_kernels.indexer.tiles import scores_rule_text

    try:
        select_rule.check_select(args.select, "--select")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    device = _device(torch, args.smoke)
    if device is None:
        return 2
    info = _device_info(torch, triton, device)
    copy_bps = _copy_bandwidth(torch) if device.type == "cuda" else None
    info["copy_gbps"] = None if copy_bps is None else copy_bps / 1e9
    print(
        f"indexer_perf on {info['name']} (torch {info['torch']}, triton {info['triton']}): "
        f"batches {args.batches}, max_context {args.max_context}, topk {args.topk}, heads {args.heads}, "
        f"select {select_rule.select_rule_text(args.select)}, "
        f"scores {scores_rule_text() if device.type == 'cuda' else 'a fixed tile (interpreter)'}, "
        f"{args.iters} timed calls each",
        file=sys.stderr,
    )
    results: list[dict[str, Any]] = []
    for batch in args.batches:
        for ctx in args.contexts:
            got = _measure_case(args, batch, ctx, device, copy_bps)
            if isinstance(got, str):
                print(f"error: {got}", file=sys.stderr)
                return 1
            results.extend(got)
    speedups, failures = _report(args, results)
    record = {
        "bench": "indexer_perf",
        "smoke": bool(args.smoke),
        "device": info,
        "batches": args.batches,
        "max_context": args.max_context,
        "contexts": args.contexts,
        "topk": args.topk,
        "heads": args.heads,
        "select": args.select or select_rule.SELECT,
        "select_rule": select_rule.select_rule_text(args.select),  # the whole rule, as kernel_step_perf's JSON
        "iters": args.iters,
        "l2_flush": args.flush,
        "command": " ".join([Path(sys.argv[0]).name, *(sys.argv[1:] if argv is None else argv)]),
        "speedup_fp32_maxctx_over_bf16": speedups,
        "targets_missed": failures,
        "results": results,
    }
    line = json.dumps(record)
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(line + "\n")
    print(line)
    return 1 if args.check_targets and failures and not args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
