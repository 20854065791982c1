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
- ``bf16``: bf16 tensor-core products (``tl.dot`` of ``q[H, 128] x k^T[128, BLOCK_T]``), programs stride
  over each request's real length only, then a per-request GPU radix select (up to 4 passes of 8-bit
  histograms over order-preserving uint32 keys, stopping once the k-th digit's bucket is taken whole;
  none for a request with at most ``topk`` tokens) and a compaction pass, all proportional to
  ``seq_lens[b]``. No host sync, no data-dependent shapes: CUDA-graph capturable once autotuning has
  been resolved by a warm-up call. ``LAST_LAUNCH`` records the kernels and their resolved configs.

Both Triton paths compute in fp32 under the Triton interpreter (``FP32_MATH``), which mishandles bf16.
``seq_lens`` past the block table's capacity are clamped to it by the Triton paths (the reference
raises); block-table entries for pages a request does not use are never dereferenced by ``bf16``, and
are clamped into range by ``fp32_maxctx`` (which reads the whole capacity, as the baseline did). A
token on an out-of-range page within ``seq_lens`` (a caller error) ranks last and comes back as ``-1``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from mla_kernels._common import (
    LAST_LAUNCH,
    check_device,
    check_last_dim_contiguous,
    check_same_device,
    check_tensor,
    interpreting,
    max_shared_mem,
    next_pow2,
    num_sms,
)

__all__ = [
    "INDEXER_IMPLS",
    "IndexerInputs",
    "check_indexer_output",
    "dequantize_index_cache",
    "indexer_logits_reference",
    "indexer_reference",
    "indexer_topk",
    "make_indexer_inputs",
    "quantize_index_cache",
]

PAGE_SIZE = 256
HEAD_DIM = 128
KEY_BYTES = PAGE_SIZE * HEAD_DIM  # the fp32 scales start here within a page
INDEX_PAGE_BYTES = PAGE_SIZE * (HEAD_DIM + 4)  # 33,792
FP8_MAX = 448.0
INDEXER_IMPLS = ("reference", "fp32_maxctx", "bf16")


# --------------------------------------------------------------------------------------------------
# Cache format
# --------------------------------------------------------------------------------------------------
def _check_page_stride(page_stride: int) -> None:
    if isinstance(page_stride, bool) or not isinstance(page_stride, int):
        raise ValueError(f"page_stride must be an int, got {type(page_stride).__name__}")
    if page_stride < INDEX_PAGE_BYTES or page_stride % 4:
        raise ValueError(
            f"page_stride must be a multiple of 4 and >= {INDEX_PAGE_BYTES} (256 x 132), got {page_stride}"
        )


def _quantize_pages(keys: torch.Tensor, out: torch.Tensor) -> None:
    """Quantize ``keys[n <= 256 * out.shape[0], 128]`` into the pages ``out`` (zero-filled tail)."""
    n = keys.shape[0]
    x = torch.zeros((out.shape[0] * PAGE_SIZE, HEAD_DIM), dtype=torch.float32, device=keys.device)
    x[:n] = keys.float()
    amax = x.abs().amax(dim=1)
    scale = amax / FP8_MAX
    # A zero key keeps scale 0: dividing by 1 instead leaves its FP8 bytes 0, and 0 * 0 = 0 on the way back.
    fp8 = (x / torch.where(scale > 0, scale, torch.ones_like(scale))[:, None]).to(torch.float8_e4m3fn)
    out[:, :KEY_BYTES] = fp8.view(torch.uint8).reshape(out.shape[0], KEY_BYTES)
    out[:, KEY_BYTES:INDEX_PAGE_BYTES] = scale.reshape(out.shape[0], PAGE_SIZE).view(torch.uint8)


def quantize_index_cache(keys: torch.Tensor, page_stride: int | None = None) -> torch.Tensor:
    """FP8 e4m3 keys with one fp32 scale (amax / 448) per token, paged 256 tokens a page.

    ``keys``: fp32 or bf16 ``[num_tokens, 128]``; token ``i`` lands in page ``i // 256`` at offset
    ``i % 256``. Returns uint8 ``[ceil(num_tokens / 256), page_stride]`` (default stride 33,792; padding
    bytes and unused tokens of the last page are zero).
    """
    check_tensor("keys", keys, dtype=(torch.float32, torch.bfloat16), ndim=2)
    if keys.shape[1] != HEAD_DIM:
        raise ValueError(f"keys must have shape [num_tokens, {HEAD_DIM}], got {tuple(keys.shape)}")
    if keys.shape[0] == 0:
        raise ValueError("keys must hold at least one token")
    if not bool(torch.isfinite(keys).all()):
        raise ValueError("keys must be finite (NaN or inf cannot be stored as FP8 e4m3 with a scale)")
    stride = INDEX_PAGE_BYTES if page_stride is None else page_stride
    _check_page_stride(stride)
    num_pages = triton.cdiv(keys.shape[0], PAGE_SIZE)
    cache = torch.zeros((num_pages, stride), dtype=torch.uint8, device=keys.device)
    _quantize_pages(keys, cache)
    return cache


