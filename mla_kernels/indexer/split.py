"""The bf16 path's split top-k select: plan and launch (kernels in ``split_kernels``).

A request's logits are cut into chunks of ``CHUNK`` tokens, each selected by its own program (one long
request fills the GPU instead of one SM); a request longer than one chunk is finished by a merge over
its chunks' candidates. The plan depends only on what the host knows (block-table capacity, top-k, the
longest request's length where the caller gives it), never on ``seq_lens``: no host sync, CUDA-graph
capturable. Where every request fits one chunk, one program a request selects it whole. Where the
candidates of a full-capacity request would not fit one program's registers, ``plan`` returns None and
the launcher keeps the single-program radix select.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from .._common import KernelLaunch, interpreting, next_pow2
from ..record import KernelRun
from .checks import _Dims
from .split_kernels import _chunk_topk_kernel, _merge_topk_kernel, _request_topk_kernel

# Tokens a chunk program holds in registers; the interpreter's is small so tests cross chunk edges.
GPU_CHUNK = 4096
INTERP_CHUNK = 256
# Candidates one merge program holds in registers: 16 warps, 16 keys a thread (16384 spills on sm_90 and
# sm_120). A request of at most half a chunk is selected on half the lanes. 16 warps: faster than 8 and 4
# on the H200 (indexer_breakdown).
MAX_MERGE_BLOCK = 8192
CHUNK_WARPS = 16
MERGE_WARPS = 16
# Where the caller knows its longest request (``max_seq_len``) and it has at most ONE_MAX tokens, one
# program a request holds it whole (``_request_topk_kernel``): no merge launch, no grid over the block
# table's capacity. Measured on the H200 at 17-128 requests (docs/measurements/indexer_one_program_session33.log),
# the select alone: 11.7-12.8 / 15.5-16.7 us at 2K / 4K tokens at 8 warps (16: 12.7-13.9 / 16.6-17.9) against
# the capacity plan's 18.1-31.6 / 18.6-31.9 (8,192-token chunks and a merge), 25.1-26.8 us at 6K-8K on 8,192
# lanes at 16 warps (8: 47 us). In the whole indexer 16 warps won at 4K then (64 requests: 35.6-35.7 against
# 41.3-41.4 us; at 17 and 4K they lost 1.2-1.8 us), when the select still launched with PDL at every batch. 16,384
# lanes spill on sm_90 and sm_120.
ONE_MAX = 8192
# Since the select launches in stream order from IN_ORDER_BATCH requests, 8 warps win up to ONE_SMALL_BLOCK lanes
# (80 registers a thread at 4,096 lanes on sm_90, triton 3.9's compile matrix). H100, alternating with 16 warps
# (docs/measurements/session49_h100.log, calls C and E): the indexer 0.5-1.5 us faster at 17-128 requests of 1K-4K
# (64 x 4K 31.5 against 32.2 us, 128 x 4K 49.0-49.4 against 50.3-50.5, 32 x 2K 18.1-18.3 against 19.1-19.2; 17 x 2K
# 16.5 / 17.1 against 17.0 / 16.9) and 0.4-1.1 us at 1-3 requests of 1K-3K where the rule runs it; the step 0.5-2.0
# us faster at 1-32 requests of 2K and 17-128 of 4K (64 x 4K 66.8 against 68.5, 32 x 4K 51.3 against 53.3). 8,192
# lanes keep 16 warps (8: 161 registers, and 47 us above).
ONE_SMALL_BLOCK = 4096
ONE_SMALL_WARPS = 8

# The one-program kernel's block for a request past the hint (a wrong hint costs time, never slots).
LONG_BLOCK = 1024

# From this many requests the one-chunk select (one program a request) launches in stream order, without PDL:
# placed early beside the scores kernel's programs it made the indexer slower. H100, indexer_perf --select split,
# PDL on / the select's off (docs/measurements/session45_h100.log, two rounds): 32 x 4K 31.5-31.8 / 26.7, 64 x 2K
# 26.2 / 23.0-23.1, 64 x 4K 38.8-39.2 / 33.0-33.3, 128 x 4K 53.6 / 47.9-48.0 us; the step at 64 x 4K 73.3-74.0 /
# 68.4-69.3 us. PDL wins 0.1-0.6 us at 17 requests and 0.6-1.0 at 32 x 2K. The scores' PDL off measured the same.
# The chunk + merge plan keeps PDL: in stream order it took the same or 1-7 us more at 32-128 x 16K-32K.
# Why, by the registers (session 48, docs/measurements/session48_h100.log, H100): a program of up to 4,096 lanes takes
# 49 registers at 16 warps (sm_90 in triton 3.9's compile matrix), so two fit an SM, and placed early they can fill the
# first SMs the scores kernel frees two at a time, where in stream order they spread one an SM (inferred from what
# follows, not observed SM by SM). At 32 warps (one an SM) PDL cost nothing (call C: 64 x 4K 36.9 against 37.2 us) but
# the select itself lost more (37.2 against 32.1-32.6 at 16 warps in stream order). A block of 8,192 lanes takes 98
# registers, one program an SM, so blocks over IN_ORDER_MAX_BLOCK keep PDL. Against stream order (calls D-E, five rounds
# at 64 / 96 / 128 requests of 6K and 8K) the indexer took the same or less in 25 of 30 pairs (64 x 8K 53.2-53.8 against
# 53.3-54.1 us, 128 x 6K 67.0-68.0 against 68.2-71.1) and 0.9-2.3 us more in five (96 x 6K and 96-128 x 8K, four of them
# in call D); the decode step 0-2.6 us less in each of the 20 pairs at 6K and 64 x 8K, and from 2.4 us more to 2.5 less
# at 96-128 x 8K.
IN_ORDER_BATCH = 32
IN_ORDER_MAX_BLOCK = 4096
# And at IN_ORDER_FEW requests (inclusive), for the decode step's sake. H100, two rounds each: with the select's PDL
# the step at 8 / 10 x 4K took 33.3-33.4 / 35.9-36.2 us against 30.3-30.5 / 33.5-33.6 in stream order, though the
# indexer alone was 0.1-0.7 us faster with PDL (docs/measurements/session52_h100.log, call B). Why is not known; not
# the decode's programs placed beside the select's: a select that waits but does not signal lost as much (8-10 x 4K
# 33.2-35.8 against 30.3-33.6 us; session53_h100.log, call E). Stream order costs up to 0.8 us at 7-9 x 2K-3K (session
# 52, call F), and at 6, 7 and 12 requests PDL made the faster step (6 / 12 x 4K 28.1-28.2 / 35.4-35.6 against 28.4 /
# 35.7-35.8, session 52's call B; 7 x 2K-4K in 11 of 12 pairs of session 53's calls E and C, 7 x 4K 29.7-29.9 against
# 30.2).
IN_ORDER_FEW = (8, 10)


def one_chunk_pdl(batch: int, block: int) -> bool:
    """Whether a one-chunk select of ``batch`` requests on ``block`` lanes may launch with PDL."""
    in_order = batch >= IN_ORDER_BATCH or IN_ORDER_FEW[0] <= batch <= IN_ORDER_FEW[1]
    return not in_order or block > IN_ORDER_MAX_BLOCK


@dataclass(frozen=True)
class SplitPlan:
    chunk: int  # tokens per chunk program (a power of two)
    chunks: int  # chunk programs per request: the block table's capacity over ``chunk``
    merge_block: int  # candidate lanes of the merge program; 0 when no request can span two chunks
    out_block: int
    chunk_warps: int = CHUNK_WARPS
    merge_warps: int = MERGE_WARPS
    radix: bool = False  # thresholds by byte histograms (4 rounds) instead of two-bit counts (up to 16)
    pdl: bool = True  # may launch with PDL (where the device takes it); False: in stream order


def plan(
    d: _Dims,
    topk: int,
    chunk: int | None = None,
    merge_cap: int = MAX_MERGE_BLOCK,
    radix: bool = False,
    longest: int | None = None,
) -> SplitPlan | None:
    """The split for these shapes, or None where it does not apply (top-k above a chunk, or more than
    twice ``merge_cap`` candidates for a full-capacity request). ``chunk`` overrides the default (a
    power of two): 4096 tokens on the GPU, grown until a full-capacity request's candidates fit one merge
    block where they can (past it, up to twice, the merge reduces four pieces of candidates first).
    ``radix``: the programs find thresholds by byte histograms (``SplitPlan.radix``). ``longest``: the
    longest request's tokens where the caller knows them; up to ``ONE_MAX``, one program a request (of
    ``ONE_SMALL_WARPS`` warps up to ``ONE_SMALL_BLOCK`` lanes). From ``IN_ORDER_BATCH`` requests, and at
    ``IN_ORDER_FEW``, a one-chunk select of up to ``IN_ORDER_MAX_BLOCK`` lanes launches without PDL."""
    out_block = min(1024, next_pow2(topk))

    def one_chunk(tokens: int) -> SplitPlan:  # every request of up to ``tokens`` in one program
        block = max(16, next_pow2(tokens))
        warps = ONE_SMALL_WARPS if block <= ONE_SMALL_BLOCK else CHUNK_WARPS
        return SplitPlan(block, 1, 0, out_block, warps, radix=radix, pdl=one_chunk_pdl(d.batch, block))

    if chunk is None and longest is not None and longest <= ONE_MAX:
        return one_chunk(longest)
    if chunk is None:
        chunk = INTERP_CHUNK if interpreting() else GPU_CHUNK
        while triton.cdiv(d.max_context, chunk) * topk > merge_cap and chunk < merge_cap:
            chunk *= 2
    if d.max_context <= chunk:  # every request is one chunk: no merge, any top-k
        return one_chunk(d.max_context)
    chunks = triton.cdiv(d.max_context, chunk)
    lanes = chunks * topk
    merge_block = max(64, min(next_pow2(lanes), merge_cap))
    if topk > chunk or lanes > 2 * merge_block or (lanes > merge_block and 16 * topk > merge_block):
        return None
    return SplitPlan(chunk, chunks, merge_block, out_block, radix=radix)


def launches(
    logits: torch.Tensor, bt: torch.Tensor, sl: torch.Tensor, out: torch.Tensor, topk: int, d: _Dims, p: SplitPlan
) -> list[KernelLaunch]:
    """The one-program kernel's launch where the plan holds every request in one chunk, else the chunk
    launch and the merge launch (in order)."""
    common = (topk, d.max_context, d.num_pages)
    if p.chunks == 1:
        return [KernelLaunch(
            "indexer.request_topk", _request_topk_kernel, (d.batch,),
            (logits, bt, sl, out, logits.stride(0), bt.stride(0), out.stride(0), *common),
            {"BLOCK": p.chunk, "OUT_BLOCK": p.out_block, "RADIX": p.radix, "LONG_BLOCK": LONG_BLOCK},
            num_warps=p.chunk_warps, in_order=not p.pdl,
        )]  # fmt: skip
    width = p.chunks * topk
    ckey = torch.empty((d.batch, width), dtype=torch.int32, device=logits.device)
    cpos = torch.empty((d.batch, width), dtype=torch.int32, device=logits.device)
    stage1 = KernelLaunch(
        "indexer.chunk_topk", _chunk_topk_kernel, (p.chunks, d.batch),
        (logits, bt, sl, ckey, cpos, out, logits.stride(0), bt.stride(0), ckey.stride(0), out.stride(0), *common),
        {"CHUNK": p.chunk, "OUT_BLOCK": p.out_block, "RADIX": p.radix}, num_warps=p.chunk_warps, in_order=not p.pdl,
    )  # fmt: skip
    merge = KernelLaunch(
        "indexer.merge_topk", _merge_topk_kernel, (d.batch,),
        (ckey, cpos, bt, sl, out, ckey.stride(0), bt.stride(0), out.stride(0), *common),
        {"CHUNK": p.chunk, "MERGE_BLOCK": p.merge_block, "OUT_BLOCK": p.out_block, "RADIX": p.radix},
        num_warps=p.merge_warps, in_order=not p.pdl,
    )  # fmt: skip
    return [stage1, merge]


def split_select(
    logits: torch.Tensor, bt: torch.Tensor, sl: torch.Tensor, out: torch.Tensor, topk: int, d: _Dims, p: SplitPlan
) -> tuple[KernelRun, ...]:
    """Select each request's top-k slots from ``logits`` into ``out``; returns the runs it launched."""
    return tuple(KernelRun.of(launch, launch.run()) for launch in launches(logits, bt, sl, out, topk, d, p))
