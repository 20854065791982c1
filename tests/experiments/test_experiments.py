"""The experiments (``experiments/``) still run against today's kernels: ablation variants built from the
kernel's source, the ncu summary, the sweeps' config parsing, the PTX comparison, and every one's --help."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from experiments import kernel_decode_ablate as ablate
from experiments import kernel_decode_ncu as ncu
from experiments import kernel_ptx_identity as ptx
from mla_kernels import make_decode_inputs
from mla_kernels.decode import MmaConfig, decode_with_config

REPO = Path(__file__).resolve().parents[2]


def test_every_ablation_anchor_is_in_the_kernel(tmp_path):
    # A kernel edit that removes an anchor must fail here, not silently time the unchanged kernel.
    for name in ablate.VARIANTS:
        kernel = ablate.build_variant(name, tmp_path)
        source = (tmp_path / f"ablate_{name.replace('-', '_')}.py").read_text()
        anchor, replacement = ablate.VARIANTS[name]
        assert callable(kernel.run) and kernel.fn.__name__ == "_mma_decode_kernel"
        if anchor:
            assert anchor not in source and replacement in source


def test_full_variant_runs_through_the_production_launcher(device, tmp_path):
    inp = make_decode_inputs(1, 16, 40, num_tokens=256, device=device, seed=5)
    cfg = MmaConfig(block_h=16, block_n=16, num_warps=4, num_stages=1, num_splits=2, prefetch=3)
    want = decode_with_config(inp.q, inp.kv_cache, inp.indices, cfg)
    got = decode_with_config(inp.q, inp.kv_cache, inp.indices, cfg, kernel=ablate.build_variant("full", tmp_path))
    no_pv = decode_with_config(inp.q, inp.kv_cache, inp.indices, cfg, kernel=ablate.build_variant("no-pv", tmp_path))
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
    torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)
    assert not torch.equal(no_pv[0], want[0])  # the swap really ran another kernel


def _fake_ncu(tmp_path: Path, csv_text: str) -> Path:
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir()
    (tmp_path / "raw.csv").write_text(csv_text)
    exe.write_text(f"#!/bin/sh\ncat '{tmp_path / 'raw.csv'}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe.parent


def test_ncu_summary_reports_metrics_and_stall_shares(tmp_path, monkeypatch, capsys):
    header = ["Kernel Name", "Grid Size", "Block Size", "gpu__time_duration.sum",
              "smsp__issue_active.avg.pct_of_peak_sustained_active",
              "smsp__pcsamp_warps_issue_stalled_barrier", "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
              "smsp__pcsamp_warps_issue_stalled_barrier_not_issued"]
    units = ["", "", "", "us", "%", "", "", ""]
    row = ["_mma_decode_kernel", "(128, 1, 1)", "(256, 1, 1)", "62.8", "22.8", "1,000", "3,000", "999"]
    text = "\n".join(",".join(f'"{c}"' for c in r) for r in (header, units, row)) + "\n"
    monkeypatch.setenv("PATH", f"{_fake_ncu(tmp_path, text)}:/usr/bin:/bin")
    report = tmp_path / "d.ncu-rep"
    report.write_bytes(b"")
    assert ncu.summarize(report) == 0
    out = capsys.readouterr().out
    assert "_mma_decode_kernel grid (128, 1, 1)" in out
    assert "duration us                  62.8" in out
    assert "registers / thread           n/a" in out  # absent from the report: said, not invented
    lines = [ln.split() for ln in out.splitlines() if "%" in ln and ln.startswith("    ")]
    assert lines == [["long_scoreboard", "75.0%"], ["barrier", "25.0%"]]  # not_issued samples left out


def test_ncu_summary_names_a_missing_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{_fake_ncu(tmp_path, '')}:/usr/bin:/bin")
    assert ncu.summarize(tmp_path / "nope.ncu-rep") == 2
    assert "nope.ncu-rep" in capsys.readouterr().err


@pytest.mark.parametrize(
    "script",
    sorted(p.stem for p in (REPO / "experiments").glob("*.py") if p.stem != "__init__"),
)
def test_experiments_run_as_modules_with_help(script):
    res = subprocess.run([sys.executable, "-m", f"experiments.{script}", "--help"], capture_output=True,
                         text=True, cwd=REPO)  # fmt: skip
    assert res.returncode == 0 and f"usage: python -m experiments.{script}" in res.stdout


def test_each_experiment_says_what_it_answered():
    readme = (REPO / "experiments" / "README.md").read_text()
    for path in (REPO / "experiments").glob("*.py"):
        if path.stem != "__init__":
            assert f"`{path.name}`" in readme, path.name


def test_ptx_comparison_ignores_debug_info_only(tmp_path):
    ptx_text = """.version 8.7
