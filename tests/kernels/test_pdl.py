"""Programmatic dependent launch (``mla_kernels.pdl``, decided in ``mla_kernels._common``): every kernel
of the step but the coop indexer waits for the previous grid, the switch is off where it cannot apply, the
wait compiles for sm_90 and sm_120, and on a GPU the answers are the same with it on and off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # must precede the first triton import
    os.environ.setdefault("TRITON_INTERPRET", "1")

from mla_kernels._common import KernelLaunch, interpreting, pdl_constexprs, pdl_enabled, takes_pdl  # noqa: E402
from mla_kernels.decode import launch as decode_launch  # noqa: E402
from mla_kernels.decode.combine import _combine_kernel  # noqa: E402
from mla_kernels.decode.tuning import MmaConfig  # noqa: E402
from mla_kernels.indexer import launch as indexer_launch  # noqa: E402
from settings import env  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GPU = torch.cuda.is_available() and not interpreting()


def test_every_step_kernel_waits_for_the_previous_grid() -> None:
    # The Gluon kernels (impl gluon) are not the step's.
    gluon = ("gluon", "wgmma", "wgmma_ws")
    kernels = {**{f"decode.{k}": v for k, v in decode_launch.KERNELS.items() if k not in gluon},
               **{f"indexer.{k}": v for k, v in indexer_launch.KERNELS.items()}}  # fmt: skip
    missing = [name for name, kernel in kernels.items() if not takes_pdl(kernel)]
    # The one-launch coop indexer launches in stream order: measured slower with PDL (its comment says).
    assert missing == ["indexer.coop"], f"kernels without the PDL constexpr (mla_kernels.pdl): {missing}"


def _combine_launch(device: torch.device, constexprs: dict[str, object] | None = None) -> KernelLaunch:
    opart = torch.zeros((1, 2, 16, 512), device=device)
    lpart = torch.zeros((1, 2, 16), device=device)
    out = torch.empty((1, 16, 512), dtype=torch.bfloat16, device=device)
    lse = torch.empty((1, 16), device=device)
    args = (opart, lpart, out, lse, 2, 16, out.stride(0), out.stride(1), lse.stride(0))
    return KernelLaunch("combine", _combine_kernel, (1, 16), args, {"BLOCK_S": 2, **(constexprs or {})})


def test_pdl_is_off_where_it_cannot_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not pdl_enabled(torch.device("cpu"))
    assert "PDL" not in _combine_launch(torch.device("cpu")).constexprs
    assert _combine_launch(torch.device("cpu"), {"PDL": False}).constexprs["PDL"] is False  # a given value stays
    monkeypatch.setenv(env.PDL.name, "0")
    if torch.cuda.is_available():
        assert not pdl_enabled(torch.device("cuda"))
    assert pdl_constexprs(_combine_kernel, (torch.zeros(1),)) == {}


def test_the_mma_decode_launches_in_stream_order_from_its_in_order_batch() -> None:
    # From decode.launch.IN_ORDER_BATCH requests the MMA split kernel is given PDL=False; below it the device
    # decides (KernelLaunch: on under PDL, absent here on the CPU); the combine after it always follows the device.
    cfg = MmaConfig(16, 64, 4, 2, 4)  # BLOCK_H, BLOCK_N, warps, stages, splits
    device = torch.device("cpu")  # the launches are built, not run
    for batch in (1, decode_launch.IN_ORDER_BATCH - 1, decode_launch.IN_ORDER_BATCH, 2 * decode_launch.IN_ORDER_BATCH):
        q = torch.empty(batch, 16, 512, dtype=torch.bfloat16, device=device)
        cache = torch.empty(2, 149_504, dtype=torch.uint8, device=device)
        indices = torch.empty(batch, 256, dtype=torch.int32, device=device)
        split, combine = decode_launch.mma_launches(q, cache, indices, 512**-0.5, cfg)[0]
        assert (split.name, combine.name) == ("mma", "combine")
        by_device = True if pdl_enabled(device) else None
        assert split.constexprs.get("PDL") is (False if batch >= decode_launch.IN_ORDER_BATCH else by_device)
        assert combine.constexprs.get("PDL") is by_device


_COMPILE = """
import torch
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton
from mla_kernels.aot import signature
from mla_kernels._common import KernelLaunch
from mla_kernels.decode.combine import _combine_kernel
m = torch.device("meta")
opart, lpart = torch.empty((1, 2, 16, 512), device=m), torch.empty((1, 2, 16), device=m)
out, lse = torch.empty((1, 16, 512), dtype=torch.bfloat16, device=m), torch.empty((1, 16), device=m)
args = (opart, lpart, out, lse, 2, 16, out.stride(0), out.stride(1), lse.stride(0))
for cap in (90, 120):
    for flag in (False, True):
        given = {"BLOCK_S": 2, "PDL": flag} if flag else {"BLOCK_S": 2}  # off: the default constexpr
        sig, constexprs, attrs = signature(KernelLaunch("combine", _combine_kernel, (1, 16), args, given))
        ptx = triton.compile(ASTSource(_combine_kernel, sig, constexprs, attrs), target=GPUTarget("cuda", cap, 32),
                             options={"num_warps": 4}).asm["ptx"]
        print(cap, flag, "griddepcontrol.wait" in ptx, "griddepcontrol.launch_dependents" in ptx)
"""


def test_the_wait_compiles_for_sm90_and_sm120() -> None:
    # A child process: kernels defined under TRITON_INTERPRET=1 do not compile.
    child_env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True, env=child_env, cwd=REPO,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:4] == ["90 False False False", "90 True True True", "120 False False False",
                                           "120 True True True"], proc.stdout  # fmt: skip


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA device (and no forced interpreter)")
def test_gpu_answers_are_the_same_with_pdl_on_and_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from mla_kernels import DecodeStep, make_step_inputs, sparse_mla_decode

    inp = make_step_inputs(2, [4096, 3000], max_context=8192, device="cuda", seed=5)
    results = {}
    for flag in ("1", "0"):
        monkeypatch.setenv(env.PDL.name, flag)
        step = DecodeStep(inp)
        step.capture()
        step.replay()
        torch.cuda.synchronize()
        indices = step.indices.clone()
        _, _, records = step.run_with_records()
        # The step's top-k as a set (the select writes its winners in any order), then the decode on one
        # fixed order of them, which is deterministic.
        fixed = torch.sort(indices, 1).values
        results[flag] = (fixed, *sparse_mla_decode(inp.q, inp.kv_cache, fixed))
        on = pdl_enabled(torch.device("cuda"))
        used = {r.name: r.config.get("PDL", False) for rec in records.values() for r in rec.kernels}
        assert used == {name: on and name != "_coop_topk_kernel" for name in used}, used  # coop: stream order
    assert all(torch.equal(a, b) for a, b in zip(results["1"], results["0"], strict=True))
