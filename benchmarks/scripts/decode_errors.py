"""Worst-case errors of the decode kernels and the package's reference, against the float64 oracle:
the measurements behind the gate's tolerance table (``benchmarks/_gate.py``, ``docs/tolerances.md``).

For every case of the kernel tests and the asv grid of the tier (interpreter on the CPU, the GPU
when CUDA is present) it runs ``reference``, ``simt`` and ``mma`` (and ``mma`` under each arch
profile the package offers) and prints, per comparison and tensor, the largest absolute error,
the largest error not covered by the relative tolerance (what ``atol`` must cover) and the cosine
distance. ``--json FILE`` writes every row.

    python -m benchmarks.scripts.decode_errors [--tier auto|interpreter|gpu] [--json FILE] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

# Relative tolerance of ``out`` from the bf16 rounding model (one ulp is at most 2**-7 of a value): the
# reference rounds once (1/2 ulp off the exact value, so rtol 1 ulp), a kernel and the reference each
# round (1 ulp apart, so rtol 2 ulps): the margin over the rounding error. ``atol`` covers what rtol
# leaves (values near zero).
OUT_RTOL = {"reference": 1 / 128, "kernels": 2 / 128}
MARGIN = 2.0  # every measured number is doubled, then rounded up to one significant digit ...
ATOL_MARGIN = 4.0  # ... except out's atol: near-zero residuals are a tail that moves with summation order
# The configs the kernel tests pin, on the same inputs: mla_kernels.testing.PINNED_MMA_CONFIGS.
# Cases run with every candidate MMA config as well (H a multiple of 64, so every head block fits).
# atol is absolute, for data at FlashMLA's scale (kv ~ N(0, 0.1), what the suites and most tests use). The
# 1e4-scale case checks overflow; its near-zero outputs are off by ~2**-9 of its values on the GPU (bf16
# probabilities), so it does not set atol (its row is still printed; rtol and cos count it).
OTHER_SCALE = ("large magnitudes",)
SIMT_MAX = 32 * 64 * 2048  # B * H * topk above which the kernel tests skip SIMT (test_decode.py)
SWEEP_CASES = ("B2 H64 topk70", "B7 H64 topk512", "B32 H128 topk2048", "asv B128 topk2048")


Builder = Callable[[], tuple[Any, Any, Any, float | None]]


def _cases(tier: str, quick: bool) -> Iterator[tuple[str, Builder, list[tuple[str, Callable[..., Any]]] | None]]:
    """(name, builder, runs) of every measured case; builders return (q, kv_cache, indices, sm_scale);
    runs None = every public kernel run (``_runs``)."""
    import torch

    import mla_kernels as mk
    from mla_kernels.testing import PINNED_MMA_CONFIGS, large_magnitudes_case, padded_spread_case, random_kv

    dev = torch.device("cuda" if tier == "gpu" else "cpu")

    def inputs(b: int, h: int, topk: int, tokens: int, seed: int, **kw: Any) -> Callable[[], Any]:
        def build() -> Any:
            inp = mk.make_decode_inputs(b, h, topk, num_tokens=tokens, device=dev, seed=seed, **kw)
            return inp.q, inp.kv_cache, inp.indices, None

        return build

    def special_rows() -> Any:
        inp = mk.make_decode_inputs(3, 16, 48, num_tokens=512, device=dev, seed=7)
        idx = inp.indices.clone()
        idx[0, :32] = -1
        idx[1, :] = -1
        idx[2, 10:20] = idx[2, 0]
        idx[2, 40] = 512 * 10
        return inp.q, inp.kv_cache, idx, None

    def padded() -> Any:
        cache = mk.quantize_kv_cache(random_kv(600, device=dev, seed=11), page_stride=149_760)
        idx = torch.randperm(600, generator=torch.Generator().manual_seed(0))[:64].view(2, 32).to(torch.int32)
        q = torch.randn(2, 16, 512, generator=torch.Generator().manual_seed(1)).bfloat16()
        return q.to(dev), cache, idx.to(dev), 0.02

    yield "special rows", special_rows, None
    yield "padded stride, sm_scale 0.02", padded, None
    yield "padded stride, spread scales, sm_scale 0.02", lambda: padded_spread_case(dev), None
    yield "large magnitudes", lambda: large_magnitudes_case(dev), None
    for q_scale in (1e-3, 400.0):
        yield f"q_scale {q_scale:g}", inputs(1, 16, 64, 300, 5, q_scale=q_scale), None
    if tier == "gpu":
        for b in (1, 7, 32, 128):
            for h in (64, 128):
                for topk in (128, 512, 2048):
                    yield (
                        f"B{b} H{h} topk{topk}",
                        inputs(b, h, topk, max(b * 4096, 65536), b + topk, invalid_frac=0.05),
                        None,
                    )
        for b in (1, 2, 4, 8, 16, 32, 64, 128):  # the asv grid: 64K tokens per request
            for topk in (128, 512, 2048):
                yield f"asv B{b} topk{topk}", inputs(b, 64, topk, b * 65536, 0), None
    for block_h, splits, prefetch in PINNED_MMA_CONFIGS:
        yield (f"B2 H64 topk70 seed{block_h + splits}", inputs(2, 64, 70, 512, block_h + splits, invalid_frac=0.2),
               [_pinned(tier, block_h, splits, prefetch)])  # fmt: skip
    if tier == "gpu":
        return
    yield "B2 H16 topk40", inputs(2, 16, 40, 700, 40, invalid_frac=0.1), None
    yield "B1 H32 topk33", inputs(1, 32, 33, 700, 33, invalid_frac=0.1), None
    yield "B2 H64 topk70", inputs(2, 64, 70, 512, 17, invalid_frac=0.2), None
    if not quick:
        for b in (1, 2):  # the asv CPU grid: 1K tokens per request
            for topk in (32, 64):
                yield f"asv B{b} topk{topk}", inputs(b, 16, topk, b * 1024, 0), None
        for seed in range(4):
            yield f"B3 H16 topk64 seed{seed}", inputs(3, 16, 64, 4096, 100 + seed, invalid_frac=0.3), None


def _runs(tier: str) -> list[tuple[str, Callable[..., Any]]]:
    """(label, call(q, kv_cache, indices, sm_scale)) of every kernel run per case: the public impls and
    each architecture profile the package offers."""
    import functools

    import mla_kernels as mk

    runs: list[tuple[str, Callable[..., Any]]] = [
        (impl, functools.partial(mk.sparse_mla_decode, impl=impl)) for impl in ("simt", "mma")
    ]
    runs += [
        (f"mma {p}", functools.partial(mk.sparse_mla_decode, impl="mma", arch_profile=p))
        for p in mk.ARCH_PROFILES
        if p != "native"
    ]
    return runs


def _config_runs(heads: int) -> list[tuple[str, Callable[..., Any]]]:
    """Every candidate MMA config (and 1 or 3 splits) through ``mla_kernels.decode.decode_with_config``:
    the autotuner may pick any of them on some GPU."""
    from dataclasses import replace

    from mla_kernels.decode import CANDIDATES, decode_with_config

    runs: list[tuple[str, Callable[..., Any]]] = []
    for candidate in CANDIDATES:
        if heads % candidate.block_h:
            continue
        for splits in (1, 3) if not candidate.block_d else (1,):  # two-pass configs have no split-K
            cfg = replace(candidate, num_splits=splits, source="fixed")

            def call(q: Any, cache: Any, idx: Any, sm_scale: Any, cfg: Any = cfg) -> Any:
                return decode_with_config(q, cache, idx, cfg, sm_scale)[:2]  # (out, lse)

            runs.append((f"config {cfg.label} splits{splits}", call))
    return runs


def _pinned(tier: str, block_h: int, splits: int, prefetch: int) -> tuple[str, Callable[..., Any]]:
    from mla_kernels.decode import decode_with_config
    from mla_kernels.testing import pinned_mma_config

    cfg = pinned_mma_config(block_h, splits, prefetch, gpu=tier == "gpu")
    label = f"config {block_h}x16 pf{prefetch} splits{splits}"
    return label, lambda q, cache, idx, sm_scale: decode_with_config(q, cache, idx, cfg, sm_scale)[:2]


def _errors(actual: Any, expected: Any, rtol: float) -> dict[str, float]:
    """Largest |diff|, largest |diff| / |expected|, largest |diff| above ``rtol * |expected|`` (what
    atol must cover) and the cosine distance."""
    import torch

    a, e = actual.double(), expected.double()
    fin = torch.isfinite(e)
    if not torch.equal(fin, torch.isfinite(a)) or bool(torch.isnan(a).any()):
        return {"abs": math.inf, "atol_needed": math.inf, "rel": math.inf, "cos": math.inf}
    d, r = (a[fin] - e[fin]).abs(), e[fin].abs()
    if d.numel() == 0:
        return {"abs": 0.0, "atol_needed": 0.0, "rel": 0.0, "cos": 0.0}
    uncovered = d[d > rtol * r]
    denom = float((a[fin] ** 2 + e[fin] ** 2).sum())
    return {
        "abs": float(d.max()),
        "atol_needed": float(uncovered.max()) if uncovered.numel() else 0.0,
        "rel": float((d / r.clamp_min(1e-30)).max()),
        "cos": 0.0 if denom == 0 else 1 - 2 * float((a[fin] * e[fin]).sum()) / denom,
    }


def measure(tier: str, quick: bool = False, partial: str | None = None) -> list[dict[str, Any]]:
    """Every row; with ``partial``, the rows so far are rewritten there as JSON after each case."""
    import torch

    import mla_kernels as mk
    from benchmarks import _oracle

    rows: list[dict[str, Any]] = []
    runs = _runs(tier)
    t0 = time.perf_counter()
    cases = list(_cases(tier, quick))
    for i, (name, build, only) in enumerate(cases, 1):
        q, cache, idx, sm_scale = build()
        exact = _oracle.decode(q, cache, idx, sm_scale)
        ref = mk.sparse_mla_decode(q, cache, idx, sm_scale, impl="reference")
        got = {"reference": ref}
        sweep = _config_runs(q.shape[1]) if name in SWEEP_CASES else []
        for label, call in runs + sweep if only is None else only:
            if label == "simt" and not name.startswith("asv") and q.shape[0] * q.shape[1] * idx.shape[1] > SIMT_MAX:
                continue  # as the kernel tests: SIMT at this size only costs time
            got[label] = call(q, cache, idx, sm_scale)
        if tier == "gpu":
            torch.cuda.synchronize()
        for label, (out, lse) in got.items():
            kind = "reference" if label == "reference" else "kernels"
            against = [("oracle", exact)] + ([] if label == "reference" else [("reference", ref)])
            for what, (e_out, e_lse) in against:
                for tensor, a, e in (("out", out, e_out), ("lse", lse, e_lse)):
                    rtol = OUT_RTOL[kind] if tensor == "out" else 0.0
                    rows.append({"tier": tier, "case": name, "run": label, "against": what, "tensor": tensor,
                                 **_errors(a, e, rtol)})  # fmt: skip
        print(f"[{i}/{len(cases)}] {name} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
        if partial:
            with open(partial, "w", encoding="utf-8") as fh:
                json.dump({"rows": rows}, fh)
    return rows


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worst case per (run kind, tensor) over both comparisons: kernels pooled, reference on its own."""
    worst: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        kind = "reference" if r["run"] == "reference" else "kernels"
        w = worst.setdefault((kind, r["tensor"]), {"tier": r["tier"], "run": kind, "tensor": r["tensor"]})
        for stat in ("abs", "rel", "atol_needed", "cos"):
            if stat == "atol_needed" and r["case"] in OTHER_SCALE:
                w["other_scale_atol_needed"] = max(w.get("other_scale_atol_needed", 0.0), r[stat])
                continue
            if r[stat] >= w.get(stat, -1.0):
                w[stat] = r[stat]
                w[f"{stat}_case"] = f"{r['run']} vs {r['against']}: {r['case']}"
    return list(worst.values())


