"""FP8 paged KV cache in the DeepSeek-V4-Flash / FlashMLA "MODEL1" byte layout.

Per token 584 bytes: 576 data bytes (448 FP8 e4m3 "nope" values, then 64 bf16 "rope" values) and 8 scale
bytes (7 UE8M0 exponents, one per group of 64 nope values, then one pad byte). A page holds 256 tokens as
``[256 x 576 data bytes][256 x 8 scale bytes]`` = 149,504 bytes; pages may be padded (any stride >= that).
"""

from __future__ import annotations

import torch

TOKENS_PER_PAGE = 256
NOPE_DIM = 448
ROPE_DIM = 64
HEAD_DIM = NOPE_DIM + ROPE_DIM  # 512
GROUP_SIZE = 64
NUM_GROUPS = NOPE_DIM // GROUP_SIZE  # 7
DATA_BYTES = NOPE_DIM + 2 * ROPE_DIM  # 576
SCALE_BYTES = 8
TOKEN_BYTES = DATA_BYTES + SCALE_BYTES  # 584
PAGE_BYTES = TOKENS_PER_PAGE * TOKEN_BYTES  # 149,504
SCALE_OFFSET = TOKENS_PER_PAGE * DATA_BYTES  # where a page's scale rows start
FP8_MAX = 448.0
AMAX_FLOOR = 1e-4


def _ceil_log2(x: torch.Tensor) -> torch.Tensor:
    """Exact ceil(log2(x)) for positive finite fp32 x (no float log rounding at powers of two)."""
    mantissa, exponent = torch.frexp(x)  # x = mantissa * 2**exponent, mantissa in [0.5, 1)
    return torch.where(mantissa == 0.5, exponent - 1, exponent)


def ue8m0_scales(amax: torch.Tensor) -> torch.Tensor:
    """Exponent bytes for groups with the given absolute maxima: scale = 2**ceil(log2(max(amax,1e-4)/448))."""
    ratio = amax.float().clamp_min(AMAX_FLOOR) / FP8_MAX
    exp = _ceil_log2(ratio)
    return (exp + 127).clamp(0, 254).to(torch.uint8)


