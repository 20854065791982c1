"""The kernel measurement scripts in ``benchmarks/scripts`` run as modules and answer --help (they need a GPU
to measure anything); kernel_step_perf checks a step before it times it."""

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

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["kernel_decode_perf", "kernel_step_perf", "gather_ceiling", "indexer_perf"])
def test_scripts_run_as_modules_with_help(script: str) -> None:
    res = subprocess.run([sys.executable, "-m", f"benchmarks.scripts.{script}", "--help"], capture_output=True,
                         text=True, cwd=REPO)  # fmt: skip
    assert res.returncode == 0 and f"usage: python -m benchmarks.scripts.{script}" in res.stdout


def test_step_perf_names_an_unknown_variant() -> None:
    res = subprocess.run([sys.executable, "-m", "benchmarks.scripts.kernel_step_perf", "--variants", "mma,fast"],
                         capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert res.returncode == 2 and "--variants fast: not one of" in res.stderr and "gluon+indexer" in res.stderr


def test_step_perf_checks_the_step_before_timing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # kernel_step_perf times a variant only after its first layer's step passed the reference check: a
    # correct step passes, a step whose decode or top-k is wrong raises.
    from benchmarks.scripts.kernel_step_perf import check_step
    from mla_kernels import DecodeStep, make_step_inputs
    from mla_kernels.indexer import indexer_logits_reference, select_rule

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    inp = make_step_inputs(2, [300, 40], max_context=1024, num_heads=16, topk=32, device=dev, seed=5)
    step = DecodeStep(inp, decode_impl="mma", indexer_impl="bf16")
    ref_logits = indexer_logits_reference(*inp.args()[:5])
    launched = check_step(step, ref_logits)  # and it returns what the checked run launched
    assert launched["indexer"]["select"] == select_rule.select_path(2, max_seq_len=300)
    assert launched["decode"]["impl"] == "mma" and launched["indexer"]["impl"] == "bf16"
    json.dumps(launched)  # JSON-ready, as the script's rows hold it
    real_run = DecodeStep.run_with_records

    def wrong_out(self: DecodeStep) -> tuple:
        out, lse, records = real_run(self)
        return out * 1.5, lse, records

    monkeypatch.setattr(DecodeStep, "run_with_records", wrong_out)
    with pytest.raises(AssertionError, match="out"):
        check_step(step, ref_logits)

    def wrong_topk(self: DecodeStep) -> tuple:
        out, lse, records = real_run(self)
        self.indices = self.indices.flip(0)  # request 0's selection for request 1 and back
        return out, lse, records

    monkeypatch.setattr(DecodeStep, "run_with_records", wrong_topk)
    with pytest.raises(AssertionError):
        check_step(step, ref_logits)


def test_launch_records_go_into_the_scripts_json_as_they_are() -> None:
    # indexer_perf and kernel_step_perf keep LaunchRecord.as_json(): as_dict() with every value JSON has a type for
    # kept as it is, any other as its str (a dtype in a config, say), so the record always serializes.
    from mla_kernels.record import LaunchRecord

    record = LaunchRecord("indexer", "bf16", (), {"select": "split", "BLOCK": 4096, "dtype": torch.float16})
    view = record.as_json()
    assert view == {**record.as_dict(), "dtype": "torch.float16"}
    assert json.loads(json.dumps(view)) == view
