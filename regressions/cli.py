"""`mlaperf detect` and `mlaperf compare` (registered into the one `mlaperf` parser)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from db.models import REGRESSION_STATUSES
from regressions.compare import DEFAULT_ALPHA, compare_commits, exit_status
from regressions.config import ConfigError, Settings, load_settings
from regressions.report import MAX_BODY_CHARS, compare_json, compare_markdown, detect_table
from regressions.results import UsageError, machines_with, resolve_commit
from regressions.store import (
    DEFAULT_LOOKBACK,
    OPEN_STATUSES,
    DetectSummary,
    detect_store,
    regressions_frame,
)
from regressions.text_table import FORMATS, compare_text
from settings.args import add_db, add_thresholds_config
from settings.env import store_url

STATUSES = REGRESSION_STATUSES
# A `detect --json` record is a row of regressions_frame less these columns, with these renamed.
_NOT_LISTED = ["params_key", "message"]
_LISTED_AS = {"sha": "commit", "fixed_sha": "fixed_at"}


def _threshold(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 0.05 or 5%)") from None
    if not 0 < value < 10:
        raise argparse.ArgumentTypeError(f"must be in (0, 10), e.g. 0.05 for 5%; got {text!r}")
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    add_db(p)
    p.add_argument(
        "--threshold",
        type=_threshold,
        metavar="T",
        help="slowdown that counts, for every series (0.05 or 5%%); default: the configuration's, 5%%",
    )
    add_thresholds_config(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of the human-readable report")


def register(subparsers: argparse._SubParsersAction) -> None:
    d = subparsers.add_parser(
        "detect",
        help="flag regressions over the history of every series (incremental, idempotent)",
        description="Find steps in every series (benchmark x params x machine; each asv version of a "
        "benchmark on its own) over commits, store the regressions beyond the threshold at the commit "
        "where they begin, grouped per machine and commit range, and list the open ones. A step seen only "
        "in the newest run is 'suspect' until a later run or a re-run of its commit confirms it ('new') or "
        "refutes it ('transient'); one that came back is 'fixed'; open ones of benchmarks that no longer "
        "run are 'retired'. Re-running never flags a step twice; only series with results newer than the "
        "last run are re-examined, unless --full. Exit status: 0 (also when only suspects are open), 1 with "
        "--fail-on-new when this run flagged or confirmed a regression, 2 bad usage or input, 3 internal "
        "error. --list only lists what is stored (read-only: works on a store this process may not write). "
        "Rules: docs/detection.md.",
    )
    _add_common(d)
    d.add_argument("--machine", metavar="M", help="only this machine's series")
    d.add_argument("--full", action="store_true", help="re-examine every series over its whole history")
    d.add_argument(
        "--lookback",
        type=int,
        default=DEFAULT_LOOKBACK,
        metavar="N",
        help=f"commits an incremental run looks back over (default {DEFAULT_LOOKBACK})",
    )
    d.add_argument(
        "--status",
        action="append",
        choices=STATUSES,
        help="list regressions with this status (repeatable; default: suspect, new and acknowledged)",
    )
    d.add_argument("--all", action="store_true", help="list regressions of every status")
    d.add_argument(
        "--list",
        action="store_true",
        help="only list the stored regressions, re-examining nothing; opens the store read-only, so it works "
        "on a store this process may not write (a read-only folder or mount, a read-only database role)",
    )
    d.add_argument(
        "--fail-on-new",
        action="store_true",
        help="exit 1 when this run flagged or confirmed a regression (status new; suspects do not fail)",
    )
    d.set_defaults(func=detect_command)

    c = subparsers.add_parser(
        "compare",
        help="compare two commits (pull request head against base); exit 1 on regression or failure",
        description="Compare every series of BASE and HEAD on each machine that ran both. A regression is a "
        "slowdown beyond the threshold that is also significant (Mann-Whitney U on the samples, and the "
        "run-to-run noise of the series' history). Each series is improved, regressed, unchanged, failed "
        "(no result where it ran), new (only on HEAD), removed (only on BASE) or not run. Prints the "
        f"markdown of the PR comment (escaped, under {MAX_BODY_CHARS:,} characters: the least severe rows "
        "are left out first), or JSON with --json. Exit status: 0 no regression, 1 a regression or a "
        "failed benchmark, 2 bad usage or input (e.g. an unknown commit), 3 internal error.",
    )
    c.add_argument("base", metavar="BASE", help="base commit: full sha, unique prefix, or git ref")
    c.add_argument("head", metavar="HEAD", help="head commit: full sha, unique prefix, or git ref")
    _add_common(c)
    c.add_argument("--machine", metavar="M", help="machine (default: every machine with results at both)")
    c.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA, help=f"significance level (default {DEFAULT_ALPHA})"
    )
    c.add_argument("--repo", metavar="PATH", default=".", help="git repository for refs (default: .)")
    c.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="text: an aligned table, worst rows first (the default in a terminal); markdown: the PR comment "
        "(the default otherwise); json: every row (same as --json)",
    )
    c.add_argument(
        "--markdown-out", metavar="FILE", type=Path, help="also write the PR comment here (capped, as printed)"
    )
    c.add_argument(
        "--full-markdown-out",
        metavar="FILE",
        type=Path,
        help="also write the whole markdown report, every row, here (the CI artifact)",
    )
    c.add_argument("--json-out", metavar="FILE", type=Path, help="also write the JSON report (every row) here")
    c.set_defaults(func=compare_command)


def _fail(msg: str) -> int:
    print(f"mlaperf: error: {msg}", file=sys.stderr)
    return 2


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config).with_threshold(args.threshold)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def detect_command(args: argparse.Namespace) -> int:
    from db.engine import StoreError, ensure_schema, make_engine

    if args.list:
        return _list_command(args)
    try:
        settings = _settings(args)
        if args.lookback < 10:
            raise UsageError(f"--lookback: must be at least 10 commits; got {args.lookback}")
        engine = make_engine(args.db)
        ensure_schema(engine)
    except StoreError as exc:
        return _store_fail(exc, args.db)
    except (ConfigError, UsageError, ValueError, RuntimeError, SQLAlchemyError) as exc:
        return _fail(str(exc))
    try:
        with Session(engine) as session, session.begin():
            summary = detect_store(
                session,
                settings,
                machine=args.machine,
                full=args.full,
                lookback=args.lookback,
                progress=not args.json and sys.stderr.isatty(),
            )
        with Session(engine) as session:
            frame = _listed(session, args)
    except UsageError as exc:
        return _fail(str(exc))
    except SQLAlchemyError as exc:
        return _store_fail(exc, args.db)
    _print_listing(args, frame, _detect_summary_line(summary), summary.events())
    return 1 if args.fail_on_new and summary.alerting else 0


def _list_command(args: argparse.Namespace) -> int:
    """`detect --list`: the stored regressions as `detect` lists them, read through a read-only engine
    (``db.engine.make_engine(readonly=True)``); nothing is examined, so no record is ``new`` or has an event."""
    from db.engine import check_schema, make_engine

    for flag in ("full", "fail_on_new"):
        if getattr(args, flag):
            return _fail(f"--list re-examines nothing; --{flag.replace('_', '-')} has no meaning with it")
    try:
        engine = make_engine(args.db, readonly=True)
        check_schema(engine)
        with Session(engine) as session:
            frame = _listed(session, args)
    except SQLAlchemyError as exc:
        return _store_fail(exc, args.db)
    except (UsageError, ValueError, RuntimeError) as exc:
        return _fail(str(exc))
    _print_listing(args, frame, "detect --list: the stored regressions; nothing re-examined", {})
    return 0


def _listed(session: Session, args: argparse.Namespace) -> Any:
    statuses = STATUSES if args.all else tuple(args.status or OPEN_STATUSES)
    return regressions_frame(session, statuses=statuses, machine=args.machine)


def _print_listing(args: argparse.Namespace, frame: Any, headline: str, events: dict[int, str]) -> None:
    records = []
    for row in frame.drop(columns=_NOT_LISTED).rename(columns=_LISTED_AS).to_dict("records"):
        rec = {k: _clean(v) for k, v in row.items()}
        event = events.get(row["id"])
        rec["new"] = event == "flagged"  # flagged by this run (DetectSummary.events() puts it first)
        rec["event"] = event
        records.append(rec)
    if args.json:
        print(json.dumps(records, indent=2, allow_nan=False))
    else:
        print(headline)
        print(_grouped_table(records))


def _store_fail(exc: Exception, url: str | None) -> int:
    """A store `detect` cannot use, in one line (never SQL text); when the store can still be read, say
    that `detect --list` lists it."""
    from db.engine import StoreError, check_schema, display_url, first_line, make_engine, store_error

    url = store_url(url)
    err = exc if isinstance(exc, StoreError) else store_error(exc, url)
    if err is None:
        return _fail(f"database {display_url(url)}: {first_line(exc)}")  # the driver's line, never SQL text
    try:
        engine = make_engine(url, readonly=True)
        try:
            check_schema(engine)
        finally:
            engine.dispose()
    except (ValueError, RuntimeError, SQLAlchemyError):
        return _fail(str(err))
    return _fail(f"{err}; `mlaperf detect --list` lists the stored regressions without writing")


def _detect_summary_line(summary: DetectSummary) -> str:
    mode = "incremental" if summary.incremental else "full"
    counts = [
        f"{len(summary.new)} new regression(s) in {len(summary.groups)} new group(s)",
        f"{len(summary.confirmed)} confirmed",
        f"{len(summary.transient)} transient",
        f"{len(summary.fixed)} marked fixed",
        f"{len(summary.retired)} retired",
    ]
    return f"detect ({mode}): {summary.series_examined} series examined in {summary.seconds:.2f} s, " + ", ".join(
        counts
    )


def _grouped_table(records: list[dict[str, Any]]) -> str:
    """The regressions table, one block per alert group (machine, commit range, size, status)."""
    if not records:
        return detect_table(records)
    blocks: dict[Any, list[dict[str, Any]]] = {}
    for r in records:
        blocks.setdefault(r.get("group"), []).append(r)
    out = []
    for gid, rows in blocks.items():
        first = rows[0]
        where = f"{first['parent'][:10]}..{first['commit'][:10]}" if first.get("parent") else first["commit"][:10]
        wide = ", machine-wide" if first.get("machine_wide") else ""
        size = first.get("group_size") or len(rows)
        title = "no group" if gid is None else f"group {gid}"
        out.append(
            f"\n{title}: {first['machine']} at {where}, {size} series, {first.get('group_status') or first['status']}"
            f"{wide}"
        )
        out.append(detect_table(rows))
    return "\n".join(out).lstrip("\n")


def compare_command(args: argparse.Namespace) -> int:
    from db.engine import check_schema, display_url, make_engine

    try:
        settings = _settings(args)
        if not 0 < args.alpha < 1:
            raise UsageError(f"--alpha: must be in (0, 1); got {args.alpha}")
        if args.json and args.format not in (None, "json"):
            raise UsageError(f"--json and --format {args.format} ask for two formats; give one")
        for flag in ("markdown_out", "full_markdown_out", "json_out"):
            _check_writable(getattr(args, flag), "--" + flag.replace("_", "-"))
        engine = make_engine(args.db, readonly=True)
        check_schema(engine)
    except (ConfigError, UsageError, ValueError, RuntimeError, SQLAlchemyError) as exc:
        return _fail(str(exc))
    try:
        with Session(engine) as session:
            base = resolve_commit(session, args.base, "BASE", args.repo)
            head = resolve_commit(session, args.head, "HEAD", args.repo)
            both = machines_with(session, [base.id, head.id])
            if args.machine is not None:
                if args.machine not in both:
                    raise UsageError(
                        f"--machine: {args.machine!r} has no results at both {base.sha[:12]} and "
                        f"{head.sha[:12]} (machines with both: {', '.join(both) or 'none'})"
                    )
                machines = [args.machine]
            else:
                machines = both
                if not machines:
                    raise UsageError(
                        f"no machine has results at both BASE {base.sha[:12]} and HEAD {head.sha[:12]}"
                    )
            comparisons = compare_commits(session, base, head, machines=machines, settings=settings, alpha=args.alpha)
            messages = {"base_message": base.message, "head_message": head.message}
    except UsageError as exc:
        return _fail(str(exc))
    except SQLAlchemyError as exc:
        return _fail(f"database {display_url(engine.url)}: {exc}")
    note = (
        f"threshold {settings.default_threshold:.0%}"
        if not settings.thresholds
        else f"threshold {settings.default_threshold:.0%}, per-benchmark overrides from {settings.source}"
    )
    report = {"base": base.sha, "head": head.sha, "machines": machines, "threshold_note": note, **messages}
    md = compare_markdown(comparisons, **report)
    js = compare_json(comparisons)
    try:
        if args.markdown_out:
            args.markdown_out.write_text(md, encoding="utf-8")
        if args.full_markdown_out:
            args.full_markdown_out.write_text(compare_markdown(comparisons, **report, max_chars=None), encoding="utf-8")
        if args.json_out:
            args.json_out.write_text(js + "\n", encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write the report: {exc}")
    shown = args.format or ("json" if args.json else "text" if sys.stdout.isatty() else "markdown")
    if shown == "text":
        print(compare_text(comparisons, **{k: report[k] for k in ("base", "head", "machines", "threshold_note")}),
              end="")
    else:
        print(js if shown == "json" else md, end="\n" if shown == "json" else "")
    return exit_status(comparisons)


def _check_writable(path: Path | None, flag: str) -> None:
    """Fail before the work, naming the flag, when an output file cannot be written."""
    if path is None:
        return
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{flag}: {path} is a directory")
    if not parent.is_dir():
        raise UsageError(f"{flag}: no such directory: {parent}")
