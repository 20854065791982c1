"""The bf16 indexer's scores kernel on queries far from fp16's range: its MMA runs in fp16 on queries
scaled per head by a power of two (``token_scores._load_q``), which must score exactly as bf16 would."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():  # must precede the first triton import
    os.environ.setdefault("TRITON_INTERPRET", "1")

from mla_kernels.indexer import indexer_logits_reference, make_indexer_inputs  # noqa: E402
from mla_kernels.indexer import launch as ix_launch  # noqa: E402

DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# Per-head query scale: past fp16's largest (65504) and below its smallest subnormal (6e-8), zero, and plain.
HEAD_SCALES = (3e30, 1e-30, 0.0, 1e6, 1e-8, 2.6e5, 1.0, 7e-3, 1e20, 1e-20, 0.5, 4.0, 1e-3, 1e3, 1e-33, 1.0)


@pytest.mark.parametrize("lens", [[700], [300, 1000, 0]])
def test_queries_outside_fp16_range_score_as_the_reference(lens: list[int]) -> None:
    inp = make_indexer_inputs(len(lens), lens, max_context=1024, num_heads=16, topk=64, device=DEV, seed=len(lens))
    scales = torch.tensor(HEAD_SCALES, dtype=torch.float32, device=DEV)
    q = inp.q_idx.float() * scales[None, :, None]
    q[:, 6, :32] *= 2.0**40  # one head mixing magnitudes 2**40 apart
    q = q.bfloat16()
    # Weights that bring every head's contribution to the same size, so each one shows in the sum.
    w = (1.0 / torch.where(scales > 0, scales, 1.0))[None, :].expand(len(lens), -1).contiguous()
    w[:, 6] = 2.0**-40
    args = (q, w, inp.index_cache, inp.block_table, inp.seq_lens)
    want = indexer_logits_reference(*args)
    d = ix_launch._check_args(*args, inp.topk, "bf16")
    got = torch.empty((len(lens), d.max_context), dtype=torch.float32, device=DEV)
    ix_launch._run_scores(*args, got, d, inp.topk)
    for b, n in enumerate(lens):
        if n == 0:  # an empty request: nothing scored
            continue
        assert torch.isfinite(got[b, :n]).all(), "a head's products left fp16's range"
        scale = float(want[b, :n].abs().max())
        torch.testing.assert_close(got[b, :n], want[b, :n].float(), rtol=1e-5, atol=1e-5 * scale)
