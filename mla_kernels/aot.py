"""Ahead-of-time compilation of a launch for any NVIDIA architecture, no GPU needed.

Triton's compiler and its bundled ptxas build the cubin for the target (sm_90, sm_120, ...);
``cuobjdump --dump-resource-usage`` reads back registers and the local-memory frame. Results are
cached on disk (``MLAPERF_COMPILE_CACHE``, default ``~/.cache/mlaperf/compile.json``; ``0`` turns the
disk cache off) by kernel source, specialization, options, target and Triton version.

``spill_bytes`` is the per-thread local-memory frame: these kernels have no local arrays, so it is
what ptxas spilled, and it is the figure a GPU reports (Triton's ``n_spills`` is it divided by 4).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from settings import env as _env

from ._common import DiskCache, KernelLaunch

_DTYPES = {
    torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp64",
    torch.uint8: "u8", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
    torch.float8_e4m3fn: "fp8e4nv",
}  # fmt: skip
_LOCK = threading.Lock()
_MEMO: dict[str, CompileStats] = {}
_BY_LAUNCH: dict[tuple[object, ...], CompileStats] = {}


@dataclass(frozen=True)
class CompileStats:
    registers: int  # per thread
    spill_bytes: int  # local-memory frame per thread
    shared: int  # bytes of shared memory per block (Triton's allocation)
    mma: tuple[str, ...]  # tensor-core instructions in the PTX (e.g. mma.sync...bf16, wgmma...)
    seconds: float  # compile time (0 when read from the cache)


class CompileError(RuntimeError):
    pass


def _specialize(value: object) -> tuple[str, bool]:
    """(signature type, divisible by 16) of one runtime argument, as Triton's launcher derives them."""
    if isinstance(value, torch.Tensor):
        if value.dtype not in _DTYPES:
            raise CompileError(f"no Triton type for tensor dtype {value.dtype}")
        return "*" + _DTYPES[value.dtype], value.data_ptr() % 16 == 0
    if isinstance(value, bool):
        return "i1", False
    if isinstance(value, int):
        return ("i32" if -(2**31) <= value < 2**31 else "i64"), value % 16 == 0
    if isinstance(value, float):
        return "fp32", False
    raise CompileError(f"cannot specialize an argument of type {type(value).__name__}")


def signature(launch: KernelLaunch) -> tuple[dict[str, str], dict[str, object], dict[tuple[int, ...], list]]:
    """Triton signature, constexprs and attributes of a launch (ints equal to 1 become constexprs and
    pointers / ints divisible by 16 get the divisibility hint, as at a real launch)."""
    fn = launch.kernel
    names: list[str] = list(getattr(fn, "arg_names", []))
    if not names:
        raise CompileError(
            f"{launch.name}: not a compiled Triton kernel (under TRITON_INTERPRET=1 nothing is compiled)"
        )
    params = getattr(fn, "params", [])
    # constexprs the launch leaves at their default (``PDL`` off where it was not decided)
    defaults = {p.name: p.default for p in params if getattr(p, "is_constexpr", False) and p.has_default}
    constexprs: dict[str, object] = {**defaults, **launch.constexprs}
    runtime = [n for n in names if n not in constexprs]
    if len(runtime) != len(launch.args):
        raise CompileError(f"{launch.name}: {len(launch.args)} arguments for {len(runtime)} runtime parameters")
    values = dict(zip(runtime, launch.args, strict=True))
    fixed = {p.name for p in params if getattr(p, "do_not_specialize", False)}
    sig: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list] = {}
    for i, name in enumerate(names):
        if name not in values:
            sig[name] = "constexpr"
            continue
        value = values[name]
        if name in fixed:  # @triton.jit(do_not_specialize=...): one compile for every value
            sig[name] = _specialize(value)[0]
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value == 1:
            sig[name] = "constexpr"
            constexprs[name] = 1
            continue
        kind, div16 = _specialize(value)
        sig[name] = kind
        if div16:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, constexprs, attrs


_CACHE = DiskCache(_env.COMPILE_CACHE, "compile.json")


def cache_key(launch: KernelLaunch, capability: int) -> str:
    import triton

    sig, constexprs, attrs = signature(launch)
    text = json.dumps(
        [getattr(launch.kernel, "cache_key", ""), sig, sorted((str(k), v) for k, v in constexprs.items()),
         sorted((str(k), v) for k, v in attrs.items()), launch.num_warps, launch.num_stages, capability,
         triton.__version__],
        default=str,
    )  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _tool(name: str) -> str:
    """A CUDA binary tool Triton bundles (cuobjdump), wherever this Triton version keeps it."""
    import shutil

    import triton

    try:
        from triton import knobs

        path = getattr(knobs.nvidia, name).path
        if path and Path(path).exists():
            return str(path)
    except (ImportError, AttributeError, RuntimeError):
        pass
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if bundled.exists():
        return str(bundled)
    found = shutil.which(name)
    if found is None:
        raise CompileError(f"{name} not found (Triton bundles it under backends/nvidia/bin)")
    return found


