"""Engines for the mlaperf store: a SQLite file by default, any SQLAlchemy URL otherwise.

SQLite engines run in WAL mode with foreign keys on and a busy timeout, and start write transactions with
``BEGIN IMMEDIATE`` so two processes ingesting at once queue up instead of failing on a lock upgrade.
Read-only engines (the dashboard's, ``compare``'s) open SQLite with ``mode=ro``, or as ``immutable`` when
the folder cannot be written (a read-only mount: SQLite could not create its ``-shm`` file there), and make
every PostgreSQL transaction ``READ ONLY``.

Problems of the store itself (a corrupted file, a database that is not an mlaperf store, a missing
permission, an unreachable server, a schema that needs a migration) raise :class:`StoreError`, whose
message is one line naming the database and what to do; never SQL text.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any, NoReturn

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

from settings.disk import FULL_BELOW_BYTES, describe_bytes, free_bytes
from settings.env import store_url
from settings.exits import BadInput

BUSY_TIMEOUT_S = 60.0
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# Any constant: serializes concurrent `upgrade` calls on one PostgreSQL database.
_PG_UPGRADE_LOCK = 0x6D6C6170


# The tables every mlaperf schema revision has: a database holding them is an mlaperf store.
_CORE_TABLES = frozenset({"machine", "commit", "benchmark", "run", "result"})
_SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreError(RuntimeError, BadInput):
    """The store cannot be used: corrupted, not an mlaperf store, unreadable, unwritable, unreachable, or
    at another schema revision. ``str()`` is one line naming the database and what to do (exit status 2)."""


class SchemaError(StoreError):
    """The database's schema revision is not the one this mlaperf needs (``mlaperf db upgrade``)."""


