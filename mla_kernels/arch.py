"""GPU architectures the kernels are judged on, and the architecture profile of a decode launch.

A profile names the architecture whose kept configs the MMA autotuner may pick: ``native`` (the GPU
it runs on), ``sm_90`` (H100/H200: wgmma, 232,448 B of shared memory per block) or ``sm_120`` (RTX PRO
6000 Blackwell / RTX 5090: mma.sync only, 101,376 B per block). With ``sm_120`` an H200 runs the code
path of the users' sm_120 runner.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from settings import env as _env

if TYPE_CHECKING:
    from ._common import KernelLaunch
    from .aot import CompileStats

ARCH_PROFILES = _env.ARCH_PROFILES  # defined with the variable that names one (settings.env), torch-free
ENV_PROFILE = _env.ARCH_PROFILE.name


@dataclass(frozen=True)
class Arch:
    capability: int  # 90, 120
    shared_per_block: int  # bytes one block may opt in to
    tensor_cores: str  # what tl.dot lowers to there
    shared_per_sm: int = 233472  # bytes of shared memory per SM
    threads_per_sm: int = 2048

    @property
    def name(self) -> str:
        return f"sm_{self.capability}"


# Shared memory per block: the CUDA programming guide's "maximum amount of shared memory per thread
# block" (compute capability 9.0: 227 KB = 232,448 B; 12.0: 99 KB = 101,376 B); per SM 228 KB and 100 KB,
# resident threads per SM 2,048 and 1,536 (its compute-capability table).
ARCHS: dict[int, Arch] = {
    90: Arch(90, 232448, "wgmma (64-row warpgroups) and mma.sync"),
    120: Arch(120, 101376, "mma.sync (no wgmma); block-scaled FP8 MMA", 102400, 1536),
}
REGISTERS_PER_SM = 65536  # both architectures
SHARED_RESERVED_PER_BLOCK = 1024  # the system's own shared memory per resident block (cc 8.0 on)

# Kernels whose programs wait for one another (grid barriers), by spec name: the blocks per SM their grids
# hold, so the number that must fit an SM at once. Where fewer fit, a barrier would never open: the keep
# rule drops the config.
RESIDENT_BLOCKS: dict[str, int] = {"indexer.coop": 2}


def blocks_needed(spec: tuple[object, ...]) -> int:
    """Blocks per SM a spec's kernel needs resident at once (``RESIDENT_BLOCKS``); 0 without grid barriers."""
    return RESIDENT_BLOCKS.get(str(spec[0]), 0) if spec else 0


