"""Synthetic indexer inputs and the output check the tests and benchmarks share."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton

from .layout import HEAD_DIM, INDEX_PAGE_BYTES, PAGE_SIZE, _check_page_stride, _quantize_pages
from .reference import _slots_of_positions


@dataclass
class IndexerInputs:
    q_idx: torch.Tensor
    weights: torch.Tensor
    index_cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    topk: int

    def args(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
        return (self.q_idx, self.weights, self.index_cache, self.block_table, self.seq_lens, self.topk)


def make_indexer_inputs(
    batch: int,
    context: int | list[int],
    *,
    max_context: int = 131072,
    num_heads: int = 64,
    topk: int = 512,
    device: torch.device | str = "cpu",
    seed: int = 0,
    page_stride: int | None = None,
) -> IndexerInputs:
    """Random requests over a quantized cache: each request owns its pages, shuffled across the cache.

    ``context`` is one length for all requests or one per request; block-table entries past a
    request's pages are ``-1``. Keys are quantized from normal values (random FP8 bytes could hold NaN).
    """
    dev = torch.device(device)
    lens = [context] * batch if isinstance(context, int) else list(context)
    if len(lens) != batch:
        raise ValueError(f"context must be an int or {batch} lengths, got {len(lens)}")
    if max_context <= 0 or max_context % PAGE_SIZE:
        raise ValueError(f"max_context must be a positive multiple of {PAGE_SIZE}, got {max_context}")
    if any(not 0 <= n <= max_context for n in lens):
        raise ValueError(f"context lengths must lie in [0, max_context={max_context}], got {lens}")
    stride = INDEX_PAGE_BYTES if page_stride is None else page_stride
    _check_page_stride(stride)
    g = torch.Generator(device=dev).manual_seed(seed)
    max_pages = max_context // PAGE_SIZE
    need = [triton.cdiv(n, PAGE_SIZE) for n in lens]
    num_pages = max(1, sum(need))
    perm = torch.randperm(num_pages, generator=g, device=dev).to(torch.int32)
    block_table = torch.full((batch, max_pages), -1, dtype=torch.int32, device=dev)
    at = 0
    for b, m in enumerate(need):
        block_table[b, :m] = perm[at : at + m]
        at += m
    cache = torch.empty((num_pages, stride), dtype=torch.uint8, device=dev)
    cache[:, INDEX_PAGE_BYTES:] = 0
    chunk = 512  # pages quantized at a time: bounds the fp32 temporaries at production sizes
    for p0 in range(0, num_pages, chunk):
        p1 = min(num_pages, p0 + chunk)
        keys = torch.randn(((p1 - p0) * PAGE_SIZE, HEAD_DIM), generator=g, device=dev)
        _quantize_pages(keys, cache[p0:p1])
    q = torch.randn((batch, num_heads, HEAD_DIM), generator=g, device=dev).to(torch.bfloat16)
    weights = torch.randn((batch, num_heads), generator=g, device=dev) * num_heads**-0.5
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=dev)
    return IndexerInputs(q, weights, cache, block_table, seq_lens, topk)


def check_indexer_output(
    indices: torch.Tensor,
    ref_logits: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> dict[str, float]:
    """Check a selection against reference logits (``indexer_logits_reference``); return its recall.

    Each row must hold ``min(seq_lens[b], topk)`` distinct slots of the request's own tokens, and
    ``-1`` elsewhere; every selected token's reference logit must be at least the k-th best minus
    ``atol + rtol * max|logit|`` of its row (selections may differ only at near-ties). Raises
    ``AssertionError`` naming the first bad row. Returns ``recall_min`` and ``recall_mean`` (fraction
    of the reference's top-k set that was selected; rows with no token count as 1).
    """
    batch, ctx = ref_logits.shape
    if tuple(indices.shape) != (batch, topk) or indices.dtype != torch.int32:
        raise AssertionError(
            f"indices must be int32 [{batch}, {topk}], got {indices.dtype} {tuple(indices.shape)}"
        )
    dev = ref_logits.device
    idx = indices.to(dev, torch.int64)
    lens = seq_lens.to(dev, torch.int64).clamp(0, ctx)
    n_valid = lens.clamp_max(topk)

    def fail(mask: torch.Tensor, what: str) -> None:
        if bool(mask.any()):
            b = int(mask.nonzero()[0, 0])
            raise AssertionError(f"row {b} (seq_len {int(lens[b])}): {what}")

    fail((idx < -1).any(1), "slot below -1")
    fail((idx >= 0).sum(1) != n_valid, f"expected min(seq_len, {topk}) valid slots")
    # Slot -> token position through the sorted slots of each request's own tokens.
    pos = torch.arange(ctx, device=dev)
    own = _slots_of_positions(block_table.to(dev, torch.int64), pos.expand(batch, ctx).contiguous())
    sentinel = torch.iinfo(torch.int64).max
    own = torch.where(pos[None, :] < lens[:, None], own, torch.full_like(own, sentinel))
    own_sorted, order = torch.sort(own, dim=1)
    at = torch.searchsorted(own_sorted, idx.clamp_min(0)).clamp_max(ctx - 1)
    found = torch.gather(own_sorted, 1, at) == idx
    fail(((idx >= 0) & ~found).any(1), "slot outside the request's tokens")
    sel_sorted, _ = torch.sort(idx, dim=1)
    fail(((sel_sorted[:, 1:] == sel_sorted[:, :-1]) & (sel_sorted[:, 1:] >= 0)).any(1), "duplicate slot")
    tok = torch.gather(order, 1, at)
    sel_logit = torch.gather(ref_logits, 1, tok)
    k = min(topk, ctx)
    ref_vals, ref_pos = torch.topk(ref_logits, k, dim=1)
    kth = torch.gather(ref_vals, 1, (n_valid.clamp_min(1) - 1).clamp_max(k - 1)[:, None])[:, 0]
    finite = torch.where(torch.isfinite(ref_logits), ref_logits.abs(), torch.zeros_like(ref_logits))
    tol = atol + rtol * finite.amax(1)
    fail(
        ((idx >= 0) & (sel_logit < (kth - tol)[:, None])).any(1), "selected a token below the k-th best logit"
    )
    # Recall: reference top-k slots present in the selection.
    ref_slots = _slots_of_positions(block_table.to(dev, torch.int64), ref_pos)
    ref_ok = torch.arange(k, device=dev)[None, :] < n_valid[:, None]
    hit = torch.searchsorted(sel_sorted, ref_slots).clamp_max(topk - 1)
    hit = (torch.gather(sel_sorted, 1, hit) == ref_slots) & ref_ok
    recall = torch.where(
        n_valid > 0, hit.sum(1) / n_valid.clamp_min(1), torch.ones_like(n_valid, dtype=torch.float)
    )
    return {
        "recall_min": float(recall.min()) if batch else 1.0,
        "recall_mean": float(recall.mean()) if batch else 1.0,
    }

