"""The `mlaperf` command: one entry point over the runner, the store, detection and the dashboard.

Every command ends with the one exit-status rule of ``settings.exits`` (0 nothing found, 1 regression,
2 bad usage or input, 3 internal error, 130/143 stopped by SIGINT/SIGTERM); :func:`main` runs the chosen
command through ``settings.exits.dispatch``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from settings import exits

from . import __version__


def build_parser() -> argparse.ArgumentParser:
    import dashboard.serve
    import db.store_commands
    import regressions.commands

    from . import demo, doctor, nightly, publish, runner

    parser = argparse.ArgumentParser(
        prog="mlaperf",
        description="Performance-regression tracking for sparse-MLA decode kernels: asv suites on every "
        f"commit, a SQL store, regression detection, PR reports and a Streamlit dashboard. {exits.SUMMARY}",
    )
    parser.add_argument("--version", action="version", version=f"mlaperf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    runner.register(sub)
    db.store_commands.register(sub)
    regressions.commands.register(sub)
    dashboard.serve.register(sub)
    publish.register(sub)
    demo.register(sub)
    nightly.register(sub)
    doctor.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # bad usage: argparse prints it and exits 2
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return exits.USAGE
    return exits.dispatch(func, args)


if __name__ == "__main__":
    raise SystemExit(main())
