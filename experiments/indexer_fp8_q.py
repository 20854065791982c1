"""Would an FP8 query (as DeepGEMM's ``fp8_mqa_logits`` takes it: e4m3 q, e4m3 keys with their per-token
scale) keep the indexer's selection? Each request's q is quantized per head to e4m3 (scale ``amax / 448``,
folded into that head's weight, since ``w * relu(s * x) = (w * s) * relu(x)`` for ``s > 0``), and the logits
are computed exactly (the fp64 reference on the e4m3 values, which bf16 holds exactly). Reported against
the reference logits of the bf16 query: the recall of the reference's top-k, and the worst selected token's
shortfall below the reference's k-th logit as a fraction of the row's largest ``|logit|`` (the quantity the
selection gate, ``check_indexer_output``, bounds by ``atol + rtol * max|logit|``: rtol 1e-4 today).

    python -m experiments.indexer_fp8_q                     # CPU: 4 requests at 4K and 16K, top-k 512
    python -m experiments.indexer_fp8_q --contexts 65536 --batch 2

No GPU: this is numerics, not time. The keys are ``make_indexer_inputs``'s (normal values quantized into the
cache), not a model's.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

E4M3_MAX = 448.0


def quantized_query(q: Any, w: Any) -> tuple[Any, Any]:
    """(e4m3 values of ``q`` as bf16, weights with each head's scale folded in)."""
    import torch

    scale = q.float().abs().amax(-1).clamp_min(1e-30) / E4M3_MAX  # [B, H]
    q8 = (q.float() / scale[..., None]).to(torch.float8_e4m3fn)
    return q8.to(torch.bfloat16), w * scale


def compare(ref: Any, got: Any, topk: int) -> tuple[float, float, float]:
    """(min recall of ref's top-k, worst shortfall of got's top-k below ref's k-th / max|logit|, max |error| /
    max|logit|), over the rows."""
    import torch

    want = torch.topk(ref, topk, dim=1)
    chose = torch.topk(got, topk, dim=1).indices
    hit = torch.zeros_like(ref, dtype=torch.bool).scatter_(1, want.indices, True).gather(1, chose)
    scale = ref.abs().masked_fill(torch.isinf(ref), 0).amax(1)
    short = (want.values[:, -1] - torch.gather(ref, 1, chose).min(1).values) / scale
    finite = torch.isfinite(ref)
    err = ((got - ref).abs().masked_fill(~finite, 0).amax(1) / scale)
    return float(hit.float().mean(1).min()), float(short.max()), float(err.max())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.indexer_fp8_q", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--contexts", default="4096,16384", help="tokens a request, comma-separated (default 4096,16384)")
    ap.add_argument("--batch", type=int, default=4, help="requests (default 4)")
    ap.add_argument("--heads", type=int, default=64, help="indexer heads (default 64)")
    ap.add_argument("--topk", type=int, default=512, help="slots a request (default 512)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        contexts = [int(c) for c in args.contexts.split(",") if c]
    except ValueError:
        ap.error(f"--contexts takes comma-separated integers, got {args.contexts!r}")
    if not contexts or min(contexts) < args.topk or args.batch < 1 or args.topk < 1 or args.heads % 16:
        ap.error("--contexts must be at least --topk, --batch and --topk positive, --heads a multiple of 16")
    from mla_kernels.indexer import indexer_logits_reference, make_indexer_inputs

    print(f"{'tokens':>7} {'recall min':>11} {'shortfall':>10} {'max error':>10}  (fractions of max|logit|)")
    for ctx in contexts:
        inp = make_indexer_inputs(args.batch, ctx, max_context=256 * -(-ctx // 256), num_heads=args.heads,
                                  topk=args.topk, device="cpu", seed=args.seed)  # fmt: skip
        q, w, cache, bt, sl, topk = inp.args()
        ref = indexer_logits_reference(q, w, cache, bt, sl)
        q8, w8 = quantized_query(q, w)
        recall, short, err = compare(ref, indexer_logits_reference(q8, w8, cache, bt, sl), topk)
        print(f"{ctx:>7} {recall:>11.4f} {short:>10.1e} {err:>10.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
