"""The compile matrix (``python -m mla_kernels.compile_report``): every kernel x candidate config compiled
for sm_120 (the indexer's also for sm_90) with Triton's bundled ptxas, no GPU. Fails when a config the
launchers keep for sm_120 spills or exceeds its shared memory. A child process: kernels defined under
TRITON_INTERPRET=1 do not compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mla_kernels.aot import CompileStats
from mla_kernels.arch import resident_blocks
from mla_kernels.compile_report import Entry, judge
from mla_kernels.indexer.coop import SEL_BLOCKS, block_label
from mla_kernels.indexer.tiles import COOP_TILES, SCORES_TILES, tile_label

REPO = Path(__file__).resolve().parents[2]


def _assert_fixed_tiles_kept(rows: list[dict]) -> None:
    # The one-launch indexer runs COOP_TILES alone: one not kept at a select block moves it to another block
    # (none: the radix select runs, ``launch._coop_block_kept``);
    # the scores kernel runs ``tiles.SCORES_TILE`` (one not kept would run as it compiled, spills and all).
    # The coop tiles at every select block the plan can choose (``coop.select_block``).
    coop_labels = {block_label(tile_label(t), b) for t in COOP_TILES for b in SEL_BLOCKS}
    fixed = (("indexer.coop", coop_labels),
             ("indexer.scores_t", {tile_label(t) for t in SCORES_TILES}))  # fmt: skip
    for kernel, labels in fixed:
        kept = {r["config"] for r in rows if r["kernel"] == kernel and r["kept"]}
        missing = labels - kept
        assert not missing, f"{kernel} tiles not kept: {sorted(missing)}"


def _report(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(MLAPERF_COMPILE_CACHE=str(cache), TRITON_DEFAULT_FP_FUSION="1")
    return subprocess.run(
        [sys.executable, "-m", "mla_kernels.compile_report", *args],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=900,
    )  # fmt: skip


def _child_json(cache: Path, code: str) -> object:
    # ``code`` in a child process (kernels compile only without TRITON_INTERPRET) reading the report's compile
    # cache (the same compiles); the JSON of its last line.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(MLAPERF_COMPILE_CACHE=str(cache), TRITON_DEFAULT_FP_FUSION="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def sm120(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], float, Path]:
    cache = tmp_path_factory.mktemp("compile") / "compile.json"
    start = time.perf_counter()
    proc = _report(cache, "--arch", "120", "--json", "--jobs", "2")
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout), elapsed, cache


# The indexer's compile-matrix rows: the live scores kernel (also zeroing the radix select's workspace, and
# with its pass 0 fused), the single-program, split (one program a request, or chunks and a merge) and
# global radix selects, the one-launch scores and select, the SIMT baseline.
INDEXER_KERNELS = ("indexer.scores_t", "indexer.scores_zero", "indexer.scores_hist", "indexer.select",
                   "indexer.request_topk", "indexer.chunk_topk", "indexer.merge_topk", "indexer.radix_pass0",
                   "indexer.radix_pass1", "indexer.radix_compact", "indexer.coop", "indexer.fp32_maxctx")  # fmt: skip


def test_every_kernel_is_compiled_for_sm120(sm120):
    rows, _, _ = sm120
    kernels = {r["kernel"] for r in rows}
    assert kernels == {"decode.mma", "decode.gluon", "decode.simt", "decode.combine", *INDEXER_KERNELS}
    assert all(r["arch"] == "sm_120" and r["registers"] for r in rows)
    assert all(set(r) >= {"kernel", "arch", "config", "kept", "registers", "spill_bytes", "shared"} for r in rows)


def test_what_sm120_keeps_compiles_spill_free_within_its_shared_memory(sm120):
    rows, _, _ = sm120
    kept = [r for r in rows if r["kept"]]
    assert all(r["spill_bytes"] == 0 and r["shared"] <= 101376 and not r["failure"] for r in kept)
    mma = [r for r in kept if r["kernel"] == "decode.mma"]
    assert mma, "an sm_120 must keep at least one MMA decode config"
    # Both split-K variants of some config are kept, so every batch size has a spill-free choice.
    assert {r["config"].removesuffix(" split-K") for r in mma if r["config"].endswith("split-K")} & {
        r["config"] for r in mma
    }
    for r in mma:  # tensor cores of this architecture, not a fallback
        assert r["mma"] and all(m.startswith("mma.sync") for m in r["mma"])
    gluon = [r for r in kept if r["kernel"] == "decode.gluon"]
    assert gluon, "an sm_120 must keep at least one Gluon decode config"
    assert all(r["mma"] and all(m.startswith("mma.sync") for m in r["mma"]) for r in gluon)
    simt = next(r for r in rows if r["kernel"] == "decode.simt")
    assert simt["kept"] and simt["spill_bytes"] == 0 and not simt["mma"]  # SIMT stays on CUDA cores
    assert next(r for r in rows if r["kernel"] == "indexer.fp32_maxctx")["mma"] == []
    coop = [r for r in kept if r["kernel"] == "indexer.coop"]  # its grid barrier: two blocks per SM must fit
    assert coop and all(
        resident_blocks(120, r["registers"], int(r["config"].split(" w")[1].split()[0]), r["shared"]) >= 2 for r in coop
    )
    _assert_fixed_tiles_kept(rows)
    dropped = [r for r in rows if r["kernel"] == "decode.mma" and not r["kept"]]
    assert all(r["reason"] for r in dropped)  # every config left out says why


# The launcher's check (``launch._coop_block_kept``) on the compile matrix's one-launch rows, in a child process
# (kernels compile only without TRITON_INTERPRET); prints {config label: kept}.
_COOP_KEPT = """
import json
from dataclasses import replace
from mla_kernels.indexer import coop, launch
from mla_kernels.indexer.checks import _Dims
from mla_kernels.indexer.matrix import compile_matrix
d = _Dims(batch=64, heads=64, max_pages=512, num_pages=64 * 512)
rows = [(label, run) for label, run, _ in compile_matrix() if run.name == "indexer.coop"]
print(json.dumps({label: launch._coop_block_kept(replace(coop.gpu_plan(1, 512), sel_block=run.constexprs["SEL_BLOCK"]),
                                                 run.args, d, 120, 101376) for label, run in rows}))
