"""``mlaperf run`` end to end on a throwaway repository: real asv runs of the CPU smoke tier, real
result files, the correctness gate failing a wrong kernel, skipping of measured commits."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from mlaperf import runner
from settings import env, exits

if TYPE_CHECKING:  # annotations only: `from conftest import` at run time picks whichever conftest came last
    from conftest import SmokeRepo

GPU_KEYS = {"gpu_name", "gpu_cc", "gpu_sm_count", "gpu_memory_gb", "gpu_driver", "cuda", "torch", "triton"}


def run_cli(repo: SmokeRepo, *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mlaperf.runner", *args],
        cwd=repo.path, env=repo.env(), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def load_results(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(file params, {benchmark: {column: value}}) of an asv results v2 file, via result_columns."""
    data = json.loads(path.read_text())
    cols = data["result_columns"]
    return data["params"], {name: dict(zip(cols, row, strict=False)) for name, row in data["results"].items()}


def value_at(entry: dict[str, Any], params: tuple[str, ...]) -> Any:
    import itertools

    combos = list(itertools.product(*entry["params"]))
    return entry["result"][combos.index(params)]


def result_file(repo: SmokeRepo, machine: str, sha: str) -> Path:
    files = sorted(repo.results(machine).glob(f"{sha[:8]}-*.json"))
    assert len(files) == 1, files
    return files[0]


def worktrees(repo: SmokeRepo) -> list[str]:
    out = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=repo.path, capture_output=True, text=True, check=True
    )
    return [line for line in out.stdout.splitlines() if line.startswith("worktree ")]


# --- fast checks: arguments, errors, dry run ------------------------------------------------------


