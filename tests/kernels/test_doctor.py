"""``mlaperf doctor``: a real subprocess on this machine. Without a GPU it must say so and fail; on a GPU
every check (versions, each kernel against its reference, ceilings) must pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _doctor(*args: str, module: str = "mlaperf.cli", hide_gpu: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if hide_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    prefix = ["doctor"] if module == "mlaperf.cli" else []
    return subprocess.run([sys.executable, "-m", module, *prefix, *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=600)  # fmt: skip


def test_help():
    pytest.importorskip("sqlalchemy", reason="the mlaperf CLI needs the store's packages (the GPU image lacks them)")
    proc = _doctor("--help")
    assert proc.returncode == 0 and "usage: mlaperf doctor" in proc.stdout and "--no-ceilings" in proc.stdout


def test_without_a_gpu_it_says_so_and_fails():
    proc = _doctor(module="mlaperf.doctor", hide_gpu=True)
    assert proc.returncode == 1, proc.stderr
    assert "[FAIL] gpu" in proc.stdout and "no CUDA GPU is visible to torch" in proc.stdout
    assert "[skip] kernels" in proc.stdout and "NOT ready, failed: gpu" in proc.stdout
    assert "triton" in proc.stdout  # versions are still reported


def test_json_and_a_bad_profile_is_named(monkeypatch):
    monkeypatch.setenv("MLAPERF_ARCH_PROFILE", "sm_100")
    proc = _doctor("--json", module="mlaperf.doctor", hide_gpu=True)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert "[FAIL] gpu" in proc.stderr  # each check shown as it is done, off the JSON document
    status = {c["name"]: c["status"] for c in report["checks"]}
    assert report["ok"] is False and status["gpu"] == "FAIL" and status["arch profile"] == "FAIL"
    assert "MLAPERF_ARCH_PROFILE='sm_100'" in next(c["detail"] for c in report["checks"] if c["name"] == "arch profile")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_every_check_passes():
    proc = _doctor("--json", module="mlaperf.doctor")  # the GPU image may lack the store's packages
    report = json.loads(proc.stdout)
    failed = [c for c in report["checks"] if c["status"] == "FAIL"]
    assert proc.returncode == 0 and not failed, failed
    names = {c["name"] for c in report["checks"]}
    assert {"decode simt", "decode mma", "decode mma sm_120 profile", "decode gluon", "decode gluon sm_120 profile",
            "indexer bf16", "indexer fp32_maxctx", "ceilings"} <= names  # every kernel the suites time