def display_url(url: str | URL) -> str:
    """The URL as shown in messages (password hidden; a read-only SQLite engine's ``file:`` URI shown as
    the plain path the user gave)."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except ArgumentError:
        return str(url)
    database = parsed.database or ""
    if parsed.get_backend_name() == "sqlite" and database.startswith("file:") and "uri" in parsed.query:
        return "sqlite:///" + urllib.parse.unquote(database.removeprefix("file:").split("?")[0])
    return parsed.render_as_string(hide_password=True)


def _parse_url(url: str | URL) -> URL:
    if isinstance(url, URL):
        return url
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        # A bare path: the SQLite URL is what was meant (an absolute path gets its fourth slash).
        hint = f" (a SQLite file is written sqlite:///{url})" if "://" not in url else ""
        raise ValueError(f"invalid database URL {url!r}: {exc}{hint}") from None
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


def missing_sqlite_file(url: str | URL) -> bool:
    """Whether ``url`` names a SQLite file that does not exist yet: a store not created yet, which holds
    nothing (readers say so instead of creating it). ``ValueError`` for a malformed URL or unknown driver."""
    parsed = _parse_url(url)
    path = _sqlite_file(parsed) if parsed.get_backend_name() == "sqlite" else None
    return path is not None and not Path(path).expanduser().exists()


def _on_sqlite_connect(readonly: bool):  # noqa: ANN202 - event callback factory
    def connect(dbapi_conn: Any, _record: Any) -> None:
        # Driver-level autocommit: SQLAlchemy's "begin" event below issues BEGIN itself.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            # WAL is a property of the file, set once when the store is new; an existing database keeps
            # its mode (switching rewrites its header, and a foreign database must not be written to).
            if cur.execute("PRAGMA page_count").fetchone()[0] == 0:
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


def _sqlite_header_problem(file: Path, size: int) -> str | None:
    """Why ``file`` cannot be a (complete) SQLite database, from its first 100 bytes, or None."""
    if size == 0:
        return None  # SQLite's own empty database
    with open(file, "rb") as handle:
        header = handle.read(100)
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return f"is not a SQLite database (it starts with {header[:16]!r}): corrupted, or another kind of file"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    header_valid = header[24:28] == header[92:96] and pages > 0
    wal = Path(f"{file}-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0  # a crash mid-checkpoint: the log completes it
    if header_valid and not wal_pending and size < pages * page_size:
        return f"is corrupted: truncated to {size:,} bytes, its header says {pages * page_size:,}"
    return None


def _sqlite_file_checks(file: Path, shown: str) -> None:
    """Raise StoreError for an existing SQLite file that cannot be read as a database."""
    try:
        info = file.stat()
    except OSError as exc:
        raise StoreError(f"cannot open database {shown}: {exc.strerror or exc}") from None
    if not file.is_file():
        raise StoreError(f"database {shown} is not a file (it is a directory or a device): point --db at a file")
    if not os.access(file, os.R_OK):
        raise StoreError(
            f"cannot read database {shown}: read permission on the file is missing (mode {info.st_mode & 0o777:o}, "
            f"owner uid {info.st_uid}; this process runs as uid {os.geteuid()})"
        )
    try:
        problem = _sqlite_header_problem(file, info.st_size)
    except OSError as exc:
        raise StoreError(f"cannot read database {shown}: {exc.strerror or exc}") from None
    if problem is not None:
        raise StoreError(
            f"database file {shown} {problem}; it is not a usable mlaperf store: restore it from a backup, or "
            "point --db at another file"
        )


def _readonly_sqlite_query(file: Path, shown: str) -> str:
    """The URI query opening ``file`` read-only: ``mode=ro``, or ``immutable=1`` on a read-only folder."""
    if not file.exists():
        raise StoreError(f"no database at {shown} (file {file} does not exist)")
    _sqlite_file_checks(file, shown)
    folder = file.resolve().parent
    wal, shm = Path(f"{file}-wal"), Path(f"{file}-shm")
    if os.access(folder, os.W_OK) or (wal.exists() and shm.exists()):
        return "mode=ro"  # SQLite can create (or already has) the shared-memory file a WAL reader needs
    if not wal.exists() or wal.stat().st_size == 0:
        # Nothing pending in a log and nobody able to write here: the file alone is the whole store.
        return "mode=ro&immutable=1"
    raise StoreError(
        f"cannot read database {shown}: its write-ahead log {wal.name} holds changes not yet in the database "
        f"file, and the folder {folder} is not writable, so SQLite cannot create {shm.name} to read them; give "
        f"write permission on {folder}, or open the store once where it is writable (that folds the log in)"
    )


def _check_writable_sqlite(file: Path, shown: str) -> None:
    """Raise StoreError unless ``file`` can be created or written, with its -wal/-shm files beside it."""
    folder = file.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder of database {shown}: {exc.strerror or exc}") from None
    if file.exists():
        _sqlite_file_checks(file, shown)
        if not os.access(file, os.W_OK):
            raise StoreError(
                f"cannot write database {shown}: write permission on the file is missing "
                "(read-only commands such as `mlaperf compare` and the dashboard can still read it)"
            )
    if not os.access(folder, os.W_OK):
        what = "write" if file.exists() else "create"
        raise StoreError(
            f"cannot {what} database {shown}: write permission on the folder {folder.resolve()} is missing "
            "(SQLite creates its -wal and -shm files beside the database)"
        )


def store_error(exc: BaseException, url: str | URL) -> StoreError | None:
    """The :class:`StoreError` for a database error that is about the store itself, else None.

    Covers a corrupted or non-database SQLite file, missing permissions, a full disk, I/O errors, a lock
    held too long, and PostgreSQL connection, permission and read-only failures. The message names the
    database and never holds SQL text.
    """
    orig = getattr(exc, "orig", None) or exc
    shown = display_url(url)
    first = first_line(exc)
    if isinstance(orig, sqlite3.Error):
        code = (getattr(orig, "sqlite_errorcode", 0) or 0) & 0xFF
        # SQLITE_FULL comes only where SQLite grows a file it writes pages to; where it cannot map its -shm file
        # (SQLITE_IOERR_SHMSIZE) or finish a write, a full disk is a "disk I/O error".
        free = sqlite_free_bytes(url) if code in (10, 13) else None
        if code == 13 or (code == 10 and free is not None and free < FULL_BELOW_BYTES):
            room = "" if free is None else f" ({describe_bytes(free)} free in its folder)"
            return StoreError(f"cannot write database {shown}: the disk is full{room}")
        messages = {
            11: f"database file {shown} is corrupted (SQLite: {first}): restore it from a backup",
            26: f"database file {shown} is not a SQLite database (SQLite: {first}): point --db at an mlaperf store",
            8: f"cannot write database {shown}: {first} (a write permission on the file or its folder is missing)",
            14: f"cannot open database {shown}: {first} (check that the file and its folder exist and are accessible)",
            3: f"cannot use database {shown}: permission denied ({first})",
            10: f"cannot use database {shown}: disk I/O error ({first})",
            5: f"database {shown} stayed locked by another process for {BUSY_TIMEOUT_S:.0f} s: try again later",
            6: f"database {shown} stayed locked by another process for {BUSY_TIMEOUT_S:.0f} s: try again later",
        }
        message = messages.get(code)
        return None if message is None else StoreError(message)
    module = type(orig).__module__ or ""
    if module.startswith("psycopg"):
        name = type(orig).__name__
        if name == "InsufficientPrivilege":
            return StoreError(f"cannot use database {shown}: {first} (the database user lacks that privilege)")
        if name == "ReadOnlySqlTransaction":
            return StoreError(f"cannot write database {shown}: it is read-only for this connection ({first})")
        if name in ("OperationalError", "ConnectionTimeout", "AdminShutdown", "CannotConnectNow") or (
            isinstance(exc, DBAPIError) and exc.connection_invalidated
        ):
            return StoreError(f"cannot connect to database {shown}: {first}")
        if name in ("DiskFull", "IoError", "DataCorrupted", "IndexCorrupted"):
            return StoreError(f"database {shown} failed: {first}")
    return None


def sqlite_free_bytes(url: str | URL) -> int | None:
    """Bytes this process may still write on the filesystem of a SQLite store's folder; None for another
    backend, an in-memory or URI database, or a folder that cannot be looked at."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
    except ArgumentError:
        return None
    path = _sqlite_file(parsed) if parsed.get_backend_name() == "sqlite" else None
    return None if path is None else free_bytes(Path(path).expanduser().resolve().parent)


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (the driver's, for a SQLAlchemy error: never the SQL text
    SQLAlchemy appends), or its type's name when the message is empty."""
    orig = getattr(exc, "orig", None) or exc
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0]


