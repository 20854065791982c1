"""The asv suites: names and grids as asv discovers them, the metric models, the timing (the gate:
test_gate.py; versions: test_versions.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from benchtools import ROOT, discover

from benchmarks import _roofline, _timing

VARIANTS = ("baseline", "mma", "mma+indexer")
CONCURRENCY = [1, 2, 4, 8, 16, 32, 64, 128]
TRACKS = {
    "track_tokens_per_s": "tokens/s",
    "track_gbps": "GB/s",
    "track_tflops": "TFLOP/s",
    "track_roofline_fraction": "fraction",
}
DECODE_KEYS = ("block_h", "block_n", "block_d", "num_splits", "prefetch", "num_warps", "num_stages", "spill_bytes")
LAUNCH_KEYS = {  # kernel-config records (track_launch_<key>, unit "config"; test_launch.py)
    "bench_decode.SparseDecode": DECODE_KEYS,
    "bench_indexer.Indexer": ("block_t", "num_warps", "num_stages", "select_block", "select_num_warps"),
    "bench_step.DecodeStep": (*DECODE_KEYS, "indexer_block_t", "indexer_select_block"),
}


def expected(tier: str) -> dict[str, tuple[list[str], list[list[object]]]]:
    if tier == "gpu":
        conc, topk, ctx = CONCURRENCY, [128, 512, 2048], [4096, 16384, 65536]
    else:
        conc, topk, ctx = [1, 2], [32, 64], [256, 512]
    suites = {
        "bench_decode.SparseDecode": (
            "time_decode", ["impl", "concurrency", "topk"],
            [["simt", "mma", "mma_sm120", "gluon", "gluon_sm120"], conc, topk],
        ),
        "bench_indexer.Indexer": (
            "time_indexer", ["impl", "concurrency", "context"], [["fp32_maxctx", "bf16"], conc, ctx]
        ),
        "bench_step.DecodeStep": (
            "time_step", ["variant", "concurrency", "context"], [list(VARIANTS), conc, ctx]
        ),
    }  # fmt: skip
    out = {}
    for cls, (time_name, names, params) in suites.items():
        out[f"{cls}.{time_name}"] = (names, params)
        for track in (*TRACKS, *(f"track_launch_{key}" for key in LAUNCH_KEYS[cls])):
            out[f"{cls}Metrics.{track}"] = (names, params)
    return out


@pytest.mark.parametrize("tier", ["gpu", "cpu"], ids=["gpu-grid", "cpu-grid"])
def test_asv_discovers_the_contract_names_and_grids(tier: str) -> None:
    found = discover(tier)
    want = expected(tier)
    assert sorted(found) == sorted(want)
    for name, (names, params) in want.items():
        assert found[name]["param_names"] == names, name
        assert found[name]["params"] == [[repr(v) for v in values] for values in params], name
        if name.split(".")[-1].startswith("time_"):
            assert found[name]["unit"] == "seconds"
        elif ".track_launch_" in name:
            assert found[name]["unit"] == "config"
        else:
            assert found[name]["unit"] == TRACKS[name.split(".")[-1]], name


def test_concurrency_subset_and_bad_tier() -> None:
    found = discover("gpu", MLAPERF_CONCURRENCY="1,16,64")
    assert found["bench_decode.SparseDecode.time_decode"]["params"][1] == ["1", "16", "64"]
    proc = subprocess.run(
        [sys.executable, "-c", "import benchmarks._tier"],
        cwd=ROOT, env=dict(os.environ, MLAPERF_TIER="tpu"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0 and "MLAPERF_TIER must be 'gpu' or 'cpu'" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-c", "import benchmarks._tier"],
        cwd=ROOT, env=dict(os.environ, MLAPERF_TIER="cpu", MLAPERF_CONCURRENCY="1,x"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0 and "MLAPERF_CONCURRENCY" in proc.stderr


@pytest.mark.parametrize("tier", ["gpu", "cpu"], ids=["gpu-grid", "cpu-grid"])
def test_asv_check_passes(tier: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "asv", "check", "--python=same"],
        cwd=ROOT, env=dict(os.environ, MLAPERF_TIER=tier), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No problems found" in proc.stdout


# --- metric models ----------------------------------------------------------------------------------


def test_models_reproduce_the_design_rooflines() -> None:
    bw = 4.27e12  # the design's H200 copy bandwidth
    for batch, us in [(1, 0.10), (16, 1.61), (64, 6.45), (128, 12.89)]:
        nbytes, flops = _roofline.decode_model(batch, 64, 512)
        assert nbytes / bw * 1e6 == pytest.approx(us, abs=0.015)
        assert flops == batch * 64 * 512 * 2048
    for context, us in [(4096, 8.1), (16384, 32), (65536, 130)]:
        nbytes, _ = _roofline.indexer_model(64, context, 512)
        assert nbytes / bw * 1e6 == pytest.approx(us, rel=0.015)
    sb, sf = _roofline.step_model(8, 64, 4096, 512)
    ib, if_ = _roofline.indexer_model(8, 4096, 512)
    db, df = _roofline.decode_model(8, 64, 512)
    assert (sb, sf) == (ib + db, if_ + df)


def test_metrics_math() -> None:
    ceil = {"copy_gbps": 4000.0, "matmul_tflops": 700.0}
    m = _roofline.metrics(64, 100e-6, 4_000_000_000 // 10_000, 7_000_000_000, ceil)
    assert m["tokens_per_s"] == pytest.approx(640_000)
    assert m["gbps"] == pytest.approx(4.0)
    assert m["tflops"] == pytest.approx(70.0)
    assert m["roofline_fraction"] == pytest.approx(max(400_000 / 4e12, 7e9 / 7e14) / 100e-6)


def test_ceilings_are_measured_once_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ceilings.json"
    monkeypatch.setenv(_roofline.CEILINGS_ENV, str(path))
    first = _roofline.ceilings(torch.device("cpu"))
    assert first["copy_gbps"] > 0 and first["matmul_tflops"] > 0
    table = json.loads(path.read_text())
    (key,) = table
    table[key]["copy_gbps"] = 123.0  # a cached value is used as is
    path.write_text(json.dumps(table))
    assert _roofline.ceilings(torch.device("cpu"))["copy_gbps"] == 123.0


# --- timing -----------------------------------------------------------------------------------------


def test_cpu_replayer_rotates_and_times() -> None:
    calls: list[int] = []
    rep = _timing.Replayer([lambda: calls.append(0), lambda: calls.append(1)], "cpu")
    times = rep.measure(3)
    assert calls == [0, 1, 0]
    assert all(t > 0 for t in times)
    assert rep.pick_number() == 1
    clock = _timing.GpuClock()
    a = clock()
    assert clock() >= a


@pytest.mark.gpu
def test_gpu_replayer_times_graph_replays_with_events() -> None:
    dev = torch.device("cuda", 0)
    x = torch.randn(1 << 24, device=dev)
    fns = [lambda: x.mul(2.0), lambda: x.mul(3.0)]
    rep = _timing.Replayer(fns, dev)
    assert torch.equal(rep.outputs(1), x * 3.0)
    times = rep.measure(10)
    assert all(0 < t < 0.1 for t in times)
    clock = _timing.GpuClock()
    clock.events = True
    before = clock()
    rep.replay(clock)
    rep.replay(clock)
    spent = clock() - before
    assert 0 < spent < 0.2 and math.isfinite(spent)
