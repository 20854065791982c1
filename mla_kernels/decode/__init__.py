"""Sparse MLA decode: kernels (``kernels``; the Gluon ones in ``gluon_kernels`` and, for sm_90, ``wgmma_kernels``
and its warp-specialized form ``wgmma_ws_kernels``), the split-K LSE combine (``combine``), launchers
(``launch``), MMA and Gluon autotuner (``tuning``).

The cache layout it reads is ``mla_kernels.cache``; its pure-torch reference (fp32) and plain-torch bf16
baseline are ``reference``.
"""

from ..arch import SPILL_ALLOWED, verdict
from . import gluon_kernels, wgmma_kernels, wgmma_ws_kernels
from .combine import combine_launch
from .launch import (
    IMPLS,
    KERNEL_IMPLS,
    KERNELS,
    PROFILED_IMPLS,
    decode_with_config,
    gluon_unavailable,
    mma_launches,
    simt_launch,
    simt_tile,
    sparse_mla_decode,
    sparse_mla_decode_with_record,
    split_plan,
)
from .tuning import (
    CANDIDATES,
    GLUON_CANDIDATES,
    MAX_SPLITS,
    WGMMA_CANDIDATES,
    MmaConfig,
    arch_candidates,
    config_split_counts,
    judged_launches,
    launch_label,
    split_counts,
)

__all__ = [
    "CANDIDATES",
    "GLUON_CANDIDATES",
    "IMPLS",
    "KERNEL_IMPLS",
    "PROFILED_IMPLS",
    "WGMMA_CANDIDATES",
    "KERNELS",
    "MAX_SPLITS",
    "SPILL_ALLOWED",
    "arch_candidates",
    "MmaConfig",
    "combine_launch",
    "decode_with_config",
    "gluon_kernels",
    "wgmma_kernels",
    "wgmma_ws_kernels",
    "gluon_unavailable",
    "judged_launches",
    "config_split_counts",
    "launch_label",
    "mma_launches",
    "simt_launch",
    "simt_tile",
    "sparse_mla_decode",
    "sparse_mla_decode_with_record",
    "split_counts",
    "split_plan",
    "verdict",
]
