"""The Gluon decode (impl ``gluon``): against the fp32 reference on the GPU for every candidate and
split, the fallback where it cannot run (recorded as such), and its compiles for sm_90 and sm_120."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from mla_kernels import make_decode_inputs, sparse_mla_decode, sparse_mla_decode_with_record
from mla_kernels.arch import device_capability, has_wgmma
from mla_kernels.decode import (
    GLUON_CANDIDATES,
    WGMMA_CANDIDATES,
    MmaConfig,
    decode_with_config,
    gluon_kernels,
    gluon_unavailable,
    launch_label,
    mma_launches,
)
from mla_kernels.decode.launch import _mma_config, split_plan
from mla_kernels.record import KernelRun, LaunchRecord
from mla_kernels.testing import check_decode

needs_gluon = pytest.mark.skipif(not gluon_kernels.AVAILABLE, reason="this Triton has no Gluon mma_v2")


def test_fallback_is_recorded_as_the_mma_kernel(device):
    # H=48 never runs the Gluon kernel (64 heads a CTA): today's MMA kernel runs, and says so.
    inp = make_decode_inputs(2, 48, 40, num_tokens=600, device=device, seed=3, invalid_frac=0.1)
    out, lse, record = sparse_mla_decode_with_record(inp.q, inp.kv_cache, inp.indices, impl="gluon")
    assert (record.impl, record.source) == ("mma", "fallback")
    assert record.kernel.startswith(("_mma_decode_kernel", "_scores_pass_kernel"))
    check_decode(out, lse, *sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference"))


def test_unavailable_says_why(monkeypatch):
    monkeypatch.setattr(gluon_kernels, "AVAILABLE", True)
    monkeypatch.setattr("mla_kernels.decode.launch._common.interpreting", lambda: False)
    assert gluon_unavailable(64) == "" and gluon_unavailable(128) == ""
    assert gluon_unavailable(96) == "H=96 is not a multiple of 64"
    monkeypatch.setattr("mla_kernels.decode.launch._common.interpreting", lambda: True)
    assert "interpreter" in gluon_unavailable(64)
    monkeypatch.setattr(gluon_kernels, "AVAILABLE", False)
    assert gluon_unavailable(64).startswith("the Gluon kernel is built for Triton 3.6 to 3.9")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only check")
def test_a_fixed_gluon_config_where_it_cannot_run_says_why(device):
    inp = make_decode_inputs(1, 64, 16, num_tokens=300, device=device, seed=1)
    with pytest.raises(ValueError, match="the Gluon decode cannot run here: the Triton interpreter"):
        decode_with_config(inp.q, inp.kv_cache, inp.indices, GLUON_CANDIDATES[0])


@needs_gluon
@pytest.mark.parametrize("cfg", WGMMA_CANDIDATES, ids=lambda c: c.label)
def test_a_wgmma_launch_records_the_config_it_was_built_from(cfg, monkeypatch):
    # Ring stages travel as num_stages, the key buffers as PREFETCH + 1; the record reads both back.
    monkeypatch.setattr("mla_kernels.decode.launch._common.interpreting", lambda: False)  # built, not run
    meta = (torch.empty(2, 128, 512, dtype=torch.bfloat16, device="meta"),
            torch.empty(8, 149_504, dtype=torch.uint8, device="meta"),
            torch.empty(2, 512, dtype=torch.int32, device="meta"))  # fmt: skip
    launches = mma_launches(*meta, 512**-0.5, replace(cfg, num_splits=4))[0]
    assert [launch.name for launch in launches] == ["wgmma_ws" if cfg.specialized else "wgmma", "combine"]
    assert launches[0].grid == (2, 2, 4) and launches[0].constexprs["KEY_BUFFERS"] == cfg.prefetch + 1
    runs = tuple(KernelRun.of(launch, None) for launch in launches)
    record = LaunchRecord("decode", "gluon", runs, _mma_config(runs))
    assert MmaConfig.of_record(record) == replace(cfg, num_splits=4, source=record.source)
    assert launch_label(record) == f"{cfg.label} S4"


def test_supported_triton_versions_are_pinned():
    assert gluon_kernels.supported("3.6.0") and gluon_kernels.supported("3.9.0+git1234")
    assert not gluon_kernels.supported("3.5.1") and not gluon_kernels.supported("3.10.0")
    assert not gluon_kernels.supported("4.0.0") and not gluon_kernels.supported("nightly")


_COMPILE = """
import json, torch
import json
import os
import subprocess
import sys
from dataclasses import replace
from mla_kernels import aot
from mla_kernels.decode import GLUON_CANDIDATES, WGMMA_CANDIDATES, mma_launches
meta = [torch.empty(8, 64, 512, dtype=torch.bfloat16, device="meta"),
        torch.empty(64, 149_504, dtype=torch.uint8, device="meta"),
        torch.empty(8, 512, dtype=torch.int32, device="meta")]
rows = []
for cap in (90, 120):
    for cfg in GLUON_CANDIDATES:
        launch = mma_launches(*meta, 512**-0.5, replace(cfg, num_splits=4))[0][0]
        st = aot.compile_uncached(launch, cap)
        rows.append({"cap": cap, "label": cfg.label, "mma": list(st.mma), "shared": st.shared, "regs": st.registers})
for cfg in WGMMA_CANDIDATES:  # sm_90 only: wgmma is Hopper's
    launch = mma_launches(*meta, 512**-0.5, replace(cfg, num_splits=4))[0][0]
    st = aot.compile_uncached(launch, 90)
    rows.append({"cap": 90, "label": cfg.label, "mma": list(st.mma), "shared": st.shared, "regs": st.registers})