def resident_blocks(capability: int, registers: int, num_warps: int, shared: int) -> int:
    """Blocks of one kernel an SM holds at once: by registers (allocated per warp in units of 256), shared
    memory and threads. An architecture not in ``ARCHS`` gets the smaller of each limit."""
    arch = ARCHS.get(capability)
    shared_per_sm = arch.shared_per_sm if arch else min(a.shared_per_sm for a in ARCHS.values())
    threads = arch.threads_per_sm if arch else min(a.threads_per_sm for a in ARCHS.values())
    per_warp = -(-max(registers, 1) * 32 // 256) * 256
    by_registers = REGISTERS_PER_SM // (per_warp * num_warps)
    return min(by_registers, shared_per_sm // (shared + SHARED_RESERVED_PER_BLOCK), threads // (32 * num_warps))


# The keep rule of every tuned kernel (MMA decode, SIMT tile, indexer autotuners): a config is kept for an
# architecture when Triton's shared memory fits it and ptxas spilled nothing. The exceptions, each with
# the same-machine A/B that shows it faster than every spill-free choice there (never on sm_120: the
# compile report fails on that); keys are (capability, spec).
SPILL_ALLOWED: dict[tuple[int, tuple[object, ...]], str] = {
    (90, (64, 64, 8, 2, 3, 0)): "H200: 18.9 / 41.2 / 58.2 us at B=16/64/128 against 20.7 / 51.8 / 82.7 us for the "
    "fastest spill-free fused config (64x32x8x2 pf0) and 22.8 / 36.9 / 73.0 us for the fastest two-pass one "
    "(faster at 16 and 128; the tuner times both); spills 16 B/thread with triton 3.6, 400 B with 3.9",
    (90, (64, 64, 8, 2, 0, 0)): "H200: 19.0 / 42.8 / 63.5 us at B=16/64/128 against 20.7 / 51.8 / 82.7 us for the "
    "fastest spill-free fused config and 22.8 / 36.9 / 73.0 us for the fastest two-pass one (faster at 16 and 128; "
    "the tuner times both); spills 8-16 B/thread with triton 3.6",
    (90, (64, 64, 8, 2, 0, 0, 2)): "H200, the Gluon wgmma decode's 64-token tile: 23.0 / 37.2 / 54.3 us at "
    "B=32/64/128 against 24.0 / 38.4 / 57.0 us for its spill-free 32-token tile; spills 32-40 B/thread with "
    "triton 3.6, 144 B with 3.9 (8 B before its dequant applied the scale in bf16, session 24)",
    (90, (64, 64, 8, 2, 0, 0, 3)): "H200, the warp-specialized Gluon wgmma decode's 64-token tile (one key buffer, "
    "producer on 88 registers): 32.5-32.6 / 45.1-45.6 us at B=64/128 against 35.6-35.7 / 50.2-50.3 us for its "
    "32-token tile in the same processes (session 25; 32.0-32.3 / 43.9-44.2 us with the seven-group dequant, "
    "31.0-31.5 / 42.5-42.7 us with q copied by the producer, session 26); "
    "spills 8 B/thread with triton 3.6, 112 B with 3.9",
    (90, (64, 32, 8, 3, 1, 0, 3)): "H200, the warp-specialized Gluon wgmma decode (a producer warpgroup on 80 "
    "registers, 16 rows a dequant step; since session 25 on 88 and the seven-group dequant, same spills): 36.1 / "
    "51.4 us at B=64/128 against 37.3 / 54.0 us for the unspecialized "
    "kernel's 64-token tile in the same process; the spill-free 32-token tile of the unspecialized kernel took "
    "38.2-38.3 / 57.8-58.1 us beside an earlier form of it (36.0-36.1 / 50.5-51.2 us); spills 8 B/thread with "
    "triton 3.6 and 3.9",
    (90, ("simt", 32, 4)): "H200: SIMT 82 / 490 / 1,961 us at B=1/16/64 against 117 / 828 / 3,305 us for the "
    "fastest spill-free tile; spills 288 B/thread",
}


def verdict(
    capability: int, shared_limit: int, spec: tuple[object, ...], shared: int, spill_bytes: int, registers: int = 0
) -> str | None:
    """Why a compiled config is not kept for an architecture, or None when it is (the one rule the
    tuners and the compile report share). A ``RESIDENT_BLOCKS`` kernel's spec ends in (num_warps,
    num_stages); its ``registers`` per thread then count."""
    if shared > shared_limit:
        return f"shared {shared:,} B > {shared_limit:,} B"
    if spill_bytes and (capability, spec) not in SPILL_ALLOWED:
        return f"spills {spill_bytes} B/thread"
    need = blocks_needed(spec)
    if need:
        fit = resident_blocks(capability, registers, int(spec[-2]), shared)  # type: ignore[call-overload]
        if fit < need:
            return f"{fit} blocks fit an SM ({registers} registers, {shared:,} B shared), its grid barrier needs {need}"
    return None


_WARNED: set[str] = set()


def _compiled_stats(launch: KernelLaunch, capability: int) -> CompileStats | None:
    """``launch`` compiled ahead of time for sm_<capability> (``mla_kernels.aot``, cached), or None where it
    cannot be compiled here (no toolchain), with one warning per cause."""
    from . import aot

    try:
        return aot.compile_launch(launch, capability)
    except aot.CompileError as exc:
        if str(exc) not in _WARNED:
            _WARNED.add(str(exc))
            warnings.warn(f"{launch.name} configs not checked for sm_{capability}: {exc}", RuntimeWarning, stacklevel=3)
        return None


def kept_by_compile(launch: KernelLaunch, spec: tuple[object, ...], capability: int, shared_limit: int) -> bool:
    """``verdict`` on ``launch`` compiled ahead of time for sm_<capability>: the keep rule of every tuner. A
    launch that cannot be compiled here is kept, and launching decides; not a ``RESIDENT_BLOCKS`` kernel's,
    which is dropped."""
    stats = _compiled_stats(launch, capability)
    if stats is None:
        return not blocks_needed(spec)  # residency cannot be left to the launch
    return verdict(capability, shared_limit, spec, stats.shared, stats.spill_bytes, stats.registers) is None


def resident_programs(launch: KernelLaunch, capability: int) -> int | None:
    """Programs of ``launch`` one SM of sm_<capability> holds at once, from its registers and shared memory
    compiled ahead of time (the compiler the GPU runs: on a GPU, its own); None where it cannot be compiled
    here."""
    stats = _compiled_stats(launch, capability)
    if stats is None:
        return None
    return resident_blocks(capability, stats.registers, launch.num_warps, stats.shared)


def has_warpgroup_mma(capability: int) -> bool:
    """Tensor cores that take a 64-row operand per warpgroup (wgmma on sm_90, tcgen05 on sm_100)."""
    return capability // 10 in (9, 10)


def has_wgmma(capability: int) -> bool:
    """Hopper's ``wgmma`` instructions themselves (sm_90 only; sm_100 has tcgen05 instead)."""
    return capability // 10 == 9


def parse_arch(text: str) -> int:
    """``"120"``, ``"sm_120"`` or ``"12.0"`` -> 120 (one of ``ARCHS``); ValueError otherwise."""
    t = text.strip().lower().removeprefix("sm_").removeprefix("sm")
    if "." in t:
        major, _, minor = t.partition(".")
        t = f"{major}{minor}"
    if not t.isdigit() or int(t) not in ARCHS:
        known = ", ".join(str(a) for a in ARCHS)
        raise ValueError(f"unknown architecture {text!r}; known: {known}")
    return int(t)


def resolve_profile(arch_profile: str | None) -> str:
    """The profile to use: the argument, else env ``MLAPERF_ARCH_PROFILE`` (``settings.env``), else ``native``."""
    if arch_profile is None:
        return _env.arch_profile()
    if arch_profile not in ARCH_PROFILES:
        raise ValueError(f"arch_profile must be one of {', '.join(ARCH_PROFILES)}; got {arch_profile!r}")
    return arch_profile


def device_capability(device: torch.device) -> int:
    """90 for an H200, 120 for an RTX PRO 6000 Blackwell; 0 off CUDA."""
    from . import _common

    major, minor = _common.capability(device)
    return major * 10 + minor


def profile_target(profile: str, device: torch.device) -> tuple[int, int]:
    """(architecture to judge configs on, shared memory a config may use) for a profile on a device.

    A config must fit both the profile's architecture and the device it really runs on.
    """
    from . import _common

    device_smem = _common.max_shared_mem(device)
    if profile == "native":
        return device_capability(device), device_smem
    arch = ARCHS[int(profile.removeprefix("sm_"))]
    return arch.capability, min(arch.shared_per_block, device_smem)
