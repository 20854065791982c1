"""The gather-ceiling probe's kernel (``benchmarks/scripts/gather_ceiling.py``): fetch exactly the bytes
the sparse decode reads for each selected token (the 576-byte data row and the 8 bytes of scales, pages
of 256 tokens) and fold them into one checksum per row, so no load can be dropped; no math beyond that."""

from __future__ import annotations

import triton
import triton.language as tl

from mla_kernels import cache

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
