"""GPU identity recorded with every benchmark run, and the environment names the runner passes to asv.

asv's machine.json has no GPU field, so the runner adds these keys to the asv machine entry
(``~/.asv-machine.json``); asv copies them into ``machine.json`` and into every result file's
``params``, where ingestion reads them. All values are strings, as asv's own machine fields are.

Keys (docs/CONTRACTS.md): the store's GPU columns (``db.models.GPU_COLUMNS``: ``gpu_name``, ``gpu_cc``
("9.0"), ``gpu_sm_count``, ``gpu_memory_gb`` (GiB, one decimal), ``gpu_driver``, ``cuda`` (the CUDA
version torch was built with), ``torch``, ``triton``) and ``arch_profile``: the MMA configs the kernels
choose from when a benchmark names none (``MLAPERF_ARCH_PROFILE``, default ``native``). A machine
without a usable CUDA device reports ``gpu_name: "none"`` and "none"/"0" for the other GPU fields.

The environment names are defined here once; the runner sets them and ``benchmarks/_tier.py`` reads
them (it loads this file from the benchmarking checkout by path, so this module's top level imports
the standard library only).

Run ``python -m mlaperf.gpuinfo`` to print the identity of this machine as JSON.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Environment of a benchmark process (set by ``mlaperf run``, read by the suites).
TIER_ENV = "MLAPERF_TIER"  # gpu | cpu
CONCURRENCY_ENV = "MLAPERF_CONCURRENCY"  # comma-separated subset of the concurrency grid
ARCH_PROFILE_ENV = "MLAPERF_ARCH_PROFILE"  # one of ARCH_PROFILES
# mla_kernels.ARCH_PROFILES, copied: this module imports no torch (tests/bench/test_gpuinfo.py keeps them equal).
ARCH_PROFILES = ("native", "sm_90", "sm_120")

NONE = "none"


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's public ceilings: memory bandwidth and dense bf16 tensor rate with fp32 accumulation
    (what the MMA decode uses). Sources in docs/runner-roofline.md; ``mlaperf doctor`` and the
    dashboard's Efficiency page read them here."""

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


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return NONE


def _torch_version() -> str:
    try:
        import torch
    except ImportError:
        return NONE
    return str(torch.__version__)


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return _version("triton")
    return str(getattr(triton, "__version__", _version("triton")))


def driver_version(device_index: int = 0) -> str:
    """NVIDIA driver version from nvidia-smi, else /proc/driver/nvidia/version, else "unknown"."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=driver_version", "--format=csv,noheader", "-i", str(device_index)],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.strip()
            if out:
                return out.splitlines()[0].strip()
        except (OSError, subprocess.SubprocessError):
            pass
    proc = Path("/proc/driver/nvidia/version")
    try:
        m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", proc.read_text())
    except OSError:
        m = None
    return m.group(1) if m else "unknown"


def cuda_available() -> bool:
    """True when torch sees a CUDA device (torch's check does not create a CUDA context)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def gpu_keys() -> tuple[str, ...]:
    """The GPU identity keys: the store's GPU columns, one definition (``db.models.GPU_COLUMNS``)."""
    from db.models import GPU_COLUMNS

    return tuple(GPU_COLUMNS)


def arch_profile() -> str:
    """The architecture profile kernels use when a caller names none (``MLAPERF_ARCH_PROFILE``, default
    ``native``); ValueError for a value the kernels would reject, so no run records it."""
    value = os.environ.get(ARCH_PROFILE_ENV, "").strip() or "native"
    if value not in ARCH_PROFILES:
        raise ValueError(f"{ARCH_PROFILE_ENV}={value!r} is not one of {', '.join(ARCH_PROFILES)}")
    return value


def _checked(info: dict[str, str]) -> dict[str, str]:
    missing = set(gpu_keys()) - set(info)
    if missing:  # the store added a GPU column this module does not fill yet
        raise RuntimeError(f"GPU identity lacks {sorted(missing)} (db.models.GPU_COLUMNS)")
    return {**info, "arch_profile": arch_profile()}


def cpu_identity() -> dict[str, str]:
    """Identity of a machine benchmarked without a GPU (the CPU smoke tier)."""
    cuda = NONE
    try:
        import torch

        cuda = str(torch.version.cuda) if torch.version.cuda else NONE
    except ImportError:
        pass
    return _checked(
        {
            "gpu_name": NONE,
            "gpu_cc": NONE,
            "gpu_sm_count": "0",
            "gpu_memory_gb": "0",
            "gpu_driver": NONE,
            "cuda": cuda,
            "torch": _torch_version(),
            "triton": _triton_version(),
        }
    )


def gpu_identity(device_index: int = 0) -> dict[str, str]:
    """Identity of CUDA device ``device_index``; raises RuntimeError when there is none."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device is available (torch.cuda.is_available() is False)")
    count = torch.cuda.device_count()
    if not 0 <= device_index < count:
        raise ValueError(f"device_index {device_index} is out of range: {count} CUDA device(s)")
    props = torch.cuda.get_device_properties(device_index)
    return _checked(
        {
            "gpu_name": str(props.name),
            "gpu_cc": f"{props.major}.{props.minor}",
            "gpu_sm_count": str(props.multi_processor_count),
            "gpu_memory_gb": f"{props.total_memory / 2**30:.1f}",
            "gpu_driver": driver_version(device_index),
            "cuda": str(torch.version.cuda or NONE),
            "torch": _torch_version(),
            "triton": _triton_version(),
        }
    )


def identity(tier: str = "auto", device_index: int = 0) -> dict[str, str]:
    """GPU identity for ``tier`` "gpu", "cpu" or "auto" (gpu when CUDA is available)."""
    if tier not in ("auto", "gpu", "cpu"):
        raise ValueError(f"tier must be 'auto', 'gpu' or 'cpu', got {tier!r}")
    if tier == "cpu" or (tier == "auto" and not cuda_available()):
        return cpu_identity()
    return gpu_identity(device_index)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mlaperf.gpuinfo",
        description="Print this machine's GPU identity (the keys mlaperf run adds to asv's machine entry) as "
        "JSON. Exit status: 0 ok, 2 no usable CUDA device for --tier gpu / --device.",
    )
    parser.add_argument(
        "--tier",
        choices=("auto", "gpu", "cpu"),
        default="auto",
        help="gpu: CUDA device required; cpu: the smoke tier's identity; auto: gpu when present",
    )
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    args = parser.parse_args(argv)
    try:
        info = identity(args.tier, args.device)
    except (RuntimeError, ValueError) as exc:  # no usable device for --tier/--device: bad usage
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
