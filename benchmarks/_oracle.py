"""Independent float64 oracles of sparse MLA decode and of the lightning indexer, written from the
contracts in ``docs/design.md`` and ``mla_kernels.indexer``'s docstring (its index-cache layout).

They share no code with ``mla_kernels`` (no import from it, not even a constant): a change to the
package's references and its kernels together cannot move them (``tests/oracle/test_hand_worked.py``
runs both in a fresh interpreter and checks that no ``mla_kernels`` module was loaded). Both decode
the caches byte by byte from the bit fields the contracts name, instead of through torch's fp8 dtype.

Decode (:func:`decode`), over the FP8 "MODEL1" KV cache:

* per page ``[256 x 576 data bytes][256 x 8 scale bytes]`` (149,504 bytes; any larger page stride);
  a token's data bytes are 448 FP8 e4m3 "nope" values, then 64 bf16 "rope" values (little endian);
  its scale bytes are 7 UE8M0 exponents (one per 64 nope values) and a pad byte.
* e4m3 (bias 7, no infinities, S.1111.111 = NaN); UE8M0 byte ``e`` = ``2**(e - 127)``; bf16 = the
  top half of an IEEE float32.
* ``s = (q . k) * sm_scale`` over the valid slots (``sm_scale`` defaults to ``512 ** -0.5``),
  ``lse = ln(sum exp(s))``, ``out = softmax(s) @ k`` with V = the whole 512-value key. A slot is
  valid when ``0 <= slot < num_pages * 256`` (``-1`` marks an invalid slot; the launcher documents
  slots outside the cache as invalid too). A slot listed twice counts twice. A row with no valid
  slot gives ``out = 0`` and ``lse = +inf``.

Indexer (:func:`indexer_logits`), over the index cache:

* per page ``[256 x 128 FP8 e4m3 key bytes][256 x fp32 scales]`` (33,792 bytes; any larger page
  stride); a scale is 4 little-endian bytes of an IEEE float32; a token's key is ``e4m3 * scale``.
* ``logit[b, t] = sum_h weights[b, h] * relu(q_idx[b, h] . k_t)`` for ``t < seq_lens[b]``, where token
  ``t`` of request ``b`` is slot ``t % 256`` of page ``block_table[b, t // 256]``; ``-inf`` elsewhere.

Everything is computed in float64 on the inputs' device and returned unrounded (float64), so a
comparison with a bf16 ``out`` sees the kernel's rounding as part of its error.

This module lives in the tracker's checkout: asv imports the benchmark directory of the checkout
that runs it (``mlaperf run`` uses the current checkout's suites for every commit), so the commit
under test cannot change the oracle its gate uses.
"""

from __future__ import annotations

import math
from typing import Any

TOKENS_PER_PAGE = 256
NOPE, ROPE = 448, 64
DIM = NOPE + ROPE  # 512
GROUP = 64  # nope values per UE8M0 scale
DATA_BYTES = NOPE + 2 * ROPE  # 576
SCALE_BYTES = 8
PAGE_BYTES = TOKENS_PER_PAGE * (DATA_BYTES + SCALE_BYTES)  # 149,504
SCALE_AREA = TOKENS_PER_PAGE * DATA_BYTES  # where a page's scale rows start
INDEX_DIM = 128  # FP8 e4m3 key bytes per token of the index cache
INDEX_SCALES = TOKENS_PER_PAGE * INDEX_DIM  # where an index page's fp32 scales start
INDEX_PAGE_BYTES = TOKENS_PER_PAGE * (INDEX_DIM + 4)  # 33,792


def e4m3_value(byte: int) -> float:
    """The FP8 e4m3 ("fn": finite, one NaN pattern per sign) value of one byte."""
    sign = -1.0 if byte & 0x80 else 1.0
    exp, man = (byte >> 3) & 0xF, byte & 0x7
    if exp == 0xF and man == 0x7:
        return math.nan
    if exp == 0:  # subnormal: 0.mmm * 2**(1 - 7)
        return sign * man / 8 * 2.0**-6
    return sign * (1 + man / 8) * 2.0 ** (exp - 7)


