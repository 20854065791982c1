"""Would a bitonic top-k (``tl.topk`` over packed (order key, token) pairs) serve the split's one program a
request better than its sixteen two-bit counting rounds (``split_kernels._request_topk_kernel``)?

    python -m experiments.indexer_sort_select --stats            # no GPU: both compiled for sm_90 and sm_120
    python -m experiments.indexer_sort_select                    # GPU: both timed alone on the same logits
    python -m experiments.indexer_sort_select --smoke            # CPU, interpreter, small shapes (correctness)

The probe kernel sorts each request's keys with their token position in the low 32 bits (so every key is
distinct and the order total), keeps the ``next_pow2(topk)`` largest and writes the first ``topk`` as slots
through the block table, ``-1`` past the request's tokens or on an unmapped page: the product's row contract
for a request of at most ``BLOCK`` tokens (the probe sizes ``BLOCK`` to the context; it has no fallback for a
longer one). ``--stats`` reports registers, spills, shared memory and the SASS instruction and barrier counts
of the product's kernel as launched ("rounds"), of its counting path alone without the fallback for a request
past ``BLOCK`` ("path": straight-line code, so its static count is close to what one program issues) and of
the probe ("sort"). The timed form checks each kernel's slots against the reference logits first and again after its
timed replays (``indexer_perf``'s graph replay behind an L2 flush); the logits are the product's scores.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
from dataclasses import replace
from typing import Any

import triton
import triton.language as tl

from mla_kernels.indexer.kernels import _order_key, _request_len
from mla_kernels.indexer.split import ONE_MAX
from mla_kernels.indexer.split_kernels import _short_request
from settings import env


@triton.jit
def _sort_select_kernel(
    logits_ptr, bt_ptr, seq_ptr, out_ptr,
    stride_lb, stride_btb, stride_ob,
    topk, max_ctx, num_pages,
    BLOCK: tl.constexpr, K: tl.constexpr,
):  # fmt: skip
    # One program a request of at most BLOCK tokens: its K largest (order key, token) pairs, descending.
    b = tl.program_id(0)
    n = _request_len(seq_ptr, b, max_ctx)
    t = tl.arange(0, BLOCK)
    valid = t < n
    key = tl.where(valid, _order_key(tl.load(logits_ptr + b * stride_lb + t, mask=valid, other=0.0)), 0)
    top = tl.topk((key.to(tl.uint64) << 32) | t.to(tl.uint64), K)  # [K]; empty lanes (key 0) last
    tok = (top & 0xFFFFFFFF).to(tl.int32)
    full = (top >> 32) != 0
    page = tl.load(bt_ptr + b * stride_btb + tok // 256, mask=full, other=-1)
    slot = tl.where(full & (page >= 0) & (page < num_pages), page * 256 + tok % 256, -1)
    j = tl.arange(0, K)
    tl.store(out_ptr + b * stride_ob + j, slot, mask=j < topk)


@triton.jit
def _rounds_path_kernel(
    logits_ptr, bt_ptr, seq_ptr, out_ptr,
    stride_lb, stride_btb, stride_ob,
    topk, max_ctx, num_pages,
    BLOCK: tl.constexpr, OUT_BLOCK: tl.constexpr,
):  # fmt: skip
    # ``_request_topk_kernel`` without its fallback for a request past BLOCK: the code that runs.
    b = tl.program_id(0)
    n = _request_len(seq_ptr, b, max_ctx)
    _short_request(logits_ptr + b * stride_lb, out_ptr + b * stride_ob, bt_ptr + b * stride_btb, n, topk,
                   num_pages, BLOCK, OUT_BLOCK, False)  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m experiments.indexer_sort_select", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--stats", action="store_true", help="compile both for sm_90 and sm_120 (no GPU) and stop")
    ap.add_argument("--smoke", action="store_true", help="CPU under the interpreter, tiny shapes")
    ap.add_argument("--batches", default=None, help="requests, comma-separated (default 1,16,64; smoke 2)")
    ap.add_argument("--contexts", default=None, help="tokens a request (default 2048,4096,8192; smoke 300)")
    ap.add_argument("--topk", type=int, default=None, help="slots a request (default 512; smoke 32)")
    ap.add_argument("--warps", type=int, default=16, help="the probe kernel's warps (default 16, the product's)")
    ap.add_argument("--iters", type=int, default=30, help="timed replays a kernel and case (default 30)")
    args = ap.parse_args(argv)
    try:
        args.batches = [int(v) for v in (args.batches or ("2" if args.smoke else "1,16,64")).split(",")]
        args.contexts = [int(v) for v in (args.contexts or ("300" if args.smoke else "2048,4096,8192")).split(",")]
    except ValueError:
        ap.error("--batches and --contexts take comma-separated integers")
    args.topk = args.topk or (32 if args.smoke else 512)
    if min(args.batches + args.contexts) < 1 or args.topk < 1 or args.warps not in (4, 8, 16, 32):
        ap.error("--batches, --contexts and --topk must be positive; --warps one of 4, 8, 16, 32")
    # One program a request (the split's plan) up to ONE_MAX tokens; the probe's K = next_pow2(topk) lanes fit
    # its block when a request is at least top-k long.
    if max(args.contexts) > ONE_MAX or min(args.contexts) < args.topk:
        ap.error(f"--contexts must lie in [--topk, {ONE_MAX}] (the one program a request), got {args.contexts}")
    return args


def probe_launch(logits: Any, bt: Any, sl: Any, out: Any, topk: int, d: Any, block: int, warps: int) -> Any:
    """The probe kernel's launch over ``d.batch`` requests of at most ``block`` tokens."""
    from mla_kernels._common import KernelLaunch, next_pow2

    k = next_pow2(topk)
    if k > block:
        raise ValueError(f"top-k {topk} needs {k} lanes, above the block's {block}")
    return KernelLaunch("probe.sort_select", _sort_select_kernel, (d.batch,),
                        (logits, bt, sl, out, logits.stride(0), bt.stride(0), out.stride(0), topk, d.max_context,
                         d.num_pages), {"BLOCK": block, "K": k}, num_warps=warps)  # fmt: skip