def raise_store_error(exc: DBAPIError, url: str | URL, doing: str = "read") -> NoReturn:
    """Raise the StoreError for ``exc``; any other database error becomes one naming the database too
    ("cannot <doing> database <url>: <the driver's first line>")."""
    err = store_error(exc, url) or StoreError(f"cannot {doing} database {display_url(url)}: {first_line(exc)}")
    raise err from None


def make_engine(url: str | URL | None = None, *, readonly: bool = False, **kwargs: Any) -> Engine:
    """Create an engine for ``url`` (default: ``settings.env.store_url()``).

    ``readonly=True`` gives an engine that cannot write and needs no write permission: SQLite opens the
    file with ``mode=ro`` (it must exist), or ``immutable=1`` where the folder is not writable and no
    write-ahead log is pending; PostgreSQL sets ``default_transaction_read_only``. Extra keyword arguments
    go to :func:`sqlalchemy.create_engine`. A malformed URL or unknown driver raises ``ValueError``
    naming it; what can be seen of a SQLite file without connecting (missing, not a database, truncated,
    a permission missing) raises :class:`StoreError`. Problems only a connection shows surface in
    :func:`check_schema` / :func:`ensure_schema` / :func:`current_revision`, as :class:`StoreError` too.
    """
    parsed = _parse_url(store_url() if url is None else url)
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(f"database {display_url(parsed)}: mlaperf stores results in SQLite or PostgreSQL, not "
                         f"{backend!r} (e.g. sqlite:///path.sqlite or postgresql+psycopg://user@host/db)")
    _check_driver(parsed)
    connect_args: dict[str, Any] = dict(kwargs.pop("connect_args", {}))
    if backend == "sqlite":
        path = _sqlite_file(parsed)
        connect_args.setdefault("timeout", BUSY_TIMEOUT_S)
        if path is not None:
            file = Path(path).expanduser()
            if readonly:
                query = _readonly_sqlite_query(file, display_url(parsed))
                quoted = urllib.parse.quote(str(file.resolve()))
                parsed = parsed.set(database=f"file:{quoted}?{query}").update_query_dict({"uri": "true"})
            else:
                _check_writable_sqlite(file, display_url(parsed))
        engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _on_sqlite_connect(readonly))
        event.listen(engine, "begin", _on_sqlite_begin(readonly))
        return engine
    if backend == "postgresql":
        if readonly:
            options = parsed.query.get("options", "")
            if isinstance(options, tuple):
                options = " ".join(options)
            # A connect argument, not a URL query: the URL is what error messages show the user.
            options = f"{options} -c default_transaction_read_only=on".strip()
            parsed = parsed.difference_update_query(["options"])
            connect_args = {**connect_args, "options": options}
        kwargs.setdefault("pool_pre_ping", True)
        return create_engine(parsed, connect_args=connect_args, **kwargs)
    if readonly:
        raise ValueError(
            f"read-only mode is supported for SQLite and PostgreSQL, not {backend!r} ({display_url(parsed)})"
        )
    return create_engine(parsed, connect_args=connect_args, **kwargs)


def _check_driver(parsed: URL) -> None:
    """A clear error naming the missing Python driver (``psycopg``, ``pg8000`` ...), instead of the
    ModuleNotFoundError SQLAlchemy raises when it creates the engine."""
    try:
        parsed.get_dialect().import_dbapi()
    except ImportError as exc:
        module = getattr(exc, "name", None) or parsed.get_driver_name()
        hint = " (bash scripts/setup.sh postgres, or pip install 'mlaperf[postgres]')" \
            if parsed.get_driver_name() == "psycopg" else ""
        raise StoreError(f"database {display_url(parsed)}: its driver {module!r} is not installed{hint}") from None


