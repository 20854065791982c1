"""Synthetic inputs with the exact cache layout, and the closeness check of the package's own tests."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .cache import HEAD_DIM, TOKENS_PER_PAGE, quantize_kv_cache
from .decode.tuning import MmaConfig

# The benchmark gate's rule and table (benchmarks/_gate.py), copied: the gate keeps its own so that the
# commit it measures cannot loosen it (asv loads the gate from the benchmarking checkout, the kernels
# from the commit); tests/oracle/test_tolerances.py fails when this copy and the gate differ.
# Rule (FlashMLA's): an element passes when |diff| <= atol or |diff| <= rtol * |expected|; the cosine
# distance of the whole tensor must be <= cos. Numbers: measured worst cases with margins (docs/tolerances.md).
TOLERANCES: dict[str, dict[str, tuple[float, float, float]]] = {
    "gpu": {"out": (5e-4, 2 / 128, 6e-6), "lse": (1e-6, 1e-6, 7e-14)},
    "interpreter": {"out": (4e-8, 2 / 128, 3e-5), "lse": (1e-6, 1e-6, 4e-14)},
}


def tolerance_tier(device: torch.device) -> str:
    return "gpu" if device.type == "cuda" else "interpreter"


def assert_close(
    name: str, actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float, cos_tol: float = 1.0
) -> None:
    """The rule above, in float64: inf positions and signs must agree, NaN never passes."""
    a, e = actual.double(), expected.to(actual.device).double()
    if tuple(a.shape) != tuple(e.shape):
        raise AssertionError(f"{name}: shape {tuple(a.shape)}, expected {tuple(e.shape)}")
    for label, t in (("kernel output", a), ("expected values", e)):
        if torch.isnan(t).any():
            raise AssertionError(f"{name}: {int(torch.isnan(t).sum())} NaN values in the {label}")
    a_inf, e_inf = torch.isinf(a), torch.isinf(e)
    if not torch.equal(a_inf, e_inf) or not torch.equal(a[a_inf], e[e_inf]):
        raise AssertionError(f"{name}: inf positions differ ({int(a_inf.sum())} vs {int(e_inf.sum())})")
    fin = ~e_inf
    af, ef = a[fin], e[fin]
    diff = (af - ef).abs()
    bad = (diff > atol) & (diff > rtol * ef.abs())
    if bad.any():
        worst = int(torch.argmax(torch.where(bad, diff, torch.zeros_like(diff))))
        raise AssertionError(
            f"{name}: {int(bad.sum())}/{diff.numel()} elements off; max|diff| {diff.max().item():.3e}, "
            f"worst {af[worst].item():.6g} vs {ef[worst].item():.6g} (atol {atol:.1e}, rtol {rtol:.3g})"
        )
    denom = float((af * af + ef * ef).sum())
    cos_diff = 0.0 if denom == 0 else 1 - 2 * float((af * ef).sum()) / denom
    if cos_diff > cos_tol:
        raise AssertionError(f"{name}: cosine distance {cos_diff:.3e} > {cos_tol:.1e}")


def check_decode(out: torch.Tensor, lse: torch.Tensor, ref_out: torch.Tensor, ref_lse: torch.Tensor) -> None:
    tol = TOLERANCES[tolerance_tier(out.device)]
    assert_close("out", out, ref_out, *tol["out"])
    assert_close("lse", lse, ref_lse, *tol["lse"])


# The MMA configs pinned by the kernel tests (tests/kernels/test_decode.py) and measured by
# benchmarks/scripts/decode_errors.py, each on inputs seeded BLOCK_H + splits: (BLOCK_H, splits, PREFETCH).
PINNED_MMA_CONFIGS: tuple[tuple[int, int, int], ...] = (
    (16, 1, 0), (16, 3, 2), (32, 1, 1), (32, 2, 2), (64, 4, 0), (64, 1, 1), (64, 2, 2), (16, 2, 3), (64, 3, 3),
)  # fmt: skip


def pinned_mma_config(block_h: int, splits: int, prefetch: int, *, gpu: bool) -> MmaConfig:
    """A pinned config: 16-token tiles, one stage, 8 warps for 64-head blocks on the GPU, else 4."""
    warps = 8 if block_h == 64 and gpu else 4
    return MmaConfig(block_h, 16, warps, 1, splits, prefetch)


def random_kv(
    num_tokens: int, *, device: torch.device | str, seed: int = 0, spread: float = 0.0, scale: float = 0.1
) -> torch.Tensor:
    """Real-valued keys, normal with std ``scale`` (0.1, as FlashMLA's tests draw them); ``spread`` > 0
    gives every 64-group a log-normal magnitude (so UE8M0 scales differ widely between groups)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    kv = torch.randn(num_tokens, HEAD_DIM, generator=g) * scale
    mag = torch.exp(torch.randn(num_tokens, 8, generator=g) * spread)  # per 64-group magnitudes
    kv = (kv.view(num_tokens, 8, 64) * mag.unsqueeze(-1)).view(num_tokens, HEAD_DIM)
    return kv.to(device)


def make_kv_cache(
    num_tokens: int,
    *,
    device: torch.device | str,
    seed: int = 0,
    page_stride: int | None = None,
    unique_tokens: int = 1 << 16,
) -> torch.Tensor:
    """A cache of ``num_tokens`` tokens, quantized from real values.

    Large caches repeat a quantized pool of ``unique_tokens`` tokens page by page: every byte is a
    genuine quantized value (random FP8 bytes could hold NaN patterns) and addresses stay distinct,
    which is what cold-L2 timing needs.
    """
    pool_tokens = min(num_tokens, max(TOKENS_PER_PAGE, unique_tokens))
    pool = quantize_kv_cache(random_kv(pool_tokens, device=device, seed=seed), page_stride)
    num_pages = -(-num_tokens // TOKENS_PER_PAGE)
    if num_pages <= pool.shape[0]:
        return pool[:num_pages].contiguous()
    reps = -(-num_pages // pool.shape[0])
    return pool.repeat(reps, 1)[:num_pages].contiguous()


@dataclass
class DecodeInputs:
    q: torch.Tensor  # [B, H, 512] bf16
    kv_cache: torch.Tensor  # [num_pages, page_stride] uint8
    index_sets: list[torch.Tensor]  # each [B, topk] int32; rotate among them for cold-L2 timing

    @property
    def indices(self) -> torch.Tensor:
        return self.index_sets[0]


def make_decode_inputs(
    batch: int,
    num_heads: int,
    topk: int,
    *,
    num_tokens: int,
    device: torch.device | str,
    seed: int = 0,
    num_index_sets: int = 1,
    invalid_frac: float = 0.0,
    q_scale: float = 1.0,
) -> DecodeInputs:
    """Each request owns a contiguous context of ``num_tokens // batch`` tokens and picks ``topk``
    distinct slots of it; index set ``i`` draws from its own slice of the context when possible."""
    kv_cache = make_kv_cache(num_tokens, device=device, seed=seed)
    g = torch.Generator(device="cpu").manual_seed(seed + 1)
    q = (torch.randn(batch, num_heads, HEAD_DIM, generator=g) * q_scale).to(torch.bfloat16).to(device)
    context = max(1, num_tokens // max(batch, 1))
    sets = []
    for i in range(num_index_sets):
        region = context // num_index_sets if context // num_index_sets >= topk else context
        lo = (i * region) % max(context - region + 1, 1)
        rows = []
        for b in range(batch):
            pick = torch.randperm(region, generator=g)[:topk] + lo + b * context
            if pick.numel() < topk:  # context shorter than top-k: pad with invalid slots
                pick = torch.cat([pick, torch.full((topk - pick.numel(),), -1, dtype=pick.dtype)])
            if invalid_frac > 0:
                drop = torch.rand(topk, generator=g) < invalid_frac
                pick = torch.where(drop, torch.full_like(pick, -1), pick)
            rows.append(pick)
        sets.append(torch.stack(rows).to(torch.int32).to(device))
    return DecodeInputs(q=q, kv_cache=kv_cache, index_sets=sets)


# The hard cases the oracle tests and the tolerance measurements (benchmarks/scripts/decode_errors.py) share:
# each returns (q, kv_cache, indices, sm_scale), sm_scale None for the default.
DecodeCase = tuple[torch.Tensor, torch.Tensor, torch.Tensor, float | None]


def padded_spread_case(device: torch.device | str) -> DecodeCase:
    """A padded page stride, 64-groups with very different UE8M0 scales, 32 heads, sm_scale 0.02: where the
    fp32 reference is least exact (docs/tolerances.md)."""
    cache = quantize_kv_cache(random_kv(600, device=device, seed=11, spread=2.0), page_stride=149_760)
    g = torch.Generator().manual_seed(0)
    idx = torch.randperm(600, generator=g)[:64].view(2, 32).to(torch.int32)  # [B=2, topk=32]
    q = torch.randn(2, 32, 512, generator=g).bfloat16()  # [B, H=32, 512]
    return q.to(device), cache, idx.to(device), 0.02


def large_magnitudes_case(device: torch.device | str) -> DecodeCase:
    """Keys near FP8's range (x1e4, the rope part clamped to bf16-safe values) and a tiny query: overflow."""
    kv = random_kv(256, device="cpu", seed=9) * 1e4
    kv[:, 448:] = kv[:, 448:].clamp(-3e4, 3e4)
    q = (torch.randn(1, 16, 512, generator=torch.Generator().manual_seed(2)) * 1e-4).bfloat16()  # [1, 16, 512]
    idx = torch.arange(32, dtype=torch.int32, device=device)[None]  # [1, 32]
    return q.to(device), quantize_kv_cache(kv).to(device), idx, None
