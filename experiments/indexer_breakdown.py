#!/usr/bin/env python
"""Where the bf16 indexer's time goes: its scores kernel, and each top-k select, timed alone.

For each (batch, context): the scores kernel (the launcher's tuned config), the single-program radix
select, the split's one program a request where the context fits one (``split.ONE_MAX``), and the split
select (chunk + merge) at several chunk sizes and warp counts, each captured in its own CUDA graph over the
same logits and replayed with a cold L2 (``indexer_perf``'s timer). Every select's output is checked against
the reference before it is timed. Needs a CUDA GPU.

    python -m experiments.indexer_breakdown [--batches 1,64] [--contexts 4096,16384,65536]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def _variants(d: Any, topk: int, chunks: list[int], warps: list[int], ctx: int | None = None) -> dict[str, Any]:
    """The split plans to time: the product's one program a request where ``ctx`` fits one (the plan the rule runs
    when the caller gives the longest request), then chunk + merge at each chunk size and warp count."""
    from mla_kernels.indexer import split

    out = {}
    one = None if ctx is None else split.plan(d, topk, longest=ctx)
    if one is not None and one.chunks == 1:
        out[f"split one b{one.chunk} w{one.chunk_warps}"] = one
    for c in chunks:
        for w in warps:
            p = split.plan(d, topk, chunk=c)
            if p is not None:
                out[f"split c{c} w{w}"] = split.SplitPlan(
                    p.chunk, p.chunks, p.merge_block, p.out_block, w, p.merge_warps
                )
    return out


def measure(batch: int, ctx: int, args: argparse.Namespace) -> dict[str, float]:
    """Median microseconds of each part at one (batch, context)."""
    import torch

    from benchmarks.scripts.indexer_perf import _time_gpu
    from mla_kernels.indexer import (
        check_indexer_output,
        indexer_logits_reference,
        indexer_topk,
        make_indexer_inputs,
        split,
    )
    from mla_kernels.indexer import launch as L
    from mla_kernels.indexer.checks import _check_args

    inp = make_indexer_inputs(batch, ctx, max_context=args.max_context, topk=args.topk, device="cuda", seed=batch)
    q, w, cache, bt, sl, topk = inp.args()
    d = _check_args(q, w, cache, bt, sl, topk, "bf16")
    indexer_topk(*inp.args(), impl="bf16")  # compiles what the product runs for this batch
    ref = indexer_logits_reference(q, w, cache, bt, sl)
    logits = torch.empty((batch, d.max_context), dtype=torch.float32, device="cuda")
    out = torch.empty((batch, topk), dtype=torch.int32, device="cuda")

    def run_scores() -> None:
        L._run_scores(q, w, cache, bt, sl, logits, d, topk, max_seq_len=ctx)

    parts: dict[str, Any] = {"scores": run_scores}
    radix = L._tuned_select()
    parts["radix select"] = lambda: radix[(batch,)](*L._select_args(logits, bt, sl, out, topk, d))
    for name, p in _variants(d, topk, args.chunks, args.warps, ctx).items():
        parts[name] = lambda p=p: split.split_select(logits, bt, sl, out, topk, d, p)
    row: dict[str, float] = {}
    for name, fn in parts.items():
        run_scores()
        fn()
        torch.cuda.synchronize()
        if not name.startswith("scores"):
            check_indexer_output(out, ref, bt, sl, topk)
        row[name] = statistics.median(_time_gpu(torch, fn, args.iters, capture=True))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.indexer_breakdown", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--contexts", default="4096,16384,65536")
    ap.add_argument("--chunks", default="4096,8192", help="split-select chunk sizes to time")
    ap.add_argument("--warps", default="4,8,16", help="chunk-program warp counts to time")
    ap.add_argument("--max-context", type=int, default=131072)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    args.chunks = [int(c) for c in args.chunks.split(",")]
    args.warps = [int(c) for c in args.warps.split(",")]
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        for ctx in (int(c) for c in args.contexts.split(",")):
            row = {"batch": batch, "context": ctx, **measure(batch, ctx, args)}
            rows.append(row)
            parts = "  ".join(f"{k} {v:.1f}" for k, v in row.items() if k not in ("batch", "context"))
            print(f"B={batch:3d} ctx {ctx:6d} (us): {parts}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
