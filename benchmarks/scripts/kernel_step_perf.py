"""Whole decode step (indexer -> top-k -> sparse decode) per layer, side by side, CUDA-graph replay.

Variants: baseline (simt + fp32_maxctx), mma (mma + fp32_maxctx), mma+indexer (mma + bf16), gluon+indexer
(the Gluon decode + bf16; it runs the MMA kernel where Gluon is unavailable, its launch record says so).
Cold L2: each graph runs the step of several layers, each with its own caches. Each variant's first layer is
checked against the reference step (top-k and decode) before it is timed.

    python -m benchmarks.scripts.kernel_step_perf [--batches 1,64] [--contexts 4096,16384,65536] [--variants ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def variants() -> dict[str, tuple[str, str]]:
    """The asv step suite's pairings (decode impl, indexer impl), and the step with the Gluon decode.
    Imported here, not at the top: a script's top level stays standard library only."""
    from benchmarks.bench_step import VARIANTS

    return {**VARIANTS, "gluon+indexer": ("gluon", "bf16")}


def check_step(step: object, ref_logits: object) -> dict[str, dict[str, object]]:
    """One eager run of ``step`` (a ``mla_kernels.DecodeStep``) checked before it is timed: its top-k against
    ``ref_logits`` (``indexer_logits_reference`` of its inputs, computed once for every variant) and its decode
    against the reference decode on that same selection. Raises AssertionError: a fast wrong step is a
    failure, not a figure. Returns what the run launched, each op's launch record as a JSON-ready dict
    (``{"indexer": ..., "decode": ...}``: the indexer's names the select path the rule chose)."""
    from mla_kernels import sparse_mla_decode
    from mla_kernels.indexer import check_indexer_output
    from mla_kernels.testing import check_decode

    inp = step.inputs  # type: ignore[attr-defined]
    out, lse, records = step.run_with_records()  # type: ignore[attr-defined]
    indices = step.indices  # type: ignore[attr-defined]
    check_indexer_output(indices, ref_logits, inp.block_table, inp.seq_lens, inp.topk)  # type: ignore[arg-type]
    check_decode(out, lse, *sparse_mla_decode(inp.q, inp.kv_cache, indices, impl="reference"))
    return {op: record.as_json() for op, record in records.items()}


def step_us(steps: list, reps: int) -> float:
    """Median us per layer step of one graph that runs every layer's step once."""
    from benchmarks.scripts.kernel_decode_perf import graph_ms

    for step in steps:
        step.warmup()  # resolves autotuning before capture

    def run_all() -> None:
        for step in steps:
            step.run()

    return graph_ms(run_all, reps=reps) * 1e3 / len(steps)


def _measure(batch: int, context: int, args: argparse.Namespace) -> dict[str, object]:
    import torch

    from mla_kernels import DecodeStep, make_step_inputs
    from mla_kernels.indexer import indexer_logits_reference

    layers = [make_step_inputs(batch, context, max_context=args.max_context, topk=args.topk,
                               device="cuda", seed=batch * 10 + i) for i in range(args.layers)]
    row: dict[str, object] = {"batch": batch, "context": context}
    launches: dict[str, object] = {}  # variant -> what its checked run launched
    ref_logits = indexer_logits_reference(*layers[0].args()[:5])  # the first layer's, every variant checked on it
    pairings = variants()
    for variant in args.variants:
        dec, idx = pairings[variant]
        steps = [DecodeStep(inp, decode_impl=dec, indexer_impl=idx, select=args.select) for inp in layers]
        launches[variant] = check_step(steps[0], ref_logits)
        row[variant] = step_us(steps, reps=10 if variant == "baseline" else 30)
    row["launch"] = launches
    times = "  ".join(f"{v} {row[v]:8.1f} us" for v in args.variants)
    ratio = ""
    if {"baseline", "mma+indexer"} <= set(args.variants):
        ratio = f"  baseline/mma+indexer {row['baseline'] / row['mma+indexer']:6.1f}x"  # type: ignore[operator]
    print(f"B={batch:4d} context {context:6d}  {times}{ratio}", flush=True)
    del layers, ref_logits
    torch.cuda.empty_cache()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scripts.kernel_step_perf", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,64", help="concurrencies, comma-separated (default 1,64)")
    ap.add_argument("--contexts", default="4096,16384,65536", help="contexts, comma-separated")
    ap.add_argument("--max-context", type=int, default=131072)
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4, help="layers per graph (distinct caches: cold L2)")
    ap.add_argument("--select", default=None,
                    help="the bf16 indexer's top-k select for every case (mla_kernels.indexer.select_rule.SELECTS; "
                         "default: the rule)")
    names = list(variants())
    ap.add_argument("--variants", default=",".join(names), help=f"comma-separated, of {', '.join(names)} (default all)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    args.variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in args.variants if v not in names]
    if unknown or not args.variants:
        print(f"error: --variants {', '.join(unknown) or '(none)'}: not one of {', '.join(names)}", file=sys.stderr)
        return 2
    import torch

    from mla_kernels.indexer import select_rule
    from mla_kernels.indexer.tiles import scores_rule_text

    try:
        select_rule.check_select(args.select, "--select")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton

    name = torch.cuda.get_device_name(0)
    contexts = [int(c) for c in args.contexts.split(",")]
    print(f"# {name}, torch {torch.__version__}, triton {triton.__version__}; contexts {contexts}, "
          f"max_context {args.max_context}, top-k {args.topk}, {args.layers} layers per graph, "
          f"indexer select {select_rule.select_rule_text(args.select)}, scores {scores_rule_text()}")
    rows = []
    for context in contexts:
        for batch in (int(b) for b in args.batches.split(",")):
            rows.append(_measure(batch, context, args))
    result = {"device": name, "torch": torch.__version__, "triton": triton.__version__, "contexts": contexts,
              "max_context": args.max_context, "topk": args.topk, "select": args.select or select_rule.SELECT,
              "select_rule": select_rule.select_rule_text(args.select), "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
