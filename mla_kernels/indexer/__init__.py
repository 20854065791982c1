"""Lightning indexer + top-k: score every cached token of a request, return the top-k physical slots.

Index cache layout (one page = 256 tokens, ``page_stride >= 256 * 132`` bytes, a multiple of 4):
``[256 x 128 FP8 e4m3 keys][256 x fp32 scales]``; a token's key is ``fp8 * scale`` with
``scale = amax / 448``. An all-zero key is stored with scale 0 (and zero FP8 bytes).

``logit[b, t] = sum_h weights[b, h] * relu(q_idx[b, h] . (k_t * scale_t))`` for ``t < seq_lens[b]``;
``indexer_topk`` returns the physical slots ``block_table[b, t // 256] * 256 + t % 256`` of the
``topk`` highest logits (valid ones first, order otherwise free), ``-1`` where a request has fewer
tokens than ``topk``.

Implementations:
- ``reference``: torch (fp64 accumulation, returned as fp32 logits; syncs with the host).
- ``fp32_maxctx``: the story's slow baseline: one Triton program per (request, 64-token block) over the
  whole capacity of the block table, fp32 SIMT arithmetic (broadcast-multiply-sum per head, no
  ``tl.dot``), masked afterwards, then ``torch.topk`` over ``[B, max_context]``.
- ``bf16``: bf16 tensor-core products with tokens as the MMA's rows (``tl.dot`` of ``k[BLOCK_T, 128] x
  q^T[128, H]``, ``token_scores``), programs stride over each request's real length with the page-table walk
  fused into the tile loads; then a split top-k select (``split``): every chunk of a request is selected by
  its own program (the k-th largest key found in registers, two bits a round), and a request longer than one
  chunk is finished by a merge over its chunks' candidates, so one long request spreads over many SMs; where
  the caller gives the longest request's length (``max_seq_len``) and it fits one program (``split.ONE_MAX``),
  one program a request selects it whole. Where a full-capacity request's candidates would not fit one merge
  program, the single-program radix select (8-bit histograms over order-preserving uint32 keys) runs instead,
  recorded as such. ``select_rule.SELECT`` (one line) picks the select among ``select_rule.SELECTS``: that split
  ("split"), the split with byte-histogram rounds ("split_radix"), or the global radix select (``radix``:
  every pass spread over slices of every request, per-request histograms merged by atomics, the last program
  of a request resolving its bucket; "radix_fused" runs its first pass inside the scores kernel), or the
  scores and that radix select in one launch ("coop", ``coop``: phases separated by grid barriers, so only
  configs of which its programs per SM fit at once are kept). The record's ``select``
  names it. No host sync, no data-dependent shapes: CUDA-graph
  capturable once autotuning has been resolved by a warm-up call. ``indexer_topk_with_record`` also returns the
  ``LaunchRecord`` of the kernels and their resolved configs.

Both Triton paths compute in fp32 under the Triton interpreter (``FP32_MATH``), which mishandles bf16.
``seq_lens`` past the block table's capacity are clamped to it by the Triton paths (the reference
raises); block-table entries for pages a request does not use are never dereferenced by ``bf16``, and
are clamped into range by ``fp32_maxctx`` (which reads the whole capacity, as the baseline did). A
token on an out-of-range page within ``seq_lens`` (a caller error) ranks last and comes back as ``-1``.
"""

from __future__ import annotations

from .checks import INDEXER_IMPLS
from .inputs import IndexerInputs, check_indexer_output, make_indexer_inputs
from .launch import KERNELS, indexer_topk, indexer_topk_with_record, indexer_workspace
from .layout import INDEX_PAGE_BYTES, dequantize_index_cache, quantize_index_cache
from .matrix import compile_matrix
from .reference import indexer_logits_reference, indexer_reference

__all__ = [
    "INDEXER_IMPLS",
    "INDEX_PAGE_BYTES",
    "KERNELS",
    "IndexerInputs",
    "check_indexer_output",
    "compile_matrix",
    "dequantize_index_cache",
    "indexer_logits_reference",
    "indexer_reference",
    "indexer_topk",
    "indexer_topk_with_record",
    "indexer_workspace",
    "make_indexer_inputs",
    "quantize_index_cache",
]