def _up(x: float, margin: float = MARGIN) -> float:
    """``margin * x`` rounded up to one significant digit (0 stays 0)."""
    if x <= 0:
        return 0.0
    y = margin * x
    e = math.floor(math.log10(y))
    return math.ceil(y / 10**e - 1e-9) * 10**e


def derive(summary: list[dict[str, Any]]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """The gate's (atol, rtol, cos) per row and tensor from the worst cases.

    out: rtol from the rounding model (OUT_RTOL), atol = ATOL_MARGIN x the largest error rtol leaves.
    lse (fp32, magnitudes ~1-10): rtol = margin x the largest relative error, atol = rtol (errors of an
    lse below 1 in magnitude are judged as at 1). cos: margin x the largest cosine distance.
    """
    table: dict[str, dict[str, tuple[float, float, float]]] = {}
    for w in summary:
        row = "reference" if w["run"] == "reference" else w["tier"]
        if w["tensor"] == "out":
            tol = (_up(w["atol_needed"], ATOL_MARGIN), OUT_RTOL[w["run"]], _up(w["cos"]))
        else:
            rtol = _up(w["rel"])
            tol = (rtol, rtol, _up(w["cos"]))
        table.setdefault(row, {})[w["tensor"]] = tol
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scripts.decode_errors", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--tier", choices=("auto", "interpreter", "gpu"), default="auto")
    parser.add_argument("--json", metavar="FILE", help="write every row and the summary as JSON")
    parser.add_argument("--quick", action="store_true", help="interpreter: the kernel tests' cases only")
    args = parser.parse_args(argv)
    tier = args.tier
    if tier == "auto":
        import torch

        tier = "gpu" if torch.cuda.is_available() else "interpreter"
    if tier == "interpreter":
        from settings.env import use_interpreter

        use_interpreter()
    rows = measure(tier, args.quick, args.json)
    summary = summarize(rows)
    print(f"{'run':<10} {'tensor':<6} {'max|diff|':>10} {'max rel':>10} {'atol need':>10} {'cos dist':>10}  worst")
    for w in summary:
        print(f"{w['run']:<10} {w['tensor']:<6} {w['abs']:>10.2e} {w['rel']:>10.2e} {w['atol_needed']:>10.2e} "
              f"{w['cos']:>10.2e}  atol: {w['atol_needed_case']}; rel: {w['rel_case']}")  # fmt: skip
    for w in summary:
        if w.get("other_scale_atol_needed"):
            need = w["other_scale_atol_needed"]
            print(f"{w['run']:<10} {w['tensor']:<6} {OTHER_SCALE}: atol need {need:.2e} (not in atol)")
    table = derive(summary)
    print(f"\nderived (margin {MARGIN:g}x, out atol {ATOL_MARGIN:g}x): (atol, rtol, cos)")
    for row, tensors in table.items():
        print(f"  {row:<12} " + "  ".join(f"{t}: ({a:.0e}, {r:.3g}, {c:.0e})" for t, (a, r, c) in tensors.items()))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"margin": MARGIN, "derived": table, "summary": summary, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
