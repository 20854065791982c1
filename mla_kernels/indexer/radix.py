"""The bf16 path's global radix select: plan and launch (kernels in ``radix_kernels``).

Every request's context is cut into slices of ``SLICE`` tokens, one program each, for every pass: a
long request spreads over the whole GPU, and no pass serializes on one program except the last small
select over the k-th key's bucket. The plan depends only on shapes the host knows (batch, block-table
capacity, the device's SM count), never on ``seq_lens``: no host sync, CUDA-graph capturable.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from .._common import KernelLaunch, interpreting, next_pow2, num_sms
from ..record import KernelRun
from .checks import _Dims
from .radix_kernels import WS_WIDTH, _radix_compact_kernel, _radix_pass_kernel

# Programs per SM the slices aim at (a full-capacity batch); a slice is at least one block. 8 programs of
# 8 warps beat 4 of 4 at every case of the select A/B (H200: 24-27 against 28-29 us at one request, 129
# against 153 us at 64 x 64K; docs/measurements/indexer_select_ab_617c728.log).
PROGRAMS_PER_SM = 8
MIN_SLICE = 256
MAX_BLOCK = 2048  # tokens a program holds in registers per step
FINAL_BLOCK = 1024  # candidates the last program takes per step
WARPS = 8
INTERP_SLICE = 64  # small under the interpreter, so tests cross slice edges


@dataclass(frozen=True)
class RadixPlan:
    slice: int  # tokens per program (a power of two)
    slices: int  # programs per request: the block table's capacity over ``slice``
    block: int  # tokens per step within a slice
    final_block: int
    out_block: int
    warps: int = WARPS

    @property
    def compact_warps(self) -> int:
        # At 8 warps a one-step 256-token slice leaves the compaction one key a thread, and CI's Triton
        # (3.9) then spills 8 B/thread on sm_90; 4 warps there, as before (Triton 3.6 spilled neither).
        return min(self.warps, max(4, self.block // 64))


def plan(
    d: _Dims,
    topk: int,
    device: torch.device,
    slice_: int | None = None,
    warps: int | None = None,
    per_sm: int | None = None,
) -> RadixPlan:
    """Slices of the block table's capacity: enough programs over the whole batch to give every SM
    ``per_sm`` (default ``PROGRAMS_PER_SM``; at full capacity), at least ``MIN_SLICE`` tokens each;
    ``slice_`` overrides. ``warps`` defaults to ``WARPS``."""
    if slice_ is None:
        if interpreting():
            slice_ = INTERP_SLICE
        else:
            per_req = max(1, triton.cdiv(num_sms(device) * (per_sm or PROGRAMS_PER_SM), d.batch))
            slice_ = max(MIN_SLICE, next_pow2(triton.cdiv(d.max_context, per_req)))
    block = min(slice_, 64 if interpreting() else MAX_BLOCK)
    return RadixPlan(slice_, triton.cdiv(d.max_context, slice_), block, 64 if interpreting() else FINAL_BLOCK,
                     min(1024, next_pow2(topk)), warps or WARPS)  # fmt: skip


def state_rows(batch: int, device: torch.device | str, zeroed: bool = True) -> torch.Tensor:
    """The histogram/state rows, int32 ``[batch, WS_WIDTH]`` (zeroed unless ``zeroed`` is False: the scores
    kernel then zeroes them, ``ZERO_WS``). Rows of exactly ``WS_WIDTH`` words, an even number: the 64-bit
    counters in them stay 8-byte aligned."""
    return (torch.zeros if zeroed else torch.empty)((batch, WS_WIDTH), dtype=torch.int32, device=device)


def candidates(d: _Dims, device: torch.device) -> torch.Tensor:
    """The candidate lists, int64 ``[B, capacity]``: order key and KV slot."""
    return torch.empty((d.batch, d.max_context), dtype=torch.int64, device=device)


def workspace(d: _Dims, device: torch.device, zeroed: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``state_rows`` and ``candidates``: what the select's kernels share."""
    return state_rows(d.batch, device, zeroed), candidates(d, device)


def launches(
    logits: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    out: torch.Tensor,
    topk: int,
    d: _Dims,
    p: RadixPlan,
    ws: torch.Tensor,
    cand: torch.Tensor,
    first_pass: int = 0,
) -> list[KernelLaunch]:
    """The byte passes (from ``first_pass``: 1 when the scores kernel ran pass 0) and the compaction."""
    grid = (p.slices, d.batch)
    runs = [
        KernelLaunch(
            f"indexer.radix_pass{k}", _radix_pass_kernel, grid,
            (logits, sl, ws, logits.stride(0), ws.stride(0), topk, d.max_context),
            {"PASS": k, "SLICE": p.slice, "BLOCK": p.block}, num_warps=p.warps,
        )  # fmt: skip
        for k in range(first_pass, 2)
    ]
    runs.append(KernelLaunch(
        "indexer.radix_compact", _radix_compact_kernel, grid,
        (logits, bt, sl, ws, cand, out, logits.stride(0), bt.stride(0), ws.stride(0), cand.stride(0), out.stride(0),
         topk, d.max_context, d.num_pages),
        {"SLICE": p.slice, "BLOCK": p.block, "FBLOCK": p.final_block, "OUT_BLOCK": p.out_block},
        num_warps=p.compact_warps,
    ))  # fmt: skip
    return runs


def radix_select(
    logits: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    out: torch.Tensor,
    topk: int,
    d: _Dims,
    p: RadixPlan,
    ws_cand: tuple[torch.Tensor, torch.Tensor] | None = None,
    first_pass: int = 0,
) -> tuple[KernelRun, ...]:
    """Select each request's top-k slots from ``logits`` into ``out``; returns the runs it launched.
    ``ws_cand``: a ``workspace`` (fresh when None); ``first_pass`` 1 when the scores kernel ran pass 0
    into it."""
    ws, cand = workspace(d, logits.device) if ws_cand is None else ws_cand
    runs = launches(logits, bt, sl, out, topk, d, p, ws, cand, first_pass)
    return tuple(KernelRun.of(launch, launch.run()) for launch in runs)
