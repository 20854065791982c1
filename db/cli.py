"""Command line of the store: ``mlaperf ingest`` and ``mlaperf db upgrade|current|downgrade``.

``register(subparsers)`` adds the commands to mlaperf's parser; ``python -m db.cli`` runs them alone.
Exit status: 0 success, 1 a file failed to ingest or the schema is not usable, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from db.engine import (
    SchemaError,
    current_revision,
    default_url,
    display_url,
    downgrade,
    head_revision,
    make_engine,
    upgrade,
)
from db.ingest import ingest_paths

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="SQLAlchemy database URL (default: $MLAPERF_DB, else sqlite:///.mlaperf/mlaperf.sqlite)",
    )


def _error(message: str) -> None:
    print(f"mlaperf: error: {message}", file=sys.stderr)


def cmd_ingest(args: argparse.Namespace) -> int:
    url = args.db or default_url()
    progress: bool | str = False if args.quiet else ("always" if args.progress else True)
    try:
        engine = make_engine(url)
    except ValueError as exc:
        return _report(exc, url)
    try:
        summary = ingest_paths(engine, args.paths, progress=progress, repo=args.repo)
    except (FileNotFoundError, ValueError, SchemaError, OperationalError) as exc:
        return _report(exc, url)
    finally:
        engine.dispose()
    for path, reason in summary.failed:
        print(f"FAILED {path}: {reason}", file=sys.stderr)
    if not args.quiet or summary.failed:
        print(f"{summary.line()} into {display_url(url)}")
    return EXIT_OK if summary.ok else EXIT_FAILED


def cmd_db(args: argparse.Namespace) -> int:
    url = args.db or default_url()
    try:
        if args.db_command in ("upgrade", "downgrade"):
            migrate = upgrade if args.db_command == "upgrade" else downgrade
            migrate(url, args.revision)
            engine = make_engine(url)
            try:
                print(f"database at {display_url(url)} is at schema revision {current_revision(engine)}")
            finally:
                engine.dispose()
        else:
            if url.startswith("sqlite") and _missing_sqlite_file(url):
                print(
                    f"none (no database at {display_url(url)} yet: `mlaperf ingest` or `mlaperf db upgrade` creates it)"
                )
                return EXIT_OK
            engine = make_engine(url, readonly=url.startswith("sqlite"))
            try:
                current = current_revision(engine)
            finally:
                engine.dispose()
            head = head_revision()
            state = "up to date" if current == head else f"needs upgrade to {head}"
            print(f"{current or 'none (empty database)'} ({state})")
    except (ValueError, SchemaError, OperationalError) as exc:
        return _report(exc, url)
    return EXIT_OK


def _report(exc: Exception, url: str) -> int:
    """Print a store command's error; return its exit status (bad input is usage, the rest a failure)."""
    if isinstance(exc, OperationalError):
        _error(f"cannot use database {display_url(url)}: {str(exc.orig).strip() or exc}")
        return EXIT_FAILED
    _error(str(exc))
    return EXIT_FAILED if isinstance(exc, SchemaError) else EXIT_USAGE


def _missing_sqlite_file(url: str) -> bool:
    try:
        database = make_url(url).database
    except ArgumentError:
        return False
    return (
        bool(database) and database != ":memory:" and not database.startswith("file:") and not Path(database).exists()
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``ingest`` and ``db`` to mlaperf's subcommands."""
    ingest = subparsers.add_parser(
        "ingest",
        help="load asv results into the database",
        description=(
            "Load asv results (format version 2) into the database: an asv results directory, one "
            "machine's directory, or results files. Files already stored are skipped; a broken file is "
            "reported and changes nothing."
        ),
    )
    ingest.add_argument("paths", nargs="*", default=[".asv/results"], metavar="PATH", help="default: .asv/results")
    _add_db_option(ingest)
    ingest.add_argument(
        "--repo",
        metavar="DIR",
        default=None,
        help="git repository of the benchmarked project, for commit messages/authors/parents "
        "(default: the repository containing the current directory)",
    )
    ingest.add_argument("--quiet", "-q", action="store_true", help="no progress bar, no summary unless a file failed")
    ingest.add_argument("--progress", action="store_true", help="show the progress bar even when not on a terminal")
    ingest.set_defaults(func=cmd_ingest)

    db = subparsers.add_parser("db", help="database schema: upgrade, current, downgrade")
    db_sub = db.add_subparsers(dest="db_command", metavar="{upgrade,current,downgrade}")
    up = db_sub.add_parser("upgrade", help="migrate the database schema to this mlaperf's revision")
    up.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    _add_db_option(up)
    current = db_sub.add_parser("current", help="show the database's schema revision")
    _add_db_option(current)
    down = db_sub.add_parser("downgrade", help="migrate the database schema down (drops newer tables' data)")
    down.add_argument("revision", help="target revision, e.g. -1, 0001 or base")
    _add_db_option(down)
    for parser in (up, current, down):
        parser.set_defaults(func=cmd_db)
    db.set_defaults(func=lambda args: (db.print_help(), EXIT_USAGE)[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlaperf", description="mlaperf store commands")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
