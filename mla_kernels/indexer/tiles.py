"""The bf16 indexer's tile configs: what its autotuners choose among, narrowed to measured tiles where Triton's
tuner misleads. Triton's autotuner times its candidates warm, on whatever call comes first; for the scores
tiles that is often a short context whose keys sit in L2, where the tiles rank unlike at 16K-64K tokens
read from DRAM.

Before the tuners time anything, each candidate is compiled ahead of time for the device's architecture and
kept only when it fits its shared memory without spilling (``mla_kernels.arch.verdict``, the MMA tuner's
rule; cached), which the compile report shows per arch.
"""

from __future__ import annotations

import triton

Tile = tuple[int, int, int]  # (BLOCK_T, num_warps, num_stages)

SCORE_CONFIGS = tuple(
    triton.Config({"BLOCK_T": bt}, num_warps=nw, num_stages=ns)
    for bt in (32, 64, 128)
    for nw in (4, 8)
    for ns in (2, 3)
)
# The one-launch "coop" kernel's one tile: no tuning noise (the tuner timed on whatever context came first and
# had picked either of 64 tokens at 4 warps and 128 at 8, the best two of twelve: coop_configs_session14.log);
# this one was 0.7-1.2 us faster in every case side by side (docs/measurements/coop_tiles_session17.log).
COOP_TILES: set[Tile] = {(64, 4, 2)}
# A full batch (33 requests or more: ``FULL_BATCH_BUCKET``, the largest batch bucket) runs one scores tile:
# with the fp16 MMA (``token_scores._load_q``) 128 tokens at 4 warps and 2 stages was the fastest of the twelve
# at 4K, 16K and 64K tokens for 64 requests (28.9 / 74.0 / 247.0 us, the next 30.2 / 86.9 / 305.1 us;
# docs/measurements/scores_fp16_session18.log).
FULL_BATCH_TILES: set[Tile] = {(128, 4, 2)}
FULL_BATCH_BUCKET = 64
# Smaller batches tune over the three tiles within 2 us of the best at 4, 16 and 32 requests and 4K-64K tokens,
# each forced with cold L2: 4 requests 8.4-9.3 / 13.6-14.0 / 27.0-28.0 us at 4K / 16K / 64K, 32 requests
# 18.2-20.0 / 44.4-45.3 / 134.7-137.6 us, where the slowest of all twelve took 26.2 / 75.8 / 257.6 us
# (docs/measurements/radix_strided_session19.log). Among all twelve, a tuner timing warm on its first context
# could pick a tile 1.5x slower at 64K.
FEW_BATCH_TILES: set[Tile] = {(64, 4, 2), (64, 4, 3), (128, 4, 2)}


def tile_of(cfg: triton.Config) -> Tile:
    """A scores config's tile."""
    return cfg.kwargs["BLOCK_T"], cfg.num_warps, cfg.num_stages


def tile_label(tile: Tile) -> str:
    """``BLOCK_T 64 w4 st2``: a tile as the compile report names it."""
    block_t, warps, stages = tile
    return f"BLOCK_T {block_t} w{warps} st{stages}"


def configs_of(tiles: set[Tile]) -> tuple[triton.Config, ...]:
    """The ``SCORE_CONFIGS`` of ``tiles``."""
    return tuple(c for c in SCORE_CONFIGS if tile_of(c) in tiles)


COOP_CONFIGS = configs_of(COOP_TILES)
FULL_BATCH_CONFIGS = configs_of(FULL_BATCH_TILES)
FEW_BATCH_CONFIGS = configs_of(FEW_BATCH_TILES)
SELECT_CONFIGS = tuple(triton.Config({"BLOCK": bk}, num_warps=nw) for bk in (1024, 2048, 4096) for nw in (4, 8, 16))


def tuned_configs(name: str, bucket: int) -> tuple[triton.Config, ...]:
    """What the autotuner of kernel ``name`` ("indexer.coop" or a scores kernel) chooses among for a batch
    bucket."""
    if name == "indexer.coop":
        return COOP_CONFIGS
    return FULL_BATCH_CONFIGS if bucket >= FULL_BATCH_BUCKET else FEW_BATCH_CONFIGS
