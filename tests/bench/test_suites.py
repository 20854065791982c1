"""The asv suites: names and grids as asv discovers them, the gate, the metric models, the timing."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, discover

from benchmarks import _gate, _roofline, _timing

VARIANTS = ("baseline", "mma", "mma+indexer")
CONCURRENCY = [1, 2, 4, 8, 16, 32, 64, 128]
TRACKS = {
    "track_tokens_per_s": "tokens/s",
    "track_gbps": "GB/s",
    "track_tflops": "TFLOP/s",
    "track_roofline_fraction": "fraction",
}


def expected(tier: str) -> dict[str, tuple[list[str], list[list[object]]]]:
    if tier == "gpu":
        conc, topk, ctx = CONCURRENCY, [128, 512, 2048], [4096, 16384, 65536]
    else:
        conc, topk, ctx = [1, 2], [32, 64], [256, 512]
    suites = {
        "bench_decode.SparseDecode": (
            "time_decode", ["impl", "concurrency", "topk"], [["simt", "mma"], conc, topk]
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
        for track in TRACKS:
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


# --- correctness gate -------------------------------------------------------------------------------


def test_assert_close_catches_wrong_values() -> None:
    ref = torch.randn(4, 16, 512)
    _gate.assert_close("out", ref.clone(), ref, 8e-4, 2 / 128)
    with pytest.raises(_gate.KernelMismatch, match="out: .* values outside"):
        _gate.assert_close("out", ref * 1.03 + 0.01, ref, 8e-4, 2 / 128)
    bad = ref.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(_gate.KernelMismatch, match="NaN"):
        _gate.assert_close("out", bad, ref, 8e-4, 2 / 128)
    lse = torch.tensor([1.0, float("inf")])
    _gate.assert_close("lse", lse.clone(), lse, 1e-6, 8 / 65536)
    with pytest.raises(_gate.KernelMismatch, match="inf positions"):
        _gate.assert_close("lse", torch.tensor([1.0, 2.0]), lse, 1e-6, 8 / 65536)
    with pytest.raises(_gate.KernelMismatch, match="shape"):
        _gate.assert_close("lse", lse[:1], lse, 1e-6, 8 / 65536)


def test_decode_gate_on_real_kernels() -> None:
    mk = pytest.importorskip("mla_kernels")
    inputs = mk.make_decode_inputs(2, 16, 32, num_tokens=2048, device="cpu", seed=0)
    ref = mk.sparse_mla_decode(inputs.q, inputs.kv_cache, inputs.indices, impl="reference")
    out, lse = mk.sparse_mla_decode(inputs.q, inputs.kv_cache, inputs.indices, impl="mma")
    _gate.check_kernel_ran(dict(mk.LAST_LAUNCH), "mma")
    _gate.check_decode(out, lse, *ref, interpreter=True)
    with pytest.raises(_gate.KernelMismatch, match="out"):
        _gate.check_decode((out.float() * 1.1).to(out.dtype), lse, *ref, interpreter=True)
    with pytest.raises(_gate.KernelMismatch, match="lse"):
        _gate.check_decode(out, lse + 0.05, *ref, interpreter=True)
    with pytest.raises(_gate.KernelMismatch, match="asked for impl 'mma'"):
        _gate.check_kernel_ran({"impl": "simt", "kernel": "_simt_decode_kernel"}, "mma")


def test_topk_gate_on_real_indexer() -> None:
    ix = pytest.importorskip("mla_kernels.indexer")
    s = ix.make_indexer_inputs(3, [300, 512, 20], max_context=1024, topk=32, device="cpu", seed=1)
    logits = ix.indexer_logits_reference(s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens)
    sel = ix.indexer_topk(*s.args(), impl="reference")
    _gate.check_topk(sel, logits, s.block_table, s.seq_lens, 32)
    swapped = sel.clone()  # replace request 0's best token by its worst: not a near-tie
    pos = torch.argsort(logits[0, :300], descending=True)
    slot = lambda p: int(s.block_table[0, p // 256]) * 256 + p % 256  # noqa: E731
    best, worst = slot(int(pos[0])), slot(int(pos[-1]))
    swapped[0][swapped[0] == best] = worst
    with pytest.raises(_gate.KernelMismatch, match="request 0 .*not the top-k"):
        _gate.check_topk(swapped, logits, s.block_table, s.seq_lens, 32)
    dup = sel.clone()
    dup[1, 1] = dup[1, 0]
    with pytest.raises(_gate.KernelMismatch, match="request 1 .*twice"):
        _gate.check_topk(dup, logits, s.block_table, s.seq_lens, 32)
    short = sel.clone()
    short[2, 0] = int(s.block_table[0, 0]) * 256  # a slot of request 0, not request 2
    with pytest.raises(_gate.KernelMismatch, match="request 2 .*outside"):
        _gate.check_topk(short, logits, s.block_table, s.seq_lens, 32)
    few = sel.clone()
    few[2, :] = -1
    with pytest.raises(_gate.KernelMismatch, match="request 2 .*valid slots"):
        _gate.check_topk(few, logits, s.block_table, s.seq_lens, 32)


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
