"""Command-line arguments several commands share, each defined once with one help text (as asv's
``commands/common_args.py``): every parser that takes ``--db`` (run, nightly plan, ingest, db, detect,
compare, dashboard, publish, demo) adds it here, so the flag means and says the same everywhere."""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable

from settings import env

TIER_CHOICES = ("auto", *env.TIERS)


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each argument's default, except ``None``: those help texts say what not giving it means."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default is None else super()._get_help_string(action)


def fraction_type(upper: float = 1.0) -> Callable[[str], float]:
    """An argparse ``type`` for a threshold or share: ``0.05`` or ``5%`` -> 0.05, inside ``(0, upper)``;
    anything else an error that shows the accepted spelling. A bare number is a fraction, so it must be
    below 1: ``2`` is almost surely a percent missing its sign, and is refused with ``2%`` suggested (a
    share of 1 or more, where ``upper`` allows one, is written as a percent: ``200%``)."""

    def parse(text: str) -> float:
        percent = text.endswith("%")
        try:
            number = float(text.rstrip("%"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r} (e.g. 0.05 or 5%)") from None
        if not percent and 1 <= number < math.inf:
            raise argparse.ArgumentTypeError(
                f"a bare number is a fraction (0.05 is 5%); did you mean {text.strip()}%? got {text!r}"
            )
        value = number / 100.0 if percent else number
        if not 0 < value < upper:
            raise argparse.ArgumentTypeError(
                f"must be in (0, {upper:g}) (below {upper * 100:g}%), e.g. 0.05 or 5%; got {text!r}"
            )
        return value

    return parse


def add_db(parser: argparse.ArgumentParser) -> None:
    """``--db URL``: the store; the command resolves it with :func:`settings.env.store_url`."""
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help=f"the store, a SQLAlchemy URL such as sqlite:///path.sqlite or postgresql+psycopg://user@host/db "
        f"(default: ${env.DB.name}, else {env.DEFAULT_STORE_URL})",
    )


def add_tier(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tier",
        choices=TIER_CHOICES,
        default="auto",
        help="gpu: the grid on a CUDA device; cpu: the smoke tier (Triton interpreter); auto: gpu when CUDA is "
        "available",
    )


def add_asv_machine(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--machine",
        default=None,
        help="asv machine name (default: this host's name; '-cpu' is appended on the CPU tier)",
    )


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({exc})") from None
    return text


def add_bench(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bench",
        action="append",
        type=_regex,
        default=None,
        metavar="REGEX",
        help="only benchmarks matching REGEX (asv -b; may be repeated; matches 'name(params)' too)",
    )


def add_thresholds_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=None,
        help="pyproject.toml with [tool.mlaperf.thresholds], [tool.mlaperf.directions] and removed, or mlaperf.toml "
        "with [thresholds], [directions] and removed at its top level (default: ./mlaperf.toml, else "
        "./pyproject.toml)",
    )


def add_repo_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo-url",
        metavar="URL",
        default=None,
        help=f"repository web URL for commit links, e.g. https://github.com/org/repo (default: "
        f"${env.REPO_URL.name}, else the git remote origin of the current directory, as https)",
    )


def _folder(text: str) -> str:
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"no folder {text!r}")
    return text


def add_git_repo(parser: argparse.ArgumentParser) -> None:
    """``--repo``: the benchmarked project's git repository (ingest: commit order and messages; compare: refs
    such as ``HEAD~1``)."""
    parser.add_argument(
        "--repo",
        metavar="DIR",
        type=_folder,
        default=None,
        help="git repository of the benchmarked project, for commit order, messages and refs such as HEAD~1 "
        "(default: the repository containing the current directory)",
    )
