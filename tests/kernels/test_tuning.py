"""Candidate generation of the MMA autotuner (pure Python: no GPU needed)."""

from __future__ import annotations

import pytest

from mla_kernels.tuning import _BASE, smem_estimate, split_counts


@pytest.mark.parametrize(
    ("batch", "expected"),
    [(1, (8, 1)), (16, (8, 1)), (32, (4, 5, 1)), (64, (2, 3, 1)), (128, (1, 2))],
)
def test_split_counts_one_wave_cover_and_none(batch, expected):
    # 64 heads in one block, top-k 512 in tiles of 64 (8 tiles), 132 SMs (H200)
    assert split_counts(batch, 64, 64, 512, 64, 132) == expected


def test_split_counts_never_exceed_tiles_or_sixteen():
    assert max(split_counts(1, 64, 16, 2048, 32, 132)) == 16
    assert max(split_counts(1, 64, 64, 100, 64, 132)) == 2  # two tiles of 64 cover 100 slots
    assert split_counts(4096, 64, 16, 512, 32, 132) == (1,)


def test_every_config_fits_sm90_and_small_blocks_fit_sm120():
    sm90, sm120 = 227 * 1024, 99 * 1024
    for block_h, block_n, _warps, stages, prefetch in _BASE:
        assert smem_estimate(block_h, block_n, stages, prefetch) <= sm90
        if block_h < 64:  # the configs an sm_120 (mma.sync only) GPU keeps
            assert smem_estimate(block_h, block_n, stages, prefetch) <= sm120
