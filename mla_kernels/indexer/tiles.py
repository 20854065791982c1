"""The bf16 indexer's tile configs: the scores kernel's tile by a measured rule, the one-launch kernel's one
tile, and what the select's autotuner chooses among. Triton's autotuner times its candidates warm, on whatever
call comes first; for the score tiles that is often a short context whose keys sit in L2, where the tiles rank
unlike at 16K-64K tokens read from DRAM, so those are fixed by measurement.

Each tile is compiled ahead of time for the device's architecture, and a tuned candidate kept only when it fits
its shared memory without spilling (``mla_kernels.arch.verdict``, the MMA tuner's rule; cached), which the
compile report shows per arch.
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
# The scores kernel's tile, by rule (no tuner: Triton's times warm on whatever context it meets first, and had
# picked tiles up to 1.5x slower at 64K). Its grid is one wave (``launch._wave_programs``). With that grid, forced
# tile by tile with cold L2 on the H200 (docs/measurements/indexer_waves_session31.log), 128 tokens at 4 warps and
# 2 stages was the fastest or within 1.1 us of it at 4 to 64 requests and 4K-64K tokens (64 requests: 24.6 / 67.2
# / 231.0 us at 4K / 16K / 64K); at 4K and up to 16 requests 64-token tiles were as fast or faster (16 requests:
# 11.4 against 12.5 us), at 64K 1-5 us slower.
SCORES_TILE: Tile = (128, 4, 2)
# (max batch, max longest request, tile): batches of at most 16 requests whose longest request (``max_seq_len``,
# where the caller gives it) is at most 4,096 tokens take 64-token tiles.
SHORT_TILE: tuple[int, int, Tile] = (16, 4096, (64, 4, 2))
SCORES_TILES: set[Tile] = {SCORES_TILE, SHORT_TILE[2]}


def scores_tile(batch: int, max_seq_len: int | None) -> Tile:
    """The scores kernel's tile for a batch whose longest request is ``max_seq_len`` tokens (None: unknown)."""
    max_batch, max_len, tile = SHORT_TILE
    return tile if batch <= max_batch and max_seq_len is not None and max_seq_len <= max_len else SCORES_TILE


def scores_rule_text() -> str:
    """The scores kernel's tile rule and grid, in words, for a measurement's header."""
    max_batch, max_len, (short_t, *_) = SHORT_TILE
    return (f"{SCORES_TILE[0]}-token tiles ({short_t} up to {max_batch} requests of at most {max_len:,} tokens), "
            "one wave of programs")


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
SELECT_CONFIGS = tuple(triton.Config({"BLOCK": bk}, num_warps=nw) for bk in (1024, 2048, 4096) for nw in (4, 8, 16))
