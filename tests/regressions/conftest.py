"""Stores for the regression tests: a real SQLite file, and real PostgreSQL when MLAPERF_TEST_PG_URL is set
(each test gets its own schema, dropped afterwards; MLAPERF_REQUIRE_PG=1 turns the skip into a failure)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from db.engine import make_engine, upgrade
from db.ingest import ingest_paths


def _pg_url() -> str | None:
    url = os.environ.get("MLAPERF_TEST_PG_URL")
    if not url:
        if os.environ.get("MLAPERF_REQUIRE_PG") == "1":
            pytest.fail("MLAPERF_REQUIRE_PG=1 but MLAPERF_TEST_PG_URL is not set")
        pytest.skip("PostgreSQL tests need MLAPERF_TEST_PG_URL")
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty store at the current schema, on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.sqlite'}"
        upgrade(url)
        yield url
        return
    base = _pg_url()
    assert base is not None
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = (
        make_url(base)
        .update_query_dict({"options": f"-csearch_path={schema}"})
        .render_as_string(hide_password=False)
    )
    try:
        upgrade(url)
        yield url
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


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
