"""Test-wide setup: kernels run on the GPU when present, else on the CPU under the Triton interpreter."""

from __future__ import annotations

import os

# Must happen before triton is imported anywhere: without a GPU the kernels run in the interpreter.
if os.environ.get("MLAPERF_FORCE_INTERPRET") == "1":
    os.environ["TRITON_INTERPRET"] = "1"
else:
    try:
        import torch

        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")
    except ImportError:  # pragma: no cover - torch is a hard dependency
        pass
