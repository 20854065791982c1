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
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

# The relative tolerances of the gate: errors below rtol * |expected| pass whatever atol is.
RTOL = {"out": 2 / 128, "lse": 2.0**-20}


def _cases(tier: str, quick: bool) -> Iterator[tuple[str, Callable[[], tuple[Any, Any, Any, float | None]]]]:
    """(name, builder) of every measured case; builders return (q, kv_cache, indices, sm_scale)."""
    import torch

    import mla_kernels as mk
    from mla_kernels.testing import random_kv

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

    def large() -> Any:
        kv = random_kv(256, device="cpu", seed=9) * 1e4
        kv[:, 448:] = kv[:, 448:].clamp(-3e4, 3e4)
        q = (torch.randn(1, 16, 512, generator=torch.Generator().manual_seed(2)) * 1e-4).bfloat16()
        return q.to(dev), mk.quantize_kv_cache(kv).to(dev), torch.arange(32, dtype=torch.int32, device=dev)[None], None

    yield "special rows", special_rows
    yield "padded stride, sm_scale 0.02", padded
    yield "large magnitudes", large
    for q_scale in (1e-3, 400.0):
        yield f"q_scale {q_scale:g}", inputs(1, 16, 64, 300, 5, q_scale=q_scale)
    if tier == "gpu":
        for b in (1, 7, 32, 128):
            for h in (64, 128):
                for topk in (128, 512, 2048):
                    yield f"B{b} H{h} topk{topk}", inputs(b, h, topk, max(b * 4096, 65536), b + topk, invalid_frac=0.05)
        for b in (1, 2, 4, 8, 16, 32, 64, 128):  # the asv grid: 64K tokens per request
            for topk in (128, 512, 2048):
                yield f"asv B{b} topk{topk}", inputs(b, 64, topk, b * 65536, 0)
        return
    yield "B2 H16 topk40", inputs(2, 16, 40, 700, 40, invalid_frac=0.1)
    yield "B1 H32 topk33", inputs(1, 32, 33, 700, 33, invalid_frac=0.1)
    yield "B2 H64 topk70", inputs(2, 64, 70, 512, 17, invalid_frac=0.2)
    if not quick:
        for b in (1, 2):  # the asv CPU grid: 1K tokens per request
            for topk in (32, 64):
                yield f"asv B{b} topk{topk}", inputs(b, 16, topk, b * 1024, 0)
        for seed in range(4):
            yield f"B3 H16 topk64 seed{seed}", inputs(3, 16, 64, 4096, 100 + seed, invalid_frac=0.3)


def _runs(tier: str) -> list[tuple[str, dict[str, Any]]]:
    """(label, keyword arguments) of every kernel run per case."""
    import inspect

    import mla_kernels as mk

    runs: list[tuple[str, dict[str, Any]]] = [("simt", {"impl": "simt"}), ("mma", {"impl": "mma"})]
    if "arch_profile" in inspect.signature(mk.sparse_mla_decode).parameters:
        for profile in getattr(mk, "ARCH_PROFILES", ()):
            if profile != "native":
                runs.append((f"mma {profile}", {"impl": "mma", "arch_profile": profile}))
    return runs


def _errors(actual: Any, expected: Any, tensor: str) -> dict[str, float]:
    """Largest |diff|, largest |diff| above rtol * |expected| (atol must cover it), cosine distance."""
    import torch

    a, e = actual.double(), expected.double()
    fin = torch.isfinite(e)
    if not torch.equal(fin, torch.isfinite(a)) or bool(torch.isnan(a).any()):
        return {"abs": math.inf, "atol_needed": math.inf, "rel": math.inf, "cos": math.inf}
    d, r = (a[fin] - e[fin]).abs(), e[fin].abs()
    if d.numel() == 0:
        return {"abs": 0.0, "atol_needed": 0.0, "rel": 0.0, "cos": 0.0}
    uncovered = d[d > RTOL[tensor] * r]
    denom = float((a[fin] ** 2 + e[fin] ** 2).sum())
    return {
        "abs": float(d.max()),
        "atol_needed": float(uncovered.max()) if uncovered.numel() else 0.0,
        "rel": float((d / r.clamp_min(1e-30)).max()),
        "cos": 0.0 if denom == 0 else 1 - 2 * float((a[fin] * e[fin]).sum()) / denom,
    }


def measure(tier: str, quick: bool = False) -> list[dict[str, Any]]:
    import torch

    import mla_kernels as mk
    from benchmarks import _oracle

    rows: list[dict[str, Any]] = []
    runs = _runs(tier)
    t0 = time.perf_counter()
    cases = list(_cases(tier, quick))
    for i, (name, build) in enumerate(cases, 1):
        q, cache, idx, sm_scale = build()
        exact = _oracle.decode(q, cache, idx, sm_scale)
        ref = mk.sparse_mla_decode(q, cache, idx, sm_scale, impl="reference")
        got = {"reference": ref}
        for label, kw in runs:
            got[label] = mk.sparse_mla_decode(q, cache, idx, sm_scale, **kw)
        if tier == "gpu":
            torch.cuda.synchronize()
        for label, (out, lse) in got.items():
            against = [("oracle", exact)] + ([] if label == "reference" else [("reference", ref)])
            for what, (e_out, e_lse) in against:
                for tensor, a, e in (("out", out, e_out), ("lse", lse, e_lse)):
                    rows.append({"tier": tier, "case": name, "run": label, "against": what, "tensor": tensor,
                                 **_errors(a, e, tensor)})  # fmt: skip
        print(f"[{i}/{len(cases)}] {name} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    return rows


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worst case per (run kind, against, tensor): kernels pooled, reference on its own."""
    worst: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        kind = "reference" if r["run"] == "reference" else "kernels"
        key = (kind, r["against"], r["tensor"])
        w = worst.setdefault(key, {"tier": r["tier"], "run": kind, "against": r["against"], "tensor": r["tensor"]})
        for stat in ("abs", "atol_needed", "rel", "cos"):
            if r[stat] >= w.get(stat, -1.0):
                w[stat] = r[stat]
                w[f"{stat}_case"] = f"{r['run']}: {r['case']}"
    return list(worst.values())


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
        os.environ["TRITON_INTERPRET"] = "1"
    rows = measure(tier, args.quick)
    summary = summarize(rows)
    print(f"{'run':<10} {'against':<10} {'tensor':<6} {'max|diff|':>10} {'atol need':>10} {'cos dist':>10}  worst case")
    for w in summary:
        print(f"{w['run']:<10} {w['against']:<10} {w['tensor']:<6} {w['abs']:>10.2e} {w['atol_needed']:>10.2e} "
              f"{w['cos']:>10.2e}  {w['atol_needed_case']}")  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"rtol": RTOL, "summary": summary, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
