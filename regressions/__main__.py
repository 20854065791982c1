"""`python -m regressions detect|compare ...`: the same commands as `mlaperf detect|compare`."""

from __future__ import annotations

import argparse
import sys

from regressions.cli import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m regressions", description=__doc__)
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
