"""`mlaperf detect` and `mlaperf compare` (registered into the one `mlaperf` parser)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from db.models import REGRESSION_STATUSES
from regressions.compare import DEFAULT_ALPHA, compare_commits, exit_status
from regressions.compare_sides import environments_apart
from regressions.config import MAX_THRESHOLD, ConfigError, Settings, load_settings
from regressions.failing import failing_and_unrun, failing_records, failing_series, failing_text
from regressions.listing import detect_document, records, regressions_frame
from regressions.policy import OPEN_STATUSES, kind_suffix
from regressions.report import (
    MAX_BODY_CHARS,
    compare_json,
    compare_markdown,
    detect_table,
    environments_note,
    reversed_note,
)
from regressions.results import UsageError, commit_positions, machine_id, machines_with, resolve_commit
from regressions.store import DEFAULT_LOOKBACK, DetectSummary, detect_store
from regressions.text_table import FORMATS, compare_text
from regressions.units import fmt_percent, plural, terminal_text
from settings.args import add_db, add_git_repo, add_thresholds_config, fraction_type
from settings.env import store_url

STATUSES = REGRESSION_STATUSES


def _add_common(p: argparse.ArgumentParser) -> None:
    add_db(p)
    p.add_argument(
        "--threshold",
        type=fraction_type(MAX_THRESHOLD),
        metavar="T",
        help="slowdown that counts, for every series (0.05 or 5%%); default: the configuration's, 5%%",
    )
    add_thresholds_config(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of the human-readable report")


def register(subparsers: argparse._SubParsersAction) -> None:
    _register_detect(subparsers)
    _register_compare(subparsers)


def _register_detect(subparsers: argparse._SubParsersAction) -> None:
    d = subparsers.add_parser(
        "detect",
        help="flag regressions over the history of every series (incremental, idempotent)",
        description="Find steps in every series (benchmark x params x machine; each asv version of a "
        "benchmark on its own) over commits, store the regressions beyond the threshold at the commit "
        "where they begin, grouped per machine and commit range, and list the open ones. A step seen only "
        "in the newest run is 'suspect' until a later run or a re-run of its commit confirms it ('new') or "
        "refutes it ('transient'); one whose level came back for 3 commits is 'fixed'; open ones of an asv "
        "version that ended or of benchmarks that no longer run are 'retired'; each closed one keeps why "
        "(close_reason) and where (closed_at). Night by night ends in the statuses of --full. Re-running never "
        "flags a step twice; only series with results newer than the last run are re-examined, unless --full. "
        "--json prints a versioned document (version, summary, groups, regressions). Exit status: 0 (also "
        "when only suspects are open), 1 with --fail-on-new when this run flagged or confirmed a regression, "
        "2 bad usage or input, 3 internal error. --list only lists what is stored (read-only: works on a "
        "store this process may not write). Rules: docs/detection.md.",
    )
    _add_common(d)
    d.add_argument("--machine", metavar="M", help="only this machine's series")
    d.add_argument("--full", action="store_true", help="re-examine every series over its whole history")
    d.add_argument(
        "--lookback",
        type=int,
        default=None,  # None: not given (`--list` refuses it given); DEFAULT_LOOKBACK then
        metavar="N",
        help=f"commits an incremental run looks back over (default {DEFAULT_LOOKBACK})",
    )
    d.add_argument(
        "--status",
        action="append",
        choices=STATUSES,
        help="list regressions with this status (repeatable; default: suspect, new and acknowledged)",
    )
    d.add_argument("--all", action="store_true", help="list regressions of every status (not with --status)")
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
    d.add_argument(
        "--dry-run",
        action="store_true",
        help="examine and list as detect would, then store nothing: what another --threshold or --config would "
        "do to the stored alerts, without doing it (a run that stores judges every alert by its thresholds)",
    )
    d.set_defaults(func=detect_command)


def _register_compare(subparsers: argparse._SubParsersAction) -> None:
    c = subparsers.add_parser(
        "compare",
        help="compare two commits (pull request head against base); exit 1 on regression, failure or missing case",
        description="Compare every series of BASE and HEAD on each machine that ran both. A regression is a "
        "slowdown beyond the threshold that is also significant (Mann-Whitney U on the samples, and with 10 or "
        "more earlier commits the run-to-run noise of the series' history; with neither, asv's rule: 99% "
        "intervals apart, one run's noise, so runs on other days or runners may differ by more). "
        "Each series is improved, regressed, unchanged, failed "
        "(no result where it ran, and none on HEAD), repaired (failed on BASE, a result on HEAD: never fails), "
        "missing (measured on BASE, absent or skipped on HEAD while its asv module "
        "ran, the removal not declared by a new asv version or [tool.mlaperf] removed), new (only on HEAD), "
        "removed (only on BASE: declared, failed there, or its whole asv module absent on HEAD without "
        "--whole-suite), not run, changed (the benchmark's asv version differs: "
        "shown, not judged) or untested (beyond the threshold with one value a side and no history: never fails; "
        "a memory benchmark is judged by the threshold alone). Prints an aligned text table in a terminal (worst rows "
        "first), else the markdown of the PR comment (escaped, under "
        f"{MAX_BODY_CHARS:,} characters: the least severe rows are left out first); --format picks one, "
        "--json is --format json. Exit status: 0 no regression, 1 a regression, a missing or a "
        "failed benchmark, 2 bad usage or input (e.g. an unknown commit), 3 internal error.",
    )
    c.add_argument("base", metavar="BASE", help="base commit: full sha, unique prefix, or git ref")
    c.add_argument("head", metavar="HEAD", help="head commit: full sha, unique prefix, or git ref")
    _add_common(c)
    c.add_argument("--machine", metavar="M", help="machine (default: every machine with results at both)")
    c.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help=f"significance level (default {DEFAULT_ALPHA})")
    c.add_argument("--whole-suite", action="store_true",
                   help="HEAD ran the whole suite (a pull request's run, scripts/pr.sh): a benchmark measured on BASE "
                   "and absent on HEAD is missing even where its whole asv module is absent (deleted, or failing to "
                   "import), unless the removal is declared; by default a module absent altogether is a partial run "
                   "(asv run --bench), which says nothing")  # fmt: skip
    add_git_repo(c)
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


def _measured_where(session: Session, base: Any, head: Any) -> str:
    """Where each side was measured, for a message that says why nothing pairs: 'BASE on a, b; HEAD on c'."""
    sides = [(side, machines_with(session, [c.id])) for side, c in (("BASE", base), ("HEAD", head))]
    return "; ".join(f"{side} on {', '.join(names) or 'no machine'}" for side, names in sides)


def _fail(msg: str) -> int:
    print(f"mlaperf: error: {msg}", file=sys.stderr)
    return 2


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings(args.config).with_threshold(args.threshold)


def _write(text: str) -> None:
    """Print to stdout; a reader that went away (``mlaperf detect | head``) ends the output quietly: the
    rest goes to /dev/null, so neither this write nor the interpreter's last flush raises."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def detect_command(args: argparse.Namespace) -> int:
    from db.engine import StoreError, ensure_schema, make_engine

    if args.all and args.status:
        return _fail("--all lists every status and --status some of them; give one")
    if args.list:
        return _list_command(args)
    lookback = DEFAULT_LOOKBACK if args.lookback is None else args.lookback
    try:
        settings = _settings(args)
        if lookback < 10:
            raise UsageError(f"--lookback: must be at least 10 commits; got {lookback}")
        # detect writes into a store that exists: a missing SQLite file is the readers' "no database at ..."
        # (the read-only opening's check), never a new empty store that passes --fail-on-new.
        make_engine(args.db, readonly=True).dispose()
        engine = make_engine(args.db)
        ensure_schema(engine)
    except StoreError as exc:
        return _store_fail(exc, args.db)
    except (ConfigError, UsageError, ValueError, RuntimeError, SQLAlchemyError) as exc:
        return _fail(str(exc))
    try:
        with Session(engine) as session:
            session.begin()
            summary = detect_store(
                session,
                settings,
                machine=args.machine,
                full=args.full,
                lookback=lookback,
                progress=not args.json and sys.stderr.isatty(),
            )
            if args.dry_run:  # listed from this run's own, uncommitted rows, then dropped
                line = "(dry run: nothing stored) " + _detect_summary_line(summary)
                _print_listing(session, args, line, summary.events(), summary.to_json())
                session.rollback()
                return 1 if args.fail_on_new and summary.alerting else 0
            session.commit()
        with Session(engine) as session:
            _print_listing(session, args, _detect_summary_line(summary), summary.events(), summary.to_json())
    except UsageError as exc:
        return _fail(str(exc))
    except SQLAlchemyError as exc:
        return _store_fail(exc, args.db)
    return 1 if args.fail_on_new and summary.alerting else 0


