"""Autotuning of the MMA decode launch: BLOCK_H / BLOCK_N / warps / stages / split-K / column split.

Triton's own autotuner times one kernel; here a candidate is the whole launch (split kernel plus the
LSE combine), so split counts are compared fairly. Candidates are pruned by their compiled metadata
for the architecture of the launch's profile (``mla_kernels.arch``): a config is kept when Triton's
shared memory fits that architecture and ptxas spilled nothing (``mla_kernels.aot``, cached on disk).
Choices are cached per shape and profile in memory and on disk, so a warm-up call resolves them
before CUDA-graph capture and later processes skip the search.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from settings import env as _env

from .. import _common
from ..arch import has_warpgroup_mma, has_wgmma, kept_by_compile, profile_target
from ..record import LaunchRecord


@dataclass(frozen=True)
class MmaConfig:
    """One MMA decode config, the one form from the command line (``MmaConfig.parse("64x64x8x2x3")``)
    through the candidates, the tuner and its disk cache to the launch."""

    block_h: int
    block_n: int
    num_warps: int
    num_stages: int
    num_splits: int = 1
    prefetch: int = 0  # next tile's: 0 nothing, 1 indices, 2 indices and bytes, 3 indices and scale bytes
    block_d: int = 0  # 0: one fused pass; else two passes, BLOCK_D output columns per program of the second
    source: str = "default"  # default | cache | tuned | fixed | fallback
    # The Gluon kernels: 64 heads a CTA, keys dequantized once; ``gluon_kernels`` (mma_v2), or with
    # ``wgmma`` ``wgmma_kernels`` (sm_90; ``num_stages`` is then its cp.async ring's depth), with ``specialized``
    # too its warp-specialized form (``wgmma_ws_kernels``: a producer warpgroup beside the two consumer ones).
    # Keyword-only, so the positional form above is unchanged.
    gluon: bool = field(default=False, kw_only=True)
    wgmma: bool = field(default=False, kw_only=True)
    specialized: bool = field(default=False, kw_only=True)

    @property
    def tile(self) -> tuple[int, ...]:
        """(BLOCK_H, BLOCK_N, warps, stages, PREFETCH, BLOCK_D[, 1 | 2 | 3 for the three Gluon kernels]): what
        compiles differently, the keep rule's key (``mla_kernels.arch.SPILL_ALLOWED``); the split count and the
        source do not change the kernel."""
        tile = (self.block_h, self.block_n, self.num_warps, self.num_stages, self.prefetch, self.block_d)
        return (*tile, 3 if self.specialized else 2 if self.wgmma else 1) if self.gluon else tile

    @property
    def label(self) -> str:
        """``64x64x8x2 pf3``: BLOCK_H x BLOCK_N x warps x stages, then the prefetch level; two-pass configs
        ``64x64x8x1 2-pass d128`` (output columns per program of the second pass)."""
        tile = f"{self.block_h}x{self.block_n}x{self.num_warps}x{self.num_stages}"
        if self.wgmma:
            return f"{tile} pf{self.prefetch} {'ws-' if self.specialized else ''}wgmma"
        if self.gluon:
            return f"{tile} pf{self.prefetch} gluon"
        return f"{tile} " + (f"2-pass d{self.block_d}" if self.block_d else f"pf{self.prefetch}")

    @classmethod
    def parse(cls, text: str, num_splits: int = 1, source: str = "fixed") -> MmaConfig:
        """``64x64x8x2x3`` (fused: BLOCK_H x BLOCK_N x warps x stages x PREFETCH), ``64x64x8x1x0x128``
        (... x PREFETCH x BLOCK_D), ``64x32x8x1x0g`` (the Gluon kernel), ``64x32x8x1x0w`` (the Gluon
        wgmma kernel, stages its ring depth) or ``64x32x8x3x1s`` (its warp-specialized form); ValueError naming
        the text otherwise."""
        body = text.strip()
        specialized = body.endswith("s")
        wgmma = specialized or body.endswith("w")
        gluon = wgmma or body.endswith("g")
        parts = body.removesuffix("g").removesuffix("w").removesuffix("s").split("x")
        if len(parts) not in (5, 6) or not all(p.isdigit() for p in parts):
            raise ValueError(f"config {text!r} is not BLOCK_HxBLOCK_NxWARPSxSTAGESxPREFETCH[xBLOCK_D]")
        bh, bn, warps, stages, prefetch, block_d = (int(p) for p in [*parts, "0"][:6])
        return cls(bh, bn, warps, stages, num_splits, prefetch, block_d, source, gluon=gluon, wgmma=wgmma,
                   specialized=specialized)

    @classmethod
    def of_record(cls, record: LaunchRecord) -> MmaConfig:
        """The config an MMA decode's launch record states it ran with."""
        c = record.config
        return cls(int(c["BLOCK_H"]), int(c["BLOCK_N"]), int(c["num_warps"]), int(c["num_stages"]),
                   int(c["NUM_SPLITS"]), int(c["PREFETCH"]), int(c["BLOCK_D"]), record.source,
                   gluon=record.impl == "gluon", wgmma=record.kernel.startswith("_wgmma"),
                   specialized=record.kernel.startswith("_wgmma_ws"))  # fmt: skip


