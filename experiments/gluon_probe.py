#!/usr/bin/env python
"""What this Triton's Gluon dialect offers for a producer/consumer MMA decode, and whether it runs here.

Reports, one line each: the Gluon modules and entry points the decode would need (``warp_specialize``
and its signature, ``mma_v2``, ``async_copy``, ``mbarrier``, ``warpgroup_mma``, shared-memory
descriptors), then compiles and runs one ``mma_v2`` tile (bf16 [64, 64] x [64, 64], fp32 accumulate)
and checks it against torch. Needs a CUDA GPU for the run; the feature lines print anywhere.

    python -m experiments.gluon_probe [--json PATH]
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any


def features() -> dict[str, str]:
    """Entry point -> 'yes (signature)' or 'missing: why'."""
    found: dict[str, str] = {}
    probes = {
        "gluon": ("triton.experimental.gluon", "jit"),
        "warp_specialize": ("triton.experimental.gluon.language", "warp_specialize"),
        "allocate_shared_memory": ("triton.experimental.gluon.language", "allocate_shared_memory"),
        "NVMMADistributedLayout": ("triton.experimental.gluon.language", "NVMMADistributedLayout"),
        "mma_v2": ("triton.experimental.gluon.language.nvidia.ampere", "mma_v2"),
        "async_copy": ("triton.experimental.gluon.language.nvidia.ampere", "async_copy"),
        "mbarrier": ("triton.experimental.gluon.language.nvidia.hopper", "mbarrier"),
        "warpgroup_mma": ("triton.experimental.gluon.language.nvidia.hopper", "warpgroup_mma"),
        "tma": ("triton.experimental.gluon.language.nvidia.hopper", "tma"),
    }
    import importlib

    for name, (module, attr) in probes.items():
        try:
            obj = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            found[name] = f"missing: {exc}"
            continue
        try:
            sig = str(inspect.signature(obj)) if callable(obj) and not inspect.ismodule(obj) else "module"
        except (TypeError, ValueError):
            sig = "?"
        found[name] = f"yes {sig}"
    return found


def mma_v2_tile() -> str:
    """Compile and run one Gluon mma_v2 tile; 'ok (max err ...)' or what failed."""
    try:
        import torch
        from triton.experimental import gluon
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.language.nvidia.ampere import mma_v2
    except ImportError as exc:
        return f"import failed: {exc}"

    @gluon.jit
    def _tile(a_ptr, b_ptr, c_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr):
        blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1], instr_shape=[16, 8])
        rm = gl.arange(0, M, layout=gl.SliceLayout(1, blocked))
        rn = gl.arange(0, N, layout=gl.SliceLayout(0, blocked))
        rk0 = gl.arange(0, K, layout=gl.SliceLayout(0, blocked))
        rk1 = gl.arange(0, K, layout=gl.SliceLayout(1, blocked))
        a = gl.load(a_ptr + rm[:, None] * K + rk0[None, :])
        b = gl.load(b_ptr + rk1[:, None] * N + rn[None, :])
        a = gl.convert_layout(a, gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2))
        b = gl.convert_layout(b, gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2))
        acc = mma_v2(a, b, gl.zeros([M, N], gl.float32, mma))
        gl.store(c_ptr + rm[:, None] * N + rn[None, :], gl.convert_layout(acc, blocked))

    try:
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(64, 64, device="cuda", generator=g).to(torch.bfloat16)
        b = torch.randn(64, 64, device="cuda", generator=g).to(torch.bfloat16)
        c = torch.full((64, 64), float("nan"), device="cuda")
        _tile[(1,)](a, b, c, 64, 64, 64, num_warps=4)
        torch.cuda.synchronize()
        err = float((c - a.float() @ b.float()).abs().max())
    except Exception as exc:  # noqa: BLE001 - the probe reports whatever Gluon raises
        return f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    return f"ok (max abs err {err:.2e})" if err < 1e-2 else f"wrong (max abs err {err:.2e})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.gluon_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--json", type=Path, help="also write the record to this file")
    args = ap.parse_args(argv)
    import torch
    import triton

    record: dict[str, Any] = {"triton": triton.__version__, "torch": torch.__version__, "features": features()}
    record["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    record["mma_v2_tile"] = mma_v2_tile() if torch.cuda.is_available() else "not run (no CUDA device)"
    print(f"Gluon on triton {record['triton']} ({record['device'] or 'no GPU'}):")
    for name, what in record["features"].items():
        print(f"  {name:24s} {what}")
    print(f"  {'mma_v2 tile run':24s} {record['mma_v2_tile']}")
    if args.json:
        args.json.write_text(json.dumps(record, indent=1))
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
