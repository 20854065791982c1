"""Index cache layout: one page = 256 tokens, ``[256 x 128 FP8 e4m3 keys][256 x fp32 scales]``.

A token's key is ``fp8 * scale`` with ``scale = amax / 448``; an all-zero key is stored with scale 0
(and zero FP8 bytes). ``page_stride >= 256 * 132`` bytes, a multiple of 4.
"""

from __future__ import annotations

import torch
import triton

from .._common import check_last_dim_contiguous, check_tensor

PAGE_SIZE = 256
HEAD_DIM = 128
KEY_BYTES = PAGE_SIZE * HEAD_DIM  # the fp32 scales start here within a page
INDEX_PAGE_BYTES = PAGE_SIZE * (HEAD_DIM + 4)  # 33,792
FP8_MAX = 448.0


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

