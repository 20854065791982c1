"""The gather-ceiling probe's kernel (``benchmarks/scripts/gather_ceiling.py``): fetch exactly the bytes
the sparse decode reads for each selected token (the 576-byte data row and the 8 bytes of scales, pages
of 256 tokens) and fold them into one checksum per row, so no load can be dropped; no math beyond that."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from mla_kernels import cache
from mla_kernels.cache import check_kv_cache

# The cache layout (``mla_kernels.cache``) the probe reads, as the decode kernels read it.
PAGE_TOKENS = tl.constexpr(cache.TOKENS_PER_PAGE)
DATA_BYTES = tl.constexpr(cache.DATA_BYTES)  # 576: read as 512 + 64 bytes
SCALE_BYTES = tl.constexpr(cache.SCALE_BYTES)
SCALE_AREA = tl.constexpr(cache.SCALE_OFFSET)


@triton.jit
def _gather_kernel(cache_ptr, idx_ptr, out_ptr, n_idx, stride_page,
                   ROWS: tl.constexpr, GROUPS: tl.constexpr, NUM_STAGES: tl.constexpr):  # fmt: skip
    tl.static_assert(DATA_BYTES == 512 + 64, "gather probe: a data row is read as 512 + 64 bytes")
    pid = tl.program_id(0)
    r = tl.arange(0, ROWS)
    c512 = tl.arange(0, 512)
    c64 = tl.arange(0, 64)
    acc = tl.zeros([ROWS], dtype=tl.int32)
    for g in tl.range(0, GROUPS, num_stages=NUM_STAGES):
        i = (pid * GROUPS + g) * ROWS + r
        slot = tl.load(idx_ptr + i, mask=i < n_idx, other=-1)
        ok = slot >= 0  # an invalid slot (-1) is not read, as in the decode
        slot = tl.where(ok, slot, 0)
        page = (slot // PAGE_TOKENS).to(tl.int64) * stride_page
        off = (slot % PAGE_TOKENS).to(tl.int64)
        row = tl.multiple_of(page + off * DATA_BYTES, 16)
        head = tl.load(cache_ptr + row[:, None] + c512[None, :], mask=ok[:, None], other=0)  # bytes 0-511
        tail = tl.load(cache_ptr + row[:, None] + 512 + c64[None, :], mask=ok[:, None], other=0)  # 512-575
        scale = tl.load(cache_ptr + page + SCALE_AREA + off * SCALE_BYTES, mask=ok, other=0)
        acc += tl.sum(head.to(tl.int32), axis=1) + tl.sum(tail.to(tl.int32), axis=1) + scale.to(tl.int32)
    tl.store(out_ptr + pid * ROWS + r, acc)


def gather_rows(
    kv_cache: torch.Tensor,
    slots: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    rows: int = 4,
    groups: int = 1,
    num_stages: int = 1,
    num_warps: int = 4,
) -> torch.Tensor:
    """Read the decode's bytes of every slot in ``slots`` (``[n]`` int32, -1 invalid) from ``kv_cache``; returns
    one checksum per (program, row) lane, ``[programs * rows]`` int32 (into ``out`` when given, which must be
    that size). A program takes ``groups`` rounds of ``rows`` slots, ``num_stages`` rounds in flight."""
    check_kv_cache(kv_cache)
    if slots.dim() != 1 or slots.dtype != torch.int32 or slots.device != kv_cache.device:
        raise ValueError(f"slots must be a 1-D int32 tensor on {kv_cache.device}; got {tuple(slots.shape)} "
                         f"{slots.dtype} on {slots.device}")  # fmt: skip
    for name, value in (("rows", rows), ("groups", groups), ("num_stages", num_stages), ("num_warps", num_warps)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1; got {value}")
    n = slots.numel()
    programs = max(1, triton.cdiv(n, rows * groups))
    if out is None:
        out = torch.empty(programs * rows, dtype=torch.int32, device=kv_cache.device)
    elif out.shape != (programs * rows,) or out.dtype != torch.int32:
        raise ValueError(f"out must be [{programs * rows}] int32; got {tuple(out.shape)} {out.dtype}")
    _gather_kernel[(programs,)](kv_cache, slots, out, n, kv_cache.stride(0),  # [programs * rows]
                                ROWS=rows, GROUPS=groups, NUM_STAGES=num_stages, num_warps=num_warps)  # fmt: skip
    return out