def launch_label(record: LaunchRecord) -> str:
    """An MMA decode's launch record as ``64x64x8x2 pf3 S4`` or ``64x128x8x1 2-pass d128``."""
    cfg = MmaConfig.of_record(record)
    return cfg.label if cfg.block_d else f"{cfg.label} S{cfg.num_splits}"


# Which of these a GPU may use is decided by
# compiling them for its architecture (``verdict``), not listed by hand. Measured on one H200
# (experiments/kernel_decode_variants.py; docs/measurements/decode_variants_30d6eb7.log, _4d2b241.log and
# _sm120_sweep1.log, _sm120_sweep1_extra.log, _sm120_sweep2.log):
# - 64-head blocks use Hopper's wgmma; 64x64 with 2 stages (prefetch 3 or 0) is the fastest at every
#   concurrency from 16 on, 64x32 the fastest that does not spill on sm_90.
# - mma.sync (sm_120, and every block under 64 heads on the H200): register prefetching of the next
#   tile (level 2) with one stage wins; 4 warps for 16-head blocks, 8 warps for 32-head blocks (210
#   registers, spill-free on sm_120, where 4 warps spill). 8-warp configs with cp.async stages (levels
#   0/3) ran 1.8-3.1x slower, and splitting the 512 output columns over two programs (32-head blocks,
#   half the accumulators, scores computed twice) 1.8-1.9x slower than the best of these.
# - Two passes (64-head blocks, each FP8 byte dequantized once per pass; 36 configs swept,
#   docs/measurements/decode_variants_two_pass_acbd369.log): at B=32/64/128 the best spill-free-on-sm_120
#   ones take 26.4 / 36.5 / 73.9 us against 39.3 / 66.7 / 135.3 us for the best fused mma.sync config and
#   25.3 / 41.0 / 57.8 us for the H200's wgmma pick. Kept: the fastest at each of those concurrencies and
#   64x32x4x1 d64 for more, smaller programs at low concurrency.
# - One request (docs/measurements/session41_h100.log, H100): 16x16x4x1 over 32 splits, one 16-token tile a
#   program and 128 programs, took 6.6 us against 6.9 us for the best 32-token tile over 16 splits; tuned,
#   the decode took 6.7 / 6.7 us against 6.9 / 7.0 us without it (two rounds, alternating).
CANDIDATES: tuple[MmaConfig, ...] = tuple(
    MmaConfig(bh, bn, warps, stages, 1, prefetch, block_d)
    for bh, bn, warps, stages, prefetch, block_d in (
        (64, 64, 8, 2, 3, 0),
        (64, 64, 8, 2, 0, 0),
        (64, 32, 8, 2, 0, 0),
        (16, 32, 4, 1, 2, 0),
        (16, 32, 8, 1, 2, 0),
        (32, 32, 8, 1, 2, 0),
        (16, 64, 8, 1, 2, 0),
        (16, 32, 8, 2, 3, 0),
        (64, 128, 8, 1, 0, 128),
        (64, 64, 4, 1, 0, 64),
        (64, 64, 8, 1, 0, 128),
        (64, 32, 4, 1, 0, 64),
        (16, 16, 4, 1, 2, 0),
    )
)
# Fused 64-head blocks hold a [64, 512] fp32 accumulator that only warpgroup MMA keeps in registers;
# on mma.sync-only GPUs (sm_8x, sm_120) they spill kilobytes (3.9 KB/thread for 64x64x8x2 on sm_120 in
# docs/compile-matrix.md), so they are not candidates there and are not compiled for them. Two-pass
# configs (BLOCK_D > 0) hold at most [64, BLOCK_D] and are candidates everywhere.
WARPGROUP_BLOCK_H = 64
# The Gluon kernel (impl ``gluon``): 64 heads a CTA, mma_v2 on every architecture; tokens per tile x warps x
# PREFETCH (2: the next tile's bytes in flight during the MMAs; 0: loaded after them, fewer registers).
# The keep rule decides per architecture (sm_120's 99 KB of shared memory holds q and a 16-token tile).
GLUON_CANDIDATES: tuple[MmaConfig, ...] = tuple(
    MmaConfig(64, bn, warps, 1, 1, prefetch, gluon=True)
    for bn, warps, prefetch in ((16, 8, 2), (32, 8, 2), (32, 16, 2), (64, 16, 2), (16, 8, 0))
)


