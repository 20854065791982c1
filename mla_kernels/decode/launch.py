"""Launchers of the sparse-MLA decode: validate, allocate, build each launch (``KernelLaunch``), run it.

``sparse_mla_decode`` is the public entry (``sparse_mla_decode_with_record`` also returns the
``LaunchRecord`` of what ran); ``decode_with_config`` runs one fixed MMA config (profiling scripts);
``mma_launches`` builds the launches of a config without running them, which is also what
``mla_kernels.aot`` compiles ahead of time for another architecture.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import triton

from .. import _common
from ..arch import profile_target, resolve_profile
from ..cache import (
    HEAD_DIM,
    TOKENS_PER_PAGE,
    check_kv_cache,
)
from ..record import KernelRun, LaunchRecord
from . import gluon_kernels, wgmma_kernels, wgmma_ws_kernels
from .combine import _combine_kernel, combine_launch
from .kernels import (
    _mma_decode_kernel,
    _output_pass_kernel,
    _scores_pass_kernel,
    _simt_decode_kernel,
)
from .reference import sparse_mla_decode_reference, sparse_mla_decode_torch
from .tuning import MAX_SPLITS, MmaConfig, choose_mma_config

IMPLS = ("reference", "torch", "simt", "mma", "gluon")
# The Triton kernels among them, and those whose configs follow the architecture profile (``arch_profile``).
KERNEL_IMPLS = ("simt", "mma", "gluon")
PROFILED_IMPLS = ("mma", "gluon")
LOG2E = 1.4426950408889634
# The kernels by name: what the compile report compiles and profiling scripts build variants of.
KERNELS = {
    "simt": _simt_decode_kernel,
    "mma": _mma_decode_kernel,
    "combine": _combine_kernel,
    "scores": _scores_pass_kernel,
    "output": _output_pass_kernel,
    **({"gluon": gluon_kernels._gluon_decode_kernel} if gluon_kernels.AVAILABLE else {}),
    **({"wgmma": wgmma_kernels._wgmma_decode_kernel} if wgmma_kernels.AVAILABLE else {}),
    **({"wgmma_ws": wgmma_ws_kernels._wgmma_ws_decode_kernel} if wgmma_ws_kernels.AVAILABLE else {}),
}
# SIMT tile (BLOCK_N, warps) by architecture. 16 x 4 compiles spill-free on sm_90 and sm_120; 32 x 4 spills on
# both but measured faster than every spill-free tile on an H200 (docs/measurements/simt_tiles_ab_1ecadfb.log),
# so sm_90 keeps it (SPILL_ALLOWED) and every other GPU gets the spill-free tile.
SIMT_TILES = {90: (32, 4)}
SIMT_SPILL_FREE_TILE = (16, 4)
# From this many requests the MMA split kernel launches in stream order (PDL=False, ``mla_kernels.pdl``). In the
# decode step on the H100 (docs/measurements/session46_h100.log, call B) its PDL alone cost what all PDL off
# saved: 96 / 128 requests of 16K 206-207 / 240-241 us on against 200-201 / 235 us without the decode's PDL,
# of 64K 561-567 / 699-700 against 542-543 / 676-677; at 64 requests even (135-137 / 361-363 us either way). The
# scores kernel's PDL off instead saved the same; the decode's leaves the indexer's own figures alone. Against 276a3f3
# (call C and after): the step 3.2-6.9 / 15.8-30.6 us faster at 96-128 requests of 16K / 64K, the MMA decode alone
# (kernel_decode_perf) within 0.7 us at 64-128 requests; on the H200 10-14 us at 96 x 64K, even at 64-88 requests
# (session47_h100_h200.log, call G). Where the time went (session 47, kernel traces at 128 x 64K): the decode signals
# its dependents right after its own wait, so the next layer's scores kernel is placed while the decode runs, and
# then runs 458 us after it against 423-428 us placed after it; the decode's own time does not move. A probe of the
# scores kernel's programs (calls H-I) found every SM about 8% slower after such a placement, whichever requests'
# programs it held and whenever it was filled. Why (session 48, experiments.pdl_neighbour, session48_h100.log): Triton
# gives a kernel of more than 48 KB of shared memory the largest carveout (on the H100 an L1 of 28 KB), and an SM keeps
# its split while a program holds it, so scores programs placed beside the decode run in that small L1. Asking the
# indexer's kernels for the largest carveout themselves made the pair decode -> indexer as slow without PDL as with it
# (128 x 64K, H100: PDL's cost -1.3 to +2.3 us against +29 to +45), and asking the decode for the least that fits cut
# the cost to +3.9 to +8.7 us, still a loss: this rule stays. Nor is a carveout set: with the least that fits on every
# kernel over 48 KB, the step took the same within the spread at 1-128 requests (call B). A decode placed early that
# does not signal measured even with this rule (session 47, call C), so the rule stays the simpler one.
IN_ORDER_BATCH = 96


def simt_tile(capability: int) -> tuple[int, int]:
    return SIMT_TILES.get(capability, SIMT_SPILL_FREE_TILE)


def _validate(
    q: object, kv_cache: object, indices: object, sm_scale: float | None, impl: str
) -> float:
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {', '.join(IMPLS)}; got {impl!r}")
    q = _common.check_tensor("q", q, dtype=torch.bfloat16, ndim=3)
    if q.shape[2] != HEAD_DIM:
        raise ValueError(f"q head dim must be {HEAD_DIM} (448 nope + 64 rope), got {q.shape[2]}")
    if q.shape[1] == 0 or q.shape[1] % 16 != 0:
        raise ValueError(f"q must have a head count that is a multiple of 16, got H={q.shape[1]}")
    indices = _common.check_tensor("indices", indices, dtype=torch.int32, ndim=2)
    if indices.shape[0] != q.shape[0]:
        raise ValueError(f"indices has {indices.shape[0]} rows but q has batch {q.shape[0]}")
    if indices.shape[1] == 0:
        raise ValueError("indices must have topk >= 1 columns")
    check_kv_cache(kv_cache)
    assert isinstance(kv_cache, torch.Tensor)
    _common.check_same_device(q=q, kv_cache=kv_cache, indices=indices)
    if sm_scale is None:
        return HEAD_DIM**-0.5
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, int | float) or not math.isfinite(sm_scale):
        raise ValueError(f"sm_scale must be a finite number, got {sm_scale!r}")
    if sm_scale <= 0:
        raise ValueError(f"sm_scale must be positive, got {sm_scale}")
    return float(sm_scale)


def _kernel_checks(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor) -> None:
    for name, t in (("q", q), ("kv_cache", kv_cache), ("indices", indices)):
        _common.check_device(name, t)
    _common.check_last_dim_contiguous("q", q)
    _common.check_last_dim_contiguous("indices", indices)
    if kv_cache.stride(0) % 2 or kv_cache.storage_offset() % 2:
        raise ValueError(f"kv_cache page stride must be even (bf16 rope values), got {kv_cache.stride(0)}")


def sparse_mla_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    sm_scale: float | None = None,
    impl: str = "mma",
    *,
    arch_profile: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MLA decode: ``q`` bf16 [B, H, 512], ``indices`` int32 [B, topk] (-1 = invalid slot).

    Returns ``out`` bf16 [B, H, 512] and ``lse`` fp32 [B, H] (natural log; +inf for a row with no
    valid slot, whose output is 0). Slots outside the cache count as invalid. ``arch_profile``
    (``native`` | ``sm_90`` | ``sm_120``; default env ``MLAPERF_ARCH_PROFILE``, else ``native``) limits
    the MMA configs to those that architecture keeps (``mla_kernels.arch``). What ran:
    :func:`sparse_mla_decode_with_record`.
    """
    out, lse, _ = sparse_mla_decode_with_record(q, kv_cache, indices, sm_scale, impl, arch_profile=arch_profile)
    return out, lse


