"""GPU identity (settings.gpu): the keys asv copies into machine.json and every result's params."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from settings import env, gpu

GPU_KEYS = {"gpu_name", "gpu_cc", "gpu_sm_count", "gpu_memory_gb", "gpu_driver", "cuda", "torch", "triton"}
CONTRACT_KEYS = GPU_KEYS | {"arch_profile"}


def test_keys_are_the_stores_gpu_columns() -> None:
    from db.models import GPU_COLUMNS

    assert gpu.GPU_KEYS == GPU_COLUMNS
    assert set(GPU_COLUMNS) == GPU_KEYS


def test_environment_names_are_defined_once_and_read_by_the_suites() -> None:
    assert (env.TIER.name, env.CONCURRENCY.name, env.ARCH_PROFILE.name) == (
        "MLAPERF_TIER", "MLAPERF_CONCURRENCY", "MLAPERF_ARCH_PROFILE",
    )  # fmt: skip
    from benchmarks import _tier

    assert (_tier.TIER_ENV, _tier.CONCURRENCY_ENV, _tier.ARCH_PROFILE_ENV) == (
        env.TIER.name, env.CONCURRENCY.name, env.ARCH_PROFILE.name,
    )  # fmt: skip


def test_arch_profile_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(env.ARCH_PROFILE.name, raising=False)
    assert gpu.cpu_identity()["arch_profile"] == "native"
    monkeypatch.setenv(env.ARCH_PROFILE.name, "sm_120")
    assert gpu.identity("cpu")["arch_profile"] == "sm_120"


def test_arch_profile_the_kernels_would_reject_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mla_kernels

    assert env.ARCH_PROFILES is mla_kernels.ARCH_PROFILES  # one definition, read without torch
    monkeypatch.setenv(env.ARCH_PROFILE.name, "blackwell")
    with pytest.raises(ValueError, match="MLAPERF_ARCH_PROFILE='blackwell' is not one of native, sm_90, sm_120"):
        gpu.cpu_identity()
    assert gpu.main(["--tier", "cpu"]) == 2
    assert "MLAPERF_ARCH_PROFILE='blackwell'" in capsys.readouterr().err


def test_cpu_identity() -> None:
    info = gpu.cpu_identity()
    assert set(info) == CONTRACT_KEYS
    assert info["gpu_name"] == "none"
    assert info["gpu_sm_count"] == "0"
    assert info["torch"] == torch.__version__
    assert info["triton"] == triton.__version__
    assert all(isinstance(v, str) and v for v in info.values())


def test_identity_tiers() -> None:
    assert gpu.identity("cpu") == gpu.cpu_identity()
    with pytest.raises(ValueError, match="tier"):
        gpu.identity("tpu")
    if not torch.cuda.is_available():
        assert gpu.identity("auto")["gpu_name"] == "none"
        with pytest.raises(RuntimeError, match="no CUDA device"):
            gpu.identity("gpu")


def test_cli_prints_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "settings.gpu"], capture_output=True, text=True, timeout=120, check=True
    )
    info = json.loads(proc.stdout)
    assert set(info) == CONTRACT_KEYS


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error path without a GPU")
def test_cli_gpu_tier_without_gpu_fails_clearly() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "settings.gpu", "--tier", "gpu"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "no CUDA device" in proc.stderr


@pytest.mark.gpu
def test_gpu_identity() -> None:
    info = gpu.gpu_identity()
    props = torch.cuda.get_device_properties(0)
    assert info["gpu_name"] == props.name
    assert info["gpu_cc"] == f"{props.major}.{props.minor}"
    assert int(info["gpu_sm_count"]) == props.multi_processor_count
    assert float(info["gpu_memory_gb"]) > 1
    assert info["cuda"] == torch.version.cuda
    assert info["gpu_driver"] != "none"


def test_gpu_spec_finds_datasheets_by_cuda_device_name() -> None:
    gpu_spec = gpu.gpu_spec
    assert gpu_spec("NVIDIA H200").bf16_tflops == 989.4  # type: ignore[union-attr]
    assert gpu_spec("NVIDIA RTX PRO 6000 Blackwell Server Edition").capability == 120  # type: ignore[union-attr]
    assert gpu_spec("NVIDIA GeForce RTX 5090").sms == 170  # type: ignore[union-attr]
    assert gpu_spec("NVIDIA H100 80GB HBM3").bandwidth_gbps == 3350.0  # type: ignore[union-attr]
    assert gpu_spec("NVIDIA H100 PCIe") is None  # another board, other ceilings: not the SXM5's
    assert gpu_spec("NVIDIA A100-SXM4-80GB") is None


def test_suites_read_the_benchmarking_checkouts_settings(tmp_path: Path) -> None:
    """`mlaperf run` puts the commit under test first on PYTHONPATH; its `settings` (older, or another
    contract) must not reach the suites: benchmarks/__init__.py pins this checkout's, imported first or not."""
    from benchtools import ROOT

    stale = tmp_path / "commit" / "settings"
    stale.mkdir(parents=True)
    (stale / "__init__.py").write_text("")
    (stale / "env.py").write_text("raise ImportError('the commit under test settings was imported')\n")
    for first in (False, True):
        code = ("import settings\n" if first else "") + (
            "from benchmarks import _tier\nimport settings.env\nprint(settings.env.__file__, _tier.TIER_ENV)"
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(stale.parent), str(ROOT)]), MLAPERF_TIER="cpu")
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        where, name = proc.stdout.split()
        assert Path(where) == ROOT / "settings" / "env.py" and name == "MLAPERF_TIER"
