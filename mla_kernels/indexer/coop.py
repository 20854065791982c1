"""The one-launch indexer for a few requests: plan and launch of ``token_scores._coop_topk_kernel``.

Scores and the global radix select (``radix``) run in one kernel whose phases are separated by grid
barriers, which needs every program resident at once: ``PER_SM`` programs per SM over the batch (the
plan is None when a batch has more requests than that), and only configs of which that many fit an SM
(``mla_kernels.arch.RESIDENT_BLOCKS``, the keep rule). The plan depends only on shapes and the device,
never on ``seq_lens``: no host sync, CUDA-graph capturable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .._common import KernelLaunch, interpreting, next_pow2, num_sms
from ..arch import RESIDENT_BLOCKS
from .checks import _Dims
from .radix import FINAL_BLOCK

PER_SM = RESIDENT_BLOCKS["indexer.coop"]  # programs per SM: 2 beat 1 at 16K-64K tokens (more loads in flight)
# Logits a program takes per step in the select's phases: the smaller block where the plan's programs still
# hold a request of ONE_BLOCK_TOKENS in one block each (more, smaller blocks: one request 0.1-0.8 us faster at
# 4K-16K, the same at 64K), else the larger (two requests at 64K: a second block per program cost 1.6 us);
# docs/measurements/indexer_sel_block_session27.log.
SEL_BLOCKS = (256, 512)
ONE_BLOCK_TOKENS = 65536
INTERP_PROGRAMS = 3  # per request under the interpreter: tests cross program edges
INTERP_SEL_BLOCK = 64
INTERP_BLOCK_T = 64
PHASES = 4  # scores, byte pass 0, byte pass 1, compaction (one launch each under the interpreter)


@dataclass(frozen=True)
class CoopPlan:
    programs: int  # per request
    sel_block: int
    final_block: int
    out_block: int


def plan(d: _Dims, topk: int, device: torch.device) -> CoopPlan | None:
    """``PER_SM`` programs per SM over the batch; None where the batch has more requests than that."""
    if interpreting():
        return CoopPlan(INTERP_PROGRAMS, INTERP_SEL_BLOCK, 64, min(1024, next_pow2(topk)))
    programs = PER_SM * num_sms(device) // d.batch
    return gpu_plan(programs, topk) if programs >= 1 else None


def gpu_plan(programs: int, topk: int) -> CoopPlan:
    """The GPU's plan at ``programs`` per request."""
    return CoopPlan(programs, select_block(programs), FINAL_BLOCK, min(1024, next_pow2(topk)))


def kept_plan(p: CoopPlan, kept: Callable[[CoopPlan], bool]) -> CoopPlan | None:
    """``p`` at the first select block the architecture keeps the kernel at (``kept``): its own, then the other
    ``SEL_BLOCKS`` from the largest; None where it keeps none (the caller runs the radix select)."""
    blocks = (p.sel_block, *sorted((b for b in SEL_BLOCKS if b != p.sel_block), reverse=True))
    return next((q for q in (replace(p, sel_block=b) for b in blocks) if kept(q)), None)


def select_block(programs: int) -> int:
    """The smallest of ``SEL_BLOCKS`` with which ``programs`` hold ``ONE_BLOCK_TOKENS`` in one block each, else
    the largest (the block the compile matrix builds)."""
    return next((b for b in SEL_BLOCKS if programs * b >= ONE_BLOCK_TOKENS), SEL_BLOCKS[-1])


def block_label(tile_label: str, block: int) -> str:
    """A coop tile's compile-matrix label at a select block: the largest block's is the tile's own."""
    return tile_label if block == SEL_BLOCKS[-1] else f"{tile_label} sel {block}"


def args(*tensors: torch.Tensor, d: _Dims, topk: int) -> tuple[object, ...]:
    """The kernel's runtime arguments from its tensors (q, w, cache, bt, sl, logits, ws, cand, out)."""
    q, w, cache, bt, sl, logits, ws, cand, out = tensors
    return (
        q, w, cache, bt, sl, logits, ws, cand, out,
        q.stride(0), q.stride(1), w.stride(0), cache.stride(0), bt.stride(0), logits.stride(0), ws.stride(0),
        cand.stride(0), out.stride(0), d.heads, d.num_pages, d.max_context, topk,
    )  # fmt: skip


def constexprs(d: _Dims, p: CoopPlan) -> dict[str, object]:
    """The constexprs every launch shares (the tile config and ``PHASE`` come on top)."""
    return {"BLOCK_H": max(16, next_pow2(d.heads)), "FP32_MATH": interpreting(), "SEL_BLOCK": p.sel_block,
            "FBLOCK": p.final_block, "OUT_BLOCK": p.out_block,
            "L2_PREFETCH": not interpreting()}  # fmt: skip


def phase_launches(kernel: object, run_args: tuple[object, ...], d: _Dims, p: CoopPlan) -> list[KernelLaunch]:
    """The interpreter's launches of ``kernel`` (``token_scores._coop_topk_kernel``): each phase on its own
    (its programs run one after another, so a grid barrier inside one launch would never open)."""
    common = {**constexprs(d, p), "BLOCK_T": INTERP_BLOCK_T}
    return [
        KernelLaunch("indexer.coop", kernel, (p.programs, d.batch), run_args, {**common, "PHASE": k})
        for k in range(PHASES)
    ]
