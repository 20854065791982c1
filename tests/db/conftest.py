"""Fixtures for the store's tests: database URLs (SQLite files, PostgreSQL schemas) and asv files."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from db.engine import make_engine
from db.models import Benchmark, Commit, Environment, Machine, Result, Run
from mlaperf import cli

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENBLAS = REPO_ROOT / "tests" / "fixtures" / "asv-openblas" / "results"  # vendored, see its README
FASTCAN = REPO_ROOT / "tests" / "fixtures" / "asv-fastcan" / "results"  # vendored, see its README

ASV_COLUMNS = [
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
]


@pytest.fixture(scope="session")
def openblas() -> Path:
    if not OPENBLAS.is_dir():
        pytest.fail(f"asv fixture missing: {OPENBLAS}")
    return OPENBLAS


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'mlaperf.sqlite'}"


@pytest.fixture
def pg_url(pg_schema_url: Callable[[str], str]) -> str:
    """A PostgreSQL URL on a fresh schema (dropped afterwards); see tests/conftest.py."""
    return pg_schema_url("t")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'mlaperf.sqlite'}"
    return request.getfixturevalue("pg_url")


def results_doc(
    results: dict[str, list[Any]],
    *,
    commit: str = "a" * 40,
    machine: str = "test-machine",
    env_name: str = "existing-py3.11",
    date: int = 1_700_000_000_000,
    params: dict[str, Any] | None = None,
    columns: list[str] | None = None,
) -> dict[str, Any]:
    """An asv results document (format version 2), shaped like asv's Results.save writes it."""
    return {
        "commit_hash": commit,
        "env_name": env_name,
        "date": date,
        "params": {"machine": machine, "python": "3.11", **(params or {})},
        "python": "3.11",
        "requirements": {},
        "env_vars": {},
        "result_columns": columns or ASV_COLUMNS,
        "results": results,
        "durations": {},
        "version": 2,
    }


def write_results(root: Path, doc: dict[str, Any], *, name: str | None = None) -> Path:
    """Write ``doc`` where asv would: ``root/<machine>/<sha8>-<env>.json``, with machine.json."""
    machine = doc["params"]["machine"]
    folder = root / machine
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "machine.json").exists():
        (folder / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    path = folder / (name or f"{doc['commit_hash'][:8]}-{doc['env_name']}.json")
    path.write_text(json.dumps(doc))  # NaN is written as asv writes it (allow_nan)
    return path


def bench_row(values: list[Any] | None, params: list[list[str]], **columns: Any) -> list[Any]:
    """A result row in ASV_COLUMNS order; trailing None columns dropped as asv does."""
    row: list[Any] = [values, params] + [columns.get(c) for c in ASV_COLUMNS[2:]]
    while row and row[-1] is None:
        row.pop()
    return row


def isnan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def unprivileged_prefix() -> list[str]:
    """A command prefix that makes a process obey file modes like an ordinary user.

    Root ignores read/write permission bits (CAP_DAC_OVERRIDE); ``setpriv`` drops those capabilities
    from the bounding set so a root-run test exercises the same refusals as a user's run. Empty when
    not root.
    """
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def run_unprivileged(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in the repository, obeying file modes (see :func:`unprivileged_prefix`)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **kwargs.pop("env", {})}
    return subprocess.run(
        [*unprivileged_prefix(), sys.executable, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,
    )


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """``mlaperf ARGV`` in this process (the one entry point, mlaperf.cli.main): exit status, stdout, stderr."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def store_state(url: str) -> dict[str, Any]:
    """What the store holds: result rows and runs by their names (Counters), commits, machines and benchmark
    names, and ``results``, the (sha, benchmark, value) of every result."""
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                Machine.name, Commit.sha, Environment.name, Benchmark.name, Result.params_key, Result.status,
                Result.value, Result.number, Result.samples,
            )
            .select_from(Result)
            .join(Run, Run.id == Result.run_id)
            .join(Machine, Machine.id == Run.machine_id)
            .join(Commit, Commit.id == Run.commit_id)
            .join(Environment, Environment.id == Run.environment_id)
            .join(Benchmark, Benchmark.id == Result.benchmark_id)
        ).all()  # fmt: skip
        runs = conn.execute(
            sa.select(Machine.name, Commit.sha, Environment.name)
            .select_from(Run)
            .join(Machine, Machine.id == Run.machine_id)
            .join(Commit, Commit.id == Run.commit_id)
            .join(Environment, Environment.id == Run.environment_id)
        ).all()
        state = {
            "rows": Counter(tuple(r[:8]) + (None if r[8] is None else tuple(r[8]),) for r in rows),
            "runs": Counter(tuple(r) for r in runs),
            "results": {(r[1], r[3], r[6]) for r in rows},
            "commits": set(conn.execute(sa.select(Commit.sha)).scalars()),
            "machines": set(conn.execute(sa.select(Machine.name)).scalars()),
            "benchmarks": set(conn.execute(sa.select(Benchmark.name)).scalars()),
        }
    engine.dispose()
    return state