def _alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@functools.lru_cache(maxsize=1)
def head_revision() -> str:
    """The schema revision this mlaperf needs (the migrations' head)."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None, "db/migrations has no revisions"
    return head


@functools.lru_cache(maxsize=1)
def _known_revisions() -> frozenset[str]:
    return frozenset(rev.revision for rev in ScriptDirectory.from_config(_alembic_config()).walk_revisions())


def current_revision(engine: Engine) -> str | None:
    """The schema revision stored in the database, or None for a database without any tables.

    Raises :class:`StoreError` for a database that is not an mlaperf store (other tables, or another
    application's Alembic revision) and for a database that cannot be read at all, and
    :class:`SchemaError` for mlaperf tables without a schema revision (a migration would fail on them).
    """
    try:
        with engine.connect() as conn:
            revision = MigrationContext.configure(conn).get_current_revision()
            if revision is not None and revision in _known_revisions():
                return revision
            tables = set(inspect(conn).get_table_names())
    except DBAPIError as exc:
        raise_store_error(exc, engine.url)
    if revision is None and not tables - {"alembic_version"}:
        return None  # empty, or downgraded to base
    if _CORE_TABLES <= tables:
        if revision is None:  # made without Alembic (e.g. create_all): not empty, and no revision to migrate from
            raise SchemaError(
                f"database {display_url(engine.url)} has mlaperf tables but no schema revision (no "
                "alembic_version row), so mlaperf cannot tell which schema it holds: restore it from a backup, "
                "or point --db at a new file or an empty database to start one"
            )
        return revision  # an mlaperf store, perhaps written by a newer mlaperf
    others = sorted(tables - {"alembic_version"})
    listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    raise StoreError(
        f"database {display_url(engine.url)} is not an mlaperf store (it holds "
        f"{'tables ' + listed if others else 'another application’s schema revision ' + repr(revision)}); "
        "point --db at an mlaperf store, or at a new file or an empty database to start one"
    )


def _run_alembic(url: str | URL | None, action: str, revision: str) -> None:
    parsed = _parse_url(store_url() if url is None else url)
    engine = make_engine(parsed)
    try:
        current_revision(engine)  # refuses a database that is not an mlaperf store, and unusable ones
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_UPGRADE_LOCK})
            cfg = _alembic_config(conn)
            try:
                getattr(command, action)(cfg, revision)
            except CommandError as exc:
                raise SchemaError(f"cannot {action} database at {display_url(parsed)} to {revision!r}: {exc}") from None
    except DBAPIError as exc:
        raise_store_error(exc, parsed)
    finally:
        engine.dispose()


def upgrade(url: str | URL | None = None, revision: str = "head") -> None:
    """Migrate the database at ``url`` (default: ``settings.env.store_url()``) up to ``revision``."""
    _run_alembic(url, "upgrade", revision)


def downgrade(url: str | URL | None, revision: str) -> None:
    """Migrate the database at ``url`` down to ``revision`` (e.g. ``-1`` or ``base``)."""
    _run_alembic(url, "downgrade", revision)


def check_schema(engine: Engine) -> None:
    """Raise :class:`SchemaError` unless the database is at this mlaperf's schema revision (and
    :class:`StoreError` for a database that is not an mlaperf store or cannot be read)."""
    check_revision(engine.url, current_revision(engine))


def check_revision(url: str | URL, current: str | None) -> None:
    """:func:`check_schema` for a revision already read (:func:`current_revision`) from the database at
    ``url``: raise :class:`SchemaError` unless it is this mlaperf's."""
    shown = display_url(url)
    needed = head_revision()
    if current == needed:
        return
    if current is None:
        raise SchemaError(
            f"database at {shown} is empty (no mlaperf schema yet), this mlaperf needs revision {needed}: "
            f"`mlaperf ingest --db {shown}` or `mlaperf db upgrade --db {shown}` creates it"
        )
    if current not in _known_revisions():
        raise SchemaError(
            f"database at {shown} is at schema revision {current}, which this mlaperf does not know "
            f"(it needs {needed}); the database was written by a newer mlaperf: upgrade mlaperf"
        )
    raise SchemaError(
        f"database at {shown} is at schema revision {current}, this mlaperf needs {needed}: "
        f"run `mlaperf db upgrade --db {shown}`"
    )


def ensure_schema(engine: Engine) -> None:
    """Create the schema in a database that has no tables; otherwise behave like :func:`check_schema`.

    Writers call this so `mlaperf ingest` works on a fresh store with no flags, while an older schema
    still gets the clear "run `mlaperf db upgrade`" message instead of a silent migration, and a database
    that is not an mlaperf store is never written to.
    """
    current = current_revision(engine)
    if current is None:
        upgrade(engine.url)
        current = current_revision(engine)  # what the upgrade made (or a concurrent ingest did)
    check_revision(engine.url, current)
