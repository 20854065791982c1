"""The LSE combine of split-K partials: one Triton kernel and its launcher, shared by every split decode kernel
(MMA, Gluon mma_v2, Gluon wgmma).

Each split wrote fp32 partial outputs ``[B, S, H, 512]`` normalized by its own softmax sum, and their log2-domain
LSEs ``[B, S, H]`` (-inf for a split with no valid slot). The combine weights each split by ``2**(lse_s - max)``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .. import _common
from ..pdl import wait_prior_grid


# num_splits: one compile for every split count.
@triton.jit(do_not_specialize=["num_splits"])
def _combine_kernel(
    opart_ptr, lpart_ptr, out_ptr, lse_ptr, num_splits, num_heads, stride_ob, stride_oh, stride_lb,
    BLOCK_S: tl.constexpr, PDL: tl.constexpr = False,
):
    wait_prior_grid(PDL)  # first: the previous kernel's writes (mla_kernels.pdl)
    # Merge the splits of one (request, head): weights 2**(lse_s - max) over the split partials. One program
    # for all 512 columns: splitting them over four programs at one request made the decode 1.2 us slower
    # (docs/measurements/session41_h100.log, call 2).
    pid_b = tl.program_id(0).to(tl.int64)
    pid_h = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, 512)
    smask = offs_s < num_splits
    rows = (pid_b * num_splits + offs_s) * num_heads + pid_h  # [S]
    # Partial rows first: ptxas issues more of their loads before the LSE reduction waits (session 29).
    parts = tl.load(opart_ptr + rows[:, None] * 512 + offs_d[None, :], mask=smask[:, None], other=0.0)  # [S, D]
    lse2 = tl.load(lpart_ptr + rows, mask=smask, other=float("-inf"))
    mx = tl.max(lse2, axis=0)
    mx_safe = tl.where(mx == float("-inf"), 0.0, mx)
    w = tl.exp2(lse2 - mx_safe)  # 0 for empty splits
    total = tl.sum(w, axis=0)
    has = total > 0.0
    res = tl.sum(parts * w[:, None], axis=0) / tl.where(has, total, 1.0)
    tl.store(out_ptr + pid_b * stride_ob + pid_h * stride_oh + offs_d, res.to(out_ptr.dtype.element_ty))
    lse = tl.where(has, (mx_safe + tl.log2(tl.where(has, total, 1.0))) * 0.6931471805599453, float("inf"))
    tl.store(lse_ptr + pid_b * stride_lb + pid_h, lse)


def combine_launch(
    opart: torch.Tensor, lpart: torch.Tensor, out: torch.Tensor, lse: torch.Tensor, splits: int
) -> _common.KernelLaunch:
    """The LSE combine of ``splits`` partials into ``out`` and ``lse``: one program a (request, head)."""
    batch, heads, _ = out.shape
    return _common.KernelLaunch(
        "combine", _combine_kernel, (batch, heads),
        (opart, lpart, out, lse, splits, heads, out.stride(0), out.stride(1), lse.stride(0)),
        {"BLOCK_S": _common.next_pow2(splits)}, num_warps=4,
    )  # fmt: skip