def sparse_mla_decode_with_record(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    sm_scale: float | None = None,
    impl: str = "mma",
    *,
    arch_profile: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, LaunchRecord]:
    """:func:`sparse_mla_decode`, returning ``(out, lse, record)``: the ``LaunchRecord`` of the kernels
    that ran and the config they ran with (``mla_kernels.record``)."""
    scale = _validate(q, kv_cache, indices, sm_scale, impl)
    profile = resolve_profile(arch_profile)
    if impl == "reference":
        out, lse = sparse_mla_decode_reference(q, kv_cache, indices, scale)
        return out, lse, LaunchRecord("decode", "reference", (KernelRun("torch-fp32"),))
    if impl == "torch":
        out, lse = sparse_mla_decode_torch(q, kv_cache, indices, scale)
        return out, lse, LaunchRecord("decode", "torch", (KernelRun("torch-bf16-bmm"),))
    _kernel_checks(q, kv_cache, indices)
    if q.shape[0] == 0:
        return *_outputs(q), LaunchRecord("decode", impl, (), arch_profile=profile)
    if impl == "simt":
        return _simt_decode(q, kv_cache, indices, scale, profile)
    fallback = impl == "gluon" and gluon_unavailable(q.shape[1])
    if fallback:  # today's MMA kernel runs, and its record says so
        out, lse, record = _tuned_decode(q, kv_cache, indices, scale, profile, "mma")
        return out, lse, dataclasses.replace(record, source="fallback")
    return _tuned_decode(q, kv_cache, indices, scale, profile, impl)