print(json.dumps(rows))
"""


@needs_gluon
def test_compiles_for_both_architectures():
    # Every mma_v2 candidate compiles with this Triton for sm_90 and sm_120 on mma.sync (the same kernel on
    # both), every wgmma candidate for sm_90 on wgmma alone, both products (m64n256 for P V, all 64 heads a
    # warpgroup); which ones an architecture keeps is the compile report's and the tuner's rule.
    # A subprocess without TRITON_INTERPRET: the interpreter compiles nothing.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _COMPILE], capture_output=True, text=True, env=env, check=False,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 2 * len(GLUON_CANDIDATES) + len(WGMMA_CANDIDATES)
    for r in rows:
        kind = "wgmma" if r["label"].endswith("wgmma") else "mma.sync"
        assert r["mma"] and all(m.startswith(kind) for m in r["mma"]), r
        assert 0 < r["shared"] <= 228 * 1024 and 0 < r["regs"] <= 255, r
    assert all(any("m64n256k16" in m for m in r["mma"]) for r in rows if r["label"].endswith("wgmma"))


@pytest.mark.gpu
@needs_gluon
@pytest.mark.parametrize("cfg", GLUON_CANDIDATES + WGMMA_CANDIDATES, ids=lambda c: c.label)
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize(("batch", "heads", "topk"), [(3, 64, 200), (2, 128, 77), (1, 64, 2048)])
def test_gpu_every_candidate_and_split(cfg, splits, batch, heads, topk):
    if cfg.wgmma and not has_wgmma(device_capability(torch.device("cuda"))):
        pytest.skip("wgmma is sm_90's")
    inp = make_decode_inputs(batch, heads, topk, num_tokens=65536, device="cuda", seed=topk + splits,
                             invalid_frac=0.1)  # fmt: skip
    idx = inp.indices.clone()
    idx[0, : min(40, topk)] = -1  # whole leading tiles invalid
    idx[-1, :] = -1 if batch > 1 else idx[-1, :]  # a row with no valid slot: out 0, lse +inf
    idx[0, -1] = 65536 * 4  # beyond the cache: invalid
    ref_out, ref_lse = sparse_mla_decode(inp.q, inp.kv_cache, idx, impl="reference")
    out, lse, record = decode_with_config(inp.q, inp.kv_cache, idx, replace(cfg, num_splits=splits))
    kernel = "_wgmma_ws_decode_kernel" if cfg.specialized else "_wgmma_decode_kernel" if cfg.wgmma else "_gluon_"
    assert record.impl == "gluon" and record.kernel.startswith(kernel)
    check_decode(out, lse, ref_out, ref_lse)
    ran = split_plan(topk, cfg.block_n, splits)[0]  # fewer splits where the top-k has fewer tiles
    assert MmaConfig.of_record(record) == replace(cfg, num_splits=ran, source=record.source)
    if batch > 1:
        assert torch.isinf(lse[-1]).all() and (lse[-1] > 0).all() and (out[-1] == 0).all()
    assert not torch.isnan(out).any()


@pytest.mark.gpu
@needs_gluon
@pytest.mark.parametrize("profile", ["native", "sm_120"])
def test_gpu_tuned_and_graph_replay(profile):
    inp = make_decode_inputs(16, 64, 512, num_tokens=16 * 8192, device="cuda", seed=1, num_index_sets=2)
    idx = inp.indices.clone()
    out, lse, record = sparse_mla_decode_with_record(inp.q, inp.kv_cache, idx, impl="gluon", arch_profile=profile)
    assert (record.impl, record.arch_profile) == ("gluon", profile)
    check_decode(out, lse, *sparse_mla_decode(inp.q, inp.kv_cache, idx, impl="reference"))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = sparse_mla_decode(inp.q, inp.kv_cache, idx, impl="gluon", arch_profile=profile)
    idx.copy_(inp.index_sets[1])
    graph.replay()
    fresh = sparse_mla_decode(inp.q, inp.kv_cache, idx, impl="gluon", arch_profile=profile)
    torch.cuda.synchronize()
    assert torch.equal(captured[0], fresh[0]) and torch.equal(captured[1], fresh[1])


@pytest.mark.gpu
@needs_gluon
@pytest.mark.parametrize("profile", ["native", "sm_120"])
@pytest.mark.parametrize(("batch", "heads", "topk"), [(1, 64, 2048), (7, 128, 512), (32, 64, 128), (128, 64, 512)])
def test_gpu_production_shapes_against_reference_and_oracle(profile, batch, heads, topk):
    # The asv gates, as the suite applies them: the record names the Gluon kernel and the profile, and
    # the output matches the fp32 reference and the independent float64 oracle.
    from benchmarks import _gate, _oracle

    inp = make_decode_inputs(batch, heads, topk, num_tokens=max(batch * 4096, 65536), device="cuda",
                             seed=batch + topk, invalid_frac=0.05)  # fmt: skip
    out, lse, record = sparse_mla_decode_with_record(inp.q, inp.kv_cache, inp.indices, impl="gluon",
                                                     arch_profile=profile)  # fmt: skip
    _gate.check_launch(record.as_dict(), "decode", "gluon", arch_profile=profile)
    reference = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    _gate.check_decode(out, lse, reference, _oracle.decode(inp.q, inp.kv_cache, inp.indices), interpreter=False)
