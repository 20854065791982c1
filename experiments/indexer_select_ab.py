#!/usr/bin/env python
"""Which top-k select should the bf16 indexer run? Every select path side by side, in one run.

For each (batch, context), on one set of inputs: every path of ``mla_kernels.indexer.select_rule.SELECTS``
(today's "split", "split_radix", the global "radix" and "radix_fused"), plus global radix selects with
other grids / warp counts (``--radix-per-sm``: ``radix.PROGRAMS_PER_SM``, smoke: programs per request;
``--radix-warps``), each timed

- end to end (scores + select, ``indexer_topk(..., select=path)``): what ``benchmarks.scripts.indexer_perf
  --impls bf16 --select PATH`` would report, printed as its table too;
- the select alone, on the logits of one scores run (a radix path's workspace zeroing included;
  "radix_fused": its pass 0 ran in the scores kernel, so the workspace is restored from that run);
- the scores kernel alone, without and with the fused pass 0 ("scores", "scores+hist"), and on smaller
  grids (``--scores-per-sm``: "scores/N", N programs per SM over the batch instead of the launcher's).

Every output is checked before it is timed: ``check_indexer_output`` against the float64 reference
logits (valid, distinct slots of the request; any choice only among near-ties), and the recall of the
reference's top-k set is printed. GPU: CUDA-graph replay, L2 flushed before each replay
(``indexer_perf``'s timer). ``--smoke``: tiny shapes on the CPU under the Triton interpreter
(wall-clock, eager). Exit status 1 when a variant disagrees with the reference or fails (it shows FAIL,
the others are still measured), 2 on bad arguments.

    python -m experiments.indexer_select_ab                # H200: B 1 and 64 at 4K / 16K / 64K, top-k 512
    python -m experiments.indexer_select_ab --smoke        # CPU, interpreter, tiny shapes
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.scripts.indexer_perf import _int_list

    p = argparse.ArgumentParser(prog="python -m experiments.indexer_select_ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--batches", type=_int_list, default=None, help="concurrencies (default 1,64; smoke 1,3)")
    p.add_argument("--contexts", type=_int_list, default=None,
                   help="real context per request (default 4096,16384,65536; smoke 300,700)")  # fmt: skip
    p.add_argument("--max-context", type=int, default=None, help="block-table capacity (default 131072)")
    p.add_argument("--topk", type=int, default=None, help="default 512; smoke 32")
    p.add_argument("--heads", type=int, default=None, help="default 64; smoke 16")
    p.add_argument("--iters", type=int, default=None, help="timed replays per case (default 30; smoke 1)")
    p.add_argument("--radix-per-sm", type=_int_list, default=[1, 2, 4],
                   help="radix selects alone at these programs per SM (default 1,2,4; launcher: 8)")  # fmt: skip
    p.add_argument("--radix-warps", type=_int_list, default=[4],
                   help="extra global radix warp counts (default 4; launcher: 8)")  # fmt: skip
    p.add_argument("--scores-per-sm", type=_int_list, default=[2, 4],
                   help="also time the scores kernel alone at these programs per SM (default 2,4; launcher: 8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON record here")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU under the Triton interpreter")
    args = p.parse_args(argv)
    defaults = {
        "batches": [1, 3] if args.smoke else [1, 64],
        "contexts": [300, 700] if args.smoke else [4096, 16384, 65536],
        "max_context": 1024 if args.smoke else 131072,
        "topk": 32 if args.smoke else 512,
        "heads": 16 if args.smoke else 64,
        "iters": 1 if args.smoke else 30,
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("topk", "heads", "iters", "max_context"):
        if getattr(args, key) <= 0:
            p.error(f"--{key.replace('_', '-')} must be positive")
    if min(args.batches + args.radix_warps + args.scores_per_sm + args.radix_per_sm) <= 0:
        p.error("--batches, --radix-warps, --radix-per-sm and --scores-per-sm must be positive")
    if args.max_context % 256 or args.heads % 16 or max(args.contexts) > args.max_context:
        p.error("--max-context must be a multiple of 256 holding every context, --heads a multiple of 16")
    return args


def _timer(args: argparse.Namespace, device: Any) -> Any:
    import torch

    from benchmarks.scripts.indexer_perf import _time_cpu, _time_gpu

    if device.type == "cuda":
        return lambda fn: _time_gpu(torch, fn, args.iters, capture=True)
    return lambda fn: _time_cpu(fn, args.iters)


def _select_alone(case: dict[str, Any], path: str, plan: Any = None) -> Any:
    """The select of ``path`` alone on the case's logits (a closure); ``plan``: a radix plan override.
    "coop" has no select alone (one launch with its scores): its figure is that launch."""

    from mla_kernels.indexer import coop, radix
    from mla_kernels.indexer import launch as L

    q, w, cache, bt, sl, topk = case["inp"].args()
    d, logits, out = case["d"], case["logits"], case["out"]
    cp = coop.plan(d, topk, logits.device) if path == "coop" else None
    if cp is not None:

        def one_launch() -> None:
            if L._coop_topk(q, w, cache, bt, sl, logits, out, topk, d, cp) is None:
                raise RuntimeError("coop: this architecture keeps its kernel at no select block (the rule runs radix)")

        return one_launch
    if path == "radix_fused":  # pass 0 ran in the scores kernel: start from that workspace every time
        ws, cand = radix.workspace(d, logits.device)
        L._run_scores(q, w, cache, bt, sl, logits, d, topk, ws)
        snapshot = ws.clone()

        def fused() -> None:
            ws.copy_(snapshot)
            L._select(logits, bt, sl, out, topk, d, path, (ws, cand))

        return fused
    if plan is not None:
        return lambda: radix.radix_select(logits, bt, sl, out, topk, d, plan)
    L._run_scores(q, w, cache, bt, sl, logits, d, topk)
    return lambda: L._select(logits, bt, sl, out, topk, d, path, radix.workspace(d, logits.device)
                             if path == "radix" else None)  # fmt: skip


def _checked(case: dict[str, Any], out: Any) -> float:
    """Recall of the reference's top-k set; raises AssertionError on a wrong selection."""
    from mla_kernels.indexer import check_indexer_output

    inp = case["inp"]
    return check_indexer_output(out, case["ref"], inp.block_table, inp.seq_lens, inp.topk)["recall_min"]