def gluon_unavailable(heads: int) -> str:
    """Why the Gluon decode cannot run here ('' when it can): a Triton without the Gluon pieces it
    uses, the interpreter (which does not run Gluon), or a head count that is not a multiple of 64."""
    if not gluon_kernels.AVAILABLE:
        low, high = (".".join(map(str, v)) for v in gluon_kernels.SUPPORTED_TRITON)
        return f"the Gluon kernel is built for Triton {low} to {high} (this is {triton.__version__})"
    if _common.interpreting():
        return "the Triton interpreter does not run Gluon kernels"
    if heads % gluon_kernels.HEADS:
        return f"H={heads} is not a multiple of {gluon_kernels.HEADS}"
    return ""


def _tuned_decode(
    q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, scale: float, profile: str, impl: str
) -> tuple[torch.Tensor, torch.Tensor, LaunchRecord]:
    config = choose_mma_config(
        lambda cfg: _mma_decode(q, kv_cache, indices, scale, cfg, profile),
        lambda cfg: mma_launches(*_meta_like(q, kv_cache, indices), scale, cfg)[0],
        q.shape[0], q.shape[1], indices.shape[1], q.device, profile, impl,
    )  # fmt: skip
    return _mma_decode(q, kv_cache, indices, scale, config, profile)


def decode_with_config(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    config: MmaConfig,
    sm_scale: float | None = None,
    *,
    kernel: object | None = None,
) -> tuple[torch.Tensor, torch.Tensor, LaunchRecord]:
    """The MMA decode with one fixed config, no autotuning (profiling and config sweeps):
    ``(out, lse, record)``.

    ``kernel``: a drop-in replacement for ``KERNELS["mma"]`` (same signature), e.g. a variant with one
    stage left out; the launch is otherwise the production one (the record names the kernel that ran).
    """
    scale = _validate(q, kv_cache, indices, sm_scale, "mma")
    _kernel_checks(q, kv_cache, indices)
    if not isinstance(config, MmaConfig):
        raise ValueError(f"config must be an MmaConfig, got {type(config).__name__}")
    if q.shape[0] == 0:
        return *_outputs(q), LaunchRecord("decode", "mma", (), arch_profile="fixed")
    return _mma_decode(q, kv_cache, indices, scale, config, "fixed", kernel=kernel)


