"""The bf16 indexer's scores kernel on queries far from fp16's range: its MMA runs in fp16 on queries
scaled per head by a power of two (``token_scores._load_q``), which must score exactly as bf16 would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # must precede the first triton import
    os.environ.setdefault("TRITON_INTERPRET", "1")

from mla_kernels._common import interpreting, num_sms  # noqa: E402
from mla_kernels.arch import device_capability, resident_blocks  # noqa: E402
from mla_kernels.indexer import (  # noqa: E402
    check_indexer_output,
    indexer_logits_reference,
    indexer_topk_with_record,
    make_indexer_inputs,
    select_rule,
)
from mla_kernels.indexer import launch as ix_launch  # noqa: E402
from mla_kernels.indexer.tiles import SCORES_TILES  # noqa: E402

GPU = torch.cuda.is_available() and not interpreting()
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
REPO = Path(__file__).resolve().parents[2]
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


# Run without the interpreter (it compiles nothing): the scores grid of every tile and batch, for sm_90 and
# sm_120 on a notional 132-SM device, against one wave of what the ahead-of-time compile says an SM holds.
_WAVE_SCRIPT = """
import json, sys
import torch
from mla_kernels import aot, arch
from mla_kernels.indexer import launch as L
from mla_kernels.indexer.checks import _Dims
from mla_kernels.indexer.matrix import compile_matrix
from mla_kernels.indexer.tiles import SCORES_TILES, tile_label
L.num_sms = lambda device: 132
out = []
for cap in (90, 120):
    L.profile_target = lambda profile, device, cap=cap: (cap, 0)
    for label, launch, _ in compile_matrix(batch=64):
        if launch.name != "indexer.scores_t" or label not in {tile_label(t) for t in SCORES_TILES}:
            continue
        stats = aot.compile_launch(launch, cap)
        held = arch.resident_blocks(cap, stats.registers, launch.num_warps, stats.shared)
        for batch, longest in ((1, None), (4, 4096), (64, None), (64, 1000), (48, 0), (1000, None)):
            d = _Dims(batch, 64, 512, batch * 512)
            out.append([cap, label, batch, longest, held, L._wave_programs(launch, d, longest),
                        L._wave_programs(launch, d, longest, per_sm=2)])
def fail(*a, **k):
    raise aot.CompileError("no toolchain here")
aot.compile_launch = fail
d = _Dims(64, 64, 512, 64 * 512)
print(json.dumps({"rows": out, "fallback": L._wave_programs(launch, d)}))
"""


def test_scores_grid_is_one_wave(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(MLAPERF_COMPILE_CACHE=str(tmp_path / "compile.json"), TRITON_DEFAULT_FP_FUSION="1")
    proc = subprocess.run([sys.executable, "-c", _WAVE_SCRIPT], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(got["rows"]) == 2 * len(SCORES_TILES) * 6
    for cap, label, batch, longest, held, programs, two_an_sm in got["rows"]:
        block_t = int(label.split()[1])
        tiles = -(-(131072 if longest is None else longest) // block_t)
        assert held >= 1, (cap, label)
        # One wave: as many programs as the SMs hold, shared by the batch; no more than the longest has tiles.
        assert programs == max(1, min(132 * held // batch, tiles)), (cap, label, batch, longest)
        assert two_an_sm == max(1, min(132 * 2 // batch, tiles)), (cap, label, batch, longest)
    # Nothing to count with (no toolchain): SCORES_PROGRAMS_PER_SM an SM, with a warning.
    assert got["fallback"] == 132 * ix_launch.SCORES_PROGRAMS_PER_SM // 64
    assert "not checked for sm_" in proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA device (and no forced interpreter)")
def test_gpu_scores_grid_is_one_wave_of_the_kernel_that_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    # The ahead-of-time count of what an SM holds agrees with the kernel the GPU ran (its registers and shared
    # memory, from the record); a hint shorter than a request narrows the grid and still scores every token.
    # The scores kernel's own launch, so not the one-launch select that short batches run (SHORT_SELECT), nor
    # the split that the shortest run (SHORT_SPLIT): the batches below keep the radix path.
    monkeypatch.setattr(select_rule, "SHORT_SELECT", ())
    monkeypatch.setattr(select_rule, "SHORT_SPLIT", ())
    sms, capability = num_sms(DEV), device_capability(DEV)
    short = [4096, 3000, 100, 0]
    for batch, lens, hint in ((4, short, 4096), (4, short, 100), (64, [16384] * 64, None), (48, [5000] * 48, 5000)):
        inp = make_indexer_inputs(batch, lens, max_context=131072, num_heads=64, topk=512, device=DEV, seed=batch)
        out, record = indexer_topk_with_record(*inp.args(), max_seq_len=hint)
        check_indexer_output(out, indexer_logits_reference(*inp.args()[:5]), inp.block_table, inp.seq_lens, 512)
        scores = record.kernels[0]
        assert scores.name == "_bf16_scores_kernel_t" and scores.registers and scores.shared is not None
        held = resident_blocks(capability, scores.registers, int(scores.config["num_warps"]), scores.shared)
        tokens = 131072 if hint is None else hint
        want = max(1, min(sms * held // batch, -(-tokens // int(scores.config["BLOCK_T"]))))
        assert scores.grid == (want, batch), (batch, hint, held)
        assert record.config["programs_per_request"] == want