_SASS_OP = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")  # an instruction's opcode


def _sass_counts(cubin: bytes) -> tuple[int, int]:
    from mla_kernels import aot

    sass = aot.cuobjdump(cubin, "-sass").stdout
    ops = collections.Counter(m.group(1).split(".")[0] for m in _SASS_OP.finditer(sass))
    return sum(ops.values()), ops["BAR"]


def stats(args: argparse.Namespace) -> int:
    import torch

    from mla_kernels import aot
    from mla_kernels.indexer.checks import _Dims
    from mla_kernels.indexer.split import launches, plan

    meta = torch.device("meta")
    d = _Dims(batch=64, heads=64, max_pages=512, num_pages=64 * 512)
    logits = torch.empty(64, d.max_context, dtype=torch.float32, device=meta)
    bt = torch.empty(64, d.max_pages, dtype=torch.int32, device=meta)
    sl = torch.empty(64, dtype=torch.int32, device=meta)
    out = torch.empty(64, args.topk, dtype=torch.int32, device=meta)
    for ctx in args.contexts:
        (product,) = launches(logits, bt, sl, out, args.topk, d, plan(d, args.topk, longest=ctx))
        probe = probe_launch(logits, bt, sl, out, args.topk, d, product.constexprs["BLOCK"], args.warps)
        path = replace(product, kernel=_rounds_path_kernel, constexprs={
            k: product.constexprs[k] for k in ("BLOCK", "OUT_BLOCK")})  # fmt: skip
        for capability in (90, 120):
            for name, launch in (("rounds", product), ("path", path), ("sort", probe)):
                asm, shared = aot.compile_asm(launch, capability)
                regs, spill = aot._resources(asm["cubin"])
                total, bars = _sass_counts(asm["cubin"])
                print(f"sm_{capability} {ctx:>6} tokens BLOCK {launch.constexprs['BLOCK']:>5} w{launch.num_warps:<2} "
                      f"{name:6s} {regs:>3} registers, {spill} B spilled, {shared:>6,} B shared, "
                      f"{total:>5,} SASS instructions, {bars:>3} barriers", flush=True)  # fmt: skip
    return 0


