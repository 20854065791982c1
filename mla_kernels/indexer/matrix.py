"""The indexer's compile matrix: every kernel x config as it launches at production shapes, on meta tensors,
for ``mla_kernels.compile_report`` (which compiles each for every architecture and applies the keep rule)."""

from __future__ import annotations

from dataclasses import replace

import torch

from .._common import KernelLaunch, next_pow2
from . import coop
from .checks import _Dims
from .kernels import _fp32_maxctx_scores_kernel, _radix_select_kernel
from .launch import _FP32_BLOCK_T, _FP32_WARPS, _fp32_args, _score_args, _select_args, config_spec
from .layout import HEAD_DIM
from .radix import BLOCK as RADIX_BLOCK
from .radix import FEW_BLOCK as RADIX_FEW_BLOCK
from .radix import launches as radix_launches
from .radix import plan as radix_plan
from .radix import workspace as radix_workspace
from .select_rule import LONG_SELECT
from .split import launches as split_launches
from .split import plan as split_plan
from .tiles import COOP_TILES, SCORES_TILES, SELECT_CONFIGS, configs_of, tile_label, tile_of
from .token_scores import _bf16_scores_kernel_t, _coop_topk_kernel


def compile_matrix(
    *, batch: int = 64, heads: int = 64, max_context: int = 131072, topk: int = 512
) -> list[tuple[str, KernelLaunch, tuple[object, ...] | None]]:
    """Every indexer kernel x config as it launches at production shapes (meta tensors): (config label,
    launch, spec). A spec means the config is tuned and kept by the keep rule; None, that it always runs.
    The same launches are compiled for every architecture; the keep rule decides per architecture."""
    meta = torch.device("meta")
    d = _Dims(batch=batch, heads=heads, max_pages=max_context // 256, num_pages=batch * max_context // 256)
    q = torch.empty(batch, heads, HEAD_DIM, dtype=torch.bfloat16, device=meta)
    w = torch.empty(batch, heads, dtype=torch.float32, device=meta)
    cache = torch.empty(d.num_pages, 256 * (HEAD_DIM + 4), dtype=torch.uint8, device=meta)
    bt = torch.empty(batch, d.max_pages, dtype=torch.int32, device=meta)
    sl = torch.empty(batch, dtype=torch.int32, device=meta)
    logits = torch.empty(batch, max_context, dtype=torch.float32, device=meta)
    out = torch.empty(batch, topk, dtype=torch.int32, device=meta)
    block_h = max(16, next_pow2(heads))
    rows: list[tuple[str, KernelLaunch, tuple[object, ...] | None]] = []
    ws, cand = radix_workspace(d, meta)
    # The scores kernels' tile and the one-launch kernel's (the tiles that run; the other SCORE_CONFIGS do not).
    for c in configs_of(SCORES_TILES | COOP_TILES):
        label = tile_label(tile_of(c))
        if tile_of(c) in SCORES_TILES:
            for name, zero, hist in (("indexer.scores_t", False, False), ("indexer.scores_zero", True, False),
                                     ("indexer.scores_hist", False, True)):
                args = _score_args(q, w, cache, bt, sl, logits, d, ws if zero or hist else None, topk if hist else 0)
                launch = KernelLaunch(
                    name, _bf16_scores_kernel_t, (1, batch), args,
                    {"BLOCK_H": block_h, "FP32_MATH": False, "HIST": hist, "ZERO_WS": zero, **c.kwargs},
                    num_warps=c.num_warps, num_stages=c.num_stages,
                )  # fmt: skip
                rows.append((label, launch, config_spec(name, c)))
        if tile_of(c) in COOP_TILES:
            coop_args = coop.args(q, w, cache, bt, sl, logits, ws, cand, out, d=d, topk=topk)
            # At every select block the plan can choose (``coop.select_block``), labelled with the block.
            for block in coop.SEL_BLOCKS:
                cp = replace(coop.gpu_plan(1, topk), sel_block=block)
                launch = KernelLaunch(
                    "indexer.coop", _coop_topk_kernel, (1, batch), coop_args,
                    {**coop.constexprs(d, cp), "FP32_MATH": False, "PHASE": -1, **c.kwargs},
                    num_warps=c.num_warps, num_stages=c.num_stages,
                )  # fmt: skip
                rows.append((coop.block_label(label, block), launch, config_spec("indexer.coop", c)))
    for c in SELECT_CONFIGS:
        launch = KernelLaunch(
            "indexer.select", _radix_select_kernel, (batch,), _select_args(logits, bt, sl, out, topk, d),
            dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages,
        )  # fmt: skip
        rows.append((f"BLOCK {c.kwargs['BLOCK']} w{c.num_warps}", launch, config_spec("indexer.select", c)))
    # Fixed configs: always run where the plan applies (SELECT picks one): the chunks over the capacity, and
    # one program a request (the longest request known) at each of LONG_SELECT's bounds, the most lanes it runs.
    for radix in (False, True):
        for longest in (None, *sorted({bound for _, bound in LONG_SELECT[1]})):
            split = split_plan(d, topk, radix=radix, longest=longest)
            if split is not None:
                for launch in split_launches(logits, bt, sl, out, topk, d, split):
                    label = f"{'BLOCK' if split.chunks == 1 else 'CHUNK'} {split.chunk} w{launch.num_warps}"
                    rows.append((label + (" radix" if radix else ""), launch, None))
    ws, cand = radix_workspace(d, meta)
    for block in (256, RADIX_FEW_BLOCK, RADIX_BLOCK):  # the smallest block the tests run, the GPU's two
        rp = radix_plan(d, topk, meta, block=block)
        for launch in radix_launches(logits, bt, sl, out, topk, d, rp, ws, cand):
            rows.append((f"BLOCK {rp.block} w{launch.num_warps}", launch, None))
    launch = KernelLaunch(
        "indexer.fp32_maxctx", _fp32_maxctx_scores_kernel, (1, batch), _fp32_args(q, w, cache, bt, sl, logits, d),
        {"BLOCK_T": _FP32_BLOCK_T}, num_warps=_FP32_WARPS,
    )  # fmt: skip
    rows.append((f"BLOCK_T {_FP32_BLOCK_T} w{_FP32_WARPS}", launch, None))
    return rows
