#!/usr/bin/env python
"""Would one launch of scores + select beat the two (scores kernel, then one select program a request) for
batches of short requests (issue 29's 4K row at 64 requests)?

The probe kernel (``_fused_short_kernel``): ``P`` programs a request score its tiles (``token_scores``'s own
loop, ``BLOCK_T`` tokens a tile), each takes a ticket (acq_rel, after a block barrier), and the request's last
program selects its top-k from the logits the others left in L2 with the split select's two-bit rounds
(``split_kernels._select_positions``, ``BLOCK`` lanes), then zeroes its ticket for the next call. No grid
barrier and no second launch: the select starts as soon as a request's last tile is scored, beside other
requests' scores. Timed side by side with the product's ``indexer_topk`` (its rule, with a kept workspace, the
step's way) in CUDA graphs replayed with a cold L2, each output checked against the fp64 reference first.
``--smoke`` runs the kernel under the interpreter on tiny shapes and checks it (no timing).

    python -m experiments.indexer_fused_short [--batches 17,32,64,128] [--contexts 2048,4096]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

if __name__ == "__main__" and "--smoke" in sys.argv[1:]:  # Triton reads this when a kernel is defined (below)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from mla_kernels.indexer.kernels import _request_len  # noqa: E402
from mla_kernels.indexer.radix_kernels import _active, _arrive, _block_keys, _pad_row  # noqa: E402
from mla_kernels.indexer.split_kernels import _select_positions, _store_slots  # noqa: E402
from mla_kernels.indexer.token_scores import _first_tile, _load_q, _score_tiles  # noqa: E402

BLOCK_LANES = 4096  # the select's lanes on the GPU: requests of up to 4,096 tokens


@triton.jit
def _fused_short_kernel(
    q_ptr, w_ptr, cache_ptr, bt_ptr, seq_ptr, logits_ptr, ticket_ptr, out_ptr,
    stride_qb, stride_qh, stride_wb, stride_page, stride_btb, stride_lb, stride_ob,
    H, num_pages, max_ctx, topk,
    BLOCK_H: tl.constexpr, BLOCK_T: tl.constexpr, FP32_MATH: tl.constexpr, BLOCK: tl.constexpr,
    OUT_BLOCK: tl.constexpr, SELECT: tl.constexpr = True,
):  # fmt: skip
    # SELECT False: the scores alone (every program still takes and the last one zeroes its ticket), to time them.
    pid = tl.program_id(0)
    b = tl.program_id(1)
    programs = tl.num_programs(0)
    n = _request_len(seq_ptr, b, max_ctx)
    row = logits_ptr + b * stride_lb
    out_row = out_ptr + b * stride_ob
    bt_row = bt_ptr + b * stride_btb
    active = _active(n, programs, BLOCK_T)
    if active == 0:
        if pid == 0:  # an empty request: its row all -1
            _pad_row(out_row, 0, topk, OUT_BLOCK)
    if pid < active:
        qt, w = _load_q(q_ptr, w_ptr, b, stride_qb, stride_qh, stride_wb, H, BLOCK_H, FP32_MATH)
        page0, scale0 = _first_tile(cache_ptr, bt_row, pid * BLOCK_T, max_ctx, num_pages, stride_page, BLOCK_T)
        _score_tiles(qt, w, cache_ptr, bt_row, row, pid * BLOCK_T, programs * BLOCK_T, n, num_pages, stride_page,
                     page0, scale0, BLOCK_T, FP32_MATH, False)  # fmt: skip
        ticket = _arrive(ticket_ptr + b)  # after a block barrier: this program's logits are published
        if ticket == active:  # the request's last program: every other one's logits are in L2
            tl.store(ticket_ptr + b, 0)  # zeroed for the next call (every other program has taken its ticket)
        if (ticket == active) & SELECT:
            t = tl.arange(0, BLOCK)
            key = tl.where(t < n, _block_keys(row, t, n), 0)
            take, pos = _select_positions(key, topk, n, False)
            _store_slots(out_row, bt_row, t, take, pos, tl.minimum(n, topk), topk, num_pages, OUT_BLOCK)


def run_fused(inp: Any, logits: Any, tickets: Any, out: Any, cfg: tuple[int, int, int, int], interpret: bool,
              select: bool = True) -> None:
    """One launch of the probe kernel: ``cfg`` = (BLOCK_T, warps, stages, programs a request); ``select`` False:
    its scores alone."""
    from mla_kernels._common import next_pow2
    from mla_kernels.indexer.checks import _check_args

    q, w, cache, bt, sl, topk = inp.args()
    d = _check_args(q, w, cache, bt, sl, topk, "bf16")
    block_t, warps, stages, per_req = cfg
    block = next_pow2(int(sl.max().item())) if interpret else BLOCK_LANES
    _fused_short_kernel[(per_req, d.batch)](
        q, w, cache, bt, sl, logits, tickets, out,
        q.stride(0), q.stride(1), w.stride(0), cache.stride(0), bt.stride(0), logits.stride(0), out.stride(0),
        d.heads, d.num_pages, d.max_context, topk,
        BLOCK_H=max(16, next_pow2(d.heads)), BLOCK_T=block_t, FP32_MATH=interpret, BLOCK=block,
        OUT_BLOCK=min(1024, next_pow2(topk)), SELECT=select, num_warps=warps, num_stages=stages,
    )  # fmt: skip


def check(cases: list[tuple[int, list[int], int, int, tuple[int, int, int, int]]], device: str) -> int:
    """The kernel on ragged batches (batch, lengths, max_context, topk, config), twice each (the tickets come
    back zeroed), checked against the fp64 reference."""
    import torch

    from mla_kernels.indexer import check_indexer_output, indexer_logits_reference, make_indexer_inputs

    for batch, ctx, max_ctx, topk, cfg in cases:
        inp = make_indexer_inputs(batch, ctx, max_context=max_ctx, topk=topk, device=device, seed=batch)
        q, w, cache, bt, sl, topk = inp.args()
        logits = torch.empty((batch, max_ctx), dtype=torch.float32, device=device)
        tickets = torch.zeros(batch, dtype=torch.int32, device=device)
        out = torch.empty((batch, topk), dtype=torch.int32, device=device)
        ref = indexer_logits_reference(q, w, cache, bt, sl)
        for _ in range(2):
            out.fill_(-7)
            run_fused(inp, logits, tickets, out, cfg, interpret=device == "cpu")
            check_indexer_output(out, ref, bt, sl, topk)
        assert int(tickets.abs().sum()) == 0, tickets
        print(f"check B={batch} ctx {ctx[:8]} T{cfg[0]} w{cfg[1]} s{cfg[2]} P{cfg[3]}: ok", flush=True)
    return 0


def smoke() -> int:
    """The kernel under the interpreter on small ragged batches."""
    return check([(3, [300, 0, 129], 1024, 128, (64, 4, 1, 3)), (2, [700, 64], 1024, 128, (64, 4, 1, 2)),
                  (1, [100], 1024, 128, (64, 4, 1, 1))], "cpu")  # fmt: skip


def gpu_check(cfgs: list[tuple[int, int, int, int]]) -> int:
    """Each config on a ragged GPU batch: empty, one-token, at and around top-k and full 4,096-token requests."""
    lens = [4096, 0, 1, 511, 512, 513, 3000, 4095, 255, 257, 2048, 4096]
    return check([(len(lens), lens, 131072, 512, (t, w, s, p)) for t, w, s, p in cfgs for p in (1, 3)], "cuda")


def compile_stats(cfgs: list[tuple[int, int, int, int]], archs: list[int]) -> int:
    """Each config compiled for each architecture (no GPU): registers, spills, shared memory."""
    import torch

    from mla_kernels._common import KernelLaunch, next_pow2
    from mla_kernels.aot import compile_uncached
    from mla_kernels.indexer import make_indexer_inputs

    inp = make_indexer_inputs(2, 256, max_context=1024, topk=512, seed=0)
    q, w, cache, bt, sl, topk = inp.args()
    logits = torch.empty((2, 1024), dtype=torch.float32)
    tickets = torch.zeros(2, dtype=torch.int32)
    out = torch.empty((2, topk), dtype=torch.int32)
    args = (q, w, cache, bt, sl, logits, tickets, out, q.stride(0), q.stride(1), w.stride(0), cache.stride(0),
            bt.stride(0), logits.stride(0), out.stride(0), 64, cache.shape[0], 1024, topk)  # fmt: skip
    for arch in archs:
        for block_t, warps, stages, _ in cfgs:
            const = {"BLOCK_H": 64, "BLOCK_T": block_t, "FP32_MATH": False, "BLOCK": BLOCK_LANES,
                     "OUT_BLOCK": min(1024, next_pow2(topk))}  # fmt: skip
            launch = KernelLaunch("fused", _fused_short_kernel, (1, 2), args, const, warps, stages)
            s = compile_uncached(launch, arch)
            print(f"sm_{arch} T{block_t} w{warps} s{stages}: regs {s.registers} spill {s.spill_bytes} B "
                  f"shared {s.shared:,} B mma {','.join(s.mma) or '-'}", flush=True)  # fmt: skip
    return 0


def measure(batch: int, ctx: int, cfgs: list[tuple[int, int, int, int]], iters: int, rounds: int,
            scores: bool = False) -> dict[str, Any]:
    """Median us of the product's indexer and of each probe config, alternating ``rounds`` times; ``scores``:
    also the product's scores kernel alone and each config's scores alone (``SELECT`` False; not checked)."""
    import torch

    from benchmarks.scripts.indexer_perf import _time_gpu
    from mla_kernels.indexer import (
        check_indexer_output,
        indexer_logits_reference,
        indexer_topk,
        indexer_workspace,
        make_indexer_inputs,
    )

    inp = make_indexer_inputs(batch, ctx, max_context=131072, topk=512, device="cuda", seed=batch)
    q, w, cache, bt, sl, topk = inp.args()
    ref = indexer_logits_reference(q, w, cache, bt, sl)
    ws = indexer_workspace(batch, "cuda")
    logits = torch.empty((batch, 131072), dtype=torch.float32, device="cuda")
    tickets = torch.zeros(batch, dtype=torch.int32, device="cuda")
    out = torch.empty((batch, topk), dtype=torch.int32, device="cuda")

    def fused(c: tuple[int, int, int, int]) -> Any:
        out.fill_(-7)
        run_fused(inp, logits, tickets, out, c, interpret=False)
        return out

    # ``checked`` returns each side's output for the checks; the timed graphs (``fns``) capture the launches alone.
    fns: dict[str, Any] = {"product": lambda: indexer_topk(*inp.args(), workspace=ws, max_seq_len=ctx)}
    checked: dict[str, Any] = {"product": fns["product"]}
    for c in cfgs:
        name = "fused T{} w{} s{} P{}".format(*c)
        fns[name] = lambda c=c: run_fused(inp, logits, tickets, out, c, interpret=False)
        checked[name] = lambda c=c: fused(c)
    if scores:
        from mla_kernels.indexer import launch as L
        from mla_kernels.indexer.checks import _check_args

        d = _check_args(q, w, cache, bt, sl, topk, "bf16")
        fns["product scores"] = lambda: L._run_scores(q, w, cache, bt, sl, logits, d, topk, max_seq_len=ctx)
        for c in cfgs:
            fns["scores T{} w{} s{} P{}".format(*c)] = lambda c=c: run_fused(inp, logits, tickets, out, c, False, False)
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(2):  # compile, then check again with the tickets the first call left
        for chk in checked.values():
            res = chk()
            torch.cuda.synchronize()
            check_indexer_output(res, ref, bt, sl, topk)
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(statistics.median(_time_gpu(torch, fn, iters, capture=True)))
    for chk in checked.values():  # still right after the replays (the tickets came back zeroed)
        res = chk()
        torch.cuda.synchronize()
        check_indexer_output(res, ref, bt, sl, topk)
    return times


def _cfgs(text: str, batch: int, sms: int) -> list[tuple[int, int, int, int]]:
    """``T:w:s:m`` items -> (BLOCK_T, warps, stages, programs a request = max(1, m * SMs // batch))."""
    out = []
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 4 or not all(x.isdigit() and int(x) > 0 for x in parts):
            raise ValueError(f"--configs: {item!r} is not BLOCK_T:warps:stages:m (positive integers)")
        t, w, s, m = (int(x) for x in parts)
        c = (t, w, s, max(1, m * sms // batch))
        if c not in out:
            out.append(c)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.indexer_fused_short", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--batches", default="17,32,64,128")
    ap.add_argument("--contexts", default="2048,4096", help="request lengths, at most 4,096")
    ap.add_argument("--configs", default="256:16:3:1,256:16:2:1,128:8:3:2,128:8:3:1,64:4:3:4",
                    help="BLOCK_T:warps:stages:m items; m x SMs // batch programs a request")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of every variant")
    ap.add_argument("--scores", action="store_true", help="also time each side's scores alone")
    ap.add_argument("--smoke", action="store_true", help="check the kernel under the interpreter, no timing")
    ap.add_argument("--compile", default="", help="architectures (e.g. 90,120): print each config's registers, "
                    "spills and shared memory, compiled here, and exit")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        _cfgs(args.configs, 1, 1)
    except ValueError as exc:
        ap.error(str(exc))
    if args.smoke:
        return smoke()
    if args.compile:
        return compile_stats(_cfgs(args.configs, 1, 1), [int(a) for a in args.compile.split(",")])
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU (or --smoke)", file=sys.stderr)
        return 2
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device {torch.cuda.get_device_name(0)}, triton {triton.__version__}", flush=True)
    gpu_check(_cfgs(args.configs, 1, 1))
    for batch in (int(b) for b in args.batches.split(",")):
        for ctx in (int(c) for c in args.contexts.split(",")):
            if ctx > BLOCK_LANES:
                print(f"context {ctx} > {BLOCK_LANES}: skipped", file=sys.stderr)
                continue
            times = measure(batch, ctx, _cfgs(args.configs, batch, sms), args.iters, args.rounds, args.scores)
            parts = "  ".join(f"{k} {'/'.join(f'{t:.1f}' for t in v)}" for k, v in times.items())
            print(f"B={batch:3d} ctx {ctx:5d} (us): {parts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
