"""Engines for the mlaperf store: a SQLite file by default, any SQLAlchemy URL otherwise.

SQLite engines run in WAL mode with foreign keys on and a busy timeout, and start write transactions with
``BEGIN IMMEDIATE`` so two processes ingesting at once queue up instead of failing on a lock upgrade.
Read-only engines (the dashboard's) open SQLite with ``mode=ro`` and make every PostgreSQL transaction
``READ ONLY``.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

DEFAULT_URL = "sqlite:///.mlaperf/mlaperf.sqlite"
ENV_VAR = "MLAPERF_DB"
BUSY_TIMEOUT_S = 60.0
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Any constant: serializes concurrent `upgrade` calls on one PostgreSQL database.
_PG_UPGRADE_LOCK = 0x6D6C6170


class SchemaError(RuntimeError):
    """The database's schema revision is not the one this mlaperf needs."""


def default_url() -> str:
    """The store's URL: env ``MLAPERF_DB`` if set, else a SQLite file under ``.mlaperf/`` in the cwd."""
    return os.environ.get(ENV_VAR) or DEFAULT_URL


def display_url(url: str | URL) -> str:
    """The URL as shown in messages (password hidden)."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return str(url)


def _parse_url(url: str | URL) -> URL:
    if isinstance(url, URL):
        return url
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ValueError(f"invalid database URL {url!r}: {exc}") from None
    try:
        parsed.get_dialect()
    except NoSuchModuleError:
        raise ValueError(
            f"invalid database URL {display_url(url)!r}: unknown database dialect or driver "
            f"{parsed.drivername!r} (use e.g. sqlite:///path.sqlite or postgresql+psycopg://user@host/db)"
        ) from None
    return parsed


def _sqlite_file(url: URL) -> str | None:
    """The file path of a SQLite URL, or None for an in-memory database."""
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def _on_sqlite_connect(readonly: bool):  # noqa: ANN202 - event callback factory
    def connect(dbapi_conn: Any, _record: Any) -> None:
        # Driver-level autocommit: SQLAlchemy's "begin" event below issues BEGIN itself.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            cur.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL is durable across application crashes and much faster than FULL.
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    return connect


def _on_sqlite_begin(readonly: bool):  # noqa: ANN202 - event callback factory
    def begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front, so the busy timeout applies instead of SQLITE_BUSY.
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return begin


def make_engine(url: str | URL | None = None, *, readonly: bool = False, **kwargs: Any) -> Engine:
    """Create an engine for ``url`` (default: :func:`default_url`).

    ``readonly=True`` gives an engine that cannot write: SQLite opens the file with ``mode=ro`` (it must
    exist), PostgreSQL sets ``default_transaction_read_only``. Extra keyword arguments go to
    :func:`sqlalchemy.create_engine`. A malformed URL or unknown driver raises ``ValueError`` naming it.
    """
    parsed = _parse_url(default_url() if url is None else url)
    backend = parsed.get_backend_name()
    connect_args: dict[str, Any] = dict(kwargs.pop("connect_args", {}))
    if backend == "sqlite":
        path = _sqlite_file(parsed)
        connect_args.setdefault("timeout", BUSY_TIMEOUT_S)
        if path is not None:
            file = Path(path).expanduser()
            if readonly:
                if not file.is_file():
                    raise ValueError(f"database {display_url(parsed)!r} does not exist (file {file})")
                quoted = urllib.parse.quote(str(file.resolve()))
                parsed = parsed.set(database=f"file:{quoted}?mode=ro").update_query_dict({"uri": "true"})
            else:
                file.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _on_sqlite_connect(readonly))
        event.listen(engine, "begin", _on_sqlite_begin(readonly))
        return engine
    if backend == "postgresql":
        if readonly:
            options = parsed.query.get("options", "")
            if isinstance(options, tuple):
                options = " ".join(options)
            options = f"{options} -c default_transaction_read_only=on".strip()
            parsed = parsed.update_query_dict({"options": options})
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(parsed, connect_args=connect_args, **kwargs)
    if readonly:
        raise ValueError(
            f"read-only mode is supported for SQLite and PostgreSQL, not {backend!r} ({display_url(parsed)})"
        )
    return create_engine(parsed, connect_args=connect_args, **kwargs)


def _alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The schema revision this mlaperf needs (the migrations' head)."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None, "db/migrations has no revisions"
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision stored in the database, or None for a database without mlaperf schema."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def _run_alembic(url: str | URL | None, action: str, revision: str) -> None:
    parsed = _parse_url(default_url() if url is None else url)
    engine = make_engine(parsed)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_UPGRADE_LOCK})
            cfg = _alembic_config(conn)
            try:
                getattr(command, action)(cfg, revision)
            except CommandError as exc:
                raise SchemaError(f"cannot {action} database at {display_url(parsed)} to {revision!r}: {exc}") from None
    finally:
        engine.dispose()


def upgrade(url: str | URL | None = None, revision: str = "head") -> None:
    """Migrate the database at ``url`` (default: :func:`default_url`) up to ``revision``."""
    _run_alembic(url, "upgrade", revision)


def downgrade(url: str | URL | None, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision`` (e.g. ``-1`` or ``base``)."""
    _run_alembic(url, "downgrade", revision)


def check_schema(engine: Engine) -> None:
    """Raise :class:`SchemaError` unless the database is at this mlaperf's schema revision."""
    shown = display_url(engine.url)
    # Show the user's own URL, not the mode=ro form a read-only SQLite engine connects with.
    if shown.startswith("sqlite:///file:"):
        shown = "sqlite:///" + urllib.parse.unquote(shown.removeprefix("sqlite:///file:").split("?")[0])
    needed = head_revision()
    try:
        current = current_revision(engine)
    except OperationalError as exc:
        raise SchemaError(f"cannot read database at {shown}: {exc.orig}") from None
    if current == needed:
        return
    if current is None:
        raise SchemaError(
            f"database at {shown} has no mlaperf schema, this mlaperf needs revision {needed}: "
            f"run `mlaperf db upgrade --db {shown}`"
        )
    known = {rev.revision for rev in ScriptDirectory.from_config(_alembic_config()).walk_revisions()}
    if current not in known:
        raise SchemaError(
            f"database at {shown} is at schema revision {current}, which this mlaperf does not know "
            f"(it needs {needed}); the database was written by a newer mlaperf: upgrade mlaperf"
        )
    raise SchemaError(
        f"database at {shown} is at schema revision {current}, this mlaperf needs {needed}: "
        f"run `mlaperf db upgrade --db {shown}`"
    )


def ensure_schema(engine: Engine) -> None:
    """Create the schema in a database that has none; otherwise behave like :func:`check_schema`.

    Writers call this so `mlaperf ingest` works on a fresh store with no flags, while an older schema
    still gets the clear "run `mlaperf db upgrade`" message instead of a silent migration.
    """
    if current_revision(engine) is None:
        tables = set(inspect(engine).get_table_names())
        if not tables & {"run", "result", "machine"}:
            upgrade(engine.url)
    check_schema(engine)
