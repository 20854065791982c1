"""Ingestion into real SQLite and PostgreSQL stores: real asv output, edge cases, idempotency, atomicity."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from asv.results import Results
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from db import queries
from db.engine import make_engine
from db.ingest import ingest_paths
from db.models import Benchmark, Commit, Machine, Result, Run, Suite
from db.run_writer import RunWriter
from tests.db.conftest import bench_row, results_doc, write_results

TABLES = ("machine", "environment", "commit", "benchmark", "run", "result")


def counts(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(sa.text(f'SELECT count(*) FROM "{t}"')).scalar_one() for t in TABLES}


def test_fixture_ingest_is_complete_and_idempotent(db_url: str, openblas: Path) -> None:
    engine = make_engine(db_url)
    first = ingest_paths(engine, [openblas], progress=False)
    assert first.ok, first.failed
    assert (first.files, first.ingested, first.unchanged, first.results) == (269, 269, 0, 37454)
    shas = {json.loads(p.read_text())["commit_hash"] for p in openblas.glob("*/[0-9a-f]*.json")}
    after = counts(engine)
    assert after["machine"] == 3 and after["run"] == 269 and after["result"] == 37454
    assert after["commit"] == len(shas)
    with engine.connect() as conn:
        max_id = conn.execute(sa.select(sa.func.max(Result.id))).scalar_one()

    again = ingest_paths(engine, [openblas, openblas / "gha-aws-skylake"], progress=False)
    assert (again.files, again.ingested, again.unchanged, again.results) == (269, 0, 269, 0)
    assert counts(engine) == after
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.max(Result.id))).scalar_one() == max_id

    # Values in the store equal what asv's own loader reads, per parameter combination.
    path = sorted((openblas / "gha-ubuntu-noble").glob("[0-9a-f]*.json"))[3]
    asv = Results.load(str(path))
    with Session(engine) as s:
        frame = queries.results_at_commit(s, asv.commit_hash, "gha-ubuntu-noble")
        bench = json.loads((openblas / "benchmarks.json").read_text())
    checked = 0
    for name, params in asv._benchmark_params.items():
        values = asv.get_result_value(name, params)
        rows = frame[frame["benchmark"] == name]
        assert len(rows) == len(values)

        names = bench[name]["param_names"] if name in bench else [f"param{i + 1}" for i in range(len(params))]
        by_key = dict(zip(rows["params_key"], rows["value"], strict=True))
        for combo, value in zip(itertools.product(*params), values, strict=True):
            key = json.dumps(dict(zip(names, combo, strict=True)), sort_keys=True)
            assert by_key[key] == pytest.approx(value, rel=1e-12)
            checked += 1
    assert checked > 50
    engine.dispose()


def sha(i: int) -> str:
    return f"{i:08x}" + "0" * 32


def _good(root: Path, i: int, **kw) -> Path:
    doc = results_doc(
        {"s.time_a": bench_row([1.0 + i, 2.0 + i], [["1", "2"]], started_at=1_700_000_000_000 + i)},
        commit=sha(i),
        date=1_700_000_000_000 + i * 1000,
        **kw,
    )
    return write_results(root, doc)


def test_bad_files_are_reported_and_change_nothing(tmp_path: Path, sqlite_url: str) -> None:
    root = tmp_path / "results"
    for i in range(3):
        _good(root, i)
    truncated = _good(root, 3)
    truncated.write_bytes(truncated.read_bytes()[:-40])
    old = _good(root, 4)
    old.write_text(old.read_text().replace('"version": 2', '"version": 1'))
    engine = make_engine(sqlite_url)
    summary = ingest_paths(engine, [root], progress=False)
    assert summary.ingested == 3 and summary.results == 6
    failed = dict(summary.failed)
    assert set(failed) == {str(truncated), str(old)}
    assert "truncated" in failed[str(truncated)]
    assert "unsupported asv results format version 1" in failed[str(old)]
    assert f"{truncated.name}" in summary.line() and "2 refused" in summary.line()
    assert summary.exit_status == 2
    assert counts(engine)["run"] == 3 and counts(engine)["commit"] == 3

    # Repairing the file later ingests it; nothing stored before is touched.
    _good(root, 3)
    summary = ingest_paths(engine, [root], progress=False)
    assert (summary.ingested, summary.unchanged, len(summary.failed)) == (1, 3, 1)
    assert counts(engine)["run"] == 4
    engine.dispose()


def test_database_error_rolls_back_only_that_file(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "results"
    paths = [_good(root, i, machine="m-fail" if i == 2 else "m") for i in range(5)]
    real = RunWriter.insert_results

    def flaky(self, conn, run_id, groups, bench_ids):  # noqa: ANN001, ANN202
        count = real(self, conn, run_id, groups, bench_ids)
        machine = conn.execute(sa.select(Machine.name).join(Run, Run.machine_id == Machine.id).where(Run.id == run_id))
        if machine.scalar_one() == "m-fail":  # the file of commit 2
            raise OperationalError("INSERT", {}, Exception("disk I/O error (injected)"))
        return count

    monkeypatch.setattr(RunWriter, "insert_results", flaky)
    engine = make_engine(db_url)
    summary = ingest_paths(engine, [root], progress=False)
    assert summary.ingested == 4 and [p for p, _ in summary.failed] == [str(paths[2])]
    assert "injected" in summary.failed[0][1]
    with Session(engine) as s:
        # The failed file's run, results, machine and commit are all gone; the others are complete.
        assert s.scalar(sa.select(sa.func.count()).select_from(Run)) == 4
        assert s.scalar(sa.select(sa.func.count()).select_from(Result)) == 8
        assert s.scalar(sa.select(Machine.id).where(Machine.name == "m-fail")) is None
        assert s.scalar(sa.select(Commit.id).where(Commit.sha == sha(2))) is None

    monkeypatch.setattr(RunWriter, "insert_results", real)
    summary = ingest_paths(engine, [root], progress=False)
    assert (summary.ingested, summary.unchanged, summary.failed) == (1, 4, [])
    with Session(engine) as s:
        assert queries.results_at_commit(s, sha(2), "m-fail")["value"].tolist() == [3.0, 4.0]
    engine.dispose()


def test_statuses_samples_and_stats_are_stored(tmp_path: Path, db_url: str) -> None:
    root = tmp_path / "results"
    doc = results_doc(
        {
            "s.time_mixed": bench_row(
                [1.5, None, math.nan],
                [["'a'", "'b'", "'c'"]],
                stats_q_25=[1.4, None, None],
                stats_q_75=[1.6, None, None],
                stats_repeat=[5, None, None],
                samples=[[1.4, 1.5, 1.6], None, None],
            ),
            "s.track_plain": bench_row([42.0], []),
        }
    )
    write_results(root, doc)
    engine = make_engine(db_url)
    assert ingest_paths(engine, [root], progress=False).results == 4
    with Session(engine) as s:
        frame = queries.results_at_commit(s, "aaaa", "test-machine")
        mixed = frame[frame["benchmark"] == "s.time_mixed"].set_index("param1")
        assert mixed.loc["a", "status"] == "ok" and mixed.loc["a", "samples"] == [1.4, 1.5, 1.6]
        assert mixed.loc["a", "q_25"] == 1.4 and mixed.loc["a", "repeat"] == 5
        assert mixed.loc["b", "status"] == "failed" and math.isnan(mixed.loc["b", "value"])
        assert mixed.loc["c", "status"] == "skipped" and mixed.loc["c", "samples"] is None
        plain = frame[frame["benchmark"] == "s.track_plain"].iloc[0]
        assert plain["params"] == {} and plain["value"] == 42.0
        # A missing sample list is SQL NULL, not JSON null, on both backends.
        assert s.scalar(sa.select(sa.func.count()).select_from(Result).where(Result.samples.is_(None))) == 3
    engine.dispose()


def test_rerun_of_a_commit_is_a_second_run_and_the_same_file_nothing_new(tmp_path: Path, db_url: str) -> None:
    root = tmp_path / "results"
    sha = "b" * 40
    for env, value, started in (("env-a", 1.0, 1_000), ("env-b", 2.0, 3_000)):
        doc = results_doc(
            {"s.time_a": bench_row([value], [["1"]], started_at=1_700_000_000_000 + started)},
            commit=sha,
            env_name=env,
        )
        write_results(root, doc)
    engine = make_engine(db_url)
    assert ingest_paths(engine, [root], progress=False).ingested == 2
    # asv re-runs the commit in env-a later: the file changes and is stored as a new run.
    doc = results_doc(
        {"s.time_a": bench_row([3.0], [["1"]], started_at=1_700_000_000_000 + 5_000)},
        commit=sha,
        env_name="env-a",
    )
    write_results(root, doc)
    summary = ingest_paths(engine, [root], progress=False)
    assert (summary.ingested, summary.unchanged) == (1, 1)
    # The same files again (and a copy of one under another name): nothing new.
    copy = root / "test-machine" / "copy-of-env-b.json"
    copy.write_bytes((root / "test-machine" / f"{sha[:8]}-env-b.json").read_bytes())
    again = ingest_paths(engine, [root], progress=False)
    assert (again.ingested, again.unchanged, again.exit_status) == (0, 3, 0)
    with Session(engine) as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(Run)) == 3
        assert s.scalar(sa.select(sa.func.count()).select_from(Commit)) == 1
        # A commit's result pools its runs (db.queries.pool_runs: the median of 1.0, 2.0 and 3.0).
        hist = queries.history(s, "s.time_a", {"param1": "1"}, "test-machine")
        assert hist["value"].tolist() == [2.0] and hist["sha"].tolist() == [sha]
        commit_id = s.scalar(sa.select(Commit.id))
        assert queries.commit_results(s, commit_id, "test-machine")["value"].tolist() == [2.0]  # what compare reads
    engine.dispose()


def test_gpu_identity_and_machine_json(tmp_path: Path, sqlite_url: str) -> None:
    root = tmp_path / "results"
    gpu = {
        "gpu_name": "NVIDIA H200",
        "gpu_cc": "9.0",
        "gpu_sm_count": "132",
        "gpu_memory_gb": "139.8",
        "gpu_driver": "550.54",
        "cuda": "12.8",
        "torch": "2.11.0",
        "triton": "3.6.0",
        "arch": "x86_64",
        "cpu": "Intel Xeon",
        "num_cpu": "16",
        "os": "Linux 6.8",
        "ram": "131072000",
    }
    path = _good(root, 0, machine="h200-runner", params=gpu)
    engine = make_engine(sqlite_url)
    ingest_paths(engine, [path], progress=False)
    with Session(engine) as s:
        m = s.scalars(sa.select(Machine)).one()
        assert (m.name, m.gpu_name, m.gpu_cc, m.gpu_sm_count, m.gpu_memory_gb) == (
            "h200-runner",
            "NVIDIA H200",
            "9.0",
            132,
            139.8,
        )
        assert (m.gpu_driver, m.cuda, m.torch, m.triton, m.arch, m.num_cpu) == (
            "550.54",
            "12.8",
            "2.11.0",
            "3.6.0",
            "x86_64",
            "16",
        )
        assert m.info["gpu_name"] == "NVIDIA H200" and "python" not in m.info
    # A newer driver on a later run updates the machine's description.
    _good(root, 1, machine="h200-runner", params={**gpu, "gpu_driver": "560.1"})
    ingest_paths(engine, [root], progress=False)
    with Session(engine) as s:
        assert s.scalars(sa.select(Machine.gpu_driver)).one() == "560.1"
        assert queries.machines(s)["runs"].tolist() == [2]
    engine.dispose()


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
    }
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True).stdout


def test_commit_metadata_from_git(tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(3):
        (repo / "f.txt").write_text(str(i))
        _git(repo, "add", "f.txt")
        _git(repo, "commit", "-q", "-m", f"change {i}\n\nbody {i}")
        shas.append(_git(repo, "rev-parse", "HEAD").strip())
    root = tmp_path / "results"
    for i, sha in enumerate([*shas, "f" * 40]):
        write_results(root, results_doc({"s.time_a": bench_row([1.0], [])}, commit=sha, date=1_700_000_000_000 + i))
    engine = make_engine(sqlite_url)
    # First without a repository at hand (cwd is not a git repo): sha + date only.
    monkeypatch.chdir(tmp_path)
    ingest_paths(engine, [root / "test-machine" / f"{shas[0][:8]}-existing-py3.11.json"], progress=False)
    with Session(engine) as s:
        assert s.scalar(sa.select(Commit.message).where(Commit.sha == shas[0])) is None
    with pytest.raises(ValueError, match="not a git repository"):
        ingest_paths(engine, [root], progress=False, repo=tmp_path / "results")
    ingest_paths(engine, [root], progress=False, repo=repo)
    with Session(engine) as s:
        frame = queries.commits(s).set_index("sha")
    assert frame.loc[shas[2], "message"] == "change 2\n\nbody 2"
    assert frame.loc[shas[2], "author"] == "Ada <ada@example.com>"
    assert frame.loc[shas[2], "parents"] == [shas[1]]
    assert frame.loc[shas[0], "parents"] == [] and frame.loc[shas[0], "message"].startswith("change 0")
    assert frame.loc[shas[1], "branch"] == "main"
    assert pd.isna(frame.loc["f" * 40, "message"]) and pd.isna(frame.loc["f" * 40, "branch"])
    assert frame.loc[shas, "generation"].tolist() == [1, 2, 3]
    assert pd.isna(frame.loc["f" * 40, "generation"])
    # Oldest -> newest: git generation; the commit git does not know has none and goes by its date (the newest).
    assert list(frame.index) == [*shas, "f" * 40]
    engine.dispose()


def test_benchmarks_json_metadata_and_versions(tmp_path: Path, sqlite_url: str) -> None:
    root = tmp_path / "results"
    entry = {
        "name": "bench_decode.SparseDecodeMetrics.track_tokens_per_s",
        "type": "track",
        "unit": "tokens/s",
        "param_names": ["impl", "concurrency"],
        "params": [["'simt'", "'mma'"], ["1", "64"]],
        "version": "v1",
    }
    (root).mkdir(parents=True)
    (root / "benchmarks.json").write_text(json.dumps({entry["name"]: entry, "version": 2}))
    row = bench_row([1.0, 2.0, 3.0, 4.0], entry["params"], version="v1")
    write_results(root, results_doc({entry["name"]: row}))
    engine = make_engine(sqlite_url)
    ingest_paths(engine, [root], progress=False)
    # The benchmark changes: benchmarks.json and new results carry version v2.
    (root / "benchmarks.json").write_text(json.dumps({entry["name"]: {**entry, "version": "v2"}, "version": 2}))
    row = bench_row([5.0, 6.0, 7.0, 8.0], entry["params"], version="v2")
    write_results(root, results_doc({entry["name"]: row}, commit="c" * 40, date=1_800_000_000_000))
    ingest_paths(engine, [root], progress=False)
    with Session(engine) as s:
        b = s.scalars(sa.select(Benchmark)).one()
        assert (b.type, b.unit, b.param_names, b.version) == (
            "track",
            "tokens/s",
            ["impl", "concurrency"],
            "v2",
        )
        versions = s.execute(sa.select(Result.benchmark_version, sa.func.count()).group_by(Result.benchmark_version))
        assert dict(versions.all()) == {"v1": 4, "v2": 4}
        hist = queries.history(s, entry["name"], {"impl": "'mma'", "concurrency": "64"}, "test-machine")
        assert hist["value"].tolist() == [4.0, 8.0]
    engine.dispose()


def test_each_run_keeps_the_suite_its_benchmarks_json_listed(tmp_path: Path, db_url: str) -> None:
    """A run keeps the names its folder's benchmarks.json listed (``asv run --bench`` lists the whole suite):
    runs that came with the same listing share one suite row, a new listing is a new row, a folder without
    benchmarks.json leaves NULL, and a name whose entry is bad (refusing the files that use it) is not kept."""
    engine = make_engine(db_url)
    row = bench_row([1.0], [])
    listed, bare = tmp_path / "listed", tmp_path / "bare"

    def entry(name: str, **extra: object) -> dict[str, object]:
        return {"name": name, "type": "time", "unit": "seconds", "param_names": [], "params": [], **extra}

    def suite_of(commit: str) -> list[str] | None:
        with Session(engine) as s:
            sid = s.scalars(sa.select(Run.suite_id).join(Commit).where(Commit.sha == commit)).one()
            return None if sid is None else s.scalars(sa.select(Suite.names).where(Suite.id == sid)).one()

    listed.mkdir()
    names = ["b.S.time_x", "b.S.time_y", "c.S.time_z"]
    (listed / "benchmarks.json").write_text(json.dumps({**{n: entry(n) for n in names}, "version": 2}))
    for c in "ab":
        write_results(listed, results_doc({"b.S.time_x": row}, commit=c * 40))
    write_results(bare, results_doc({"b.S.time_x": row}, commit="c" * 40))
    assert ingest_paths(engine, [listed, bare], progress=False).ingested == 3
    assert suite_of("a" * 40) == suite_of("b" * 40) == names
    assert suite_of("c" * 40) is None
    # The suite changes: time_y deleted, a bad entry added (its params are not a list).
    (listed / "benchmarks.json").write_text(json.dumps(
        {"b.S.time_x": entry("b.S.time_x"), "d.S.time_bad": entry("d.S.time_bad", params=7), "version": 2}))
    write_results(listed, results_doc({"b.S.time_x": row}, commit="d" * 40))
    assert ingest_paths(engine, [listed], progress=False).ingested == 1
    assert suite_of("d" * 40) == ["b.S.time_x"] and suite_of("a" * 40) == names
    with Session(engine) as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(Suite)) == 2
    engine.dispose()


def test_progress_bar_only_when_asked(tmp_path: Path, sqlite_url: str, capfd: pytest.CaptureFixture) -> None:
    root = tmp_path / "results"
    for i in range(3):
        _good(root, i)
    engine = make_engine(sqlite_url)
    ingest_paths(engine, [root], progress=True)  # stderr is not a TTY under pytest: no bar
    assert "file" not in capfd.readouterr().err
    (root / "test-machine" / "extra.json").write_text(_good(root, 9).read_text().replace(sha(9), "e" * 40))
    ingest_paths(engine, [root], progress="always")
    assert "file" in capfd.readouterr().err
    engine.dispose()


def test_ingest_speed_floor(tmp_path: Path, sqlite_url: str) -> None:
    """A loose floor (the 20,000 results/s target is measured by benchmarks/scripts/ingest_perf.py):
    catches order-of-magnitude slowdowns without flaking on a busy CI machine."""
    from db.engine import upgrade
    from db.synthetic import write_synthetic_results

    hist = write_synthetic_results(tmp_path / "synth", commits=40, series=300)
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    first = ingest_paths(engine, [hist.root], progress=False)
    again = ingest_paths(engine, [hist.root], progress=False)
    engine.dispose()
    assert first.results == hist.total_results == 12_000
    assert first.results / first.seconds > 4_000, first.line()
    assert first.seconds / again.seconds > 5, (first.line(), again.line())


def test_a_commit_measured_in_two_environments_is_named(tmp_path: Path, sqlite_url: str) -> None:
    """One series pools a commit's runs whatever their asv environment: ingest says where that happens, and a
    runner that moved from one environment to the next (no commit in both) is not warned about."""
    root = tmp_path / "results"
    for commit, env in (("a", "virtualenv-py3.11"), ("a", "virtualenv-py3.12"), ("b", "virtualenv-py3.12"),
                        ("c", "existing-py3.11"), ("d", "existing-py3.12")):  # fmt: skip
        machine = "two-envs" if commit in "ab" else "upgraded"
        doc = results_doc({"s.time_a": bench_row([1.0], [])}, commit=commit * 40, env_name=env, machine=machine)
        write_results(root, doc)
    summary = ingest_paths(make_engine(sqlite_url), [root], progress=False)
    assert summary.ok and summary.mixed_environments == {("two-envs", "a" * 40): ["virtualenv-py3.11",
                                                                                  "virtualenv-py3.12"]}  # fmt: skip
    note = str(summary.environments_note())
    assert "1 commit measured in several asv environments" in note and "aaaaaaaaaa on 'two-envs'" in note


def test_files_without_benchmarks_json_join_the_series_the_store_has(tmp_path: Path, db_url: str,
                                                                      openblas: Path) -> None:  # fmt: skip
    """Results files copied without their benchmarks.json name a benchmark's parameters param1, param2 (asv's
    defaults): after files that came with one, their results made new series beside the named ones (a compare
    across them found 36 cases missing; found on fastcan's real results). The store's names are used now."""
    import shutil

    machine = "gha-aws-skylake"
    files = sorted((openblas / machine).glob("[0-9a-f]*.json"))
    with_suite = tmp_path / "a" / "results"
    (with_suite / machine).mkdir(parents=True)
    shutil.copy(openblas / "benchmarks.json", with_suite)
    shutil.copy(openblas / machine / "machine.json", with_suite / machine)
    for f in files[:3]:
        shutil.copy(f, with_suite / machine)
    bare = tmp_path / "b" / machine  # no benchmarks.json anywhere above it
    bare.mkdir(parents=True)
    for f in files[3:5]:
        shutil.copy(f, bare)
    engine = make_engine(db_url)
    assert ingest_paths(engine, [with_suite], progress=False).ok
    with Session(engine) as s:
        named = set(s.execute(sa.select(Benchmark.id).where(Benchmark.name == "benchmarks.gemm.time_gemm")).scalars())
    assert ingest_paths(engine, [bare], progress=False).ok
    with Session(engine) as s:
        keys = set(s.execute(sa.select(Result.params_key).where(Result.benchmark_id.in_(named))).scalars())
    assert len(keys) == 24 and not [k for k in keys if '"param1"' in k], sorted(keys)  # gemm's 24 series, named
    engine.dispose()
    # Both in one call, the bare folder first: named by the benchmarks.json of the other folder, read up front.
    once = make_engine(f"sqlite:///{tmp_path / 'once.sqlite'}")
    assert ingest_paths(once, [bare, with_suite], progress=False).ok
    with Session(once) as s:
        keys = set(s.execute(sa.select(Result.params_key).join(Benchmark).where(
            Benchmark.name == "benchmarks.gemm.time_gemm")).scalars())
    assert len(keys) == 24 and not [k for k in keys if '"param1"' in k], sorted(keys)
    once.dispose()


def test_folder_without_machine_json_beside_a_machine_is_named(tmp_path: Path, db_url: str) -> None:
    """fastcan's folders copied without benchmarks.json: the one with machine.json was read and the three beside it,
    results files and no machine.json, were passed over without a word ("ingested 5 of 5 files", found on cvxpy's
    real results). Each is named as not read, with what would read it; naming it by itself does."""
    import shutil

    from tests.db.conftest import FASTCAN

    results = tmp_path / "results"
    shutil.copytree(FASTCAN, results, ignore=shutil.ignore_patterns("benchmarks.json"))
    engine = make_engine(db_url)
    summary = ingest_paths(engine, [results], progress=False)
    assert not summary.ok and summary.ingested == 5, summary.line("store")
    refused = dict(summary.refused)
    assert sorted(Path(p).name for p in refused) == ["ubuntu-24.04-arm", "ubuntu-latest", "windows-latest"], refused
    assert all("no machine.json" in why and "name this folder itself" in why for why in refused.values())
    assert ingest_paths(engine, [results / "ubuntu-latest"], progress=False).ingested > 0
    engine.dispose()
    # A dot-folder (an editor's or a notebook's) is never a machine's and never named (a review's find).
    whole = tmp_path / "whole"
    shutil.copytree(FASTCAN, whole)
    (whole / ".ipynb_checkpoints").mkdir()
    shutil.copy(first := sorted((whole / "macos-latest").glob("[0-9a-f]*.json"))[0], whole / ".ipynb_checkpoints")
    assert first.exists() and ingest_paths(make_engine(db_url), [whole], progress=False).ok


def test_a_file_naming_another_machine_than_its_folder_is_said(tmp_path: Path, db_url: str) -> None:
    """uxarray's real results name their machine 'Philip' in the folder and machine.json of 'philipc2-desktop':
    stored under 'Philip' without a word, where asv's own site skips them. Said now, with the name to ask for."""
    import shutil

    from tests.db.conftest import FASTCAN

    results = tmp_path / "results"
    shutil.copytree(FASTCAN, results)
    first = sorted((results / "macos-latest").glob("[0-9a-f]*.json"))[0]
    doc = json.loads(first.read_text())
    doc["params"]["machine"] = "Philip"
    first.write_text(json.dumps(doc))
    engine = make_engine(db_url)
    summary = ingest_paths(engine, [results], progress=False)
    engine.dispose()
    assert summary.ok and summary.renamed == {("Philip", "macos-latest"): 1}
    assert "1 results file names its machine otherwise" in str(summary.machine_names_note())
    assert "'Philip' in 'macos-latest'" in str(summary.machine_names_note())


def test_fastcan_machine_folders_without_machine_json_ingest_whole(db_url: str) -> None:
    """fastcan's real results as fetched (tests/fixtures/asv-fastcan): four machine folders, one with machine.json.
    The three without were skipped without a word ("ingested 5 of 5 files"); every file is stored now, each machine
    named by its files' own params, the parameters by benchmarks.json (task, alg, opt_alg), never param1."""
    from tests.db.conftest import FASTCAN

    engine = make_engine(db_url)
    summary = ingest_paths(engine, [FASTCAN], progress=False)
    assert summary.ok and summary.files == summary.ingested == 20, summary.line("store")
    with Session(engine) as s:
        machines = set(queries.machines(s)["name"])
        keys = set(s.execute(sa.select(Result.params_key)).scalars())
    engine.dispose()
    assert machines == {"macos-latest", "ubuntu-24.04-arm", "ubuntu-latest", "windows-latest"}
    assert keys and all('"alg"' in k or '"opt_alg"' in k for k in keys) and not [k for k in keys if "param1" in k]