def _list_command(args: argparse.Namespace) -> int:
    """`detect --list`: the stored regressions as `detect` lists them, read through a read-only engine
    (``db.engine.make_engine(readonly=True)``); nothing is examined, so no record is ``new`` or has an event."""
    from db.engine import check_schema, make_engine

    # Options that only steer an examination: refused rather than silently ignored.
    for flag in ("full", "fail_on_new", "config", "threshold", "lookback", "dry_run"):
        if getattr(args, flag) not in (None, False):
            return _fail(f"--list re-examines nothing; --{flag.replace('_', '-')} has no meaning with it")
    try:
        engine = make_engine(args.db, readonly=True)
        check_schema(engine)
        with Session(engine) as session:
            _print_listing(session, args, "detect --list: the stored regressions; nothing re-examined", {}, None)
    except SQLAlchemyError as exc:
        return _store_fail(exc, args.db)
    except (UsageError, ValueError, RuntimeError) as exc:
        return _fail(str(exc))
    return 0


def _print_listing(
    session: Session, args: argparse.Namespace, headline: str, events: dict[int, str], summary: dict[str, Any] | None
) -> None:
    """The listed regressions: the versioned JSON document (``listing.detect_document``) or the grouped
    table."""
    statuses = STATUSES if args.all else tuple(args.status or OPEN_STATUSES)
    if args.machine is not None:
        machine_id(session, args.machine)  # an unknown name is an error, not an empty listing
    frame = regressions_frame(session, statuses=statuses, machine=args.machine)
    if args.json:  # the nightly also needs the series that stopped running while failing: both in one pass
        failing, unrun = failing_and_unrun(session, args.machine)
    else:
        failing, unrun = failing_series(session, args.machine), []
    if args.json:
        document = {**detect_document(session, frame, events, summary), "failing": failing_records(failing),
                    "failing_unrun": failing_records(unrun),
                    "failing_machine": args.machine}  # the one machine examined (null: every machine)
        _write(json.dumps(document, indent=2, allow_nan=False))
    elif frame.empty:  # say what the listing left out, so "none listed" never reads as "none found"
        others = [s for s in STATUSES if s not in statuses]
        left = regressions_frame(session, statuses=others, machine=args.machine) if others else frame
        closed = {str(k): int(v) for k, v in left["status"].value_counts().items()} if not left.empty else {}
        listed = "open" if set(statuses) == set(OPEN_STATUSES) else "/".join(statuses)
        _write(headline + "\n" + detect_table([], closed=closed, listed=listed) + failing_text(failing))
    else:
        _write(headline + "\n" + _grouped_table(records(frame, events)) + failing_text(failing))


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
    """One line of what this run did; each regression is counted once, under what happened to it: a step
    flagged already confirmed or fixed is 'flagged', its status now in brackets, and the counts after
    'earlier alerts' are of alerts stored before this run (two different 'fixed' otherwise read alike)."""
    mode = "incremental" if summary.incremental else "full"
    flagged = ", ".join(f"{n} {s}" for s, n in sorted(summary.flagged_status.items()))
    counts = [
        f"{len(summary.new)} flagged"
        + (f" (status now: {flagged})" if flagged else "")
        + f" in {plural(len(summary.groups), 'new group')}; earlier alerts: {len(summary.confirmed)} confirmed",
        f"{len(summary.transient)} transient",
        f"{len(summary.fixed)} fixed",
        f"{len(summary.retired)} retired",
    ]
    if summary.reopened:
        counts.append(f"{len(summary.reopened)} reopened")
    if summary.updated:
        counts.append(f"{len(summary.updated)} with numbers updated")
    return f"detect ({mode}): {summary.series_examined} series examined in {summary.seconds:.2f} s, " + ", ".join(
        counts
    )



