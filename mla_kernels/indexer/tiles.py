"""The bf16 indexer's tile configs: the scores kernel's measured tile, the one-launch kernel's one tile, and what
the select's autotuner chooses among. Triton's autotuner times its candidates warm, on whatever call comes
first; for the score tiles that is often a short context whose keys sit in L2, where the tiles rank unlike at
16K-64K tokens read from DRAM, so those are fixed by measurement.

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
# this one was 0.7-1.2 us faster in every case side by side (docs/measurements/coop_tiles_session17.log). With
# the tile-ahead loads (session 32) 3 stages were no faster and, without the kernel's L2 prefetch, slower at 8
# requests and 16K-64K (docs/measurements/indexer_ahead_session32.log).
COOP_TILES: set[Tile] = {(64, 4, 2)}
# The scores kernel's tile (no tuner: Triton's times warm on whatever context it meets first, and had picked tiles
# up to 1.5x slower at 64K), on a grid of one wave (``launch._wave_programs``). Its loop loads each tile's page
# entry and scales a tile ahead (``token_scores._score_tiles``), which lets Triton's pipeline keep two tiles'
# keys in flight at 3 stages. Forced side by side with cold L2 on the H200
# (docs/measurements/indexer_ahead_session32.log), 64 tokens at 4 warps and 3 stages was the fastest or within
# 0.3 us of it at 1 to 64 requests and 4K-64K tokens: at 64 requests 21.5-22.0 / 63.0-63.3 / 225.6-226.9 us at
# 4K / 16K / 64K against 24.5-24.9 / 67.9-68.3 / 233.4-234.0 for the former rule's 128-token tile.
SCORES_TILE: Tile = (64, 4, 3)
SCORES_TILES: set[Tile] = {SCORES_TILE}


def scores_rule_text() -> str:
    """The scores kernel's tile and grid, in words, for a measurement's header."""
    block_t, warps, stages = SCORES_TILE
    return f"{block_t}-token tiles at {warps} warps and {stages} stages, one wave of programs"


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
