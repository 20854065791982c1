"""GPU identity recorded with every benchmark run, GPUs' datasheet peaks, and the device's measured ceilings.

asv's machine.json has no GPU field, so the runner adds these keys to the asv machine entry
(``~/.asv-machine.json``); asv copies them into ``machine.json`` and into every result file's
``params``, where ingestion reads them. All values are strings, as asv's own machine fields are.

Keys (docs/CONTRACTS.md): the store's GPU columns (``GPU_KEYS``, which ``db.models.GPU_COLUMNS`` is:
``gpu_name``, ``gpu_cc`` ("9.0"), ``gpu_sm_count``, ``gpu_memory_gb`` (GiB, one decimal), ``gpu_driver``,
``cuda`` (the CUDA version torch was built with), ``torch``, ``triton``) and ``arch_profile``: the MMA
configs the kernels choose from when a benchmark names none (``MLAPERF_ARCH_PROFILE``, default ``native``). A machine
without a usable CUDA device reports ``gpu_name: "none"`` and "none"/"0" for the other GPU fields.

Run ``python -m settings.gpu`` to print the identity of this machine as JSON.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from settings import env

NONE = "none"
# The GPU identity keys, one column each in the store (db.models.GPU_COLUMNS is this tuple).
GPU_KEYS: tuple[str, ...] = ("gpu_name", "gpu_cc", "gpu_sm_count", "gpu_memory_gb", "gpu_driver", "cuda", "torch",
                             "triton")  # fmt: skip


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
    GpuSpec("H100 80GB HBM3", 90, 132, 3350.0, 989.4),  # the SXM5 board's CUDA name; PCIe and NVL differ
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


def _checked(info: dict[str, str]) -> dict[str, str]:
    missing = set(GPU_KEYS) - set(info)
    if missing:  # a key added to GPU_KEYS that this module does not fill yet
        raise RuntimeError(f"GPU identity lacks {sorted(missing)} (GPU_KEYS)")
    return {**info, "arch_profile": env.arch_profile()}


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
    if tier not in ("auto", *env.TIERS):
        raise ValueError(f"tier must be 'auto', 'gpu' or 'cpu', got {tier!r}")
    if tier == "cpu" or (tier == "auto" and not cuda_available()):
        return cpu_identity()
    return gpu_identity(device_index)


# --- measured ceilings ------------------------------------------------------------------------------
# The suites' roofline fraction and `mlaperf doctor` divide by these: the device's copy bandwidth and
# bf16 matmul rate, measured once per device and cached (settings.env.ceilings_file()).


def _measure_gpu(device: Any) -> dict[str, float]:
    import torch

    def best(fn: Any, reps: int) -> float:
        fn()
        torch.cuda.synchronize(device)
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return min(times)

    def copy_seconds(n: int) -> float:
        src = torch.ones(n, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        return best(lambda: dst.copy_(src), 10)

    def matmul_seconds(m: int) -> float:
        a = torch.randn(m, m, dtype=torch.bfloat16, device=device)
        b = torch.randn(m, m, dtype=torch.bfloat16, device=device)
        return best(lambda: a @ b, 10)

    n, m = 1 << 30, 8192  # 1 GiB copies: far larger than any L2
    copy_gbps = 2 * n / copy_seconds(n) / 1e9
    torch.cuda.empty_cache()
    return {"copy_gbps": copy_gbps, "matmul_tflops": 2 * m**3 / matmul_seconds(m) / 1e12}


def _measure_cpu() -> dict[str, float]:
    import time

    import torch

    def best(fn: Any, reps: int) -> float:
        fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    n = 128 << 20
    src = torch.ones(n, dtype=torch.uint8)
    dst = torch.empty_like(src)
    t_copy = best(lambda: dst.copy_(src), 5)
    m = 512  # the interpreter computes in fp32, so the CPU ceiling is an fp32 matmul
    a, b = torch.randn(m, m), torch.randn(m, m)
    t_mm = statistics.median([best(lambda: a @ b, 5) for _ in range(3)])
    return {"copy_gbps": 2 * n / t_copy / 1e9, "matmul_tflops": 2 * m**3 / t_mm / 1e12}


def ceilings(device: Any) -> dict[str, float]:
    """Copy bandwidth (GB/s, read + write) and matmul rate (TFLOP/s) of ``device``, cached on disk."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        key = f"gpu:{torch.cuda.get_device_name(device)}"
    else:
        import platform

        key = f"cpu:{platform.processor() or platform.machine()}:{os.cpu_count()}"
    path = env.ceilings_file()
    try:
        table = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        table = {}
    entry = table.get(key)
    if isinstance(entry, dict) and entry.get("copy_gbps", 0) > 0 and entry.get("matmul_tflops", 0) > 0:
        return {"copy_gbps": float(entry["copy_gbps"]), "matmul_tflops": float(entry["matmul_tflops"])}
    measured = _measure_gpu(device) if device.type == "cuda" else _measure_cpu()
    table[key] = measured
    if path is None:
        return measured
    try:  # atomic replace: several benchmark processes may race to write it
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ceilings-")
        with os.fdopen(fd, "w") as fh:
            json.dump(table, fh, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # read-only home: measured again next time, results are still right
    return measured


def main(argv: list[str] | None = None) -> int:
    from settings import exits
    from settings.args import add_tier

    parser = argparse.ArgumentParser(
        prog="python -m settings.gpu",
        description="Print this machine's GPU identity (the keys mlaperf run adds to asv's machine entry) as "
        "JSON. Exit status: 0 ok, 2 no usable CUDA device for --tier gpu / --device.",
    )
    add_tier(parser)
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    args = parser.parse_args(argv)
    try:
        info = identity(args.tier, args.device)
    except (RuntimeError, ValueError) as exc:  # no usable device for --tier/--device: bad usage
        print(f"error: {exc}", file=sys.stderr)
        return exits.USAGE
    print(json.dumps(info, indent=2, sort_keys=True))
    return exits.OK


if __name__ == "__main__":
    sys.exit(main())