_RESOURCES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
_MMA = re.compile(r"\b(wgmma\.mma_async[\w.:]*|mma\.sync\.aligned[\w.:]*)")


def cuobjdump(cubin: bytes, flag: str) -> subprocess.CompletedProcess[str]:
    """``cuobjdump FLAG`` over a compiled kernel's cubin (``--dump-resource-usage``, ``-sass``), through a
    temporary file; the caller reads its output and return code."""
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
        fh.write(cubin)
        path = fh.name
    try:
        return subprocess.run([_tool("cuobjdump"), flag, path], capture_output=True, text=True, check=False)
    finally:
        os.unlink(path)


def _resources(cubin: bytes) -> tuple[int, int]:
    proc = cuobjdump(cubin, "--dump-resource-usage")
    found = _RESOURCES.findall(proc.stdout)
    if proc.returncode != 0 or not found:
        raise CompileError(f"cuobjdump could not read the cubin: {proc.stderr.strip() or proc.stdout.strip()}")
    regs, stack, _shared, local = (int(v) for v in found[-1])
    return regs, stack + local


def lookup(launch: KernelLaunch, capability: int) -> CompileStats | None:
    """The cached resources of a launch (memo, then disk), or None."""
    key = cache_key(launch, capability)
    with _LOCK:
        if key in _MEMO:
            return _MEMO[key]
    stored = _CACHE.read().get(key)
    if stored is None:
        return None
    stats = CompileStats(**{**stored, "mma": tuple(stored.get("mma", ()))})
    with _LOCK:
        _MEMO[key] = stats
    return stats


def store(launch: KernelLaunch, capability: int, stats: CompileStats) -> None:
    key = cache_key(launch, capability)
    with _LOCK:
        _MEMO[key] = stats
    _CACHE.put(key, {**asdict(stats), "seconds": 0.0})


def _launch_key(launch: KernelLaunch, capability: int) -> tuple[object, ...]:
    """What decides a launch's compile, without hashing its signature (``cache_key`` costs about 50 us, this
    about 7: launchers that size a grid by it call it per launch). As discriminating as ``signature``: the
    kernel, its given constexprs, warps, stages, and each argument's type, alignment and being the int 1."""
    spec = tuple((*_specialize(a), isinstance(a, int) and not isinstance(a, bool) and a == 1) for a in launch.args)
    constexprs = tuple(sorted((str(k), v) for k, v in launch.constexprs.items()))
    return (launch.kernel, constexprs, launch.num_warps, launch.num_stages, capability, spec)


def compile_launch(launch: KernelLaunch, capability: int) -> CompileStats:
    """Compile one launch for ``sm_<capability>`` and return its resources (memo by launch, then by cache
    key, then disk cache)."""
    key = _launch_key(launch, capability)
    with _LOCK:
        if key in _BY_LAUNCH:
            return _BY_LAUNCH[key]
    stats = lookup(launch, capability)
    if stats is None:
        stats = compile_uncached(launch, capability)
        store(launch, capability, stats)
    with _LOCK:
        _BY_LAUNCH[key] = stats
    return stats


def compile_asm(launch: KernelLaunch, capability: int) -> tuple[dict[str, object], int]:
    """Compile one launch for ``sm_<capability>`` as it would launch (Triton or Gluon kernel, its warps,
    stages and argument specialization): (the compiled ``asm`` by stage, ptx and cubin among them; the
    shared memory it needs in bytes). Raises ``CompileError`` naming the launch."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig, constexprs, attrs = signature(launch)
    if getattr(launch.kernel, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource  # noqa: N814
    src = ASTSource(launch.kernel, sig, constexprs, attrs)
    options = {"num_warps": launch.num_warps, "num_stages": launch.num_stages, "enable_fp_fusion": True}
    try:
        compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32), options=options)
    except Exception as exc:  # noqa: BLE001 - name the launch; keep the compiler's message
        raise CompileError(f"{launch.name} for sm_{capability}: {type(exc).__name__}: {str(exc)[:400]}") from exc
    return compiled.asm, int(getattr(compiled.metadata, "shared", 0))


def compile_uncached(launch: KernelLaunch, capability: int) -> CompileStats:
    start = time.perf_counter()
    asm, shared = compile_asm(launch, capability)
    seconds = time.perf_counter() - start
    regs, spill = _resources(asm["cubin"])  # type: ignore[arg-type]
    ptx = str(asm["ptx"])
    mma = tuple(sorted({m.rstrip(".") for m in _MMA.findall(ptx)}))
    return CompileStats(registers=regs, spill_bytes=spill, shared=shared, mma=mma, seconds=round(seconds, 2))
