"""GPU architectures the kernels are judged on, and the architecture profile of a decode launch.

A profile names the architecture whose kept configs the MMA autotuner may pick: ``native`` (the GPU
it runs on), ``sm_90`` (H100/H200: wgmma, 232,448 B of shared memory per block) or ``sm_120`` (RTX PRO
6000 Blackwell / RTX 5090: mma.sync only, 101,376 B per block). With ``sm_120`` an H200 runs the code
path of the users' sm_120 runner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

ARCH_PROFILES = ("native", "sm_90", "sm_120")
ENV_PROFILE = "MLAPERF_ARCH_PROFILE"


@dataclass(frozen=True)
class Arch:
    capability: int  # 90, 120
    shared_per_block: int  # bytes one block may opt in to
    tensor_cores: str  # what tl.dot lowers to there

    @property
    def name(self) -> str:
        return f"sm_{self.capability}"


# Shared memory per block: the CUDA programming guide's "maximum amount of shared memory per thread
# block" (compute capability 9.0: 227 KB = 232,448 B; 12.0: 99 KB = 101,376 B).
ARCHS: dict[int, Arch] = {
    90: Arch(90, 232448, "wgmma (64-row warpgroups) and mma.sync"),
    120: Arch(120, 101376, "mma.sync (no wgmma); block-scaled FP8 MMA"),
}


def has_warpgroup_mma(capability: int) -> bool:
    """Tensor cores that take a 64-row operand per warpgroup (wgmma on sm_90, tcgen05 on sm_100)."""
    return capability // 10 in (9, 10)


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
    """The profile to use: the argument, else env ``MLAPERF_ARCH_PROFILE``, else ``native``."""
    if arch_profile is None:
        env = os.environ.get(ENV_PROFILE, "").strip()
        if not env:
            return "native"
        if env not in ARCH_PROFILES:
            raise ValueError(f"{ENV_PROFILE}={env!r} is not one of {', '.join(ARCH_PROFILES)}")
        return env
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


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's public ceilings: memory bandwidth and dense bf16 tensor rate with fp32 accumulation
    (what the MMA decode uses). Sources in docs/runner-roofline.md."""

    name: str
    capability: int
    sms: int
    bandwidth_gbps: float
    bf16_tflops: float


GPU_SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("RTX PRO 6000 Blackwell", 120, 188, 1792.0, 503.8),
    GpuSpec("RTX 5090", 120, 170, 1792.0, 209.5),
    GpuSpec("H200", 90, 132, 4800.0, 989.4),
)


def gpu_spec(device_name: str) -> GpuSpec | None:
    """The public specification of a GPU by its CUDA device name, or None for an unlisted GPU."""
    for spec in GPU_SPECS:
        if spec.name.lower() in device_name.lower():
            return spec
    return None
