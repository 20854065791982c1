"""The bf16 path's global radix select: plan and launch (kernels in ``radix_kernels``).

Every request gets the same number of programs for every pass, which stride over its real length a
block at a time: a long request spreads over the whole GPU, a short one in a long block table over as
many programs as it has blocks, and no pass serializes on one program except the last small select over
the k-th key's bucket. The plan depends only on shapes the host knows (batch, block-table capacity, the
device's SM count), never on ``seq_lens``: no host sync, CUDA-graph capturable.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from .._common import KernelLaunch, interpreting, next_pow2, num_sms
from ..record import KernelRun
from .checks import _Dims
from .radix_kernels import WS_WIDTH, _radix_compact_kernel, _radix_pass_kernel

# Programs per SM over a full batch. 8 programs of 8 warps beat 4 of 4 at every case of the select A/B (H200:
# 24-27 against 28-29 us at one request, 129 against 153 us at 64 x 64K; indexer_select_ab_617c728.log).
PROGRAMS_PER_SM = 8
# Tokens a program holds in registers per step: 512 for up to ``FEW_REQUESTS`` requests (about one program an
# SM per request: more programs on a short request), else 1024. Select alone, cold L2, H200, 4K / 16K / 64K
# tokens (docs/measurements/radix_strided_session19.log): 8 requests 18.7 / 20.4 / 28.5 us with 512 against
# 18.5 / 23.7 / 28.5 us with 1024; 16 requests 20.5 / 24.6 / 41.3 against 21.6 / 24.7 / 37.2 us; 64 requests
# 24.5 / 43.5 / 123.4 against 25.4 / 38.2 / 101.7 us.
BLOCK = 1024
FEW_BLOCK = 512
FEW_REQUESTS = 8
FINAL_BLOCK = 1024  # candidates the last program takes per step
WARPS = 8
INTERP_BLOCK = 64  # small under the interpreter, so tests cross block and program edges
INTERP_PROGRAMS = 3


@dataclass(frozen=True)
class RadixPlan:
    programs: int  # per request, striding over its real length
    block: int  # tokens per step (a power of two)
    final_block: int
    out_block: int
    warps: int = WARPS

    @property
    def compact_warps(self) -> int:
        # At 8 warps a 256-token block leaves the compaction one key a thread, and CI's Triton (3.9) then
        # spills 8 B/thread on sm_90; 4 warps there, as before (Triton 3.6 spilled neither).
        return min(self.warps, max(4, self.block // 64))


def plan(
    d: _Dims,
    topk: int,
    device: torch.device,
    block: int | None = None,
    warps: int | None = None,
    per_sm: int | None = None,
) -> RadixPlan:
    """``per_sm`` programs per SM over the batch (default ``PROGRAMS_PER_SM``; per request under the
    interpreter, default ``INTERP_PROGRAMS``), at most one per block of the block table's capacity;
    ``block`` (a power of two, default ``BLOCK``, ``FEW_BLOCK`` for a few requests) and ``warps`` (default
    ``WARPS``) override."""
    if block is None:
        block = INTERP_BLOCK if interpreting() else FEW_BLOCK if d.batch <= FEW_REQUESTS else BLOCK
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two of at least 16, got {block}")
    if interpreting():  # one notional SM: ``per_sm`` programs per request
        wanted = per_sm or INTERP_PROGRAMS
    else:
        wanted = triton.cdiv(num_sms(device) * (per_sm or PROGRAMS_PER_SM), d.batch)
    programs = max(1, min(wanted, triton.cdiv(d.max_context, block)))
    return RadixPlan(programs, block, 64 if interpreting() else FINAL_BLOCK, min(1024, next_pow2(topk)), warps or WARPS)


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
    grid = (p.programs, d.batch)
    runs = [
        KernelLaunch(
            f"indexer.radix_pass{k}", _radix_pass_kernel, grid,
            (logits, sl, ws, logits.stride(0), ws.stride(0), topk, d.max_context),
            {"PASS": k, "BLOCK": p.block}, num_warps=p.warps,
        )  # fmt: skip
        for k in range(first_pass, 2)
    ]
    runs.append(KernelLaunch(
        "indexer.radix_compact", _radix_compact_kernel, grid,
        (logits, bt, sl, ws, cand, out, logits.stride(0), bt.stride(0), ws.stride(0), cand.stride(0), out.stride(0),
         topk, d.max_context, d.num_pages),
        {"BLOCK": p.block, "FBLOCK": p.final_block, "OUT_BLOCK": p.out_block},
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
