#!/usr/bin/env python
"""Where the global radix select's time goes at few requests: each of its launches timed alone.

The select (``mla_kernels.indexer.radix``) is a zeroed workspace and three dependent launches: byte pass 0,
byte pass 1 and the compaction (whose last program finishes the k-th key's bucket); the product zeroes the
workspace inside the scores kernel (``ZERO_WS``), this experiment with a launch of its own. At one request
it took about 24-27 us whatever the context (``indexer_select_ab``), far more than its work. For each (batch,
context) this times, each in its own CUDA graph over the same logits with a cold L2 (``indexer_perf``'s
timer):

- ``zero``: the workspace zeroing alone; ``restore``: copying a saved workspace back (what the stages
  below need first, so it is their baseline);
- ``pass0`` / ``pass1`` / ``compact``: the workspace restored to the state that launch starts from, then
  the launch (each figure less ``restore`` is the launch's own);
- ``empty``: an empty kernel on the same grid and warps (launch and scheduling cost alone);
- ``chain``: zeroing and the three launches (the product's select, plus the zeroing launch it no longer has).

The chain's output is checked against the float64 reference before and after its timed replays.
``--smoke``: tiny shapes on the CPU under the Triton interpreter (wall clock, eager: a check that the
stages still compose, not a timing).

    python -m experiments.radix_stages [--batches 1,4] [--contexts 4096,65536] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def _empty_kernel() -> Any:
    """A kernel that does nothing (the cost of a launch of a grid and warp count); built on first use, after
    ``--smoke`` has chosen the interpreter (Triton reads that when a kernel is defined)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _empty(x_ptr, N: tl.constexpr):
        if tl.program_id(0) == N:
            tl.store(x_ptr, 0)

    return _empty


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.scripts.indexer_perf import _int_list

    p = argparse.ArgumentParser(prog="python -m experiments.radix_stages", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--batches", type=_int_list, default=None, help="concurrencies (default 1,4,16; smoke 1,2)")
    p.add_argument("--contexts", type=_int_list, default=None, help="default 4096,65536; smoke 300,700")
    p.add_argument("--max-context", type=int, default=None, help="block-table capacity (default 131072)")
    p.add_argument("--topk", type=int, default=None, help="default 512; smoke 32")
    p.add_argument("--iters", type=int, default=None, help="timed replays per case (default 30; smoke 1)")
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON record here")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU under the Triton interpreter")
    args = p.parse_args(argv)
    smoke = args.smoke
    defaults = {"batches": [1, 2] if smoke else [1, 4, 16], "contexts": [300, 700] if smoke else [4096, 65536],
                "max_context": 1024 if smoke else 131072, "topk": 32 if smoke else 512,
                "iters": 1 if smoke else 30}  # fmt: skip
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if min([*args.batches, *args.contexts, args.topk, args.iters]) <= 0:
        p.error("--batches, --contexts, --topk and --iters must be positive")
    if args.max_context % 256 or max(args.contexts) > args.max_context:
        p.error("--max-context must be a multiple of 256 holding every context")
    return args


def stages(logits: Any, bt: Any, sl: Any, out: Any, topk: int, d: Any, device: Any) -> dict[str, Any]:
    """The closures to time: each stage from the workspace state it starts from, and the whole chain."""
    import torch

    from mla_kernels.indexer import radix

    plan = radix.plan(d, topk, device)
    ws, cand = radix.workspace(d, device)
    launches = radix.launches(logits, bt, sl, out, topk, d, plan, ws, cand)
    states = [ws.clone()]
    for launch in launches:  # the workspace each launch starts from
        launch.run()
        states.append(ws.clone())
    scratch = torch.zeros(1, dtype=torch.int32, device=device)
    empty, kernel = launches[0], _empty_kernel()

    def from_state(i: int) -> Any:
        def run() -> None:
            ws.copy_(states[i])
            launches[i].run()
        return run

    def chain() -> None:
        ws.zero_()
        for launch in launches:
            launch.run()

    return {
        "zero": lambda: ws.zero_(),
        "restore": lambda: ws.copy_(states[0]),
        "empty": lambda: kernel[empty.grid](scratch, N=-1, num_warps=empty.num_warps),
        "pass0": from_state(0), "pass1": from_state(1), "compact": from_state(2),
        "chain": chain,
    }  # fmt: skip


def measure(args: argparse.Namespace, batch: int, ctx: int, device: Any, timer: Any) -> dict[str, Any]:
    import torch

    from mla_kernels.indexer import check_indexer_output, indexer_logits_reference, make_indexer_inputs
    from mla_kernels.indexer import launch as L
    from mla_kernels.indexer.checks import _check_args

    inp = make_indexer_inputs(batch, ctx, max_context=args.max_context, num_heads=16 if args.smoke else 64,
                              topk=args.topk, device=device, seed=0)  # fmt: skip
    q, w, cache, bt, sl, topk = inp.args()
    d = _check_args(*inp.args(), "bf16")
    logits = torch.empty((batch, d.max_context), dtype=torch.float32, device=device)
    out = torch.full((batch, topk), -7, dtype=torch.int32, device=device)
    L._run_scores(q, w, cache, bt, sl, logits, d, topk)
    ref = indexer_logits_reference(*inp.args()[:5])
    fns = stages(logits, bt, sl, out, topk, d, device)

    def check() -> None:
        check_indexer_output(out, ref, inp.block_table, inp.seq_lens, topk)

    for fn in fns.values():  # compiled before any graph capture
        fn()
    out.fill_(-7)
    fns["chain"]()
    check()
    row = {"batch": batch, "context": ctx, "us": {name: statistics.median(timer(fn)) for name, fn in fns.items()}}
    check()  # the chain replayed last: its output still right
    us = row["us"]
    print(f"  B={batch} ctx {ctx}: " + ", ".join(f"{k} {v:.1f}" for k, v in us.items())
          + f"; own (less restore): pass0 {us['pass0'] - us['restore']:.1f}, pass1 {us['pass1'] - us['restore']:.1f},"
          f" compact {us['compact'] - us['restore']:.1f} us", flush=True)  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        from settings.env import use_interpreter

        use_interpreter()
    import torch

    from benchmarks.scripts.indexer_perf import _device
    from experiments.indexer_select_ab import _timer

    device = _device(torch, args.smoke)
    if device is None:
        return 2
    timer = _timer(args, device)
    print(f"radix select stages on {torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU (interpreter)'}:"
          f" batches {args.batches}, contexts {args.contexts}, max_context {args.max_context}, top-k {args.topk}"
          f"; median us of {args.iters} replays", flush=True)  # fmt: skip
    rows = [measure(args, b, c, device, timer) for b in args.batches for c in args.contexts]
    record = {"bench": "radix_stages", "smoke": bool(args.smoke), "rows": rows}
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