# The Gluon wgmma kernel (``wgmma_kernels``, sm_90 only): tokens per tile x ring stages x PREFETCH (1: two
# key buffers, a tile's P V during the next one's dequant; 0: one), 8 warps (two warpgroups, each half of
# the [64, 512] output). The fastest two of five measured on the H200, 64 tokens at 32+ requests, 32 below
# (docs/measurements/wgmma_decode_session22.log); the 64-token tile spills 8-40 B (SPILL_ALLOWED on sm_90).
# Then its warp-specialized form (``wgmma_ws_kernels``): 64-token tiles with a ring of 2 and one key buffer,
# 32-token tiles with a ring of 3 and two; the fastest two of the eight forms timed in session 24 at 64 and
# 128 requests (docs/measurements/wgmma_ws_rows_session24.log), spilling 8 / 8 B with triton 3.6 since the producer
# got 88 registers (wgmma_ws_regs_session25.log; SPILL_ALLOWED on sm_90).
WGMMA_CANDIDATES: tuple[MmaConfig, ...] = (
    *(MmaConfig(64, bn, 8, 2, 1, prefetch, gluon=True, wgmma=True) for bn, prefetch in ((64, 0), (32, 1))),
    *(MmaConfig(64, bn, 8, stages, 1, prefetch, gluon=True, wgmma=True, specialized=True)
      for bn, stages, prefetch in ((64, 2, 0), (32, 3, 1))),
)


def arch_candidates(capability: int, impl: str = "mma") -> tuple[MmaConfig, ...]:
    """The candidates of an impl (``mma`` or ``gluon``) worth compiling for an architecture."""
    if impl == "gluon":
        return GLUON_CANDIDATES + (WGMMA_CANDIDATES if has_wgmma(capability) else ())
    if has_warpgroup_mma(capability):
        return CANDIDATES
    return tuple(c for c in CANDIDATES if c.block_h < WARPGROUP_BLOCK_H or c.block_d)


# The most splits of one request's top-k a launch makes (``launch.split_plan``) and the tuner times: 32 lets
# 16-token tiles cover a 512-token top-k at one request; 32-token tiles stop at 16 (at least one tile a split).
MAX_SPLITS = 32