def _end_to_end(case: dict[str, Any], path: str, timer: Any) -> tuple[float, float]:
    """(recall, median us) of ``indexer_topk`` on select ``path``: checked after the warm-up and again on
    what the last timed replay wrote (a graph's output lives in its pool)."""
    from mla_kernels.indexer import indexer_topk

    inp = case["inp"]
    held = {"out": indexer_topk(*inp.args(), impl="bf16", select=path)}  # warm-up: compiles, resolves the tuner
    recall = _checked(case, held["out"])
    median = statistics.median(timer(lambda: held.update(out=indexer_topk(*inp.args(), impl="bf16", select=path))))
    _checked(case, held["out"])
    return recall, median


def _attempt(row: dict[str, Any], key: str, fn: Any) -> Any:
    """``fn()``, or None with the error kept in ``row["errors"]``: one variant's failure (a wrong selection,
    a compile error) must not cost the others' figures in a single GPU call."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - recorded and reported, the exit status says so
        row["errors"][key] = f"{type(exc).__name__}: {str(exc)[:300]}"
        print(f"  FAILED {key} at B={row['batch']} ctx {row['context']}: {row['errors'][key]}", file=sys.stderr,
              flush=True)  # fmt: skip
        return None


def _alone(case: dict[str, Any], fn: Any, timer: Any) -> tuple[float, float]:
    """(recall, median us) of a select alone: checked once, then again after its timed replays."""
    case["out"].fill_(-7)
    fn()
    recall = _checked(case, case["out"])
    case["out"].fill_(-7)
    median = statistics.median(timer(fn))
    _checked(case, case["out"])  # replayed as often as timed: still right
    return recall, median


def _fmt(v: float | None, width: int = 0, prec: int = 1) -> str:
    return f"{'FAIL':>{width}}" if v is None else f"{v:>{width}.{prec}f}"


def _variants(args: argparse.Namespace, d: Any, device: Any) -> dict[str, Any]:
    """Extra global radix plans (select alone): name -> plan. Under the interpreter (one notional grid) the
    programs per SM stand for programs per request."""
    from mla_kernels.indexer import radix

    base = radix.plan(d, args.topk, device)
    out = {}
    for n in [radix.PROGRAMS_PER_SM, *args.radix_per_sm]:
        for w in sorted({radix.WARPS, *args.radix_warps}):
            p = radix.plan(d, args.topk, device, warps=w, per_sm=n)
            if p != base:
                out.setdefault(f"radix {n}/SM w{w}", p)
    return out


def measure(args: argparse.Namespace, batch: int, ctx: int, device: Any, timer: Any) -> dict[str, Any]:
    """One (batch, context): every path end to end and alone, the extra radix plans alone, the scores."""
    import torch

    from mla_kernels.indexer import indexer_logits_reference, make_indexer_inputs, radix, select_rule
    from mla_kernels.indexer import launch as L
    from mla_kernels.indexer.checks import _check_args

    inp = make_indexer_inputs(batch, ctx, max_context=args.max_context, num_heads=args.heads, topk=args.topk,
                              device=device, seed=args.seed)  # fmt: skip
    d = _check_args(*inp.args(), "bf16")
    case = {"inp": inp, "d": d, "ref": indexer_logits_reference(*inp.args()[:5]),
            "logits": torch.empty((batch, d.max_context), dtype=torch.float32, device=device),
            "out": torch.empty((batch, args.topk), dtype=torch.int32, device=device)}  # fmt: skip
    row: dict[str, Any] = {"batch": batch, "context": ctx, "e2e": {}, "alone": {}, "recall": {}, "errors": {}}
    for path in select_rule.SELECTS:
        got = _attempt(row, f"{path} e2e", lambda path=path: _end_to_end(case, path, timer))
        row["recall"][path], row["e2e"][path] = got if got is not None else (None, None)
    builders = {path: (lambda path=path: _select_alone(case, path)) for path in select_rule.SELECTS}
    for name, p in _variants(args, d, device).items():
        builders[name] = lambda p=p: _select_alone(case, "radix", p)
    for name, build in builders.items():
        got = _attempt(row, f"{name} alone", lambda build=build: _alone(case, build(), timer))
        recall, row["alone"][name] = got if got is not None else (None, None)
        if row["recall"].get(name) is None:
            row["recall"][name] = recall
    q, w, cache, bt, sl, topk = inp.args()
    ws, _ = radix.workspace(d, device)
    grids: dict[str, Any] = {
        "scores": lambda: L._run_scores(q, w, cache, bt, sl, case["logits"], d, topk),
        "scores+hist": lambda: (ws.zero_(), L._run_scores(q, w, cache, bt, sl, case["logits"], d, topk, ws)),
    }
    for n in args.scores_per_sm:  # the same tuned config on a smaller grid (fewer waves, more tiles each)
        grids[f"scores/{n}"] = lambda n=n: L._run_scores(q, w, cache, bt, sl, case["logits"], d, topk, per_sm=n)
    for name, fn in grids.items():
        row["alone"][name] = _attempt(row, name, lambda fn=fn: statistics.median(timer(fn)))
    print(f"  B={batch} ctx {ctx}: e2e " + ", ".join(f"{k} {_fmt(v)}" for k, v in row["e2e"].items())
          + "; alone " + ", ".join(f"{k} {_fmt(v)}" for k, v in row["alone"].items()), file=sys.stderr, flush=True)
    return row


def _print_table(rows: list[dict[str, Any]], paths: tuple[str, ...]) -> None:
    scores = [k for k in rows[0]["alone"] if k.startswith("scores")]
    extra = [k for k in rows[0]["alone"] if k not in paths and k not in scores]
    print("\nmedian us (e2e: scores + select through indexer_topk; alone: the select on fixed logits, or the scores "
          "kernel: +hist with the fused pass 0, /N on N programs per SM); recall vs the reference")  # fmt: skip
    head = f"{'B':>3} {'ctx':>6} " + " ".join(f"{k:>11}" for k in scores) + " | "
    print(head + " | ".join(f"{p:>26}" for p in paths) + " | " + " | ".join(f"{e:>14}" for e in extra))
    print(" " * len(head) + " | ".join(f"{'e2e':>8} {'alone':>8} {'recall':>8}" for _ in paths)
          + " | " + " | ".join(f"{'alone':>6} {'recall':>7}" for _ in extra))  # fmt: skip
    for r in rows:
        a = r["alone"]
        cells = [f"{_fmt(r['e2e'][p], 8)} {_fmt(a[p], 8)} {_fmt(r['recall'][p], 8, 4)}" for p in paths]
        more = [f"{_fmt(a[e], 6)} {_fmt(r['recall'][e], 7, 4)}" for e in extra]
        print(f"{r['batch']:>3} {r['context']:>6} " + " ".join(_fmt(a[k], 11) for k in scores) + " | "
              + " | ".join(cells) + " | " + " | ".join(more))  # fmt: skip


def _as_indexer_perf(args: argparse.Namespace, rows: list[dict[str, Any]], paths: tuple[str, ...],
                     copy_bps: float | None) -> None:  # fmt: skip
    """Each path's end-to-end figures as ``indexer_perf --impls bf16`` prints them (targets included)."""
    from benchmarks.scripts.indexer_perf import BYTES_PER_TOKEN, _report

    for path in paths:
        print(f"\nindexer_perf --impls bf16 --select {path}:")
        results = []
        for r in rows:
            total = r["context"] * r["batch"] * BYTES_PER_TOKEN
            med = r["e2e"][path]
            if med is None:
                continue
            results.append({
                "batch": r["batch"], "context": r["context"], "impl": "bf16", "median_us": med, "min_us": med,
                "gbps_real_length": total / (med * 1e-6) / 1e9, "recall_min": r["recall"][path],
                "roofline_us": None if copy_bps is None else total / copy_bps * 1e6,
                "timing": "cuda-graph replay" if copy_bps is not None else "eager",
            })  # fmt: skip
        _report(args, results)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        from settings.env import use_interpreter

        use_interpreter()  # before the first triton import
    import torch

    from benchmarks.scripts.indexer_perf import _copy_bandwidth, _device
    from mla_kernels.indexer import select_rule

    device = _device(torch, args.smoke)
    if device is None:
        return 2
    copy_bps = _copy_bandwidth(torch) if device.type == "cuda" else None
    timer = _timer(args, device)
    rows = []
    for batch in args.batches:
        for ctx in args.contexts:
            print(f"  batch {batch}, context {ctx} ...", file=sys.stderr, flush=True)
            rows.append(measure(args, batch, ctx, device, timer))
    _print_table(rows, select_rule.SELECTS)
    _as_indexer_perf(args, rows, select_rule.SELECTS, copy_bps)
    record = {"bench": "indexer_select_ab", "smoke": bool(args.smoke), "select_default": select_rule.SELECT,
              "copy_gbps": None if copy_bps is None else copy_bps / 1e9, "rows": rows}  # fmt: skip
    line = json.dumps(record)
    if args.json_out is not None:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(line + "\n")
    print(line)
    failed = [f"B={r['batch']} ctx {r['context']} {k}: {e}" for r in rows for k, e in r["errors"].items()]
    for f in failed:
        print(f"error: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
