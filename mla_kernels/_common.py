"""Shared helpers for the launchers: interpreter detection, device limits, argument checks."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from settings import env as _env

interpreting = _env.interpreting  # the one reading of Triton's switch (settings.env)


@functools.cache
def interpreter_problem() -> str | None:
    """Why Triton's interpreter cannot run these kernels here, or None (asked once per process).

    Triton 3.6's interpreter turns a runtime loop bound into a Python int with ``int()`` of a 1-element
    array, which numpy 2.4 refuses: every kernel with a loop then fails deep inside the interpreter.
    A one-iteration probe kernel finds out, so the error names the versions instead.
    """
    import numpy
    import triton

    from ._probe import _loop_probe_kernel

    out = torch.zeros(1)
    try:
        _loop_probe_kernel[(1,)](out, 1)
    except Exception as exc:  # noqa: BLE001 - the interpreter wraps the TypeError in its own error
        if "0-dimensional" not in str(exc):
            raise
        return (
            f"Triton {triton.__version__}'s interpreter cannot run kernels with loops under numpy "
            f"{numpy.__version__} (it calls int() on a 1-element array): install numpy<2.4 or a newer Triton "
            "(3.9 works)"
        )
    return None


def check_device(name: str, t: torch.Tensor) -> None:
    """Kernels run on CUDA, or on the CPU only under the Triton interpreter."""
    if t.device.type == "cuda":
        return
    if t.device.type == "cpu" and interpreting():
        problem = interpreter_problem()
        if problem:
            raise RuntimeError(problem)
        return
    raise ValueError(
        f"{name} is on {t.device}; Triton kernels need a CUDA tensor (or TRITON_INTERPRET=1 for CPU tensors)"
    )


def check_tensor(
    name: str,
    t: object,
    *,
    dtype: torch.dtype | Sequence[torch.dtype],
    ndim: int,
) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    dtypes = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
    if t.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise ValueError(f"{name} must have dtype {want}, got {t.dtype}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    return t


def check_same_device(**tensors: torch.Tensor) -> None:
    devices = {k: v.device for k, v in tensors.items()}
    if len(set(devices.values())) > 1:
        detail = ", ".join(f"{k} on {d}" for k, d in devices.items())
        raise ValueError(f"all tensors must be on one device: {detail}")


def check_last_dim_contiguous(name: str, t: torch.Tensor) -> None:
    if t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension (stride {t.stride()})")


@functools.cache
def _cuda_props(index: int) -> tuple[int, int, tuple[int, int]]:
    props = torch.cuda.get_device_properties(index)
    smem = 0
    try:  # Triton knows the opt-in limit per block, which is what configs must fit
        import triton

        smem = int(triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"])
    except Exception:  # noqa: BLE001 - fall back to torch's view on older stacks
        smem = int(getattr(props, "shared_memory_per_block_optin", 0) or 101376)
    return props.multi_processor_count, smem, (props.major, props.minor)


def num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # interpreter: a small notional machine keeps split counts small
    return _cuda_props(device.index if device.index is not None else torch.cuda.current_device())[0]


def max_shared_mem(device: torch.device) -> int:
    """Shared memory one block may use on this device (bytes)."""
    if device.type != "cuda":
        return 101376  # the smallest target we support (sm_120 class)
    return _cuda_props(device.index if device.index is not None else torch.cuda.current_device())[1]


def capability(device: torch.device) -> tuple[int, int]:
    if device.type != "cuda":
        return (0, 0)
    return _cuda_props(device.index if device.index is not None else torch.cuda.current_device())[2]


def pdl_enabled(device: torch.device) -> bool:
    """Whether launches on ``device`` use programmatic dependent launch (``mla_kernels.pdl``): a CUDA device
    of compute capability 9.0 or later, not the interpreter, and ``MLAPERF_PDL`` not ``0``."""
    if interpreting() or device.type != "cuda" or not _env.pdl():
        return False
    return capability(device)[0] >= 9


def takes_pdl(kernel: object) -> bool:
    """Whether a Triton kernel has the ``PDL`` constexpr (and so waits for the previous grid)."""
    return "PDL" in getattr(kernel, "arg_names", ())


def pdl_constexprs(kernel: object, args: Sequence[object]) -> dict[str, bool]:
    """``{"PDL": True}`` for a kernel that takes it when its tensors' device uses PDL, else ``{}``."""
    if not takes_pdl(kernel):
        return {}
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    return {"PDL": True} if device is not None and pdl_enabled(device) else {}


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class KernelLaunch:
    """One Triton launch, fully resolved: what the launcher runs on a GPU and what ``mla_kernels.aot``
    compiles ahead of time for another architecture (the same arguments, so both see one kernel)."""

    name: str  # the registry name (``mla_kernels.decode.KERNELS`` / ``mla_kernels.indexer.KERNELS``)
    kernel: object  # a triton JITFunction
    grid: tuple[int, ...]
    args: tuple[object, ...]  # runtime arguments, in the kernel's order
    constexprs: dict[str, object] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 1
    in_order: bool = False  # launch in stream order (PDL False) whatever the device: a launcher's measured rule

    def __post_init__(self) -> None:
        # A kernel that takes PDL gets it decided here, once, where it was not given: the record, the
        # ahead-of-time compile and the launch then all see the same value (``mla_kernels.pdl``).
        if takes_pdl(self.kernel) and "PDL" not in self.constexprs:  # a copy: the caller's dict may be shared
            pdl = {"PDL": False} if self.in_order else pdl_constexprs(self.kernel, self.args)
            object.__setattr__(self, "constexprs", {**self.constexprs, **pdl})

    def run(self) -> object:
        """Launch it; returns Triton's compiled kernel (registers, spills, shared memory)."""
        pdl = bool(self.constexprs.get("PDL", False))
        return self.kernel[self.grid](  # type: ignore[index]
            *self.args, **self.constexprs, num_warps=self.num_warps, num_stages=self.num_stages, launch_pdl=pdl
        )


@dataclass(frozen=True)
class DiskCache:
    """A JSON file of results worth keeping across processes (compile stats, tuned configs).

    Its path is ``settings.env.cache_file``'s: the variable's value (``0`` turns the disk cache off), else
    ``~/.cache/mlaperf/<filename>``. A missing or corrupt file only costs the work it would have saved.
    """

    var: _env.Var
    filename: str

    def path(self) -> Path | None:
        return _env.cache_file(self.var, self.filename)

    def read(self) -> dict[str, Any]:
        path = self.path()
        if path is None or not path.exists():
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def put(self, key: str, value: Any) -> None:
        path = self.path()
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = {**self.read(), key: value}
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, sort_keys=True)
            os.replace(tmp, path)  # atomic: concurrent writers never leave half a file
        except OSError:
            pass
