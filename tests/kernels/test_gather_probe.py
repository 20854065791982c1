"""The gather-ceiling probe's kernel reads exactly the decode's bytes: its per-row checksum equals the sum
of each selected token's 576 data bytes and 8 scale bytes, and an invalid slot (-1) reads nothing."""

from __future__ import annotations

import pytest
import torch

from mla_kernels.cache import DATA_BYTES, SCALE_BYTES, SCALE_OFFSET, TOKENS_PER_PAGE
from mla_kernels.gather_probe import gather_rows
from mla_kernels.testing import make_kv_cache


def test_checksums_are_the_bytes_the_decode_reads(device):
    cache = make_kv_cache(700, device=device, seed=3)  # 3 pages
    slots = torch.tensor([0, 255, 256, 699, -1, 511, 300], dtype=torch.int32, device=device)
    rows, groups = 4, 2  # 8 lanes: the last is past n_idx
    out = gather_rows(cache, slots, rows=rows, groups=groups)  # one program: a checksum per lane
    expected = torch.zeros(rows, dtype=torch.int64)
    c = cache.cpu().to(torch.int64)
    for i, s in enumerate(slots.tolist()):
        if s < 0:
            continue
        page, off = divmod(s, TOKENS_PER_PAGE)
        data = c[page, off * DATA_BYTES:(off + 1) * DATA_BYTES].sum()
        scale = c[page, SCALE_OFFSET + off * SCALE_BYTES]  # the probe reads the first scale byte of a row
        expected[i % rows] += data + scale
    assert torch.equal(out.cpu().to(torch.int64), expected)


def test_the_launcher_names_bad_arguments(device):
    cache = make_kv_cache(256, device=device, seed=3)
    slots = torch.zeros(4, dtype=torch.int32, device=device)
    for kwargs, name in (({"rows": 0}, "rows"), ({"num_warps": 0}, "num_warps")):
        with pytest.raises(ValueError, match=name):
            gather_rows(cache, slots, **kwargs)
    with pytest.raises(ValueError, match="slots must be a 1-D int32"):
        gather_rows(cache, slots.long())
    with pytest.raises(ValueError, match=r"out must be \[4\] int32"):
        gather_rows(cache, slots, torch.empty(3, dtype=torch.int32, device=device))