"""


def test_the_coop_launcher_keeps_what_the_report_keeps(sm120):
    # The one-launch select picks its select block by the same rule the report applies (its tuner never prunes
    # its one config): the two agree row by row (read from the report's compile cache).
    rows, _, cache = sm120
    kept = _child_json(cache, _COOP_KEPT)
    report = {r["config"]: bool(r["kept"]) for r in rows if r["kernel"] == "indexer.coop"}
    assert kept == report and len(kept) == len(SEL_BLOCKS)


def test_second_run_reads_the_cache(sm120):
    rows, first, cache = sm120
    start = time.perf_counter()
    proc = _report(cache, "--arch", "sm_120", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == rows
    assert time.perf_counter() - start < max(30.0, first / 3)


def test_indexer_kernels_compile_for_sm90(tmp_path):
    # sm_90 lowering (wgmma) the interpreter never sees, for every indexer launch (~10 s; the 64-head decode
    # configs take 10-50 s each, so sm_90 decode is left to the report itself).
    proc = _report(tmp_path / "c.json", "--arch", "90", "--kernels", "indexer", "--json", "--jobs", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = json.loads(proc.stdout)
    assert {r["kernel"] for r in rows} == set(INDEXER_KERNELS)
    split = ("indexer.request_topk", "indexer.chunk_topk", "indexer.merge_topk")
    fixed = [r for r in rows if r["kernel"] in split or "radix_" in r["kernel"]]
    assert all(r["kept"] and r["spill_bytes"] == 0 for r in fixed)  # the split and radix selects run spill-free
    assert all(r["arch"] == "sm_90" and r["registers"] and not r["failure"] for r in rows)
    scores = [r for r in rows if r["kernel"].startswith("indexer.scores_")]
    assert all(r["mma"] for r in scores)  # tensor cores, not a fallback (wgmma from 64 tokens a tile)
    assert all(any(m.startswith("wgmma") for m in r["mma"]) for r in scores if "BLOCK_T 32 " not in r["config"])
    assert all(r["shared"] <= 101376 for r in scores)  # fits the smallest target (sm_120 class) too
    assert any(r["kept"] for r in scores) and any(r["kept"] for r in rows if r["kernel"] == "indexer.select")
    assert next(r for r in rows if r["kernel"] == "indexer.fp32_maxctx")["mma"] == []  # the baseline stays SIMT
    _assert_fixed_tiles_kept(rows)


def test_a_kept_config_that_spills_or_overflows_fails():
    entry = Entry("decode.simt", "BLOCK_N 16 w4", launch=None, kept=True)
    stats = CompileStats(registers=255, spill_bytes=288, shared=8192, mma=(), seconds=0.0)
    assert judge(entry, 120, stats) == (True, None, "kept but spills 288 B/thread on sm_120")
    big = CompileStats(registers=128, spill_bytes=0, shared=150000, mma=(), seconds=0.0)
    assert judge(entry, 120, big)[2] == "kept but shared 150,000 B > 101,376 B on sm_120"
    mma = Entry("decode.mma", "64x64x8x2 pf3", launch=None, kept=None, spec=(64, 64, 8, 2, 3))
    assert judge(mma, 120, big) == (False, "shared 150,000 B > 101,376 B", None)  # not kept: no failure


def test_bad_arguments_exit_2(tmp_path):
    proc = _report(tmp_path / "c.json", "--arch", "sm_75")
    assert proc.returncode == 2 and "unknown architecture 'sm_75'" in proc.stderr
    proc = _report(tmp_path / "c.json", "--kernels", "attention")
    assert proc.returncode == 2 and "--kernels: unknown attention" in proc.stderr


_PRUNE = """
import json, sys, torch
import mla_kernels._common as common
import mla_kernels.arch as arch
import mla_kernels.indexer.launch as L
from mla_kernels.indexer.checks import _Dims
arch.device_capability = lambda device: 120  # what the autotuner's prune sees on an sm_120 GPU
common.max_shared_mem = lambda device: 101376
m = torch.device("meta")
d = _Dims(64, 64, 512, 64 * 512)
logits = torch.empty(64, 131072, dtype=torch.float32, device=m)
args = L._select_args(logits, torch.empty(64, 512, dtype=torch.int32, device=m),
                      torch.empty(64, dtype=torch.int32, device=m), torch.empty(64, 512, dtype=torch.int32, device=m),
                      512, d)
prune = L._kept_by_compile("indexer.select", L._radix_select_kernel)
kept = prune(list(L.SELECT_CONFIGS), dict(zip(L._radix_select_kernel.arg_names, args)), grid=(64,), warmup=False)
print(json.dumps([f"BLOCK {c.kwargs['BLOCK']} w{c.num_warps}" for c in kept]))
"""


def test_indexer_autotuner_keeps_what_the_report_keeps(sm120):
    # The select autotuner's prune callback, given the arguments Triton passes it, keeps exactly the
    # configs the compile report keeps for sm_120 (same compiles: read from the report's cache).
    rows, _, cache = sm120
    want = [r["config"] for r in rows if r["kernel"] == "indexer.select" and r["kept"]]
    assert _child_json(cache, _PRUNE) == want and want
