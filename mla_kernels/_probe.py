"""A one-loop kernel that ``_common.interpreter_problem`` runs under Triton's interpreter."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _loop_probe_kernel(out_ptr, n):
    acc = tl.zeros([1], dtype=tl.float32)
    for _ in range(n):  # a runtime loop bound: what Triton 3.6's interpreter mishandles under numpy 2.4
        acc += 1.0
    tl.store(out_ptr + tl.arange(0, 1), acc)
