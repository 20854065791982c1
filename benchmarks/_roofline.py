"""Derived metrics: byte and flop models, device ceilings, and the roofline fraction.

All metrics count the *useful* work of the task, whatever an implementation does internally, so
they are comparable across implementations and larger is always better:

* tokens/s = concurrency / seconds per call (one new token per request per decode step).
* GB/s = model bytes / seconds (effective bandwidth; a kernel that re-reads KV per head or scans
  the whole max_context moves more bytes than it is credited for).
* TFLOP/s = model flops / seconds.
* roofline fraction = roofline seconds / measured seconds, roofline seconds =
  max(model bytes / copy bandwidth, model flops / bf16 matmul rate), both ceilings measured on the
  device (``ceilings``), so 1.0 means "as fast as this device can move the bytes / do the math".

The ceilings are measured once per device and kept in a JSON file keyed by tier and device name
(``settings.gpu.ceilings``: ``MLAPERF_CEILINGS_FILE``, default ``~/.cache/mlaperf/ceilings.json``; delete
it to re-measure), so every commit's roofline fraction is computed against the same ceilings.
"""

from __future__ import annotations

from settings.env import CEILINGS_FILE
from settings.gpu import ceilings

__all__ = ["ceilings", "decode_model", "indexer_model", "metrics", "step_model"]
CEILINGS_ENV = CEILINGS_FILE.name

TOKEN_BYTES = 584  # KV cache: 448 FP8 nope + 64 bf16 rope + 8 scale bytes
HEAD_DIM = 512
INDEX_TOKEN_BYTES = 132  # index cache: 128 FP8 key bytes + one fp32 scale
INDEX_HEADS = 64
INDEX_DIM = 128


def decode_model(batch: int, heads: int, topk: int) -> tuple[int, int]:
    """(bytes, flops) of one sparse decode call.

    bytes = KV B*topk*584 + q B*H*512*2 + out B*H*512*2 + lse B*H*4 (the int32 indices, under 1%,
    are left out, as the design's reference roofline leaves them out, so both give the same times;
    tests/bench/test_suites.py checks that).
    flops = B*H*topk*2048: QK^T 512 MACs and PV 512 MACs per (head, slot), 2 flops per MAC.
    """
    kv = batch * topk * TOKEN_BYTES
    q_out = 2 * batch * heads * HEAD_DIM * 2
    lse = batch * heads * 4
    return kv + q_out + lse, batch * heads * topk * 2048


def indexer_model(batch: int, context: int, topk: int) -> tuple[int, int]:
    """(bytes, flops) of one indexer + top-k call over each request's *real* context.

    bytes = B*context*132: each real token's 128 FP8 key bytes and fp32 scale, the design's "bytes
    roofline (132 B/token)"; q_idx, weights, block table and output (under 4% at context 4K) are
    left out. ``topk`` does not enter the model.
    flops = B*context*64*(2*128 + 2): the 128-dim dot product per head, then relu-weight-accumulate.
    """
    del topk
    return batch * context * INDEX_TOKEN_BYTES, batch * context * INDEX_HEADS * (2 * INDEX_DIM + 2)


def step_model(batch: int, heads: int, context: int, topk: int) -> tuple[int, int]:
    """(bytes, flops) of one decode step: indexer over the real context, then sparse decode."""
    ib, if_ = indexer_model(batch, context, topk)
    db, df = decode_model(batch, heads, topk)
    return ib + db, if_ + df


def metrics(
    concurrency: int, seconds: float, nbytes: int, flops: int, ceil: dict[str, float]
) -> dict[str, float]:
    roof = max(nbytes / (ceil["copy_gbps"] * 1e9), flops / (ceil["matmul_tflops"] * 1e12))
    return {
        "tokens_per_s": concurrency / seconds,
        "gbps": nbytes / seconds / 1e9,
        "tflops": flops / seconds / 1e12,
        "roofline_fraction": roof / seconds,
    }
