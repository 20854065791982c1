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
(``MLAPERF_CEILINGS_FILE``, default ``~/.cache/mlaperf/ceilings.json``; delete it to re-measure),
so every commit's roofline fraction is computed against the same ceilings.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

CEILINGS_ENV = "MLAPERF_CEILINGS_FILE"

TOKEN_BYTES = 584  # KV cache: 448 FP8 nope + 64 bf16 rope + 8 scale bytes
HEAD_DIM = 512
INDEX_TOKEN_BYTES = 132  # index cache: 128 FP8 key bytes + one fp32 scale
INDEX_HEADS = 64
INDEX_DIM = 128


def decode_model(batch: int, heads: int, topk: int) -> tuple[int, int]:
    """(bytes, flops) of one sparse decode call.

    bytes = KV B*topk*584 + q B*H*512*2 + out B*H*512*2 + lse B*H*4 (the int32 indices, under 1%,
    are left out, as in the design's reference roofline: H 64, top-k 512, 4.27 TB/s gives 0.10 us
    at B 1 and 6.45 us at B 64).
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


def _ceilings_path() -> Path:
    env = os.environ.get(CEILINGS_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mlaperf" / "ceilings.json"


def _measure_gpu(device: Any) -> dict[str, float]:
    import torch

    def best(fn: Any, reps: int) -> float:
        fn()
        torch.cuda.synchronize(device)
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return min(times)

    def copy_seconds(n: int) -> float:
        src = torch.ones(n, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        return best(lambda: dst.copy_(src), 10)

    def matmul_seconds(m: int) -> float:
        a = torch.randn(m, m, dtype=torch.bfloat16, device=device)
        b = torch.randn(m, m, dtype=torch.bfloat16, device=device)
        return best(lambda: a @ b, 10)

    n, m = 1 << 30, 8192  # 1 GiB copies: far larger than any L2
    copy_gbps = 2 * n / copy_seconds(n) / 1e9
    torch.cuda.empty_cache()
    return {"copy_gbps": copy_gbps, "matmul_tflops": 2 * m**3 / matmul_seconds(m) / 1e12}


def _measure_cpu() -> dict[str, float]:
    import time

    import torch

    def best(fn: Any, reps: int) -> float:
        fn()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    n = 128 << 20
    src = torch.ones(n, dtype=torch.uint8)
    dst = torch.empty_like(src)
    t_copy = best(lambda: dst.copy_(src), 5)
    m = 512  # the interpreter computes in fp32, so the CPU ceiling is an fp32 matmul
    a, b = torch.randn(m, m), torch.randn(m, m)
    t_mm = statistics.median([best(lambda: a @ b, 5) for _ in range(3)])
    return {"copy_gbps": 2 * n / t_copy / 1e9, "matmul_tflops": 2 * m**3 / t_mm / 1e12}


def ceilings(device: Any) -> dict[str, float]:
    """Copy bandwidth (GB/s, read + write) and matmul rate (TFLOP/s) of ``device``, cached on disk."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        key = f"gpu:{torch.cuda.get_device_name(device)}"
    else:
        import platform

        key = f"cpu:{platform.processor() or platform.machine()}:{os.cpu_count()}"
    path = _ceilings_path()
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError):
        table = {}
    entry = table.get(key)
    if isinstance(entry, dict) and entry.get("copy_gbps", 0) > 0 and entry.get("matmul_tflops", 0) > 0:
        return {"copy_gbps": float(entry["copy_gbps"]), "matmul_tflops": float(entry["matmul_tflops"])}
    measured = _measure_gpu(device) if device.type == "cuda" else _measure_cpu()
    table[key] = measured
    try:  # atomic replace: several benchmark processes may race to write it
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".ceilings-")
        with os.fdopen(fd, "w") as fh:
            json.dump(table, fh, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # read-only home: measured again next time, results are still right
    return measured
