"""`scripts/demo.sh` and `mlaperf demo` (issue 28 item 4): --help before any install, asv's output condensed to
one line per benchmark with a running count, the dashboard opened on the machine just measured."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import OPENBLAS, ROOT, Seeded

from mlaperf.demo import BenchProgress, newest_machine
from settings import env


def test_help_before_any_install(tmp_path: Path) -> None:
    # A copy without scripts/setup.sh: any install attempt would fail, so --help must not reach it.
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo.sh", tmp_path / "scripts" / "demo.sh")
    for package in ("mlaperf", "settings"):  # demo.py's imports: the standard library and settings/
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # the system python3, nothing installed for it
    done = subprocess.run(["bash", "scripts/demo.sh", "--no-bench", "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: scripts/demo.sh") and "--no-bench" in done.stdout
    assert not (tmp_path / ".venv").exists()


def test_asv_output_condensed_to_one_line_per_benchmark() -> None:
    log = (Path(__file__).parent / "data" / "asv_run_b07c34e.log").read_text(encoding="utf-8")  # a real asv run
    progress = BenchProgress()
    shown = [line for text in log.splitlines(keepends=True) if (line := progress.line(text))]
    counted = [s for s in shown if s.startswith("  [")]
    assert progress.total == 15 and len(counted) == 15, shown
    assert counted[0] == "  [1/15] bench_decode.SparseDecode.time_decode: ok"
    assert counted[-1].startswith("  [15/15] ")
    assert len(shown) < 25 < len(log.splitlines())  # no result tables
    assert not [s for s in shown if "====" in s or "±" in s]


def test_newest_machine_is_the_one_just_measured(tmp_path: Path) -> None:
    for i, name in enumerate(("h200-sxm", "ci-runner-cpu")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "machine.json").write_text(json.dumps({"machine": name}))
        result = folder / "abc.json"
        result.write_text("{}")
        os.utime(result, (1_000_000 + i, 1_000_000 + i))
        os.utime(folder / "machine.json", (1_000_000, 1_000_000))
    assert newest_machine(tmp_path) == "ci-runner-cpu"
    assert newest_machine(tmp_path / "none") is None


def test_dashboard_opens_on_the_named_machine(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    from test_pages import app

    from dashboard import serve

    args = argparse.ArgumentParser()
    serve.add_arguments(args)
    assert args.parse_args(["--machine", "x"]).machine == "x"
    if not OPENBLAS.exists():
        return
    monkeypatch.setenv(env.DASHBOARD_MACHINE.name, "gha-aws-graviton")
    at = app(monkeypatch, seeded.url)
    assert at.sidebar.selectbox(key="machine").value == "gha-aws-graviton"  # not the first GPU machine
    monkeypatch.setenv(env.DASHBOARD_MACHINE.name, "no-such-machine")
    assert app(monkeypatch, seeded.url).sidebar.selectbox(key="machine").value == "h200-sxm"  # the default