def bf16_value(bits: int) -> float:
    """The bfloat16 value of a 16-bit pattern (sign, 8 exponent bits, 7 mantissa bits)."""
    sign = -1.0 if bits & 0x8000 else 1.0
    exp, man = (bits >> 7) & 0xFF, bits & 0x7F
    if exp == 0xFF:
        return math.nan if man else sign * math.inf
    if exp == 0:
        return sign * man / 128 * 2.0**-126
    return sign * (1 + man / 128) * 2.0 ** (exp - 127)


def fp32_values(bits: Any) -> Any:
    """float64 values of IEEE float32 bit patterns (an integer tensor): sign, 8 exponent bits (bias 127),
    23 mantissa bits; exponent 0 is subnormal, 255 infinity or NaN."""
    import torch

    bits = bits.long()
    sign = torch.where((bits >> 31) & 1 == 1, -1.0, 1.0).double()
    exp, man = (bits >> 23) & 0xFF, (bits & 0x7FFFFF).double()
    normal = torch.ldexp(1 + man / 2**23, exp - 127)
    subnormal = man / 2**23 * 2.0**-126
    special = torch.where(man == 0, math.inf, math.nan).double()
    return sign * torch.where(exp == 0, subnormal, torch.where(exp == 0xFF, special, normal))


def ue8m0_value(byte: int) -> float:
    """The scale of a UE8M0 exponent byte: ``2**(byte - 127)`` (the design's definition)."""
    return 2.0 ** (byte - 127)


_TABLES: dict[Any, tuple[Any, Any, Any]] = {}


def _tables(device: Any) -> tuple[Any, Any, Any]:
    """float64 lookup tables (e4m3 [256], bf16 [65536], UE8M0 [256]) on ``device``."""
    import torch

    key = str(device)
    if key not in _TABLES:
        e4m3 = torch.tensor([e4m3_value(b) for b in range(256)], dtype=torch.float64)
        bf16 = torch.tensor([bf16_value(b) for b in range(1 << 16)], dtype=torch.float64)
        ue8m0 = torch.tensor([ue8m0_value(b) for b in range(256)], dtype=torch.float64)
        _TABLES[key] = (e4m3.to(device), bf16.to(device), ue8m0.to(device))
    return _TABLES[key]