def quantize_kv_cache(kv: torch.Tensor, page_stride: int | None = None) -> torch.Tensor:
    """Quantize ``kv[num_tokens, 512]`` into a ``uint8[num_pages, page_stride]`` paged cache.

    Token ``t`` lands in page ``t // 256`` at offset ``t % 256``; the tail of the last page is zero.
    """
    if not isinstance(kv, torch.Tensor):
        raise ValueError(f"kv must be a torch.Tensor, got {type(kv).__name__}")
    if kv.dim() != 2 or kv.shape[1] != HEAD_DIM:
        raise ValueError(f"kv must have shape [num_tokens, {HEAD_DIM}], got {tuple(kv.shape)}")
    if not kv.is_floating_point():
        raise ValueError(f"kv must be a floating-point tensor, got {kv.dtype}")
    stride = PAGE_BYTES if page_stride is None else int(page_stride)
    if stride < PAGE_BYTES:
        raise ValueError(f"page_stride must be >= {PAGE_BYTES} bytes, got {stride}")
    if not torch.isfinite(kv).all():
        raise ValueError("kv contains inf or NaN; FP8 quantization needs finite values")

    num_tokens = kv.shape[0]
    num_pages = max(1, -(-num_tokens // TOKENS_PER_PAGE))
    padded = torch.zeros(num_pages * TOKENS_PER_PAGE, HEAD_DIM, dtype=torch.float32, device=kv.device)
    padded[:num_tokens] = kv.float()

    nope = padded[:, :NOPE_DIM].view(-1, NUM_GROUPS, GROUP_SIZE)  # [T, 7, 64]
    exps = ue8m0_scales(nope.abs().amax(dim=-1))  # [T, 7]
    scale = torch.ldexp(torch.ones_like(exps, dtype=torch.float32), exps.to(torch.int32) - 127)
    fp8 = (nope / scale.unsqueeze(-1)).to(torch.float8_e4m3fn)  # |x / scale| <= 448 by construction
    rope = padded[:, NOPE_DIM:].to(torch.bfloat16)

    data = torch.cat([fp8.view(torch.uint8).view(-1, NOPE_DIM), rope.view(torch.uint8)], dim=1)  # [T, 576]
    scales = torch.zeros(data.shape[0], SCALE_BYTES, dtype=torch.uint8, device=kv.device)
    scales[:, :NUM_GROUPS] = exps

    cache = torch.zeros(num_pages, stride, dtype=torch.uint8, device=kv.device)
    cache[:, :SCALE_OFFSET] = data.view(num_pages, SCALE_OFFSET)
    cache[:, SCALE_OFFSET:PAGE_BYTES] = scales.view(num_pages, TOKENS_PER_PAGE * SCALE_BYTES)
    return cache


def check_kv_cache(kv_cache: object, name: str = "kv_cache") -> torch.Tensor:
    if not isinstance(kv_cache, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(kv_cache).__name__}")
    if kv_cache.dtype != torch.uint8 or kv_cache.dim() != 2:
        raise ValueError(
            f"{name} must be uint8 [num_pages, page_stride], got {kv_cache.dtype} {tuple(kv_cache.shape)}"
        )
    if kv_cache.shape[1] < PAGE_BYTES:
        raise ValueError(f"{name} pages must hold >= {PAGE_BYTES} bytes, got {kv_cache.shape[1]}")
    if kv_cache.stride(1) != 1:
        raise ValueError(f"{name} must be contiguous within a page (strides {kv_cache.stride()})")
    return kv_cache


def gather_tokens(kv_cache: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """Dequantize the tokens at physical ``slots`` (any shape, values in range) to fp32 ``[..., 512]``."""
    page = (slots // TOKENS_PER_PAGE).long()
    off = (slots % TOKENS_PER_PAGE).long()
    data_cols = off.unsqueeze(-1) * DATA_BYTES + torch.arange(DATA_BYTES, device=slots.device)
    scale_cols = (
        SCALE_OFFSET + off.unsqueeze(-1) * SCALE_BYTES + torch.arange(SCALE_BYTES, device=slots.device)
    )
    rows = page.unsqueeze(-1)
    data = kv_cache[rows, data_cols]  # [..., 576] uint8
    exps = kv_cache[rows, scale_cols][..., :NUM_GROUPS]  # [..., 7] uint8
    return _dequantize_rows(data, exps)


def _dequantize_rows(data: torch.Tensor, exps: torch.Tensor) -> torch.Tensor:
    lead = data.shape[:-1]
    nope = data[..., :NOPE_DIM].contiguous().view(torch.float8_e4m3fn).float()
    scale = torch.ldexp(torch.ones_like(exps, dtype=torch.float32), exps.to(torch.int32) - 127)
    nope = (nope.view(*lead, NUM_GROUPS, GROUP_SIZE) * scale.unsqueeze(-1)).view(*lead, NOPE_DIM)
    rope = data[..., NOPE_DIM:].contiguous().view(torch.bfloat16).float()
    return torch.cat([nope, rope], dim=-1)


def dequantize_kv_cache(kv_cache: torch.Tensor) -> torch.Tensor:
    """Dequantize a whole cache to ``bf16[num_pages * 256, 512]`` (exact: scales are powers of two)."""
    check_kv_cache(kv_cache)
    num_pages = kv_cache.shape[0]
    data = kv_cache[:, :SCALE_OFFSET].reshape(num_pages * TOKENS_PER_PAGE, DATA_BYTES)
    scales = kv_cache[:, SCALE_OFFSET:PAGE_BYTES].reshape(num_pages * TOKENS_PER_PAGE, SCALE_BYTES)
    return _dequantize_rows(data, scales[:, :NUM_GROUPS]).to(torch.bfloat16)