def _grouped_table(rows: list[dict[str, Any]]) -> str:
    """The regressions table, one block per alert group: its machine, its own commit range (where the
    culprit of every member lies), the members listed here (fixed and other closed ones said apart, and
    members not listed), its status and kind."""
    if not rows:
        return detect_table(rows)
    blocks: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        blocks.setdefault(r.get("group"), []).append(r)
    out = []
    for gid, members in blocks.items():
        first = members[0]
        head, parent = first.get("group_commit") or first["commit"], first.get("group_parent")
        if gid is None:
            head, parent = first["commit"], first.get("parent")
        where = f"{parent[:10]}..{head[:10]}" if parent else head[:10]
        closed = {}
        for r in members:
            if r["status"] not in OPEN_STATUSES:
                closed[r["status"]] = closed.get(r["status"], 0) + 1
        size = f"{len(members)} series" + (
            " (" + ", ".join(f"{n} {s}" for s, n in sorted(closed.items())) + ")" if closed else ""
        )
        hidden = int(first.get("group_size") or 0) - len(members) if gid is not None else 0
        if hidden > 0:
            size += f", {hidden} more not listed"
        title = "no group" if gid is None else f"group {gid}"
        status = first.get("group_status") or first["status"]
        out.append(
            f"\n{title}: {terminal_text(first['machine'])} at {where}, {size}, {status}"
            f"{kind_suffix(first.get('group_kind'))}"
        )
        out.append(detect_table(members))
    return "\n".join(out).lstrip("\n")


