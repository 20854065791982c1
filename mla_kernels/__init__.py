"""Sparse-MLA decode kernels for DeepSeek-V4-class models over an FP8 paged KV cache (Triton)."""

from .arch import ARCH_PROFILES
from .cache import PAGE_BYTES, TOKENS_PER_PAGE, dequantize_kv_cache, quantize_kv_cache
from .decode import IMPLS as DECODE_IMPLS
from .decode import sparse_mla_decode, sparse_mla_decode_with_record
from .indexer import (
    INDEX_PAGE_BYTES,
    INDEXER_IMPLS,
    IndexerInputs,
    check_indexer_output,
    dequantize_index_cache,
    indexer_logits_reference,
    indexer_reference,
    indexer_topk,
    indexer_topk_with_record,
    indexer_workspace,
    make_indexer_inputs,
    quantize_index_cache,
)
from .record import KernelRun, LaunchRecord
from .step import DecodeStep, StepInputs, make_step_inputs
from .testing import DecodeInputs, make_decode_inputs, make_kv_cache

__all__ = [
    "ARCH_PROFILES",
    "DECODE_IMPLS",
    "INDEXER_IMPLS",
    "INDEX_PAGE_BYTES",
    "DecodeStep",
    "IndexerInputs",
    "StepInputs",
    "check_indexer_output",
    "dequantize_index_cache",
    "indexer_logits_reference",
    "indexer_reference",
    "indexer_topk",
    "indexer_topk_with_record",
    "indexer_workspace",
    "make_indexer_inputs",
    "make_step_inputs",
    "quantize_index_cache",
    "KernelRun",
    "LaunchRecord",
    "PAGE_BYTES",
    "TOKENS_PER_PAGE",
    "DecodeInputs",
    "dequantize_kv_cache",
    "make_decode_inputs",
    "make_kv_cache",
    "quantize_kv_cache",
    "sparse_mla_decode",
    "sparse_mla_decode_with_record",
]
