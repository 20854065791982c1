"""Stores for the regression tests: a real SQLite file, and real PostgreSQL when MLAPERF_TEST_PG_URL is set
(each test gets its own schema, dropped afterwards; MLAPERF_REQUIRE_PG=1 turns the skip into a failure)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db.engine import make_engine, upgrade
from db.ingest import ingest_paths


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty store at the current schema, on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.sqlite'}"
        upgrade(url)
        yield url
        return
    url = request.getfixturevalue("pg_schema_url")("t")
    upgrade(url)
    yield url


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    eng = make_engine(store_url)
    yield eng
    eng.dispose()


def _ingest(engine: Engine, paths: list[Path]) -> None:
    summary = ingest_paths(engine, paths, progress=False, repo=None)
    assert not summary.failed, summary.failed


@pytest.fixture
def ingest() -> Callable[[Engine, list[Path]], None]:
    """Real ingestion of asv result files or folders; any failed file fails the test."""
    return _ingest
