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

from regressions.compare import DEFAULT_ALPHA, Comparison, SeriesPair, compare_pair
from regressions.config import ConfigError, Settings, load_settings
from regressions.direction import infer_direction
from regressions.report import compare_json, compare_markdown, detect_table
from regressions.results import UsageError, history_noise, machines_with, resolve_commit, results_at
from regressions.store import (
    DEFAULT_LOOKBACK,
    OPEN_STATUSES,
    detect_store,
    regressions_frame,
)

STATUSES = ("new", "acknowledged", "fixed", "ignored")


def _threshold(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 0.05 or 5%)") from None
    if not 0 < value < 10:
        raise argparse.ArgumentTypeError(f"must be in (0, 10), e.g. 0.05 for 5%; got {text!r}")
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", metavar="URL", help="database URL (default: $MLAPERF_DB or sqlite:///.mlaperf/mlaperf.sqlite)"
    )
    p.add_argument(
        "--threshold",
        type=_threshold,
        metavar="T",
        help="slowdown that counts, for every series (0.05 or 5%%); default: the configuration's, 5%%",
    )
    p.add_argument(
        "--config",
        metavar="PATH",
        help="mlaperf.toml or pyproject.toml with [tool.mlaperf.thresholds]/[directions] "
        "(default: ./mlaperf.toml, else ./pyproject.toml)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the human-readable report")


def register(subparsers: argparse._SubParsersAction) -> None:
    d = subparsers.add_parser(
        "detect",
        help="flag regressions over the history of every series (incremental, idempotent)",
        description="Find steps in every series (benchmark x params x machine) over commits, store the "
        "regressions beyond the threshold at the commit where they begin, mark those that came back as "
        "fixed, and list the open ones (new, acknowledged). Re-running never flags a step twice; only "
        "series with results newer than the last run are re-examined, unless --full.",
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
        help="list regressions with this status (repeatable; default: new and acknowledged)",
    )
    d.add_argument("--all", action="store_true", help="list regressions of every status")
    d.add_argument("--fail-on-new", action="store_true", help="exit 1 when this run flagged a new regression")
    d.set_defaults(func=detect_command)

    c = subparsers.add_parser(
        "compare",
        help="compare two commits (pull request head against base); exit 1 on regression",
        description="Compare every series measured at both BASE and HEAD. A regression is a slowdown beyond "
        "the threshold that is also significant (Mann-Whitney U on the samples, and the run-to-run noise "
        "of the series' history). Prints markdown for a PR comment, or JSON with --json. "
        "Exit status: 1 when any regression, 0 when none, 2 on bad usage (e.g. an unknown commit).",
    )
    c.add_argument("base", metavar="BASE", help="base commit: full sha, unique prefix, or git ref")
    c.add_argument("head", metavar="HEAD", help="head commit: full sha, unique prefix, or git ref")
    _add_common(c)
    c.add_argument("--machine", metavar="M", help="machine (default: every machine with results at both)")
    c.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA, help=f"significance level (default {DEFAULT_ALPHA})"
    )
    c.add_argument("--repo", metavar="PATH", default=".", help="git repository for refs (default: .)")
    c.add_argument("--markdown-out", metavar="FILE", type=Path, help="also write the markdown report here")
    c.add_argument("--json-out", metavar="FILE", type=Path, help="also write the JSON report here")
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
    from db.engine import display_url, ensure_schema, make_engine

    try:
        settings = _settings(args)
        if args.lookback < 10:
            raise UsageError(f"--lookback: must be at least 10 commits; got {args.lookback}")
        engine = make_engine(args.db)
        ensure_schema(engine)
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
        statuses = STATUSES if args.all else tuple(args.status or OPEN_STATUSES)
        with Session(engine) as session:
            frame = regressions_frame(session, statuses=statuses, machine=args.machine)
    except UsageError as exc:
        return _fail(str(exc))
    except SQLAlchemyError as exc:
        return _fail(f"database {display_url(engine.url)}: {exc}")
    new = set(summary.new)
    records = []
    for row in frame.to_dict("records"):
        rec = {k: _clean(v) for k, v in row.items()}
        rec["new"] = row["id"] in new
        records.append(rec)
    if args.json:
        print(json.dumps(records, indent=2, allow_nan=False))
    else:
        mode = "incremental" if summary.incremental else "full"
        print(
            f"detect ({mode}): {summary.series_examined} series examined in {summary.seconds:.2f} s, "
            f"{len(summary.new)} new regression(s), {len(summary.fixed)} marked fixed"
        )
        print(detect_table(records))
    return 1 if args.fail_on_new and summary.new else 0


def compare_command(args: argparse.Namespace) -> int:
    from db.engine import check_schema, display_url, make_engine

    try:
        settings = _settings(args)
        if not 0 < args.alpha < 1:
            raise UsageError(f"--alpha: must be in (0, 1); got {args.alpha}")
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
            comparisons = _compare(session, settings, base, head, machines, args.alpha)
    except UsageError as exc:
        return _fail(str(exc))
    except SQLAlchemyError as exc:
        return _fail(f"database {display_url(engine.url)}: {exc}")
    note = (
        f"threshold {settings.default_threshold:.0%}"
        if not settings.thresholds
        else f"threshold {settings.default_threshold:.0%}, per-benchmark overrides from {settings.source}"
    )
    md = compare_markdown(comparisons, base=base.sha, head=head.sha, machines=machines, threshold_note=note)
    js = compare_json(comparisons)
    if args.markdown_out:
        args.markdown_out.write_text(md, encoding="utf-8")
    if args.json_out:
        args.json_out.write_text(js + "\n", encoding="utf-8")
    print(js if args.json else md, end="\n" if args.json else "")
    return 1 if any(c.regression for c in comparisons) else 0


def _compare(
    session: Session, settings: Settings, base: Any, head: Any, machines: list[str], alpha: float
) -> list[Comparison]:
    out: list[Comparison] = []
    for machine in machines:
        b = results_at(session, base.id, machine)
        h = results_at(session, head.id, machine)
        if b.empty or h.empty:
            continue
        merged = b.merge(h, on=["benchmark", "params_key"], suffixes=("_b", "_h"))
        noise = history_noise(
            session,
            machine,
            zip(merged["benchmark"], merged["params_key"], strict=False),
            upto=[base.id],  # the noise before the change: the change under test must not widen it
        )
        for row in merged.to_dict("records"):
            name = row["benchmark"]
            unit = row["unit_b"]
            sigma, runs = noise.get((name, row["params_key"]), (None, 0))
            pair = SeriesPair(
                benchmark=name,
                params=row["params_b"] or {},
                machine=machine,
                unit=unit,
                direction=infer_direction(name, unit, settings.direction_override(name)),
                threshold=settings.threshold_for(name),
                base=row["value_b"],
                head=row["value_h"],
                base_samples=row["samples_b"],
                head_samples=row["samples_h"],
                base_ci=(row["ci_99_a_b"], row["ci_99_b_b"]),
                head_ci=(row["ci_99_a_h"], row["ci_99_b_h"]),
                history_sigma=sigma,
                history_runs=runs,
            )
            out.append(compare_pair(pair, alpha=alpha))
    return out
