"""Seeded stores for the dashboard tests: real asv files (the vendored OpenBLAS results + synthetic sparse-MLA
suites written by asv's own ``Results.save``) ingested through ``db.ingest``, then the real detector.

The MLA history: ``N_COMMITS`` commits on ``MLA_MACHINE``; every series that runs the MMA decode kernel is
30% slower from ``SLOW_FROM`` and back from ``FIX_FROM`` (the detector flags one alert group and marks it
fixed); the decode step failed at commit 2; the indexer benchmark's asv version changes at ``NEW_VERSION``;
the runs from ``TORCH_FROM`` on were made with a newer torch and driver (``RUN_VERSIONS``), which their hover
shows (per-run versions, ``Run.info``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

sys.path.insert(0, str(Path(__file__).parent))
import asv_synth  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dashboard" / "app.py"
OPENBLAS = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"  # vendored, see its README
if not OPENBLAS.exists() and os.environ.get("MLAPERF_REQUIRE_FIXTURES") == "1":
    raise RuntimeError(f"MLAPERF_REQUIRE_FIXTURES=1 but {OPENBLAS} is missing")
CHROMIUM = Path("/usr/bin/chromium")
MLA_MACHINE = "h200-sxm"
N_COMMITS = 12
SLOW_FROM = 6
FIX_FROM = 9
FAILED = (2, "bench_step.DecodeStep.time_step")
NEW_VERSION = (4, "bench_indexer.Indexer.time_indexer")
TORCH_FROM = 3
RUN_VERSIONS = ({"torch": "2.10.0", "gpu_driver": "570.86.15"}, {"torch": "2.11.0", "gpu_driver": "580.159.04"})


@dataclass(frozen=True)
class Seeded:
    url: str
    path: Path
    shas: list[str]


def _seed(tmp: Path, url: str | None = None) -> Seeded:
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths
    from db.models import Benchmark, Commit, Machine, Regression
    from regressions.config import parse_settings
    from regressions.store import detect_store

    results = tmp / "results"
    shas = asv_synth.commit_shas(N_COMMITS)
    benches = asv_synth.mla_benchmarks(slow_from=SLOW_FROM, fix_from=FIX_FROM)
    asv_synth.write_results(results, MLA_MACHINE, benches, shas, failed={FAILED},
                            new_version_from={NEW_VERSION[1]: NEW_VERSION[0]},
                            params_at=lambda i: RUN_VERSIONS[i >= TORCH_FROM])
    path = tmp / "store.sqlite"
    url = url or f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    paths = [results] + ([OPENBLAS] if OPENBLAS.exists() else [])
    summary = ingest_paths(engine, paths, progress=False)
    assert summary.ok, summary.failed

    with Session(engine) as s, s.begin():
        # Kernel-config records (track_launch_*) are provenance: the detector leaves them alone by itself.
        detect_store(s, parse_settings({}, "tests/dashboard"), machine=MLA_MACHINE, full=True)
        if OPENBLAS.exists():
            # One regression on another machine, triaged already (the detector is not run there).
            def one(model: type, **kw: object) -> int:
                return s.scalars(select(model.id).filter_by(**kw)).one()

            blas_commit = s.scalars(
                select(Commit.sha).order_by(Commit.date.desc()).where(Commit.sha.notin_(shas)).limit(1)
            ).one()
            s.add(Regression(
                benchmark_id=one(Benchmark, name="benchmarks.dot.time_dot"), params_key='{"size": "100"}',
                params={"size": "100"}, machine_id=one(Machine, name="gha-aws-graviton"),
                commit_id=one(Commit, sha=blas_commit), before=4.4e-7, after=5.0e-7, ratio=1.136,
                direction="up_is_worse", status="acknowledged",
            ))
    engine.dispose()
    return Seeded(url, path, shas)


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    return _seed(tmp_path_factory.mktemp("dash_store"))


@pytest.fixture
def writable_copy(seeded: Seeded, tmp_path: Path) -> Iterator[Seeded]:
    """A private copy of the seeded store, for tests that write."""
    dst = tmp_path / "copy.sqlite"
    shutil.copy(seeded.path, dst)
    yield Seeded(f"sqlite:///{dst}", dst, seeded.shas)


@pytest.fixture
def pg_seeded(tmp_path: Path, pg_schema_url: Callable[[str], str]) -> Seeded:
    """The seeded store on PostgreSQL, in a fresh schema dropped afterwards (MLAPERF_TEST_PG_URL)."""
    return _seed(tmp_path, pg_schema_url("dash"))


@pytest.fixture
def empty_store(tmp_path: Path) -> str:
    from db.engine import upgrade

    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    upgrade(url)
    return url


def md_table(at: AppTest, column: str) -> pd.DataFrame:
    """The first Markdown table on the page with ``column`` (``fmt.md_table``), cells unescaped; a link cell
    reads ``[text](url)``."""
    for md in at.markdown:
        lines = [ln for ln in str(md.value).splitlines() if ln.startswith("| ")]
        if len(lines) < 1:
            continue
        rows = [[re.sub(r"\\(.)", r"\1", c.strip()) for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines]
        if column in rows[0]:
            return pd.DataFrame(rows[1:], columns=rows[0])
    raise AssertionError(f"no Markdown table with column {column!r}")


def mlaperf_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """`mlaperf ARGV` in a child process (no commit links: ``MLAPERF_REPO_URL`` empty); must exit 0."""
    env = {**os.environ, "MLAPERF_REPO_URL": ""}
    done = subprocess.run([sys.executable, "-m", "mlaperf.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def site_data(site: Path, key: str) -> Any:
    """One data file of a published site (``data/<key>.js``: ``MLAPERF.put("<key>", <json>);``), parsed."""
    text = (site / "data" / f"{key}.js").read_text(encoding="utf-8")
    prefix = f'MLAPERF.put("{key}",'
    assert text.startswith(prefix) and text.endswith(");\n")
    return json.loads(text[len(prefix):-3])


def need_chromium() -> None:
    """Skip the calling test or fixture when Chromium is missing; with MLAPERF_REQUIRE_BROWSER=1 (CI) that is
    an error instead."""
    if not CHROMIUM.exists():
        if os.environ.get("MLAPERF_REQUIRE_BROWSER") == "1":
            raise RuntimeError(f"MLAPERF_REQUIRE_BROWSER=1 but {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} missing")


@contextlib.contextmanager
def site_tab(site: Path) -> Iterator[tuple[Any, list[str]]]:
    """A headless Chromium tab for a published site opened from file://: (page, refused), where every request
    outside the site is refused and recorded; a page error fails the caller when the tab closes."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS

    refused: list[str] = []
    errors: list[str] = []

    def guard(route: Any) -> None:
        if route.request.url.startswith(site.as_uri()):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", guard)
        try:
            yield page, refused
        finally:
            browser.close()
    assert not errors, errors
