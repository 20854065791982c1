"""Programmatic dependent launch (PDL, sm_90 and later): a kernel may start while the one before it on the
stream is still finishing.

A launch with PDL lets the GPU place the kernel's programs as soon as every program of the previous kernel has
signalled (``gdc_launch_dependents``) or exited, instead of after that kernel has drained and the next launch
has been processed: at one request, where each kernel of the decode step is a few microseconds, that gap is a
large part of the step. Correctness rests on one rule: a kernel that takes the ``PDL`` constexpr calls
``wait_prior_grid(PDL)`` before it touches memory, and ``griddepcontrol.wait`` returns only when the previous
kernel has completed and its writes are visible. Right after it the kernel signals its own dependents, so the
next kernel's programs are placed on free SMs while this one runs; they wait in their own ``wait_prior_grid``.
The grid-barrier kernel (``indexer.coop``) does not take ``PDL`` and launches in stream order: placed early
beside the previous kernel's programs it made the one-request step slower (its comment has the figures), and a
kernel after it starts only as its programs exit. The split select of one program a request does the same from
``split.IN_ORDER_BATCH`` requests, and at ``split.IN_ORDER_FEW`` (where with PDL the step lost 2.4-3.1 us, and as
much without its signal: not the decode placed beside it), where its block is up to ``split.IN_ORDER_MAX_BLOCK``
lanes (its plan gives ``PDL=False``); and so does the MMA decode's split kernel from ``decode.launch.IN_ORDER_BATCH``
requests, whose PDL made the step slower at 96-128 requests of 16K-64K: its signal let the next layer's scores kernel be
placed beside it, and a scores kernel placed early ran 8% longer after the decode ended, on every SM alike
(session 47), in the small L1 the decode's shared-memory carveout leaves (session 48). The split select's loss
went away wherever one of its programs fills an SM by its registers (32 warps, or blocks of 8,192 lanes):
consistent with two 4,096-lane programs packing onto each of the first SMs the scores kernel frees (not
observed SM by SM); its blocks of more than 4,096 lanes keep PDL (``split.one_chunk_pdl``).

Which launches use it is decided in one place, ``mla_kernels._common`` (``pdl_constexprs``, which
``KernelLaunch`` and the autotuned indexer launches call): a kernel that takes ``PDL``, on a CUDA device of
compute capability 9.0 or later, not under the interpreter, unless ``MLAPERF_PDL=0`` (``settings.env``, an
A/B switch) or the launcher asks for stream order (``KernelLaunch.in_order``: the split select's and the MMA
decode's rules above).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def wait_prior_grid(PDL: tl.constexpr):
    # First thing in a PDL kernel: wait for the previous kernel's writes, then let the next kernel's
    # programs be placed (they wait in turn).
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