def token_values(kv_cache: Any, slots: Any) -> Any:
    """float64 ``[..., 512]`` keys of the tokens at physical ``slots`` (all in range), from the bytes."""
    import torch

    e4m3, bf16, ue8m0 = _tables(kv_cache.device)
    slots = slots.long()
    page, off = slots // TOKENS_PER_PAGE, slots % TOKENS_PER_PAGE
    rows = page.unsqueeze(-1)
    cols = off.unsqueeze(-1) * DATA_BYTES + torch.arange(DATA_BYTES, device=slots.device)
    data = kv_cache[rows, cols].long()  # [..., 576]
    cols = SCALE_AREA + off.unsqueeze(-1) * SCALE_BYTES + torch.arange(NOPE // GROUP, device=slots.device)
    scales = ue8m0[kv_cache[rows, cols].long()]  # [..., 7]
    nope = e4m3[data[..., :NOPE]] * scales.repeat_interleave(GROUP, dim=-1)  # [..., 448]
    lo, hi = data[..., NOPE::2], data[..., NOPE + 1 :: 2]  # little-endian bf16 halves
    rope = bf16[lo | (hi << 8)]  # [..., 64]
    return torch.cat([nope, rope], dim=-1)


def decode(q: Any, kv_cache: Any, indices: Any, sm_scale: float | None = None) -> tuple[Any, Any]:
    """float64 ``(out [B, H, 512], lse [B, H])`` of sparse MLA decode, by the contract.

    ``q`` [B, H, 512] (any float dtype), ``kv_cache`` uint8 [num_pages, page_stride >= 149,504],
    ``indices`` integer [B, topk].
    """
    import torch

    if kv_cache.dtype != torch.uint8 or kv_cache.dim() != 2 or kv_cache.shape[1] < PAGE_BYTES:
        raise ValueError(f"kv_cache must be uint8 [num_pages, >= {PAGE_BYTES}], got {kv_cache.dtype} "
                         f"{tuple(kv_cache.shape)}")  # fmt: skip
    if q.dim() != 3 or q.shape[2] != DIM or indices.dim() != 2 or indices.shape[0] != q.shape[0]:
        raise ValueError(f"q must be [B, H, {DIM}] and indices [B, topk]; got {tuple(q.shape)}, "
                         f"{tuple(indices.shape)}")  # fmt: skip
    scale = DIM**-0.5 if sm_scale is None else float(sm_scale)
    idx = indices.long()
    valid = (idx >= 0) & (idx < kv_cache.shape[0] * TOKENS_PER_PAGE)  # [B, topk]
    k = token_values(kv_cache, torch.where(valid, idx, torch.zeros_like(idx)))  # [B, topk, 512]
    s = torch.einsum("bhd,bkd->bhk", q.double(), k) * scale  # [B, H, topk]
    s = s.masked_fill(~valid.unsqueeze(1), -math.inf)
    m = s.amax(dim=-1, keepdim=True)  # [B, H, 1]; -inf on an empty row
    empty = torch.isneginf(m)
    p = torch.exp(s - torch.where(empty, torch.zeros_like(m), m))  # 0 at invalid slots
    denom = p.sum(dim=-1, keepdim=True)  # >= 1 on a non-empty row
    out = torch.einsum("bhk,bkd->bhd", p, k) / torch.where(empty, torch.ones_like(denom), denom)
    out = out.masked_fill(empty, 0.0)
    lse = torch.where(empty, torch.full_like(m, math.inf), m + torch.log(denom)).squeeze(-1)
    return out, lse


def index_keys(index_cache: Any, pages: Any) -> Any:
    """float64 ``[len(pages), 256, 128]`` keys of the given index-cache pages, from the bytes."""
    e4m3 = _tables(index_cache.device)[0]
    rows = index_cache[pages.long()]  # [P, page_stride] uint8
    keys = e4m3[rows[:, :INDEX_SCALES].long()].reshape(-1, TOKENS_PER_PAGE, INDEX_DIM)
    b = rows[:, INDEX_SCALES:INDEX_PAGE_BYTES].long().reshape(-1, TOKENS_PER_PAGE, 4)  # little endian
    scales = fp32_values(b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24))
    return keys * scales[..., None]


def indexer_logits(q_idx: Any, weights: Any, index_cache: Any, block_table: Any, seq_lens: Any) -> Any:
    """float64 ``[B, max_pages * 256]`` indexer logits by token position, ``-inf`` at ``t >= seq_lens[b]``.

    ``q_idx`` [B, H, 128] (any float dtype), ``weights`` [B, H], ``index_cache`` uint8 [num_pages,
    page_stride >= 33,792], ``block_table`` integer [B, max_pages], ``seq_lens`` integer [B] within
    ``[0, max_pages * 256]``; the pages a request uses must be in the cache.
    """
    import torch

    if index_cache.dtype != torch.uint8 or index_cache.dim() != 2 or index_cache.shape[1] < INDEX_PAGE_BYTES:
        raise ValueError(f"index_cache must be uint8 [num_pages, >= {INDEX_PAGE_BYTES}], got {index_cache.dtype} "
                         f"{tuple(index_cache.shape)}")  # fmt: skip
    batch, max_pages = block_table.shape
    out = torch.full((batch, max_pages * TOKENS_PER_PAGE), -math.inf, dtype=torch.float64, device=q_idx.device)
    for b, length in enumerate(int(n) for n in seq_lens.tolist()):
        if not 0 <= length <= max_pages * TOKENS_PER_PAGE:
            raise ValueError(f"seq_lens[{b}] = {length} is outside [0, {max_pages * TOKENS_PER_PAGE}]")
        if length == 0:
            continue
        pages = block_table[b, : -(-length // TOKENS_PER_PAGE)]
        if bool(((pages < 0) | (pages >= index_cache.shape[0])).any()):
            raise ValueError(f"request {b} uses a page outside the index cache: {pages.tolist()}")
        k = index_keys(index_cache, pages).reshape(-1, INDEX_DIM)[:length]  # [T, 128]
        s = (q_idx[b].double() @ k.T).clamp_min(0)  # [H, T]: relu of each head's dot product
        out[b, :length] = weights[b].double() @ s
    return out
