"""Engine: default URL, SQLite settings, read-only connections, bad URLs."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from db.engine import StoreError, make_engine, missing_sqlite_file, upgrade
from settings.env import store_url


def test_store_url_is_db_then_env_then_local_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLAPERF_DB", raising=False)
    assert store_url() == store_url(None) == "sqlite:///.mlaperf/mlaperf.sqlite"
    monkeypatch.setenv("MLAPERF_DB", "postgresql+psycopg://u@h/db")
    assert store_url() == "postgresql+psycopg://u@h/db"
    assert store_url("sqlite:///given.sqlite") == "sqlite:///given.sqlite"  # --db wins


def test_default_engine_creates_folder_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLAPERF_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    engine = make_engine()
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    engine.dispose()
    assert (tmp_path / ".mlaperf" / "mlaperf.sqlite").is_file()


def test_sqlite_pragmas(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000
    engine.dispose()


@pytest.mark.parametrize(
    "url",
    ["not a url", "foo://bar/baz", "postgresql+nosuchdriver://u@h/db"],
)
def test_bad_url_raises_value_error_naming_it(url: str) -> None:
    with pytest.raises(ValueError, match="invalid database URL") as info:
        make_engine(url)
    assert url.split("://")[0] in str(info.value)


def test_readonly_sqlite_refuses_writes_and_reads(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    ro = make_engine(sqlite_url, readonly=True)
    with ro.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM machine")).scalar() == 0
    with pytest.raises(DBAPIError, match="readonly"):
        with ro.begin() as conn:
            conn.execute(sa.text("INSERT INTO machine (name, info) VALUES ('x', '{}')"))
    ro.dispose()


def test_readonly_sqlite_missing_file_is_clear(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        make_engine(f"sqlite:///{tmp_path / 'nope.sqlite'}", readonly=True)


def test_missing_sqlite_file_is_a_store_not_created_yet(tmp_path: Path) -> None:
    (tmp_path / "there.sqlite").write_bytes(b"")
    assert missing_sqlite_file(f"sqlite:///{tmp_path / 'nope.sqlite'}")
    assert not missing_sqlite_file(f"sqlite:///{tmp_path / 'there.sqlite'}")
    for url in ("sqlite://", "sqlite:///:memory:", "postgresql+psycopg://u@h/db"):
        assert not missing_sqlite_file(url), url
    with pytest.raises(ValueError, match="invalid database URL 'foo://bar'"):
        missing_sqlite_file("foo://bar")


@pytest.mark.postgres
def test_readonly_postgres_refuses_writes(pg_url: str) -> None:
    upgrade(pg_url)
    ro = make_engine(pg_url, readonly=True)
    with ro.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM machine")).scalar() == 0
    with pytest.raises(DBAPIError, match="read-only transaction"):
        with ro.begin() as conn:
            conn.execute(sa.text("INSERT INTO machine (name, info) VALUES ('x', '{}')"))
    ro.dispose()
