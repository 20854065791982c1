"""The decode profiling scripts: ablation variants built from the kernel's source, and the ncu summary."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).resolve().parents[2] / "benchmarks" / "scripts"
sys.path.insert(0, str(SCRIPTS))

import kernel_decode_ablate as ablate  # noqa: E402
import kernel_decode_ncu as ncu  # noqa: E402

from mla_kernels import make_decode_inputs  # noqa: E402
from mla_kernels.decode import _mma_decode  # noqa: E402
from mla_kernels.tuning import MmaConfig  # noqa: E402


def test_every_ablation_anchor_is_in_the_kernel(tmp_path):
    # A kernel edit that removes an anchor must fail here, not silently time the unchanged kernel.
    for name in ablate.VARIANTS:
        kernel = ablate.build_variant(name, tmp_path)
        source = (tmp_path / f"ablate_{name.replace('-', '_')}.py").read_text()
        anchor, replacement = ablate.VARIANTS[name]
        assert callable(kernel.run)
        if anchor:
            assert anchor not in source and replacement in source


def test_full_variant_runs_through_the_production_launcher(device, tmp_path):
    inp = make_decode_inputs(1, 16, 40, num_tokens=256, device=device, seed=5)
    cfg = MmaConfig(block_h=16, block_n=16, num_warps=4, num_stages=1, num_splits=2, prefetch=3)
    want = _mma_decode(inp.q, inp.kv_cache, inp.indices, 512**-0.5, cfg)
    with ablate.kernel_swapped(ablate.build_variant("full", tmp_path)):
        got = _mma_decode(inp.q, inp.kv_cache, inp.indices, 512**-0.5, cfg)
    with ablate.kernel_swapped(ablate.build_variant("no-pv", tmp_path)):
        no_pv = _mma_decode(inp.q, inp.kv_cache, inp.indices, 512**-0.5, cfg)
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


@pytest.mark.parametrize("script", ["kernel_decode_ablate.py", "kernel_decode_ncu.py"])
def test_scripts_have_help(script):
    res = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "usage:" in res.stdout
