"""The `mlaperf` command: one entry point over the runner, the store, detection and the dashboard."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    import dashboard.cli
    import db.cli
    import regressions.cli

    from . import demo, runner

    parser = argparse.ArgumentParser(
        prog="mlaperf",
        description="Performance-regression tracking for sparse-MLA decode kernels: asv suites on every "
        "commit, a SQL store, regression detection, PR reports and a Streamlit dashboard.",
    )
    parser.add_argument("--version", action="version", version=f"mlaperf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    runner.register(sub)
    db.cli.register(sub)
    regressions.cli.register(sub)
    dashboard.cli.register(sub)
    demo.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
