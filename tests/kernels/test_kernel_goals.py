"""``benchmarks.scripts.kernel_goals``: issue 29's goal table read from real H200 outputs of the three
measurement scripts (kept in ``docs/measurements/``), its verdicts checked against the figures in those files and
against ``indexer_perf``'s own recorded target check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.scripts import kernel_goals as goals

REPO = Path(__file__).resolve().parents[2]
MEASURED = REPO / "docs" / "measurements"
DECODE = MEASURED / "decode_perf_gluon_617c728.json"  # mma, mma_sm120, gluon, gluon_sm120 at 1-128 requests
INDEXER = MEASURED / "indexer_perf_ad2e771.json"  # bf16 at 1 and 64 requests, 4K / 16K / 64K
STEP = MEASURED / "step_perf_ad2e771.json"


def _goals(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmarks.scripts.kernel_goals", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)  # fmt: skip


def test_recorded_runs_give_their_figures_and_verdicts():
    rows = {v.goal: v for v in goals.verdicts(DECODE, INDEXER, STEP)}
    roof = rows["decode <= 2.5x the roofline at 64 / 128 requests"]
    assert roof.figures == "36.6 us (5.6x) at 64 / 58.2 us (4.4x) at 128" and roof.met is False  # the MMA impl's
    assert rows["decode <= 5 us at one request"].figures == "7.4 us"
    speed = rows["decode >= 1.5x faster than the MMA kernel from 16 requests"]
    assert speed.figures == "1.00x at 16 / 1.00x at 32 / 1.00x at 64 / 1.00x at 128"  # gluon slower there
    sm120 = rows["the sm_120 set within 1.2x of this GPU's at every concurrency"]
    assert sm120.figures.endswith("1.01x at 64 / 1.28x at 128") and sm120.met is False
    assert rows["indexer <= 10 / 15 / 25 us at one request, 4K / 16K / 64K"].figures == (
        "21.3 us at 4K / 57.1 us at 16K / 73.3 us at 64K")
    assert rows["decode step <= 20 us at one request and 4K"].figures == "29.0 us"
    assert all(v.met is False for v in rows.values())


def test_indexer_verdicts_agree_with_indexer_perfs_own_check():
    # indexer_perf recorded which targets it missed; the goal table reads the same rows by the same numbers.
    record = json.loads(INDEXER.read_text())
    missed = record["targets_missed"]
    one, wide = goals.indexer_verdicts(record["results"])[::-1]
    assert (one.met is False) == any("batch 1," in m for m in missed)
    assert (wide.met is False) == any("batch 64," in m for m in missed)
    assert sum("batch 64," in m for m in missed) == wide.figures.count("x)") == 3


def test_goals_met_at_the_limit_and_rows_missing_are_not_measured(tmp_path):
    record = json.loads(DECODE.read_text())
    for row in record["rows"]:  # a kernel exactly at every limit: <= holds
        row["gluon_us"] = min(row["mma_us"] / 1.5, 2.5 * row["roofline_us"], 5.0)
        row["mma_sm120_us"] = 1.2 * row["mma_us"]
    verdicts = goals.decode_verdicts(record)
    assert [v.met for v in verdicts] == [True, True, True, True]
    record["rows"] = [r for r in record["rows"] if r["batch"] == 64]  # no row at 1 or 128 requests
    roof, speed, one, _ = goals.decode_verdicts(record)
    assert roof.met is False and roof.figures.endswith("at 64")  # 128 wanted and absent: not met
    assert one.met is None and one.state == "not measured" and one.figures == "-" and speed.met is True
    path = tmp_path / "d.json"
    path.write_text(json.dumps(record))
    res = _goals("--decode", str(path), "--check")
    assert res.returncode == 1 and "not measured" in res.stdout
    assert _goals("--decode", str(path)).returncode == 0  # no --check: a report, not a gate


def test_markdown_table_has_a_row_per_goal():
    res = _goals("--indexer", str(INDEXER), "--step", str(STEP), "--markdown")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[:2] == ["| goal | measured | |", "| --- | --- | --- |"] and len(lines) == 2 + 2 + 2
    assert all(line.endswith("| missed |") for line in lines[2:])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--decode", str(STEP)], f"--decode {STEP}: not kernel_decode_perf's JSON"),
        (["--indexer", str(DECODE)], "not indexer_perf's JSON"),
        (["--step", str(REPO / "README.md")], "cannot read it as JSON"),
        (["--step", "/nonexistent/s.json"], "/nonexistent/s.json"),
        (["--run", "out", "--step", str(STEP)], "give it alone"),
        ([], "give --run OUT, or at least one of"),
    ],
)
def test_bad_input_is_named(args, needle):
    res = _goals(*args)
    assert res.returncode == 2 and needle in res.stderr


def test_run_names_the_script_that_could_not_measure(tmp_path):
    # No GPU here: the first script refuses (exit 2), and the table is not made from nothing.
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run([sys.executable, "-m", "benchmarks.scripts.kernel_goals", "--run", str(tmp_path / "o")],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=300)  # fmt: skip
    if "needs a CUDA GPU" not in res.stderr:
        pytest.skip("a CUDA GPU is visible: --run would measure")
    assert res.returncode == 2 and "kernel_decode_perf exited 2" in res.stderr
    assert "[1/3] -m benchmarks.scripts.kernel_decode_perf" in res.stderr


def test_older_files_read_as_far_as_they_go():
    # indexer_perf before --batches named its one batch at the file's top (9730e63: 64 requests, the issue's
    # 53.6 / 183 / 689 us); a decode run without the Gluon column cannot say whether anything beat the MMA kernel.
    wide, one = goals.verdicts(None, MEASURED / "indexer_perf_9730e63.json", None)
    assert wide.figures == "53.5 us (6.6x) at 4K / 183.2 us (5.6x) at 16K / 688.8 us (5.3x) at 64K"
    assert wide.met is False and one.met is None
    rows = {v.goal: v for v in goals.verdicts(MEASURED / "decode_perf_5b94cd6.json", None, None)}
    assert rows["decode >= 1.5x faster than the MMA kernel from 16 requests"].state == "not measured"
    assert rows["decode <= 5 us at one request"].figures == "7.7 us"


def test_contexts_beside_the_goals_do_not_count(tmp_path):
    # A 64-request run with an 8K row beside 4K / 16K / 64K: the goal reads its three contexts only.
    record = json.loads(INDEXER.read_text())
    wide = [r for r in record["results"] if r["batch"] == 64 and r["impl"] == "bf16"]
    for r in wide:
        r["median_us"] = 2 * r["roofline_us"]
    record["results"].append({**wide[0], "context": 8192})
    verdict = goals.indexer_verdicts(record["results"])[0]
    assert verdict.met is True and "8K" not in verdict.figures and verdict.figures.count("(2.0x)") == 3


def test_rows_name_the_select_path_they_ran():
    # The indexer's launch record names the select path the rule chose by batch and length (indexer_perf keeps it
    # a row; kernel_step_perf since session 50, a variant a row): a goal row says which path it ran.
    wide, one = goals.verdicts(None, MEASURED / "goals_session50_h100_indexer.json", None)
    assert one.figures == "15.7 us at 4K (split) / 17.3 us at 16K (coop) / 23.3 us at 64K (coop)"
    assert wide.figures == ("31.6 us (2.7x) at 4K (split) / 102.3 us (2.2x) at 16K (radix) / 330.7 us (1.8x) at 64K "
                            "(radix)")
    step = json.loads((MEASURED / "goals_session50_h100_step.json").read_text())
    four, long = goals.step_verdicts(step)
    assert (four.figures, long.figures) == ("19.4 us", "28.5 us")  # written before the step kept its records
    for row in step["rows"]:
        path = "split" if row["context"] <= 4096 else "coop"
        row["launch"] = {"mma+indexer": {"indexer": {"select": path}, "decode": {"impl": "mma"}}}
    four, long = goals.step_verdicts(step)
    assert (four.figures, long.figures) == ("19.4 us (split)", "28.5 us (coop)") and four.met and long.met
