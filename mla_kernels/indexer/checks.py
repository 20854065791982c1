"""Argument checks of the indexer entry points (one place for every message naming an argument)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._common import check_device, check_last_dim_contiguous, check_same_device, check_tensor
from .layout import HEAD_DIM, PAGE_SIZE, _check_index_cache

INDEXER_IMPLS = ("reference", "fp32_maxctx", "bf16")


@dataclass(frozen=True)
class _Dims:
    batch: int
    heads: int
    max_pages: int
    num_pages: int

    @property
    def max_context(self) -> int:
        return self.max_pages * PAGE_SIZE


def _check_args(
    q_idx: object,
    weights: object,
    index_cache: object,
    block_table: object,
    seq_lens: object,
    topk: object,
    impl: object,
) -> _Dims:
    if not isinstance(impl, str) or impl not in INDEXER_IMPLS:
        raise ValueError(f"impl must be one of {INDEXER_IMPLS}, got {impl!r}")
    if isinstance(topk, bool) or not isinstance(topk, int) or topk <= 0:
        raise ValueError(f"topk must be a positive int, got {topk!r}")
    q = check_tensor("q_idx", q_idx, dtype=torch.bfloat16, ndim=3)
    w = check_tensor("weights", weights, dtype=torch.float32, ndim=2)
    cache = _check_index_cache("index_cache", index_cache)
    bt = check_tensor("block_table", block_table, dtype=torch.int32, ndim=2)
    sl = check_tensor("seq_lens", seq_lens, dtype=torch.int32, ndim=1)
    batch, heads, dim = q.shape
    if dim != HEAD_DIM:
        raise ValueError(f"q_idx must have shape [B, H, {HEAD_DIM}], got {tuple(q.shape)}")
    if heads == 0 or heads % 16:
        raise ValueError(f"q_idx head count must be a positive multiple of 16, got {heads}")
    if tuple(w.shape) != (batch, heads):
        raise ValueError(f"weights must have shape [B, H] = [{batch}, {heads}], got {tuple(w.shape)}")
    if bt.shape[0] != batch:
        raise ValueError(f"block_table must have B = {batch} rows (from q_idx), got shape {tuple(bt.shape)}")
    if tuple(sl.shape) != (batch,):
        raise ValueError(f"seq_lens must have shape [B] = [{batch}], got {tuple(sl.shape)}")
    check_same_device(q_idx=q, weights=w, index_cache=cache, block_table=bt, seq_lens=sl)
    if impl != "reference":
        check_device("q_idx", q)
    for name, t in (("q_idx", q), ("weights", w), ("block_table", bt)):
        check_last_dim_contiguous(name, t)
    return _Dims(batch=batch, heads=heads, max_pages=bt.shape[1], num_pages=cache.shape[0])


def check_workspace(workspace: object, batch: int, width: int, q_idx: torch.Tensor) -> torch.Tensor:
    """``workspace``: int32 ``[B, width]``, contiguous, on ``q_idx``'s device (``indexer_workspace``)."""
    ws = check_tensor("workspace", workspace, dtype=torch.int32, ndim=2)
    if tuple(ws.shape) != (batch, width):
        raise ValueError(f"workspace must have shape [B, {width}] = [{batch}, {width}] (indexer_workspace), "
                         f"got {tuple(ws.shape)}")  # fmt: skip
    if not ws.is_contiguous():
        raise ValueError("workspace must be contiguous (indexer_workspace)")
    check_same_device(q_idx=q_idx, workspace=ws)
    return ws


def check_max_seq_len(max_seq_len: object) -> None:
    """ValueError naming ``max_seq_len`` unless it is None or a non-negative int."""
    if max_seq_len is None:
        return
    if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int) or max_seq_len < 0:
        raise ValueError(f"max_seq_len must be None or a non-negative int (the longest request's tokens), "
                         f"got {max_seq_len!r}")  # fmt: skip