def split_counts(batch: int, heads: int, block_h: int, topk: int, block_n: int, sms: int) -> tuple[int, ...]:
    """Split-K counts worth timing: none, the most that still fits one wave of one program per SM
    (64-head programs fill an SM), and the fewest that cover every SM (smaller programs share one)."""
    ctas = batch * (heads // block_h)
    cap = min(-(-topk // block_n), MAX_SPLITS)  # at least one tile per split
    one_wave = max(1, min(sms // ctas, cap))
    cover = max(1, min(-(-sms // ctas), cap))
    return tuple(dict.fromkeys((one_wave, cover, 1)))


def config_split_counts(cfg: MmaConfig, batch: int, heads: int, topk: int, sms: int) -> tuple[int, ...]:
    """The split counts a candidate is timed with: ``split_counts``, or none for two-pass configs (their
    grid spreads the top-k over programs already)."""
    return (1,) if cfg.block_d else split_counts(batch, heads, cfg.block_h, topk, cfg.block_n, sms)


def judged_launches(launches: Sequence[_common.KernelLaunch]) -> list[_common.KernelLaunch]:
    """The launches of a config that the keep rule judges: all but the LSE combine, which every split
    config shares and the compile report checks on its own."""
    return [launch for launch in launches if launch.name != "combine"]


Builder = Callable[[MmaConfig], Sequence[_common.KernelLaunch]]


def candidates(
    batch: int, heads: int, topk: int, device: torch.device, profile: str = "native", build: Builder | None = None,
    impl: str = "mma",
) -> list[MmaConfig]:
    """Every candidate of ``impl`` x split count that the profile's architecture keeps (compiled when
    ``build``, which turns a config into its launches on meta tensors, is given)."""
    if _common.interpreting():
        # One small config: the interpreter is slow and has no shared-memory limit to respect.
        block_h = 16
        return [MmaConfig(block_h, 16, 4, 1, split_counts(batch, heads, block_h, topk, 16, 4)[0])]
    capability, limit = profile_target(profile, device)
    sms = _common.num_sms(device)
    out: list[MmaConfig] = []
    for candidate in arch_candidates(capability, impl):
        if heads % candidate.block_h:
            continue
        for s in config_split_counts(candidate, batch, heads, topk, sms):
            cfg = replace(candidate, num_splits=s, source="default")
            if build is None or all(
                kept_by_compile(launch, cfg.tile, capability, limit) for launch in judged_launches(build(cfg))
            ):
                out.append(cfg)
    if not out:
        kind = "Gluon" if impl == "gluon" else "MMA"
        raise RuntimeError(f"no {kind} decode config is kept for profile {profile!r} (sm_{capability}, H={heads})")
    return out


@functools.cache
def _source_hash() -> str:
    """A hash of every module a tuned config depends on: the decode package and the ``mla_kernels`` modules its
    kernels and launchers import (the cache layout, PDL, the compile rule), so changing any re-tunes."""
    package = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted([*package.glob("*.py"), *(package / "decode").glob("*.py")]):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


_DISK = _common.DiskCache(_env.AUTOTUNE_CACHE, "autotune.json")


def _disk_key(batch: int, heads: int, topk: int, device: torch.device, profile: str, impl: str) -> str:
    import triton

    name = torch.cuda.get_device_name(device).replace(" ", "_")
    kind = "" if impl == "mma" else f"{impl}|"  # mma keys as before: existing caches stay valid
    return f"{kind}{name}|triton-{triton.__version__}|{_source_hash()}|{profile}|B{batch}|H{heads}|K{topk}"


_MEMO: dict[tuple[object, ...], MmaConfig] = {}


def choose_mma_config(
    launch: Callable[[MmaConfig], object],
    build: Builder,
    batch: int,
    heads: int,
    topk: int,
    device: torch.device,
    profile: str = "native",
    impl: str = "mma",
) -> MmaConfig:
    """Best ``impl`` config for this shape and profile: memo, then disk cache, then a timed search over
    the kept candidates. ``launch(cfg)`` runs a config; ``build(cfg)`` gives its launches on meta tensors."""
    if _common.interpreting() or device.type != "cuda":
        return candidates(batch, heads, topk, device, profile, impl=impl)[0]
    key = (device.index, batch, heads, topk, profile, impl)
    if key in _MEMO:
        return _MEMO[key]
    disk_key = _disk_key(batch, heads, topk, device, profile, impl)
    stored = _DISK.read().get(disk_key)
    if stored is not None:
        cfg = MmaConfig(**stored, source="cache")
        _MEMO[key] = cfg
        return cfg
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"sparse_mla_decode(impl={impl!r}) for B={batch}, H={heads}, topk={topk}, arch profile {profile} "
            "is not tuned yet: call it once with these shapes before capturing a CUDA graph"
        )
    cands = candidates(batch, heads, topk, device, profile, build, impl)
    cfg = replace(cands[0], source="tuned") if len(cands) == 1 else _search(launch, cands, device)
    _MEMO[key] = cfg
    _DISK.put(disk_key, {k: v for k, v in asdict(cfg).items() if k != "source"})
    return cfg


def _gpu_ms(launch: Callable[[], object], flush: torch.Tensor, reps: int = 10) -> float:
    """Median GPU milliseconds of one launch with a cold L2, as a decode step sees it.

    Before each timed launch the L2 is flushed and the GPU is held in a sleep kernel while Python
    enqueues the launch, so the events time the kernels alone, not the launcher's host overhead
    (which exceeds the kernels' time at small batch and made such timings rank configs at random).
    """
    times = []
    for _ in range(reps):
        # A write flush, unlike the suites' read (benchmarks._timing.L2Flush, which this layer cannot import):
        # every candidate pays the same write-backs, so the ranking holds; moving it waits for a GPU A/B.
        flush.zero_()
        torch.cuda._sleep(_HOLD_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in times)
    return ms[len(ms) // 2]


# ~0.5 ms at Hopper clocks: longer than the launcher's host time, short next to a tuning run.
_HOLD_CYCLES = 1_000_000


def config_errors() -> tuple[type[BaseException], ...]:
    """What a candidate config may fail with and be skipped for: Triton's compile errors and the device's
    resource limits (shared memory, registers; ptxas)."""
    from triton.compiler.errors import CompilationError
    from triton.runtime import errors

    return tuple(e for e in (CompilationError, errors.OutOfResources, getattr(errors, "PTXASError", None)) if e)


def time_candidate(cfg: MmaConfig, measure: Callable[[], float]) -> float | None:
    """``measure()`` (compile, run and time ``cfg``), or None when the config cannot compile or does not
    fit the device. Any other error is a bug, raised with the config named."""
    try:
        return measure()
    except config_errors():
        return None
    except RuntimeError as exc:  # the driver refusing a launch's registers is a resource limit too
        if "too many resources requested for launch" in str(exc):
            return None
        raise RuntimeError(f"MMA decode config {cfg.label} S{cfg.num_splits} failed: {exc}") from exc
    except Exception as exc:
        raise RuntimeError(f"MMA decode config {cfg.label} S{cfg.num_splits} failed: "
                           f"{type(exc).__name__}: {exc}") from exc  # fmt: skip


def _search(launch: Callable[[MmaConfig], object], cands: list[MmaConfig], device: torch.device) -> MmaConfig:
    # Zeroing twice the L2's size evicts every line a candidate's previous launch left there.
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20))
    flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def measure(cfg: MmaConfig) -> float:
        launch(cfg)  # compile; a config the device cannot hold fails here
        torch.cuda.synchronize()
        return _gpu_ms(lambda: launch(cfg), flush)

    timed = [(ms, cfg) for cfg in cands if (ms := time_candidate(cfg, lambda c=cfg: measure(c))) is not None]
    if not timed:
        raise RuntimeError("no MMA decode config compiled on this device")
    return replace(min(timed, key=lambda t: t[0])[1], source="tuned")