def _warn_if_reversed(session: Session, base: Any, head: Any) -> None:
    """Say so when BASE comes after HEAD in history: the report reads head / base, so the newer code's slowdown
    would read as an improvement (``compare DEC OCT`` listed two improvements without a word; a review)."""
    pos = commit_positions(session)
    if pos.get(base.id, -1) > pos.get(head.id, -1):
        print(f"mlaperf compare: warning: {reversed_note(base.sha, head.sha)}", file=sys.stderr)


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
            _warn_if_reversed(session, base, head)
            both = machines_with(session, [base.id, head.id])
            where = _measured_where(session, base, head)
            if args.machine is not None:
                machine_id(session, args.machine)  # an unknown name is named as such, with the known ones
                if args.machine not in both:
                    raise UsageError(f"--machine: {args.machine!r} has no results at both {base.sha[:12]} and "
                                     f"{head.sha[:12]} (machines with both: {', '.join(both) or 'none'}; {where})")
                machines = [args.machine]
            else:
                machines = both
                if not machines:
                    raise UsageError(f"no machine has results at both BASE {base.sha[:12]} and HEAD "
                                     f"{head.sha[:12]} ({where})")
            comparisons = compare_commits(session, base, head, machines=machines, settings=settings, alpha=args.alpha,
                                          whole_suite=args.whole_suite)  # fmt: skip
            for machine in machines:
                if apart := environments_apart(session, base.id, head.id, machine):
                    print(f"mlaperf compare: warning: {terminal_text(environments_note(machine, apart))}",
                          file=sys.stderr)
            messages = {"base_message": base.message, "head_message": head.message}
    except UsageError as exc:
        return _fail(str(exc))
    except SQLAlchemyError as exc:
        return _fail(f"database {display_url(engine.url)}: {exc}")
    note = (
        f"threshold {fmt_percent(settings.default_threshold)}"
        if not settings.thresholds
        else f"threshold {fmt_percent(settings.default_threshold)}, per-benchmark overrides from {settings.source}"
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
        _write(compare_text(comparisons, **{k: report[k] for k in ("base", "head", "machines", "threshold_note")})
               .rstrip("\n"))  # fmt: skip
    else:
        _write(js if shown == "json" else md.rstrip("\n"))
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