.file 1 "/x/kernels.py"
.loc 1 10 5
$L__tmp3:
\tld.global.b32 %r1, [%rd1];
// a comment
.section\t.debug_info { }"""
    assert ptx.normalized_ptx(ptx_text) == ".version 8.7\nld.global.b32 %r1, [%rd1];"
    for name, hashes in (("a", {"k": "1", "j": "2"}), ("b", {"k": "1", "j": "3"}), ("c", {"k": "1", "j": "2"})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "hashes.json").write_text(json.dumps(hashes))
    assert ptx.compare(tmp_path / "a", tmp_path / "c") == 0
    assert ptx.compare(tmp_path / "a", tmp_path / "b") == 1


def test_ptx_comparison_counts_missing_and_failed_launches(tmp_path, capsys):
    # A launch that one side lacks, or that does not compile on both, is not "identical"; launches outside
    # what both runs compiled (here the decode, dumped before only) are left out.
    k, e, new = "sm90 indexer.select k", "sm90 indexer.merge_topk e", "sm90 indexer.request_topk new"
    runs = (("a", {k: "1", e: "error", "sm90 decode.mma x": "3", "sm90 extra pf0 y": "4"}, ["decode", "indexer"]),
            ("b", {k: "1", e: "error", new: "2"}, ["indexer"]))
    for name, hashes, kernels in runs:
        (tmp_path / name).mkdir()
        (tmp_path / name / "hashes.json").write_text(json.dumps(hashes))
        (tmp_path / name / "scope.json").write_text(json.dumps({"triton": "3.9.0", "archs": [90], "kernels": kernels}))
    assert ptx.compare(tmp_path / "a", tmp_path / "b") == 1
    out = capsys.readouterr().out
    assert "only after" in out and "DOES NOT COMPILE" in out and "1 identical, 2 not" in out
    assert "decode.mma" not in out and "extra" not in out


_LAUNCH_NAMES = """
import json
from experiments import kernel_ptx_identity as ptx
from mla_kernels import compile_report
print(json.dumps({cap: [[n for n, _ in ptx.launches(cap, groups)] for groups in (ptx.GROUPS, ("indexer",))]
                  + [len(compile_report.matrix(cap))] for cap in (90, 120)}))
