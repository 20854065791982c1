"""``mlaperf run`` asks the store what is measured before it measures anything: a store it cannot use is
bad input (exit 2, one line, nothing measured, the file untouched), an empty one holds nothing yet."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mlaperf import runner
from settings import env as names

if TYPE_CHECKING:  # annotations only (see test_runner.py)
    from conftest import SmokeRepo


def _dry_run(repo: SmokeRepo, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mlaperf.runner", "HEAD", "--tier", "cpu", "--dry-run", "--db", f"sqlite:///{store}"],
        cwd=repo.path, env=repo.env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _foreign(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    con.execute("INSERT INTO notes (body) VALUES ('kept')")
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_foreign, "is not an mlaperf store (it holds tables notes)"),
        (lambda p: (p.write_bytes(b"not a database, just text\n" * 200), p)[1], "not a SQLite database"),
    ],
    ids=["another-applications-database", "not-a-database"],
)
def test_unusable_store_is_bad_input_and_left_alone(smoke_repo: SmokeRepo, tmp_path: Path, make, message: str) -> None:
    store = make(tmp_path / "store.sqlite")
    before = store.read_bytes()
    proc = _dry_run(smoke_repo, store)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and line.startswith("mlaperf run: error: "), line
    assert message in line and "(nothing was measured)" in line and "Traceback" not in proc.stderr
    assert store.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["store.sqlite"]


def test_empty_store_holds_nothing_yet(smoke_repo: SmokeRepo, tmp_path: Path) -> None:
    store = tmp_path / "empty.sqlite"
    sqlite3.connect(store).close()  # a database file without any table
    proc = _dry_run(smoke_repo, store)
    assert proc.returncode == 0, proc.stderr
    assert "commits to measure on machine 'vm-cpu': 1 of 1" in proc.stdout


def test_benchmark_environment_uses_the_shared_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(names.CONCURRENCY.name, raising=False)
    env = runner.benchmark_env(tmp_path, "cpu", "1,16")
    assert env[names.TIER.name] == "cpu" and env[names.CONCURRENCY.name] == "1,16"
    assert names.CONCURRENCY.name not in runner.benchmark_env(tmp_path, "gpu", None)
    monkeypatch.setenv(names.DB.name, "postgresql+psycopg://user:secret@store/db")
    assert names.DB.name not in runner.benchmark_env(tmp_path, "gpu", None)  # benchmark code never sees it


def test_unknown_arch_profile_is_bad_input(smoke_repo: SmokeRepo, tmp_path: Path) -> None:
    env = {**smoke_repo.env(), names.ARCH_PROFILE.name: "blackwell"}
    proc = subprocess.run(
        [sys.executable, "-m", "mlaperf.runner", "HEAD", "--tier", "cpu", "--dry-run", "--db", "none"],
        cwd=smoke_repo.path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "MLAPERF_ARCH_PROFILE='blackwell' is not one of" in proc.stderr
    assert "would run" not in proc.stdout  # found before anything is planned
