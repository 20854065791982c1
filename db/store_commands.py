"""Command line of the store: ``mlaperf ingest`` and ``mlaperf db upgrade|current|downgrade``.

``register(subparsers)`` adds the commands to mlaperf's parser (``mlaperf.cli``, the one entry point;
``settings.exits.dispatch`` maps a crash to exit status 3). Exit status (docs/ingest.md): 0 success, 2 bad
usage or input (a refused file, a store that cannot be used: corrupted, not an mlaperf store, missing
permission, older schema), 3 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys

from db.asvformat import show_path
from db.engine import (
    StoreError,
    current_revision,
    display_url,
    downgrade,
    first_line,
    head_revision,
    make_engine,
    missing_sqlite_file,
    upgrade,
)
from db.expected import Expected
from db.ingest import ingest_paths
from settings import exits
from settings.args import add_db, add_git_repo
from settings.env import store_url

DEFAULT_RESULTS = ".asv/results"  # asv's default results_dir, read from the current directory


def cmd_ingest(args: argparse.Namespace) -> int:
    url = store_url(args.db)
    progress: bool | str = False if args.quiet else ("always" if args.progress else True)
    if not args.paths and not os.path.lexists(DEFAULT_RESULTS):  # said before any store is created
        print(f"mlaperf: error: no asv results at {DEFAULT_RESULTS} (pass PATH: an asv results folder, a "
              "machine's folder or results files)", file=sys.stderr)  # fmt: skip
        return exits.USAGE
    try:
        expect = Expected.read(args.only_commits, args.only_machine)  # a bad file is said before any store is made
        engine = make_engine(url)
        try:
            summary = ingest_paths(engine, args.paths or [DEFAULT_RESULTS], progress=progress, repo=args.repo,
                                   expect=expect)
        finally:
            engine.dispose()
    except (ValueError, StoreError) as exc:
        return _report(exc)
    for path, reason in summary.refused:
        print(f"REFUSED {path}: {reason}", file=sys.stderr)
    for path, reason in summary.errors:
        print(f"ERROR {path}: {reason}", file=sys.stderr)
    for note in (summary.order_note(), summary.unknown_note(), summary.environments_note(),
                 summary.machine_names_note()):
        if note is not None:
            print(f"WARNING {note}", file=sys.stderr)
    if not args.quiet or summary.failed:
        print(summary.line(display_url(url)))
    return summary.exit_status


def _revision_now(url: str) -> str | None:
    """The store's schema revision without creating it: None for a missing SQLite file or an empty database."""
    if missing_sqlite_file(url):
        return None
    engine = make_engine(url, readonly=True)
    try:
        return current_revision(engine)
    finally:
        engine.dispose()


def _downgrade_refusal(url: str, revision: str, yes: bool) -> str | None:
    """Why a downgrade is refused without --yes (None to go ahead): every downgrade drops what the newer
    revisions added (0001's drops every table), so one that has something to drop needs it said."""
    current = None if yes else _revision_now(url)
    if current is None:
        return None
    shown = display_url(url)
    if revision == "base":
        return (f"`mlaperf db downgrade base` drops every table of {shown}, with all its results, commits and "
                "regressions; pass --yes to do it")  # fmt: skip
    return (f"downgrading {shown} from schema revision {current} to {revision} drops the tables and columns the "
            "newer revisions added, with their data; pass --yes to do it")  # fmt: skip


def _migrate(args: argparse.Namespace, url: str) -> int:
    why = _downgrade_refusal(url, args.revision, args.yes) if args.db_command == "downgrade" else None
    if why is not None:
        print(f"mlaperf: error: {why}", file=sys.stderr)
        return exits.USAGE
    (upgrade if args.db_command == "upgrade" else downgrade)(url, args.revision)
    engine = make_engine(url)
    try:
        now = current_revision(engine)
    finally:
        engine.dispose()
    state = f"at schema revision {now}" if now is not None else "empty (base): no mlaperf tables"
    print(f"database at {display_url(url)} is {state}")
    return exits.OK


def cmd_db(args: argparse.Namespace) -> int:
    url = store_url(args.db)
    try:
        if args.db_command in ("upgrade", "downgrade"):
            return _migrate(args, url)
        if missing_sqlite_file(url):
            print(f"none (no database at {display_url(url)} yet: `mlaperf ingest` or `mlaperf db upgrade` creates it)")
            return exits.OK
        current = _revision_now(url)
        head = head_revision()
        state = "up to date" if current == head else f"needs upgrade to {head}"
        print(f"{current or 'none (empty database)'} ({state})")
    except (ValueError, StoreError) as exc:
        return _report(exc)
    return exits.OK


def _report(exc: Exception) -> int:
    """Print a store command's error (bad usage, or a store that cannot be used) as one line; exit 2."""
    print(f"mlaperf: error: {show_path(first_line(exc))}", file=sys.stderr)
    return exits.USAGE


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``ingest`` and ``db`` to mlaperf's subcommands."""
    ingest = subparsers.add_parser(
        "ingest",
        help="load asv results into the database",
        description=(
            "Load asv results (format version 2) into the database: an asv results directory, one "
            "machine's directory, or results files. Each file is stored whole or not at all; files already "
            "stored are skipped. A file that is not valid asv output or is outside the store's limits "
            "(docs/ingest.md) is refused with its path and reason and changes nothing, while the other files "
            "are stored. Exit status: 0 all stored, 2 a file refused or the store unusable, 3 internal error."
        ),
    )
    ingest.add_argument("paths", nargs="*", default=[], metavar="PATH", help=f"default: {DEFAULT_RESULTS}")
    add_db(ingest)
    add_git_repo(ingest)
    ingest.add_argument("--quiet", "-q", action="store_true", help="no progress bar, no summary unless a file failed")
    ingest.add_argument("--progress", action="store_true", help="show the progress bar even when not on a terminal")
    ingest.add_argument("--only-commits", metavar="FILE", default=None,
                        help="refuse results of commits not listed in FILE (full SHAs, one a line; the nightly passes "
                        "its plan)")
    ingest.add_argument("--only-machine", metavar="NAME", default=None,
                        help="refuse results of any other asv machine (the nightly passes MLAPERF_MACHINE)")
    ingest.set_defaults(func=cmd_ingest)

    db = subparsers.add_parser("db", help="database schema: upgrade, current, downgrade")
    db_sub = db.add_subparsers(dest="db_command", metavar="{upgrade,current,downgrade}")
    up = db_sub.add_parser("upgrade", help="migrate the database schema to this mlaperf's revision")
    up.add_argument("revision", nargs="?", default="head", help="target revision (default: head)")
    add_db(up)
    current = db_sub.add_parser("current", help="show the database's schema revision")
    add_db(current)
    down = db_sub.add_parser("downgrade", help="migrate the database schema down (drops newer tables' data)")
    down.add_argument("revision", help="target revision, e.g. -1, 0001 or base (base: no tables at all)")
    down.add_argument("--yes", action="store_true", help="drop the data the downgrade drops (refused without it)")
    add_db(down)
    for parser in (up, current, down):
        parser.set_defaults(func=cmd_db)
    db.set_defaults(func=lambda args: (db.print_help(), exits.USAGE)[1])