"""


def test_ptx_launches_cover_the_compile_matrix_under_unique_names():
    # In a process without the interpreter, as the tool runs (the Gluon decode's launches need a compiler).
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, "-c", _LAUNCH_NAMES], capture_output=True, text=True, env=env, cwd=REPO)
    assert res.returncode == 0, res.stderr[-2000:]
    for names, indexer_names, matrix_rows in json.loads(res.stdout.splitlines()[-1]).values():
        assert len(set(names)) == len(names) >= matrix_rows
        assert any(" indexer.request_topk " in n for n in names) and any(" decode.mma " in n for n in names)
        assert indexer_names and all(" indexer." in n for n in indexer_names)


def test_ptx_identity_names_bad_arguments():
    res = subprocess.run([sys.executable, "-m", "experiments.kernel_ptx_identity", "--out", "x", "--arch", "80"],
                         capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert res.returncode == 2 and "--arch" in res.stderr and "90, 120" in res.stderr


def test_variant_configs_parse_and_name_bad_ones():
    from experiments.kernel_decode_variants import parse_configs
    from mla_kernels.decode import arch_candidates

    assert parse_configs("sm120") == list(arch_candidates(120))
    got = parse_configs("64x64x8x2x3,64x128x8x1x0x128")
    assert [c.tile for c in got] == [(64, 64, 8, 2, 3, 0), (64, 128, 8, 1, 0, 128)]
    with pytest.raises(ValueError, match="'64x64x8' is not BLOCK_HxBLOCK_NxWARPSxSTAGESxPREFETCH"):
        parse_configs("64x64x8")


def test_variants_splits_name_bad_counts():
    for bad in ("0,16", "x", "8,"):
        res = subprocess.run([sys.executable, "-m", "experiments.kernel_decode_variants", "--splits", bad],
                             capture_output=True, text=True, cwd=REPO)  # fmt: skip
        assert res.returncode == 2 and "--splits takes positive counts" in res.stderr, res.stderr


def test_sm120_probe_variants_parse_and_name_bad_ones():
    from experiments.kernel_decode_sm120_probe import parse_variants

    assert parse_variants("batched:16x32x4x2x0:QSPLIT=8,production:16x32x4x1x2") == [
        ("batched", (16, 32, 4, 2, 0), {"QSPLIT": 8}), ("production", (16, 32, 4, 1, 2), {})]
    assert all(extra for name, _, extra in parse_variants("default") if name != "production")
    with pytest.raises(ValueError, match="'group8:16x32' is not NAME"):
        parse_variants("group8:16x32")
    with pytest.raises(ValueError, match="production takes no options"):
        parse_variants("production:16x32x4x1x2:QSPLIT=4")


def test_radix_stages_smoke_composes_the_select() -> None:
    # Each stage from its saved workspace state, and the chain checked against the reference (interpreter).
    proc = subprocess.run([sys.executable, "-m", "experiments.radix_stages", "--smoke", "--batches", "1",
                           "--contexts", "300"], cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "B=1 ctx 300: zero" in proc.stdout and "own (less restore): pass0" in proc.stdout


def test_sort_select_probe_selects_right_and_compiles_for_both_archs():
    # The bitonic probe against the product's counting rounds: both right on the interpreter (a request
    # shorter than top-k, top-k not a power of two), and both compile for sm_90 / sm_120 without spilling.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, "-m", "experiments.indexer_sort_select"]
    res = subprocess.run([*cmd, "--smoke", "--batches", "2", "--contexts", "300", "--topk", "24"],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.splitlines()[-1].split()[:3] == ["2", "300", "512"]
    res = subprocess.run([*cmd, "--stats", "--contexts", "2048"], capture_output=True, text=True, cwd=REPO, env=env,
                         timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [line for line in res.stdout.splitlines() if line.startswith("sm_")]
    assert len(rows) == 6 and all(" 0 B spilled" in row for row in rows)
    bad = subprocess.run([*cmd, "--warps", "3"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and "--warps" in bad.stderr


def test_fp8_query_probe_reports_a_selection_that_moves():
    from experiments import indexer_fp8_q as fp8q

    q = torch.tensor([[[0.3, -1.7, 0.01, 2.5]]], dtype=torch.bfloat16)
    q8, w8 = fp8q.quantized_query(q, torch.tensor([[2.0]]))
    assert float(q8.float().abs().max()) == fp8q.E4M3_MAX  # the largest |q| maps to e4m3's largest
    assert torch.allclose(q8.float() * (w8 / 2.0)[..., None], q.float(), rtol=2**-4)  # within e4m3's step
    ref = torch.tensor([[4.0, 3.0, 2.0, 1.0, float("-inf")]])
    assert fp8q.compare(ref, ref, 2) == (1.0, 0.0, 0.0)
    recall, short, err = fp8q.compare(ref, torch.tensor([[4.0, 1.0, 2.0, 3.5, float("-inf")]]), 2)
    assert (recall, short, err) == (0.5, 0.5, 0.625)  # chose tokens 0 and 3: 3.0 - 1.0 = 2 short of the k-th, / 4
    res = subprocess.run([sys.executable, "-m", "experiments.indexer_fp8_q", "--contexts", "1024", "--batch", "1",
                          "--heads", "16", "--topk", "64"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    recall = float(res.stdout.splitlines()[-1].split()[1])
    assert 0.5 < recall < 1.0  # e4m3 moves some of the selection, not most of it


def test_pdl_neighbour_checks_its_arguments_and_needs_a_pdl_gpu(capsys):
    from experiments import pdl_neighbour

    args = pdl_neighbour.parse_args([])
    assert [cfg.tile for cfg in args.mma_configs] == [(64, 64, 8, 2, 3, 0), (64, 128, 8, 1, 0, 0)]
    assert args.carveouts == (None, None)
    assert pdl_neighbour.parse_args(["--carveout", "0:100"]).carveouts == (0, 100)
    for bad in (["--configs", "64x64"], ["--rounds", "0"], ["--carveout", "101:-"], ["--carveout", "50"]):
        with pytest.raises(SystemExit):
            pdl_neighbour.parse_args(bad)
        assert bad[0] in capsys.readouterr().err
    assert pdl_neighbour.placement_cost(458.4, 423.6) == pytest.approx(34.8)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        assert pdl_neighbour.main(["--rounds", "1"]) == 2
        assert "needs a CUDA GPU with PDL" in capsys.readouterr().err


def test_fused_short_probe_selects_right_and_names_bad_configs():
    # The one-launch scores + last-program select probe: right on ragged batches under the interpreter (an empty
    # request, one shorter than its tiles, programs without tiles), twice each (its tickets come back zeroed).
    cmd = [sys.executable, "-m", "experiments.indexer_fused_short"]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # --smoke chooses the interpreter itself
    res = subprocess.run([*cmd, "--smoke"], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count(": ok") == 3
    for bad in ("64:4", "64:4:3:0", "a:4:3:1"):
        res = subprocess.run([*cmd, "--configs", bad], capture_output=True, text=True, cwd=REPO, timeout=120)
        assert res.returncode == 2 and "--configs" in res.stderr
