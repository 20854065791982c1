"""The gather-ceiling probe's kernel (``benchmarks/scripts/gather_ceiling.py``): fetch exactly the bytes
the sparse decode reads for each selected token (the 576-byte data row and the 8 bytes of scales, pages
of 256 tokens) and fold them into one checksum per row, so no load can be dropped; no math beyond that."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _gather_kernel(cache_ptr, idx_ptr, out_ptr, n_idx, stride_page,
                   ROWS: tl.constexpr, GROUPS: tl.constexpr, NUM_STAGES: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    r = tl.arange(0, ROWS)
    c512 = tl.arange(0, 512)
    c64 = tl.arange(0, 64)
    acc = tl.zeros([ROWS], dtype=tl.int32)
    for g in tl.range(0, GROUPS, num_stages=NUM_STAGES):
        i = (pid * GROUPS + g) * ROWS + r
        ok = i < n_idx
        slot = tl.load(idx_ptr + i, mask=ok, other=0)
        page = (slot // 256).to(tl.int64) * stride_page
        off = (slot % 256).to(tl.int64)
        row = tl.multiple_of(page + off * 576, 16)
        head = tl.load(cache_ptr + row[:, None] + c512[None, :], mask=ok[:, None], other=0)  # bytes 0-511
        tail = tl.load(cache_ptr + row[:, None] + 512 + c64[None, :], mask=ok[:, None], other=0)  # 512-575
        scale = tl.load(cache_ptr + page + 256 * 576 + off * 8, mask=ok, other=0)
        acc += tl.sum(head.to(tl.int32), axis=1) + tl.sum(tail.to(tl.int32), axis=1) + scale.to(tl.int32)
    tl.store(out_ptr + pid * ROWS + r, acc)
