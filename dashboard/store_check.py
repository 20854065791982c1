"""Opening the store for the dashboard and telling apart "bad URL", "no store yet", "old schema" and "empty".

No Streamlit here: the CLI checks the URL with these functions before it starts the server.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.orm import Session

from dashboard.gitremote import default_repo_url
from settings import env

State = Literal["ok", "empty", "missing", "outdated", "error"]


class BadStoreURL(ValueError):
    """The --db URL cannot be used (unparseable, unknown driver, unreachable server)."""


@dataclass(frozen=True)
class StoreStatus:
    state: State
    url: str
    message: str = ""


def writable() -> bool:
    """Acknowledge/ignore buttons appear only when the dashboard was started with ``--writable``."""
    return env.dashboard_writable()


def repo_url() -> str:
    """Commit links' base: env ``MLAPERF_REPO_URL`` (``--repo-url``), else the web URL of the git remote
    ``origin`` of the directory the dashboard runs in (``dashboard.gitremote``), else none."""
    chosen = env.repo_url()
    return chosen if chosen is not None else _remote_url(str(Path.cwd()))


@functools.lru_cache(maxsize=8)
def _remote_url(cwd: str) -> str:  # one git call per process, not per rerun
    return default_repo_url(Path(cwd))


def redact(url: str) -> str:
    """URL safe to print or show: the password is masked (``db.engine.display_url``, the store's one rule)."""
    from db.engine import display_url

    return display_url(url)


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for other backends and in-memory databases)."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or u.database in (None, "", ":memory:"):
        return None
    db = u.database
    if db.startswith("file:"):
        db = db[len("file:"):].split("?", 1)[0]
    return Path(db)


def validate_url(url: str) -> None:
    """Raise BadStoreURL with a clear message if ``url`` is not a usable SQLAlchemy URL."""
    try:
        u = make_url(url)
    except ArgumentError as exc:
        raise BadStoreURL(
            f"--db {url!r} is not a database URL (expected e.g. sqlite:///path/to/mlaperf.sqlite or "
            "postgresql+psycopg://user@host/dbname)"
        ) from exc
    try:
        u.get_dialect()
    except NoSuchModuleError as exc:
        raise BadStoreURL(f"--db {redact(url)}: unknown database driver {u.drivername!r}") from exc


def open_engine(url: str, *, writable: bool = False) -> Engine:
    from db.engine import make_engine

    return make_engine(url, readonly=not writable)


def check(url: str, engine: Engine | None = None) -> StoreStatus:
    """Classify the store at ``url``; never raises for expected problems."""
    from db import queries
    from db.engine import SchemaError, check_revision, current_revision

    try:
        validate_url(url)
    except BadStoreURL as exc:
        return StoreStatus("error", url, str(exc))
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return StoreStatus("missing", url, f"No store at {path} yet.")
    eng = None
    try:
        eng = engine if engine is not None else open_engine(url)
        current = current_revision(eng)
        if current is None:
            # No mlaperf tables yet: an empty store (`mlaperf ingest` creates the schema).
            return StoreStatus("empty", url, "The store has no mlaperf schema or results yet.")
        check_revision(eng.url, current)  # the revision just read, not read again
        with Session(eng) as s:
            n_machines = len(queries.machines(s))
    except SchemaError as exc:
        return StoreStatus("outdated", url, str(exc))
    except Exception as exc:  # connection refused, auth, unreadable file: show it, don't crash
        return StoreStatus("error", url, f"cannot read the store at {redact(url)}: {exc}")
    finally:
        if engine is None and eng is not None:
            eng.dispose()
    if n_machines == 0:
        return StoreStatus("empty", url, "The store has no results yet.")
    return StoreStatus("ok", url)


def ingest_help(url: str) -> str:
    """Markdown telling a user how to fill the store."""
    db_arg = f" --db {redact(url)}"
    return (
        "Benchmark results get into the store with `mlaperf ingest`, from any asv results directory:\n\n"
        f"```bash\nmlaperf run{db_arg}                      # run this project's asv suites, or\n"
        f"mlaperf ingest .asv/results{db_arg}        # ingest existing asv results (v2 JSON files)\n```\n\n"
        "Then reload this page. Any asv project's results work, e.g. "
        "`mlaperf ingest path/to/asv-openblas/results`."
    )