def _check_index_cache(name: str, cache: object) -> torch.Tensor:
    check_tensor(name, cache, dtype=torch.uint8, ndim=2)
    assert isinstance(cache, torch.Tensor)
    check_last_dim_contiguous(name, cache)
    if cache.shape[1] < INDEX_PAGE_BYTES:
        raise ValueError(
            f"{name} must have at least {INDEX_PAGE_BYTES} bytes per page (256 x 132), "
            f"got shape {tuple(cache.shape)}"
        )
    if cache.shape[0] > 1 and cache.stride(0) % 4:
        raise ValueError(
            f"{name} page stride must be a multiple of 4 bytes (fp32 scales), got {cache.stride(0)}"
        )
    if cache.data_ptr() % 4:
        raise ValueError(f"{name} must start 4-byte aligned (fp32 scales)")
    return cache


def _dequantize_pages(cache: torch.Tensor, pages: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[len(pages) * 256, 128]`` keys of the given pages (fp8 value x fp32 scale, in ``dtype``)."""
    rows = cache[pages]
    fp8 = rows[:, :KEY_BYTES].contiguous().view(torch.float8_e4m3fn).reshape(-1, PAGE_SIZE, HEAD_DIM)
    scale = rows[:, KEY_BYTES:INDEX_PAGE_BYTES].contiguous().view(torch.float32)
    return (fp8.to(dtype) * scale.to(dtype)[:, :, None]).reshape(-1, HEAD_DIM)


def dequantize_index_cache(cache: torch.Tensor) -> torch.Tensor:
    """fp32 ``[num_pages * 256, 128]`` keys (``fp8 * scale``) of an index cache."""
    _check_index_cache("cache", cache)
    pages = torch.arange(cache.shape[0], device=cache.device)
    return _dequantize_pages(cache, pages, torch.float32)


# --------------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Dims:
    batch: int
    heads: int
    max_pages: int
    num_pages: int

    @property
    def max_context(self) -> int:
        return self.max_pages * PAGE_SIZE


def _check_args(
    q_idx: object,
    weights: object,
    index_cache: object,
    block_table: object,
    seq_lens: object,
    topk: object,
    impl: object,
) -> _Dims:
    if not isinstance(impl, str) or impl not in INDEXER_IMPLS:
        raise ValueError(f"impl must be one of {INDEXER_IMPLS}, got {impl!r}")
    if isinstance(topk, bool) or not isinstance(topk, int) or topk <= 0:
        raise ValueError(f"topk must be a positive int, got {topk!r}")
    q = check_tensor("q_idx", q_idx, dtype=torch.bfloat16, ndim=3)
    w = check_tensor("weights", weights, dtype=torch.float32, ndim=2)
    cache = _check_index_cache("index_cache", index_cache)
    bt = check_tensor("block_table", block_table, dtype=torch.int32, ndim=2)
    sl = check_tensor("seq_lens", seq_lens, dtype=torch.int32, ndim=1)
    batch, heads, dim = q.shape
    if dim != HEAD_DIM:
        raise ValueError(f"q_idx must have shape [B, H, {HEAD_DIM}], got {tuple(q.shape)}")
    if heads == 0 or heads % 16:
        raise ValueError(f"q_idx head count must be a positive multiple of 16, got {heads}")
    if tuple(w.shape) != (batch, heads):
        raise ValueError(f"weights must have shape [B, H] = [{batch}, {heads}], got {tuple(w.shape)}")
    if bt.shape[0] != batch:
        raise ValueError(f"block_table must have B = {batch} rows (from q_idx), got shape {tuple(bt.shape)}")
    if tuple(sl.shape) != (batch,):
        raise ValueError(f"seq_lens must have shape [B] = [{batch}], got {tuple(sl.shape)}")
    check_same_device(q_idx=q, weights=w, index_cache=cache, block_table=bt, seq_lens=sl)
    if impl != "reference":
        check_device("q_idx", q)
    for name, t in (("q_idx", q), ("weights", w), ("block_table", bt)):
        check_last_dim_contiguous(name, t)
    return _Dims(batch=batch, heads=heads, max_pages=bt.shape[1], num_pages=cache.shape[0])


# --------------------------------------------------------------------------------------------------
# Reference (torch)
# --------------------------------------------------------------------------------------------------
_REF_CHUNK_BYTES = 1 << 30  # bound on the fp64 temporaries of one chunk of requests


def indexer_logits_reference(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
) -> torch.Tensor:
    """fp32 ``[B, max_pages * 256]`` logits by token position, ``-inf`` at ``t >= seq_lens[b]``.

    Computed in fp64 (immune to TF32 settings), so it can judge near-ties of the kernels. Syncs with
    the host; raises ``ValueError`` for ``seq_lens`` outside ``[0, capacity]`` or a block-table entry of
    a used page outside ``[0, num_pages)``.
    """
    d = _check_args(q_idx, weights, index_cache, block_table, seq_lens, 1, "reference")
    dev = q_idx.device
    out = torch.full((d.batch, d.max_context), float("-inf"), dtype=torch.float32, device=dev)
    lens = seq_lens.tolist()
    bad = [(b, n) for b, n in enumerate(lens) if not 0 <= n <= d.max_context]
    if bad:
        b, n = bad[0]
        raise ValueError(f"seq_lens[{b}] = {n} is outside [0, {d.max_context}] (block_table capacity)")
    longest = max(lens, default=0)
    if longest == 0:
        return out
    npg = triton.cdiv(longest, PAGE_SIZE)
    span = npg * PAGE_SIZE
    lens_t = seq_lens.to(torch.int64)
    used = torch.arange(npg, device=dev)[None, :] * PAGE_SIZE < lens_t[:, None]  # [B, npg]
    pages = block_table[:, :npg].to(torch.int64)
    if bool(((pages < 0) | (pages >= d.num_pages))[used].any()):
        b, p = (((pages < 0) | (pages >= d.num_pages)) & used).nonzero()[0].tolist()
        raise ValueError(
            f"block_table[{b}, {p}] = {int(pages[b, p])} is outside [0, {d.num_pages}) for a used page"
        )
    pages = torch.where(used, pages, torch.zeros_like(pages))
    per_req = span * (HEAD_DIM + d.heads) * 8
    chunk = max(1, _REF_CHUNK_BYTES // per_req)
    t = torch.arange(span, device=dev)
    for b0 in range(0, d.batch, chunk):
        b1 = min(d.batch, b0 + chunk)
        k = _dequantize_pages(index_cache, pages[b0:b1].reshape(-1), torch.float64).reshape(
            b1 - b0, span, HEAD_DIM
        )
        s = torch.einsum("bhd,btd->bht", q_idx[b0:b1].to(torch.float64), k).clamp_min_(0)
        logit = torch.einsum("bh,bht->bt", weights[b0:b1].to(torch.float64), s).to(torch.float32)
        logit = torch.where(t[None, :] < lens_t[b0:b1, None], logit, float("-inf"))
        out[b0:b1, :span] = logit
    return out


def _slots_of_positions(block_table: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Physical slot of token position ``pos[b, j]`` of request ``b`` (int32)."""
    page = torch.gather(block_table, 1, torch.div(pos, PAGE_SIZE, rounding_mode="floor"))
    return page * PAGE_SIZE + pos % PAGE_SIZE


def _topk_slots(logits: torch.Tensor, block_table: torch.Tensor, topk: int) -> torch.Tensor:
    """Top-k over ``[B, C]`` logits (``-inf`` = invalid) to int32 slots, ``-1`` padded. Capturable."""
    batch, ctx = logits.shape
    k = min(topk, ctx)
    vals, pos = torch.topk(logits, k, dim=1)
    slots = _slots_of_positions(block_table, pos)
    slots = torch.where(torch.isneginf(vals), torch.full_like(slots, -1), slots).to(torch.int32)
    if k < topk:
        slots = torch.cat([slots, slots.new_full((batch, topk - k), -1)], dim=1)
    return slots.contiguous()


def indexer_reference(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
) -> torch.Tensor:
    """``indexer_topk(..., impl="reference")``: torch logits, then ``torch.topk``."""
    return indexer_topk(q_idx, weights, index_cache, block_table, seq_lens, topk, impl="reference")


# --------------------------------------------------------------------------------------------------
# Triton kernels
# --------------------------------------------------------------------------------------------------
@triton.jit
def _fp32_maxctx_scores_kernel(
    q_ptr, w_ptr, cache_ptr, bt_ptr, seq_ptr, logits_ptr,
    stride_qb, stride_qh, stride_wb, stride_page, stride_btb, stride_lb,
    H, num_pages,
    BLOCK_T: tl.constexpr,
):  # fmt: skip
    # The baseline: every (request, block) of the block table's capacity does the full fp32 work.
    j = tl.program_id(0)
    b = tl.program_id(1)
    t = j * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.arange(0, 128)
    raw_page = tl.load(bt_ptr + b * stride_btb + (j * BLOCK_T) // 256)
    # Capacity past the request: read a real page anyway (the baseline's work), mask afterwards.
    page = tl.minimum(tl.maximum(raw_page, 0), num_pages - 1)
    base = cache_ptr + page.to(tl.int64) * stride_page
    off = t % 256
    kb = tl.load(base + off[:, None] * 128 + d[None, :])
    scale = tl.load((base + 256 * 128).to(tl.pointer_type(tl.float32)) + off)
    k = kb.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale[:, None]
    acc = tl.zeros([BLOCK_T], dtype=tl.float32)
    for h in range(H):
        qh = tl.load(q_ptr + b * stride_qb + h * stride_qh + d).to(tl.float32)
        wh = tl.load(w_ptr + b * stride_wb + h)
        s = tl.sum(k * qh[None, :], axis=1)
        acc += wh * tl.maximum(s, 0.0)
    n = tl.load(seq_ptr + b)
    # Tokens past seq_lens, or on an unmapped page (seq_lens beyond the request's pages), rank last.
    acc = tl.where(t < tl.where((raw_page >= 0) & (raw_page < num_pages), n, 0), acc, float("-inf"))
    tl.store(logits_ptr + b * stride_lb + t, acc)


@triton.jit
def _bf16_scores_kernel(
    q_ptr, w_ptr, cache_ptr, bt_ptr, seq_ptr, logits_ptr,
    stride_qb, stride_qh, stride_wb, stride_page, stride_btb, stride_lb,
    H, num_pages, max_ctx,
    BLOCK_H: tl.constexpr, BLOCK_T: tl.constexpr, FP32_MATH: tl.constexpr,
):  # fmt: skip
    # Programs stride over the request's real length; a program past it does no iteration at all.
    pid = tl.program_id(0)
    b = tl.program_id(1)
    step = tl.num_programs(0) * BLOCK_T
    n = tl.minimum(tl.load(seq_ptr + b), max_ctx)
    if pid * BLOCK_T < n:  # idle programs skip even the q load
        hh = tl.arange(0, BLOCK_H)
        d = tl.arange(0, 128)
        tt = tl.arange(0, BLOCK_T)
        q = tl.load(
            q_ptr + b * stride_qb + hh[:, None] * stride_qh + d[None, :], mask=hh[:, None] < H, other=0.0
        )
        w = tl.load(w_ptr + b * stride_wb + hh, mask=hh < H, other=0.0)
        if FP32_MATH:  # the interpreter gets bf16 products wrong; fp32 there is exact
            q = q.to(tl.float32)
        for t0 in range(pid * BLOCK_T, n, step):
            t = t0 + tt
            page = tl.load(bt_ptr + b * stride_btb + t0 // 256)  # BLOCK_T divides 256: a block is in one page
            # Out-of-range pages are never read; a scalar test (interpreter mistypes bool scalar & tensor).
            ok = t < tl.where((page >= 0) & (page < num_pages), n, 0)
            base = cache_ptr + page.to(tl.int64) * stride_page
            off = t % 256
            kb = tl.load(base + off[:, None] * 128 + d[None, :], mask=ok[:, None], other=0)
            scale = tl.load((base + 256 * 128).to(tl.pointer_type(tl.float32)) + off, mask=ok, other=0.0)
            k = kb.to(tl.float8e4nv, bitcast=True)
            if FP32_MATH:
                s = tl.dot(q, tl.trans(k.to(tl.float32)))
            else:
                s = tl.dot(q, tl.trans(k.to(tl.bfloat16)))  # e4m3 -> bf16 is exact; fp32 accumulate
            s = tl.maximum(s * scale[None, :], 0.0)
            logit = tl.where(ok, tl.sum(s * w[:, None], axis=0), float("-inf"))  # unmapped page: ranks last
            tl.store(logits_ptr + b * stride_lb + t, logit, mask=t < n)


@triton.jit
def _order_key(x):
    # fp32 -> uint32 whose unsigned order is the float order (negatives flipped, positives get the top bit).
    bits = x.to(tl.uint32, bitcast=True)
    return tl.where((bits >> 31) != 0, ~bits, bits | 0x80000000)


@triton.jit
def _radix_select_kernel(
    logits_ptr, bt_ptr, seq_ptr, out_ptr,
    stride_lb, stride_btb, stride_ob,
    topk, max_ctx, num_pages,
    BLOCK: tl.constexpr,
):  # fmt: skip
    # One program per request: find the k-th largest key digit by digit (up to 4 x 8 bits), then compact.
    b = tl.program_id(0)
    n = tl.minimum(tl.maximum(tl.load(seq_ptr + b), 0), max_ctx)
    row = logits_ptr + b * stride_lb
    idx = tl.arange(0, BLOCK)
    bins = tl.arange(0, 256)
    # done: the selection is exactly {key >= prefix}. True at once for a short request (prefix 0 keeps
    # all), or after a pass whose k-th bucket is taken whole (the remaining passes are skipped).
    done = (n <= topk).to(tl.int32)
    prefix = tl.zeros([], dtype=tl.uint32)
    k_rem = topk + tl.zeros([], dtype=tl.int32)
    for p in tl.static_range(4):
        shift = 24 - 8 * p  # constexpr: p is a static_range index
        hist = tl.zeros([256], dtype=tl.int32)
        for start in range(0, tl.where(done > 0, 0, n), BLOCK):
            t = start + idx
            valid = t < n
            key = _order_key(tl.load(row + t, mask=valid, other=0.0))
            if p == 0:
                match = valid
            else:
                match = valid & ((key >> (shift + 8)) == (prefix >> (shift + 8)))
            digit = tl.where(match, (key >> shift) & 0xFF, 0).to(tl.int32)
            # Non-matching lanes were counted in bin 0; take them out (no reliance on histogram masks).
            misses = BLOCK - tl.sum(match.to(tl.int32), axis=0)
            hist += tl.histogram(digit, 256) - tl.where(bins == 0, misses, 0)
        total = tl.sum(hist, axis=0)
        count_gt = total - tl.cumsum(hist, 0)  # matching keys with a larger digit
        count_ge = count_gt + hist
        d_star = tl.sum((count_ge >= k_rem).to(tl.int32), axis=0) - 1
        new_k = k_rem - tl.sum(tl.where(bins == d_star, count_gt, 0), axis=0)
        in_bucket = tl.sum(tl.where(bins == d_star, hist, 0), axis=0)
        new_prefix = prefix | (d_star.to(tl.uint32) << shift)
        prefix = tl.where(done > 0, prefix, new_prefix)
        k_rem = tl.where(done > 0, k_rem, new_k)
        done = tl.where(in_bucket == new_k, 1, done)
    # Not done: prefix is the k-th largest key; k_rem of the keys equal to it are taken (first come first).
    k_eq = tl.where(done > 0, 0, k_rem)
    n_sel = tl.minimum(n, topk)
    n_gt = n_sel - k_eq
    base_gt = tl.zeros([], dtype=tl.int32)
    base_eq = tl.zeros([], dtype=tl.int32)
    for start in range(0, n, BLOCK):
        t = start + idx
        valid = t < n
        key = _order_key(tl.load(row + t, mask=valid, other=0.0))
        gt = valid & tl.where(done > 0, key >= prefix, key > prefix)
        eq = valid & (key == prefix)  # when done, k_eq = 0 takes none of these
        gt_i = gt.to(tl.int32)
        eq_i = eq.to(tl.int32)
        gt_pos = base_gt + tl.cumsum(gt_i, 0) - 1
        eq_rank = base_eq + tl.cumsum(eq_i, 0) - 1
        take = gt | (eq & (eq_rank < k_eq))
        pos = tl.where(gt, gt_pos, n_gt + eq_rank)
        page = tl.load(bt_ptr + b * stride_btb + t // 256, mask=take, other=0)
        slot = tl.where((page >= 0) & (page < num_pages), page * 256 + t % 256, -1)  # never a bogus slot
        tl.store(out_ptr + b * stride_ob + pos, slot, mask=take & (pos < topk))  # belt and braces
        base_gt += tl.sum(gt_i, axis=0)
        base_eq += tl.sum(eq_i, axis=0)
    for start in range(0, topk, BLOCK):
        o = start + idx
        tl.store(out_ptr + b * stride_ob + o, tl.full([BLOCK], -1, tl.int32), mask=(o >= n_sel) & (o < topk))


# --------------------------------------------------------------------------------------------------
# Launch configuration
# --------------------------------------------------------------------------------------------------
# Fixed configs for the interpreter (big tiles: fewer Python-level programs) and the SIMT baseline.
_INTERP_BLOCK_T = 128
_INTERP_SELECT_BLOCK = 1024
_FP32_BLOCK_T = 64
_FP32_WARPS = 4


def _score_smem_bytes(cfg: triton.Config, block_h: int) -> int:
    bt = cfg.kwargs["BLOCK_T"]
    # fp8 tiles in flight + the bf16 k^T operand + q, as staged in shared memory. Checked against
    # triton's own figure when compiled for sm_90 (e.g. BLOCK_T 128, BLOCK_H 64, 2 stages: 64 KiB).
    return (cfg.num_stages - 1) * bt * HEAD_DIM + bt * HEAD_DIM * 2 + block_h * HEAD_DIM * 2


@functools.cache
def _tuned_scores(smem: int, block_h: int) -> triton.runtime.Autotuner:
    configs = [
        triton.Config({"BLOCK_T": bt}, num_warps=nw, num_stages=ns)
        for bt in (32, 64, 128)
        for nw in (4, 8)
        for ns in (2, 3)
    ]
    fits = [c for c in configs if _score_smem_bytes(c, block_h) <= smem]
    return triton.autotune(configs=fits or configs[:1], key=["H", "BLOCK_H"])(_bf16_scores_kernel)


@functools.cache
def _tuned_select() -> triton.runtime.Autotuner:
    configs = [triton.Config({"BLOCK": bk}, num_warps=nw) for bk in (1024, 2048, 4096) for nw in (4, 8, 16)]
    return triton.autotune(configs=configs, key=["topk"])(_radix_select_kernel)


def _config_dict(cfg: triton.Config | None) -> dict[str, object]:
    if cfg is None:
        return {}
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def _programs_per_request(device: torch.device, batch: int) -> int:
    # Enough programs to fill the machine a few times over; each strides over its request's tokens.
    return max(1, triton.cdiv(num_sms(device) * 8, batch))


def _bf16_topk(
    q: torch.Tensor,
    w: torch.Tensor,
    cache: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    topk: int,
    d: _Dims,
) -> torch.Tensor:
    dev = q.device
    logits = torch.empty((d.batch, d.max_context), dtype=torch.float32, device=dev)
    out = torch.empty((d.batch, topk), dtype=torch.int32, device=dev)
    block_h = max(16, next_pow2(d.heads))
    per_req = _programs_per_request(dev, d.batch)
    score_args = (
        q, w, cache, bt, sl, logits,
        q.stride(0), q.stride(1), w.stride(0), cache.stride(0), bt.stride(0), logits.stride(0),
        d.heads, d.num_pages, d.max_context,
    )  # fmt: skip
    select_args = (
        logits, bt, sl, out, logits.stride(0), bt.stride(0), out.stride(0), topk, d.max_context, d.num_pages,
    )  # fmt: skip
    if interpreting():
        grid = (min(per_req, triton.cdiv(d.max_context, _INTERP_BLOCK_T)), d.batch)
        _bf16_scores_kernel[grid](*score_args, BLOCK_H=block_h, BLOCK_T=_INTERP_BLOCK_T, FP32_MATH=True)
        _radix_select_kernel[(d.batch,)](*select_args, BLOCK=_INTERP_SELECT_BLOCK)
        score_cfg: dict[str, object] = {"BLOCK_T": _INTERP_BLOCK_T}
        select_cfg: dict[str, object] = {"BLOCK": _INTERP_SELECT_BLOCK}
    else:
        scores = _tuned_scores(max_shared_mem(dev), block_h)
        score_grid = lambda meta: (min(per_req, triton.cdiv(d.max_context, meta["BLOCK_T"])), d.batch)
        scores[score_grid](*score_args, BLOCK_H=block_h, FP32_MATH=False)
        select = _tuned_select()
        select[(d.batch,)](*select_args)
        score_cfg = _config_dict(scores.best_config)
        select_cfg = _config_dict(select.best_config)
    LAST_LAUNCH.clear()
    LAST_LAUNCH.update(
        op="indexer_topk",
        impl="bf16",
        kernel="_bf16_scores_kernel+_radix_select_kernel",
        scores={"BLOCK_H": block_h, "programs_per_request": per_req, **score_cfg},
        select=select_cfg,
        interpreted=interpreting(),
    )
    return out


def _fp32_maxctx_topk(
    q: torch.Tensor,
    w: torch.Tensor,
    cache: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    topk: int,
    d: _Dims,
) -> torch.Tensor:
    logits = torch.empty((d.batch, d.max_context), dtype=torch.float32, device=q.device)
    block_t = _INTERP_BLOCK_T if interpreting() else _FP32_BLOCK_T
    _fp32_maxctx_scores_kernel[(d.max_context // block_t, d.batch)](
        q, w, cache, bt, sl, logits,
        q.stride(0), q.stride(1), w.stride(0), cache.stride(0), bt.stride(0), logits.stride(0),
        d.heads, d.num_pages,
        BLOCK_T=block_t, num_warps=_FP32_WARPS,
    )  # fmt: skip
    out = _topk_slots(logits, bt, topk)
    LAST_LAUNCH.clear()
    LAST_LAUNCH.update(
        op="indexer_topk",
        impl="fp32_maxctx",
        kernel="_fp32_maxctx_scores_kernel+torch.topk",
        scores={"BLOCK_T": block_t, "num_warps": _FP32_WARPS, "programs": d.max_context // block_t * d.batch},
        interpreted=interpreting(),
    )
    return out


def indexer_topk(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    impl: str = "bf16",
) -> torch.Tensor:
    """int32 ``[B, topk]`` physical slots of each request's ``topk`` highest indexer logits.

    ``q_idx`` bf16 ``[B, H, 128]`` (H a multiple of 16), ``weights`` fp32 ``[B, H]``, ``index_cache``
    uint8 ``[num_pages, page_stride]``, ``block_table`` int32 ``[B, max_pages]``, ``seq_lens`` int32
    ``[B]``. Valid slots come first in each row; ``-1`` pads rows with fewer than ``topk`` tokens.
    """
    d = _check_args(q_idx, weights, index_cache, block_table, seq_lens, topk, impl)
    if impl == "reference":
        logits = indexer_logits_reference(q_idx, weights, index_cache, block_table, seq_lens)
        LAST_LAUNCH.clear()
        LAST_LAUNCH.update(op="indexer_topk", impl="reference", kernel="torch")
        return _topk_slots(logits, block_table, topk)
    if d.batch == 0 or d.max_pages == 0 or d.num_pages == 0:
        LAST_LAUNCH.clear()
        LAST_LAUNCH.update(op="indexer_topk", impl=impl, kernel="none (empty input)")
        return torch.full((d.batch, topk), -1, dtype=torch.int32, device=q_idx.device)
    if impl == "fp32_maxctx":
        return _fp32_maxctx_topk(q_idx, weights, index_cache, block_table, seq_lens, topk, d)
    return _bf16_topk(q_idx, weights, index_cache, block_table, seq_lens, topk, d)


# --------------------------------------------------------------------------------------------------
# Inputs and output checks (tests, benchmarks)
# --------------------------------------------------------------------------------------------------
@dataclass
class IndexerInputs:
    q_idx: torch.Tensor
    weights: torch.Tensor
    index_cache: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    topk: int

    def args(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
        return (self.q_idx, self.weights, self.index_cache, self.block_table, self.seq_lens, self.topk)


def make_indexer_inputs(
    batch: int,
    context: int | list[int],
    *,
    max_context: int = 131072,
    num_heads: int = 64,
    topk: int = 512,
    device: torch.device | str = "cpu",
    seed: int = 0,
    page_stride: int | None = None,
) -> IndexerInputs:
    """Random requests over a quantized cache: each request owns its pages, shuffled across the cache.

    ``context`` is one length for all requests or one per request; block-table entries past a
    request's pages are ``-1``. Keys are quantized from normal values (random FP8 bytes could hold NaN).
    """
    dev = torch.device(device)
    lens = [context] * batch if isinstance(context, int) else list(context)
    if len(lens) != batch:
        raise ValueError(f"context must be an int or {batch} lengths, got {len(lens)}")
    if max_context <= 0 or max_context % PAGE_SIZE:
        raise ValueError(f"max_context must be a positive multiple of {PAGE_SIZE}, got {max_context}")
    if any(not 0 <= n <= max_context for n in lens):
        raise ValueError(f"context lengths must lie in [0, max_context={max_context}], got {lens}")
    stride = INDEX_PAGE_BYTES if page_stride is None else page_stride
    _check_page_stride(stride)
    g = torch.Generator(device=dev).manual_seed(seed)
    max_pages = max_context // PAGE_SIZE
    need = [triton.cdiv(n, PAGE_SIZE) for n in lens]
    num_pages = max(1, sum(need))
    perm = torch.randperm(num_pages, generator=g, device=dev).to(torch.int32)
    block_table = torch.full((batch, max_pages), -1, dtype=torch.int32, device=dev)
    at = 0
    for b, m in enumerate(need):
        block_table[b, :m] = perm[at : at + m]
        at += m
    cache = torch.empty((num_pages, stride), dtype=torch.uint8, device=dev)
    cache[:, INDEX_PAGE_BYTES:] = 0
    chunk = 512  # pages quantized at a time: bounds the fp32 temporaries at production sizes
    for p0 in range(0, num_pages, chunk):
        p1 = min(num_pages, p0 + chunk)
        keys = torch.randn(((p1 - p0) * PAGE_SIZE, HEAD_DIM), generator=g, device=dev)
        _quantize_pages(keys, cache[p0:p1])
    q = torch.randn((batch, num_heads, HEAD_DIM), generator=g, device=dev).to(torch.bfloat16)
    weights = torch.randn((batch, num_heads), generator=g, device=dev) * num_heads**-0.5
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=dev)
    return IndexerInputs(q, weights, cache, block_table, seq_lens, topk)


def check_indexer_output(
    indices: torch.Tensor,
    ref_logits: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> dict[str, float]:
    """Check a selection against reference logits (``indexer_logits_reference``); return its recall.

    Each row must hold ``min(seq_lens[b], topk)`` distinct slots of the request's own tokens, and
    ``-1`` elsewhere; every selected token's reference logit must be at least the k-th best minus
    ``atol + rtol * max|logit|`` of its row (selections may differ only at near-ties). Raises
    ``AssertionError`` naming the first bad row. Returns ``recall_min`` and ``recall_mean`` (fraction
    of the reference's top-k set that was selected; rows with no token count as 1).
    """
    batch, ctx = ref_logits.shape
    if tuple(indices.shape) != (batch, topk) or indices.dtype != torch.int32:
        raise AssertionError(
            f"indices must be int32 [{batch}, {topk}], got {indices.dtype} {tuple(indices.shape)}"
        )
    dev = ref_logits.device
    idx = indices.to(dev, torch.int64)
    lens = seq_lens.to(dev, torch.int64).clamp(0, ctx)
    n_valid = lens.clamp_max(topk)

    def fail(mask: torch.Tensor, what: str) -> None:
        if bool(mask.any()):
            b = int(mask.nonzero()[0, 0])
            raise AssertionError(f"row {b} (seq_len {int(lens[b])}): {what}")

    fail((idx < -1).any(1), "slot below -1")
    fail((idx >= 0).sum(1) != n_valid, f"expected min(seq_len, {topk}) valid slots")
    # Slot -> token position through the sorted slots of each request's own tokens.
    pos = torch.arange(ctx, device=dev)
    own = _slots_of_positions(block_table.to(dev, torch.int64), pos.expand(batch, ctx).contiguous())
    sentinel = torch.iinfo(torch.int64).max
    own = torch.where(pos[None, :] < lens[:, None], own, torch.full_like(own, sentinel))
    own_sorted, order = torch.sort(own, dim=1)
    at = torch.searchsorted(own_sorted, idx.clamp_min(0)).clamp_max(ctx - 1)
    found = torch.gather(own_sorted, 1, at) == idx
    fail(((idx >= 0) & ~found).any(1), "slot outside the request's tokens")
    sel_sorted, _ = torch.sort(idx, dim=1)
    fail(((sel_sorted[:, 1:] == sel_sorted[:, :-1]) & (sel_sorted[:, 1:] >= 0)).any(1), "duplicate slot")
    tok = torch.gather(order, 1, at)
    sel_logit = torch.gather(ref_logits, 1, tok)
    k = min(topk, ctx)
    ref_vals, ref_pos = torch.topk(ref_logits, k, dim=1)
    kth = torch.gather(ref_vals, 1, (n_valid.clamp_min(1) - 1).clamp_max(k - 1)[:, None])[:, 0]
    finite = torch.where(torch.isfinite(ref_logits), ref_logits.abs(), torch.zeros_like(ref_logits))
    tol = atol + rtol * finite.amax(1)
    fail(
        ((idx >= 0) & (sel_logit < (kth - tol)[:, None])).any(1), "selected a token below the k-th best logit"
    )
    # Recall: reference top-k slots present in the selection.
    ref_slots = _slots_of_positions(block_table.to(dev, torch.int64), ref_pos)
    ref_ok = torch.arange(k, device=dev)[None, :] < n_valid[:, None]
    hit = torch.searchsorted(sel_sorted, ref_slots).clamp_max(topk - 1)
    hit = (torch.gather(sel_sorted, 1, hit) == ref_slots) & ref_ok
    recall = torch.where(
        n_valid > 0, hit.sum(1) / n_valid.clamp_min(1), torch.ones_like(n_valid, dtype=torch.float)
    )
    return {
        "recall_min": float(recall.min()) if batch else 1.0,
        "recall_mean": float(recall.mean()) if batch else 1.0,
    }
