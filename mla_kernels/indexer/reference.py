"""Torch reference of the indexer: fp64 logits (immune to TF32 settings), then ``torch.topk``."""

from __future__ import annotations

import torch
import triton

from .checks import _check_args
from .layout import HEAD_DIM, PAGE_SIZE, _dequantize_pages

_REF_CHUNK_BYTES = 1 << 30  # bound on the fp64 temporaries of one chunk of requests


def indexer_logits_reference(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
) -> torch.Tensor:
    """fp32 ``[B, max_pages * 256]`` logits by token position, ``-inf`` at ``t >= seq_lens[b]``.

    Computed in fp64 (immune to TF32 settings), so it can judge near-ties of the kernels. Syncs with
    the host; raises ``ValueError`` for ``seq_lens`` outside ``[0, capacity]`` or a block-table entry of
    a used page outside ``[0, num_pages)``.
    """
    d = _check_args(q_idx, weights, index_cache, block_table, seq_lens, 1, "reference")
    dev = q_idx.device
    out = torch.full((d.batch, d.max_context), float("-inf"), dtype=torch.float32, device=dev)
    lens = seq_lens.tolist()
    bad = [(b, n) for b, n in enumerate(lens) if not 0 <= n <= d.max_context]
    if bad:
        b, n = bad[0]
        raise ValueError(f"seq_lens[{b}] = {n} is outside [0, {d.max_context}] (block_table capacity)")
    longest = max(lens, default=0)
    if longest == 0:
        return out
    npg = triton.cdiv(longest, PAGE_SIZE)
    span = npg * PAGE_SIZE
    lens_t = seq_lens.to(torch.int64)
    used = torch.arange(npg, device=dev)[None, :] * PAGE_SIZE < lens_t[:, None]  # [B, npg]
    pages = block_table[:, :npg].to(torch.int64)
    if bool(((pages < 0) | (pages >= d.num_pages))[used].any()):
        b, p = (((pages < 0) | (pages >= d.num_pages)) & used).nonzero()[0].tolist()
        raise ValueError(
            f"block_table[{b}, {p}] = {int(pages[b, p])} is outside [0, {d.num_pages}) for a used page"
        )
    pages = torch.where(used, pages, torch.zeros_like(pages))
    per_req = span * (HEAD_DIM + d.heads) * 8
    chunk = max(1, _REF_CHUNK_BYTES // per_req)
    t = torch.arange(span, device=dev)
    for b0 in range(0, d.batch, chunk):
        b1 = min(d.batch, b0 + chunk)
        k = _dequantize_pages(index_cache, pages[b0:b1].reshape(-1), torch.float64).reshape(
            b1 - b0, span, HEAD_DIM
        )
        s = torch.einsum("bhd,btd->bht", q_idx[b0:b1].to(torch.float64), k).clamp_min_(0)
        logit = torch.einsum("bh,bht->bt", weights[b0:b1].to(torch.float64), s).to(torch.float32)
        logit = torch.where(t[None, :] < lens_t[b0:b1, None], logit, float("-inf"))
        out[b0:b1, :span] = logit
    return out


def _slots_of_positions(block_table: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Physical slot of token position ``pos[b, j]`` of request ``b`` (int32)."""
    page = torch.gather(block_table, 1, torch.div(pos, PAGE_SIZE, rounding_mode="floor"))
    return page * PAGE_SIZE + pos % PAGE_SIZE


def _topk_slots(logits: torch.Tensor, block_table: torch.Tensor, topk: int) -> torch.Tensor:
    """Top-k over ``[B, C]`` logits (``-inf`` = invalid) to int32 slots, ``-1`` padded. Capturable."""
    batch, ctx = logits.shape
    k = min(topk, ctx)
    vals, pos = torch.topk(logits, k, dim=1)
    slots = _slots_of_positions(block_table, pos)
    slots = torch.where(torch.isneginf(vals), torch.full_like(slots, -1), slots).to(torch.int32)
    if k < topk:
        slots = torch.cat([slots, slots.new_full((batch, topk - k), -1)], dim=1)
    return slots.contiguous()



def indexer_reference(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
) -> torch.Tensor:
    """``indexer_topk(..., impl="reference")``: torch logits, then ``torch.topk``."""
    _check_args(q_idx, weights, index_cache, block_table, seq_lens, topk, "reference")
    logits = indexer_logits_reference(q_idx, weights, index_cache, block_table, seq_lens)
    return _topk_slots(logits, block_table, topk)
