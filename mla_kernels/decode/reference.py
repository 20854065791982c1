"""Pure-torch sparse-MLA decode: the fp32 ground truth and the plain-torch bf16 baseline."""

from __future__ import annotations

import torch

from ..cache import TOKENS_PER_PAGE, gather_tokens


def _valid_slots(kv_cache: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    total = kv_cache.shape[0] * TOKENS_PER_PAGE
    valid = (indices >= 0) & (indices < total)  # [B, topk]
    return valid, torch.where(valid, indices, torch.zeros_like(indices))


def sparse_mla_decode_reference(
    q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 math of the contract; returns (out bf16 [B, H, 512], lse fp32 [B, H])."""
    valid, slots = _valid_slots(kv_cache, indices)
    k = gather_tokens(kv_cache, slots)  # [B, topk, 512] fp32
    s = torch.einsum("bhd,bkd->bhk", q.float(), k) * sm_scale  # [B, H, topk]
    s = s.masked_fill(~valid.unsqueeze(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [B, H]; -inf where no slot is valid
    empty = torch.isneginf(lse)
    p = torch.exp(s - torch.where(empty, torch.zeros_like(lse), lse).unsqueeze(-1))
    out = torch.einsum("bhk,bkd->bhd", p, k)
    out = out.masked_fill(empty.unsqueeze(-1), 0.0)
    lse = torch.where(empty, torch.full_like(lse, float("inf")), lse)
    return out.to(torch.bfloat16), lse


def sparse_mla_decode_torch(
    q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a user writes in plain torch: gather, dequantize to bf16, two batched matmuls."""
    valid, slots = _valid_slots(kv_cache, indices)
    k = gather_tokens(kv_cache, slots).to(torch.bfloat16)  # [B, topk, 512]
    s = torch.bmm(q, k.transpose(1, 2)).float() * sm_scale  # [B, H, topk]
    s = s.masked_fill(~valid.unsqueeze(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    empty = torch.isneginf(lse)
    p = torch.exp(s - torch.where(empty, torch.zeros_like(lse), lse).unsqueeze(-1))
    out = torch.bmm(p.to(torch.bfloat16), k).masked_fill(empty.unsqueeze(-1), 0.0)
    return out, torch.where(empty, torch.full_like(lse, float("inf")), lse)
