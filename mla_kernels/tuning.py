"""Autotuning of the MMA decode launch: BLOCK_H / BLOCK_N / warps / stages / split-K count.

Triton's own autotuner times one kernel; here a candidate is the whole launch (split kernel plus the
LSE combine), so split counts are compared fairly. Candidates are pruned by the device's shared memory
per block (sm_120 ~100 KB, sm_90 228 KB). Choices are cached per shape in memory and on disk, so a
warm-up call resolves them before CUDA-graph capture and later processes skip the search.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from . import _common

_SOURCE_HASH: str | None = None


@dataclass(frozen=True)
class MmaConfig:
    block_h: int
    block_n: int
    num_warps: int
    num_stages: int
    num_splits: int
    prefetch: int = 0  # next tile's: 0 nothing, 1 indices, 2 indices and bytes, 3 indices and scale bytes
    source: str = "default"  # default | cache | tuned


# (BLOCK_H, BLOCK_N, num_warps, num_stages, prefetch), from sweeps on an H200
# (benchmarks/scripts/kernel_decode_variants.py; figures in docs/measurements/README.md): 64 heads
# need 8 warps for the [64, 512] fp32 accumulator and use Hopper's wgmma; prefetching a whole tile
# pays only with 4 warps, where registers are left over, but prefetching the scale bytes (level 3)
# pays with 8 (B=128 on one H200: 58.2-58.7 us against 63.3 us without it, ab_5a2a673_5b94cd6.log).
# On the H200 the tuner picks 64x64 with 2 stages or 16x32 with prefetch; the others stay candidates
# for GPUs with other balances.
_BASE = (
    (64, 64, 8, 2, 3),
    (64, 64, 8, 2, 0),
    (64, 64, 8, 1, 0),
    (64, 64, 8, 1, 1),
    (64, 32, 8, 2, 0),
    (64, 32, 8, 1, 1),
    (32, 32, 4, 1, 2),
    (16, 32, 4, 1, 2),
)
# 64-row head blocks rely on warpgroup MMA; on mma.sync-only GPUs (sm_8x, sm_120) they spill kilobytes.
_WGMMA_BLOCK_H = 64


def smem_estimate(block_h: int, block_n: int, num_stages: int, prefetch: int = 0) -> int:
    """Shared memory of a config: bf16 q and K operand tiles (512 + 64 columns), the P tile, and the
    raw tiles Triton stages. An upper bound of what Triton allocates (98 KB for 64 x 32 on sm_90)."""
    raw = block_n * 584 * (max(1, num_stages) - 1 + int(prefetch == 2))
    k_tile = block_n * 576 * 2
    q_tile = block_h * 512 * 2
    return raw + k_tile + q_tile + block_h * block_n * 2


def split_counts(batch: int, heads: int, block_h: int, topk: int, block_n: int, sms: int) -> tuple[int, ...]:
    """Split-K counts worth timing: none, the most that still fits one wave of one program per SM
    (64-head programs fill an SM), and the fewest that cover every SM (smaller programs share one)."""
    ctas = batch * (heads // block_h)
    cap = min(-(-topk // block_n), 16)  # at least one tile per split
    one_wave = max(1, min(sms // ctas, cap))
    cover = max(1, min(-(-sms // ctas), cap))
    return tuple(dict.fromkeys((one_wave, cover, 1)))


def candidates(batch: int, heads: int, topk: int, device: torch.device) -> list[MmaConfig]:
    if _common.interpreting():
        # One small config: the interpreter is slow and has no shared-memory limit to respect.
        block_h = 16
        return [MmaConfig(block_h, 16, 4, 1, split_counts(batch, heads, block_h, topk, 16, 4)[0])]
    limit = _common.max_shared_mem(device)
    sms = _common.num_sms(device)
    wgmma = _common.capability(device)[0] in (9, 10)
    out: list[MmaConfig] = []
    for block_h, block_n, warps, stages, prefetch in _BASE:
        if heads % block_h or smem_estimate(block_h, block_n, stages, prefetch) > limit:
            continue
        if block_h >= _WGMMA_BLOCK_H and not wgmma:
            continue
        for s in split_counts(batch, heads, block_h, topk, block_n, sms):
            out.append(MmaConfig(block_h, block_n, warps, stages, s, prefetch))
    if not out:  # tiny shared memory: the smallest tile always fits in 48 KB-class devices' opt-in
        out.append(MmaConfig(16, 32, 4, 1, split_counts(batch, heads, 16, topk, 32, sms)[0]))
    return out


def _source_hash() -> str:
    global _SOURCE_HASH
    if _SOURCE_HASH is None:
        here = Path(__file__).parent
        h = hashlib.sha256()
        for name in ("decode.py", "tuning.py"):
            h.update((here / name).read_bytes())
        _SOURCE_HASH = h.hexdigest()[:16]
    return _SOURCE_HASH


def _cache_file() -> Path | None:
    setting = os.environ.get("MLAPERF_AUTOTUNE_CACHE", "")
    if setting == "0":
        return None
    if setting:
        return Path(setting)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mlaperf" / "autotune.json"


def _disk_key(batch: int, heads: int, topk: int, device: torch.device) -> str:
    import triton

    name = torch.cuda.get_device_name(device).replace(" ", "_")
    return f"{name}|triton-{triton.__version__}|{_source_hash()}|B{batch}|H{heads}|K{topk}"


def _read_disk() -> dict[str, dict[str, int]]:
    path = _cache_file()
    if path is None or not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # a corrupt cache only costs a re-tune


def _write_disk(key: str, cfg: MmaConfig) -> None:
    path = _cache_file()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_disk()
        data[key] = {k: v for k, v in asdict(cfg).items() if k != "source"}
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=0, sort_keys=True)
        os.replace(tmp, path)  # atomic: concurrent processes never read half a file
    except OSError:
        pass


_MEMO: dict[tuple[object, ...], MmaConfig] = {}


def choose_mma_config(
    launch: Callable[[MmaConfig], object], batch: int, heads: int, topk: int, device: torch.device
) -> MmaConfig:
    """Best config for this shape: memo, then disk cache, then a timed search over the candidates."""
    cands = candidates(batch, heads, topk, device)
    if len(cands) == 1 or device.type != "cuda":
        return cands[0]
    key = (device.index, batch, heads, topk)
    if key in _MEMO:
        return _MEMO[key]
    disk_key = _disk_key(batch, heads, topk, device)
    stored = _read_disk().get(disk_key)
    if stored is not None:
        cfg = MmaConfig(**stored, source="cache")
        _MEMO[key] = cfg
        return cfg
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(
            f"sparse_mla_decode(impl='mma') for B={batch}, H={heads}, topk={topk} is not tuned yet: "
            "call it once with these shapes before capturing a CUDA graph"
        )
    cfg = _search(launch, cands, device)
    _MEMO[key] = cfg
    _write_disk(disk_key, cfg)
    return cfg


def _gpu_ms(launch: Callable[[], object], flush: torch.Tensor, reps: int = 10) -> float:
    """Median GPU milliseconds of one launch with a cold L2, as a decode step sees it.

    Before each timed launch the L2 is flushed and the GPU is held in a sleep kernel while Python
    enqueues the launch, so the events time the kernels alone, not the launcher's host overhead
    (which exceeds the kernels' time at small batch and made such timings rank configs at random).
    """
    times = []
    for _ in range(reps):
        flush.zero_()
        torch.cuda._sleep(_HOLD_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in times)
    return ms[len(ms) // 2]


# ~0.5 ms at Hopper clocks: longer than the launcher's host time, short next to a tuning run.
_HOLD_CYCLES = 1_000_000


def _search(launch: Callable[[MmaConfig], object], cands: list[MmaConfig], device: torch.device) -> MmaConfig:
    # Zeroing twice the L2's size evicts every line a candidate's previous launch left there.
    l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (64 << 20))
    flush = torch.empty(2 * l2, dtype=torch.uint8, device=device)
    best: tuple[float, MmaConfig] | None = None
    for cfg in cands:
        try:
            launch(cfg)  # compile; a config the device cannot hold fails here
            torch.cuda.synchronize()
            ms = _gpu_ms(lambda c=cfg: launch(c), flush)
        except Exception as exc:  # noqa: BLE001 - out of resources / PTX errors rule a config out
            if "out of resource" not in str(exc).lower() and "OutOfResources" not in type(exc).__name__:
                torch.cuda.synchronize()
            continue
        if best is None or ms < best[0]:
            best = (ms, cfg)
    if best is None:
        raise RuntimeError("no MMA decode config compiled on this device")
    return replace(best[1], source="tuned")