def test_help_and_register() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mlaperf.runner", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0
    for flag in ("--results-dir", "--machine", "--bench", "--tier", "--skip-existing", "--no-skip-existing",
                 "--dry-run", "--concurrency", "--db", "--max-commits"):  # fmt: skip
        assert flag in proc.stdout
    parser = argparse.ArgumentParser(prog="mlaperf")
    runner.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["run"])
    assert args.func is runner.run  # settings.exits.dispatch maps its errors, as every command's
    assert (args.range, args.tier, args.skip_existing, args.dry_run) == (["HEAD"], "auto", True, False)
    args = parser.parse_args(["run", "A..B", "C", "--no-skip-existing", "--bench", "x", "--bench", "y"])
    assert (args.range, args.skip_existing, args.bench) == (["A..B", "C"], False, ["x", "y"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-commit"], "RANGE 'no-such-commit' is not a commit"),
        (["nope..HEAD"], "RANGE 'nope..HEAD' is not a valid git range"),
        (["--machine", "a/b"], "--machine 'a/b'"),
        (["--concurrency", "1,x"], "--concurrency '1,x'"),
        (["--config", "missing.json"], "missing.json not found (--config)"),
        (["--max-commits", "-1"], "--max-commits -1"),
        (["--db", "nosuchdriver://x"], "--db: invalid database URL"),
    ],
)
def test_bad_arguments_fail_clearly(smoke_repo: SmokeRepo, args: list[str], message: str) -> None:
    proc = run_cli(smoke_repo, *args, "--tier", "cpu", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not (smoke_repo.path / ".asv").exists() or not any((smoke_repo.path / ".asv").iterdir())


def test_run_errors_are_bad_input_wherever_they_end(capsys: pytest.CaptureFixture[str]) -> None:
    """A RunError is the user's input (exit 2, one line) through the one dispatch, also when it leaves a command
    other than `mlaperf run` (the nightly's plan calls the runner's helpers)."""

    def step(_args: argparse.Namespace) -> int:
        runner.machine_name("a/b", "cpu")
        return exits.OK

    assert exits.dispatch(step, argparse.Namespace()) == exits.USAGE
    assert capsys.readouterr().err == "mlaperf: error: --machine 'a/b': use letters, digits and . _ + - only " \
        "(it becomes a folder name)\n"


@pytest.mark.parametrize("raw", ["1,x", "0", ",", "-4,16", "1.5"])
def test_concurrency_has_one_reading(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--concurrency and MLAPERF_CONCURRENCY (what the benchmark processes read) accept and refuse the same."""
    with pytest.raises(runner.RunError) as flag:
        runner._check_concurrency(raw)
    monkeypatch.setenv(env.CONCURRENCY.name, raw)
    with pytest.raises(ValueError) as variable:
        env.concurrency([1, 16])
    assert str(flag.value) == str(variable.value).replace(env.CONCURRENCY.name, "--concurrency", 1)
    monkeypatch.setenv(env.CONCURRENCY.name, " 1, 16 ,64")
    assert runner._check_concurrency(" 1, 16 ,64") == "1,16,64" and env.concurrency([1]) == [1, 16, 64]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error path without a GPU")
def test_gpu_tier_without_gpu_fails_clearly(smoke_repo: SmokeRepo) -> None:
    proc = run_cli(smoke_repo, "--tier", "gpu", timeout=120)
    assert proc.returncode == 2
    assert "--tier gpu, but torch sees no CUDA device" in proc.stderr
    with pytest.raises(runner.RunError, match="reserved for the CPU smoke tier"):
        runner.machine_name("box-cpu", "gpu")
    assert runner.machine_name("box", "cpu") == "box-cpu"
    assert runner.machine_name("box-cpu", "cpu") == "box-cpu"


def test_dry_run_lists_commits_and_runs_nothing(smoke_repo: SmokeRepo) -> None:
    span = f"{smoke_repo.base}..{smoke_repo.bad}"
    proc = run_cli(smoke_repo, span, "--dry-run", "--machine", "dry", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "commits to measure on machine 'dry-cpu': 2 of 2 (tier cpu)" in proc.stdout
    assert f"[1/2] {smoke_repo.good[:8]} good: notes" in proc.stdout
    assert f"[2/2] {smoke_repo.bad[:8]} bad: mma 10% off" in proc.stdout
    assert f"--set-commit-hash {smoke_repo.bad}" in proc.stdout
    assert "--launch-method forkserver --record-samples" in proc.stdout
    assert not smoke_repo.results("dry-cpu").exists()
    assert not (smoke_repo.home / ".asv-machine.json").exists()


def test_bench_that_selects_nothing_is_bad_input_also_in_a_dry_run(smoke_repo: SmokeRepo) -> None:
    """A misspelt --bench would have asv set up every commit to measure nothing: said at once (exit 2), by asv's
    own discovery of the suite, in a dry run too; one that selects a benchmark plans the run."""
    span = f"{smoke_repo.base}..{smoke_repo.bad}"
    proc = run_cli(smoke_repo, span, "--dry-run", "--machine", "dry", "--bench", "time_decdoe", timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "error: --bench 'time_decdoe': matches no benchmark of the suite" in proc.stderr
    assert "would run" not in proc.stdout
    proc = run_cli(smoke_repo, span, "--dry-run", "--machine", "dry", "--bench", r"SparseDecode\.time_decode",
                   timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("would run") == 2 and "--bench SparseDecode\\.time_decode" in proc.stdout


def test_result_files_answer_before_the_store(
    smoke_repo: SmokeRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only commits without a result file are asked of the store (whose answer may need asv discovery)."""
    asked: list[list[str]] = []

    def fake_store(url: str, conf: object, commits: list[runner.Commit], *rest: object, **kw: object) -> dict[str, int]:
        asked.append([c.sha for c in commits])
        return {}

    monkeypatch.setattr(runner, "measured_in_store", fake_store)
    monkeypatch.chdir(smoke_repo.path)
    files = tmp_path / "results" / "t-cpu"
    files.mkdir(parents=True)
    (files / f"{smoke_repo.good[:8]}-x.json").write_text("{}")
    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    args = [f"{smoke_repo.base}..{smoke_repo.bad}", "--results-dir", str(files.parent), "--machine", "t",
            "--tier", "cpu", "--db", f"sqlite:///{tmp_path / 'store.sqlite'}", "--dry-run"]  # fmt: skip
    assert runner.run(parser.parse_args(args)) == 0
    assert asked == [[smoke_repo.bad]]
    (files / f"{smoke_repo.bad[:8]}-x.json").write_text("{}")
    assert runner.run(parser.parse_args(args)) == 0
    assert asked == [[smoke_repo.bad]], "every commit has a result file: the store is not asked"
    assert ": 0 of 2 (tier" in capsys.readouterr().out


# --- real runs of the CPU smoke tier ----------------------------------------------------------------


def _step_api_present() -> bool:
    import mla_kernels

    return all(hasattr(mla_kernels, n) for n in ("DecodeStep", "make_step_inputs"))


def _launch_fields(suite: str) -> list[str]:
    """The ``track_launch_<key>`` keys a suite's Metrics class declares (``benchmarks.bench_*``)."""
    import importlib

    module, cls = suite.split(".")
    return list(getattr(importlib.import_module(f"benchmarks.{module}"), f"{cls}Metrics").launch_fields)


@pytest.mark.slow
def test_cpu_smoke_tier_end_to_end(smoke_repo: SmokeRepo) -> None:
    """The whole CPU smoke tier through ``mlaperf run``: every case gets a real value."""
    t0 = time.perf_counter()
    proc = run_cli(smoke_repo, smoke_repo.good, "--machine", "smoke")
    elapsed = time.perf_counter() - t0
    print(f"CPU smoke tier, all suites, one commit: {elapsed:.0f} s")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert f"[1/1] {smoke_repo.good[:8]} good: notes" in proc.stdout

    params, results = load_results(result_file(smoke_repo, "smoke-cpu", smoke_repo.good))
    machine = json.loads((smoke_repo.results("smoke-cpu") / "machine.json").read_text())
    for info in (params, machine):
        assert GPU_KEYS <= set(info)
        assert info["gpu_name"] == "none"
        assert info["machine"] == "smoke-cpu"
        assert info["torch"] == torch.__version__
    step_present = _step_api_present()
    suites = {"bench_decode.SparseDecode": "time_decode", "bench_indexer.Indexer": "time_indexer",
              "bench_step.DecodeStep": "time_step"}  # fmt: skip
    tracks = ("track_tokens_per_s", "track_gbps", "track_tflops", "track_roofline_fraction")
    expected = [f"{s}.{t}" for s, t in suites.items()] + [f"{s}Metrics.{t}" for s in suites for t in tracks]
    launch = [f"{s}Metrics.track_launch_{key}" for s in suites for key in _launch_fields(s)]
    assert sorted(results) == sorted(expected + launch)
    for name in expected + launch:
        entry = results[name]
        values = entry["result"]
        assert len(values) == math.prod(len(p) for p in entry["params"])
        if name.startswith("bench_decode"):
            # The Gluon impls skip where the Gluon kernel cannot run (the interpreter): NaN, never the MMA
            # fallback's value under their name; every other case gets its real value.
            gluon = [str(impl).strip("'").startswith("gluon") for impl, *_ in itertools.product(*entry["params"])]
            assert any(gluon) and all(v is not None and math.isnan(v) for v, g in zip(values, gluon, strict=True)
                                      if g), (name, values)  # fmt: skip
            values = [v for v, g in zip(values, gluon, strict=True) if not g]
            entry = {**entry, "samples": [x for x, g in zip(entry.get("samples") or [], gluon, strict=False)
                                          if not g]}  # fmt: skip
        if name.startswith("bench_step") and not step_present:
            assert all(v is not None and math.isnan(v) for v in values), "a missing API must skip (NaN)"
            continue
        if name in launch:  # kernel config: a count or size, NaN where the key does not apply to that impl
            assert all(v is not None and (math.isnan(v) or (v >= 0 and v == int(v))) for v in values), (name, values)
            continue
        assert all(v is not None and math.isfinite(v) and v > 0 for v in values), (name, values)
        if ".time_" in name:
            assert all(s is not None and len(s) >= 2 for s in entry["samples"]), "samples are recorded"
    for suite in suites if step_present else [s for s in suites if not s.startswith("bench_step")]:
        # some keys are compile metadata the interpreter never has (spills, stages); the block sizes are not
        recorded = [v for n in launch if n.startswith(f"{suite}Metrics.") for v in results[n]["result"]]
        assert any(not math.isnan(v) for v in recorded), f"{suite}: no launch config recorded for any case"
    assert len(worktrees(smoke_repo)) == 1, "the throwaway worktree is removed"


@pytest.mark.slow
def test_correctness_gate_fails_a_wrong_kernel(smoke_repo: SmokeRepo) -> None:
    """A fast wrong MMA kernel (commit ``bad``) is recorded as a failure (null), never as a time; the
    commit before it, benchmarked from its own worktree while the checkout is at ``bad``, passes."""
    sel = r"SparseDecode\.time_decode\('(simt|mma)', 1, 32\)"
    span = f"{smoke_repo.base}..{smoke_repo.bad}"
    proc = run_cli(smoke_repo, span, "--machine", "gate", "--bench", sel)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]  # 1: a benchmark failed
    assert "KernelMismatch" in proc.stdout and "out:" in proc.stdout
    name = "bench_decode.SparseDecode.time_decode"
    _, good = load_results(result_file(smoke_repo, "gate-cpu", smoke_repo.good))
    _, bad = load_results(result_file(smoke_repo, "gate-cpu", smoke_repo.bad))
    for impl in ("'simt'", "'mma'"):
        assert value_at(good[name], (impl, "1", "32")) > 0
    assert value_at(bad[name], ("'simt'", "1", "32")) > 0
    assert value_at(bad[name], ("'mma'", "1", "32")) is None
    # asv's --bench measures the selection and lists the whole suite beside it: what detection reads to tell a
    # benchmark left out from one deleted (regressions/retire.py).
    suite = result_file(smoke_repo, "gate-cpu", smoke_repo.good).parents[1] / "benchmarks.json"
    listed = json.loads(suite.read_text())
    assert "bench_indexer.Indexer.time_indexer" in listed and "bench_indexer.Indexer.time_indexer" not in good
    assert len(worktrees(smoke_repo)) == 1

    t0 = time.perf_counter()
    again = run_cli(smoke_repo, span, "--machine", "gate", "--bench", sel, timeout=120)
    assert again.returncode == 0, again.stderr
    assert ": 0 of 2 (tier" in again.stdout
    assert again.stdout.count("already measured") == 2
    assert time.perf_counter() - t0 < 60