def measure(args: argparse.Namespace, batch: int, ctx: int, device: Any) -> dict[str, Any]:
    """Both selects alone on the product's logits of one case: checked, timed alternately, checked again."""
    import torch

    from benchmarks.scripts.indexer_perf import _time_cpu, _time_gpu
    from mla_kernels.indexer import check_indexer_output, indexer_logits_reference, make_indexer_inputs
    from mla_kernels.indexer import launch as L
    from mla_kernels.indexer.checks import _check_args
    from mla_kernels.indexer.split import launches, plan

    # Every request ctx tokens, as indexer_perf runs them; under --smoke the last one shorter than top-k.
    lens = [ctx] * batch if not args.smoke else [ctx] * (batch - 1) + [min(ctx, args.topk // 2)]
    inp = make_indexer_inputs(batch, lens, max_context=256 * -(-ctx // 256), num_heads=64, topk=args.topk,
                              device=device, seed=batch + ctx)  # fmt: skip
    q, w, cache, bt, sl, topk = inp.args()
    d = _check_args(*inp.args(), "bf16")
    logits = torch.empty((batch, d.max_context), dtype=torch.float32, device=device)
    L._run_scores(q, w, cache, bt, sl, logits, d, topk)
    ref = indexer_logits_reference(*inp.args()[:5])
    outs = {name: torch.full((batch, topk), -7, dtype=torch.int32, device=device) for name in ("rounds", "sort")}
    (product,) = launches(logits, bt, sl, outs["rounds"], topk, d, plan(d, topk, longest=ctx))
    probe = probe_launch(logits, bt, sl, outs["sort"], topk, d, product.constexprs["BLOCK"], args.warps)
    calls = {"rounds": product.run, "sort": probe.run}
    row: dict[str, Any] = {"batch": batch, "context": ctx, "block": product.constexprs["BLOCK"]}

    def check(name: str) -> None:
        got = check_indexer_output(outs[name], ref, bt, sl, topk)["recall_min"]
        assert got == 1.0, f"{name} at {batch} x {ctx}: recall {got}"

    for name, call in calls.items():
        call()
        check(name)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(2):  # alternating rounds: neither kernel always runs first
        for name, call in calls.items():
            times[name] += _time_gpu(torch, call, args.iters, capture=True) if device.type == "cuda" else \
                _time_cpu(call, 1)
    for name in calls:
        check(name)  # what the last replay wrote
        row[name] = statistics.median(times[name])
    print(f"{batch:>5} {ctx:>7} {row['block']:>6} {row['rounds']:>10.1f} {row['sort']:>10.1f} "
          f"{row['rounds'] / row['sort']:>8.2f}x", flush=True)  # fmt: skip
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke and not env.interpreting():
        # Triton reads the interpreter switch when a kernel is defined (this module's import): start again.
        cmd = [sys.executable, "-m", "experiments.indexer_sort_select", *(sys.argv[1:] if argv is None else argv)]
        return subprocess.run(cmd, env={**os.environ, env.TRITON_INTERPRET: "1"}, check=False).returncode
    if args.stats:
        return stats(args)
    import torch

    device = torch.device("cpu" if args.smoke else "cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        print("needs a CUDA GPU (or --stats, --smoke)", file=sys.stderr)
        return 2
    print(f"# triton {triton.__version__}, top-k {args.topk}, probe at {args.warps} warps; us per launch "
          f"({'median of graph replays behind an L2 flush' if device.type == 'cuda' else 'interpreter wall time'})")
    print(f"{'batch':>5} {'tokens':>7} {'BLOCK':>6} {'rounds us':>10} {'sort us':>10} {'speed-up':>9}")
    for ctx in args.contexts:
        for batch in args.batches:
            measure(args, batch, ctx, device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