def _outputs(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, heads, _ = q.shape
    out = torch.empty(batch, heads, HEAD_DIM, dtype=torch.bfloat16, device=q.device)
    lse = torch.empty(batch, heads, dtype=torch.float32, device=q.device)
    return out, lse


def _meta_like(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Shape- and stride-exact stand-ins on the meta device (ahead-of-time compiles allocate nothing)."""
    return tuple(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") for t in tensors)


def simt_launch(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    scale: float,
    out: torch.Tensor,
    lse: torch.Tensor,
    tile: tuple[int, int],
) -> _common.KernelLaunch:
    batch, heads, _ = q.shape
    block_n, warps = tile
    return _common.KernelLaunch(
        "simt", _simt_decode_kernel, (batch, heads),
        (q, kv_cache, kv_cache.view(torch.bfloat16), indices, out, lse,
         q.stride(0), q.stride(1), kv_cache.stride(0), indices.stride(0),
         out.stride(0), out.stride(1), lse.stride(0),
         kv_cache.shape[0] * TOKENS_PER_PAGE, indices.shape[1], scale * LOG2E),
        {"BLOCK_N": block_n}, num_warps=warps,
    )  # fmt: skip


def _simt_decode(
    q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, scale: float, profile: str
) -> tuple[torch.Tensor, torch.Tensor, LaunchRecord]:
    out, lse = _outputs(q)
    # The interpreter has no registers to spare or spill: the small tile keeps it quick.
    capability = 0 if _common.interpreting() else profile_target(profile, q.device)[0]
    launch = simt_launch(q, kv_cache, indices, scale, out, lse, simt_tile(capability))
    run = KernelRun.of(launch, launch.run())
    config = {key: run.config[key] for key in ("BLOCK_N", "num_warps")}
    return out, lse, LaunchRecord("decode", "simt", (run,), config, profile, "fixed", _common.interpreting())


def split_plan(topk: int, block_n: int, num_splits: int) -> tuple[int, int]:
    """(splits, tokens per split) for a config: at least one tile per split, no empty trailing split."""
    splits = max(1, min(num_splits, MAX_SPLITS, triton.cdiv(topk, block_n)))
    split_len = triton.cdiv(triton.cdiv(topk, splits), block_n) * block_n
    return triton.cdiv(topk, split_len), split_len


def mma_launches(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    scale: float,
    cfg: MmaConfig,
    kernel: object | None = None,
) -> tuple[list[_common.KernelLaunch], torch.Tensor, torch.Tensor]:
    """The launches of one MMA config (the split kernel, then the combine when top-k is split) and
    the outputs they write."""
    batch, heads, _ = q.shape
    topk = indices.shape[1]
    if heads % cfg.block_h:
        raise ValueError(f"BLOCK_H={cfg.block_h} does not divide H={heads}")
    if cfg.gluon:
        return _gluon_launches(q, kv_cache, indices, scale, cfg)
    if cfg.block_d:
        return _two_pass_launches(q, kv_cache, indices, scale, cfg)
    splits, split_len = split_plan(topk, cfg.block_n, cfg.num_splits)
    out, lse, opart, lpart = _split_outputs(q, splits)
    launches = [
        _common.KernelLaunch(
            "mma", kernel or _mma_decode_kernel, (batch, heads // cfg.block_h, splits),
            _split_args(q, kv_cache, indices, scale, (out, lse, opart, lpart), splits, split_len),
            {"BLOCK_H": cfg.block_h, "BLOCK_N": cfg.block_n, "SPLIT": splits > 1,
             "DOT_F32": _common.interpreting(), "PREFETCH": cfg.prefetch},
            num_warps=cfg.num_warps, num_stages=cfg.num_stages, in_order=batch >= IN_ORDER_BATCH,
        )
    ]  # fmt: skip
    if splits > 1:
        launches.append(combine_launch(opart, lpart, out, lse, splits))
    return launches, out, lse


def _split_args(
    q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, scale: float,
    outputs: tuple[torch.Tensor, ...], splits: int, split_len: int,
) -> tuple[object, ...]:
    """The runtime arguments of every split decode kernel (MMA, both Gluon ones), in their shared order;
    ``outputs`` is ``_split_outputs``'s (out, lse, opart, lpart)."""
    out, lse, _, _ = outputs
    return (q, kv_cache, kv_cache.view(torch.bfloat16), indices, *outputs,
            q.stride(0), q.stride(1), kv_cache.stride(0), indices.stride(0), out.stride(0), out.stride(1),
            lse.stride(0), kv_cache.shape[0] * TOKENS_PER_PAGE, indices.shape[1], scale * LOG2E, q.shape[1],
            splits, split_len)  # fmt: skip


def _split_outputs(q: torch.Tensor, splits: int) -> tuple[torch.Tensor, ...]:
    """out, lse and, with more than one split, the fp32 partials [B, S, H, 512] and their log2-LSEs."""
    out, lse = _outputs(q)
    if splits == 1:
        return out, lse, out, lse  # the partials are unused when SPLIT is False
    batch, heads, _ = q.shape
    opart = torch.empty(batch, splits, heads, HEAD_DIM, dtype=torch.float32, device=q.device)
    lpart = torch.empty(batch, splits, heads, dtype=torch.float32, device=q.device)
    return out, lse, opart, lpart


def _gluon_launches(
    q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, scale: float, cfg: MmaConfig
) -> tuple[list[_common.KernelLaunch], torch.Tensor, torch.Tensor]:
    """A Gluon kernel (mma_v2, or wgmma on sm_90; one CTA per request, 64 heads and split) then, when split,
    the LSE combine."""
    why = gluon_unavailable(q.shape[1])
    if why:  # a fixed Gluon config (decode_with_config) where it cannot run: say why, run nothing
        raise ValueError(f"the Gluon decode cannot run here: {why}")
    batch, heads, _ = q.shape
    topk = indices.shape[1]
    splits, split_len = split_plan(topk, cfg.block_n, cfg.num_splits)
    out, lse, opart, lpart = _split_outputs(q, splits)
    args = _split_args(q, kv_cache, indices, scale, (out, lse, opart, lpart), splits, split_len)
    grid = (batch, heads // gluon_kernels.HEADS, splits)
    shape = {"BLOCK_H": gluon_kernels.HEADS, "BLOCK_N": cfg.block_n, "SPLIT": splits > 1}
    if cfg.wgmma:  # Triton's num_stages does nothing to a Gluon kernel: it records the ring's depth here
        ring = {**shape, "STAGES": cfg.num_stages, "KEY_BUFFERS": cfg.prefetch + 1}
        if cfg.specialized:  # num_warps: the consumers' (the producer warpgroup comes on top, warp_specialize's)
            ws = wgmma_ws_kernels
            launch = _common.KernelLaunch("wgmma_ws", ws._wgmma_ws_decode_kernel, grid, args,
                                          {**ring, "PRODUCER_REGS": ws.PRODUCER_REGS, "DQ_ROWS": ws.DQ_ROWS},
                                          num_warps=ws.NUM_WARPS, num_stages=cfg.num_stages)  # fmt: skip
        else:
            launch = _common.KernelLaunch("wgmma", wgmma_kernels._wgmma_decode_kernel, grid, args, ring,
                                          num_warps=wgmma_kernels.NUM_WARPS, num_stages=cfg.num_stages)  # fmt: skip
    else:
        launch = _common.KernelLaunch("gluon", gluon_kernels._gluon_decode_kernel, grid, args,
                                      {**shape, "NUM_WARPS": cfg.num_warps, "PREFETCH": cfg.prefetch},
                                      num_warps=cfg.num_warps, num_stages=1)  # fmt: skip
    launches = [launch]
    if splits > 1:
        launches.append(combine_launch(opart, lpart, out, lse, splits))
    return launches, out, lse


def _two_pass_launches(
    q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, scale: float, cfg: MmaConfig
) -> tuple[list[_common.KernelLaunch], torch.Tensor, torch.Tensor]:
    """Scores pass then output pass (``cfg.block_d`` output columns per program of the second)."""
    if HEAD_DIM % cfg.block_d or cfg.block_d % 64:
        raise ValueError(f"BLOCK_D={cfg.block_d} must be a multiple of 64 that divides {HEAD_DIM}")
    out, lse = _outputs(q)
    batch, heads, _ = q.shape
    topk = indices.shape[1]
    tiles = triton.cdiv(topk, cfg.block_n)
    # p in bf16 is what the MMA consumes anyway; fp32 under the interpreter, whose bf16 dots are wrong.
    p_dtype = torch.float32 if _common.interpreting() else torch.bfloat16
    p = torch.empty(batch, heads, tiles * cfg.block_n, dtype=p_dtype, device=q.device)  # [B, H, T * N]
    mpart = torch.empty(batch, tiles, heads, dtype=torch.float32, device=q.device)  # [B, T, H]
    lpart = torch.empty_like(mpart)
    cache16 = kv_cache.view(torch.bfloat16)
    total = kv_cache.shape[0] * TOKENS_PER_PAGE
    blocks = heads // cfg.block_h
    dot_f32 = _common.interpreting()
    scores = _common.KernelLaunch(
        "scores", _scores_pass_kernel, (batch, blocks, tiles),
        (q, kv_cache, cache16, indices, p, mpart, lpart,
         q.stride(0), q.stride(1), kv_cache.stride(0), indices.stride(0), p.stride(0), p.stride(1),
         total, topk, scale * LOG2E, heads, tiles),
        {"BLOCK_H": cfg.block_h, "BLOCK_N": cfg.block_n, "DOT_F32": dot_f32},
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    output = _common.KernelLaunch(
        "output", _output_pass_kernel, (batch, blocks, HEAD_DIM // cfg.block_d),
        (kv_cache, cache16, indices, p, mpart, lpart, out, lse,
         kv_cache.stride(0), indices.stride(0), p.stride(0), p.stride(1),
         out.stride(0), out.stride(1), lse.stride(0), total, topk, heads, tiles),
        {"BLOCK_H": cfg.block_h, "BLOCK_N": cfg.block_n, "BLOCK_D": cfg.block_d, "DOT_F32": dot_f32},
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return [scores, output], out, lse


def _mma_decode(
    q: torch.Tensor,
    kv_cache: torch.Tensor,
    indices: torch.Tensor,
    scale: float,
    cfg: MmaConfig,
    profile: str,
    kernel: object | None = None,
) -> tuple[torch.Tensor, torch.Tensor, LaunchRecord]:
    launches, out, lse = mma_launches(q, kv_cache, indices, scale, cfg, kernel)
    runs = tuple(KernelRun.of(launch, launch.run()) for launch in launches)  # run in order
    impl = "gluon" if cfg.gluon else "mma"
    record = LaunchRecord("decode", impl, runs, _mma_config(runs), profile, cfg.source, _common.interpreting())
    return out, lse, record


def _mma_config(runs: tuple[KernelRun, ...]) -> dict[str, int]:
    """The MMA decode's config as its launches ran: the tile of the first kernel (the split kernel, or the
    scores pass), the output pass's BLOCK_D (0 when fused), the split count from the split kernel's grid."""
    first, two_pass = runs[0], "BLOCK_D" in runs[-1].config
    config = {key: int(first.config[key]) for key in ("BLOCK_H", "BLOCK_N", "num_warps", "num_stages")}
    config["BLOCK_D"] = int(runs[-1].config["BLOCK_D"]) if two_pass else 0
    config["NUM_SPLITS"] = 1 if two_pass else first.grid[2]
    # The wgmma kernel's second key buffer is its prefetch level (``tuning.WGMMA_CANDIDATES``).
    config["PREFETCH"] = int(first.config.get("PREFETCH", first.config.get("KEY_BUFFERS", 1) - 1))
    return config

