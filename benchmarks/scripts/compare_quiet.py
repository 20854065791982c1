"""How many changes `mlaperf compare` calls in pairs of consecutive commits of a real asv history, with the
history judged against the base's level (today's rule) and against the base run alone (the rule before).

Most consecutive commits of a project change nothing measurable, so a regression flagged between two of them is
mostly a false alarm; one whose base run stood out of its own level is one for sure. The default history is the
vendored OpenBLAS results (`tests/fixtures/asv-openblas`, 3 machines, 85-92 commits each), ingested into a
temporary SQLite store in date order.

    python -m benchmarks.scripts.compare_quiet
    python -m benchmarks.scripts.compare_quiet --results DIR --machine gha-aws-skylake --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RESULTS = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scripts.compare_quiet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, metavar="DIR",
                        help="an asv results directory (default: the vendored OpenBLAS results)")
    parser.add_argument("--machine", action="append", default=None, metavar="NAME",
                        help="a machine of the history, repeatable (default: every machine)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the counts as JSON")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(f"--results {args.results}: no such directory")
    # Imported here, not at the top: asv imports every module under benchmarks/ at discovery.
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths
    from db.models import Commit, Machine, Run
    from regressions.compare import compare_commits
    from regressions.results import commit_positions

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'store.sqlite'}"
        upgrade(url)
        engine = make_engine(url)
        ingest_paths(engine, [args.results], progress=False)
        counts: dict[str, Counter[str]] = {}
        with Session(engine) as s:
            pos = commit_positions(s)
            names = args.machine or sorted(s.execute(select(Machine.name)).scalars())
            for machine in names:
                mid = s.execute(select(Machine.id).where(Machine.name == machine)).scalar_one_or_none()
                if mid is None:
                    parser.error(f"--machine {machine}: not in the history")
                ids = sorted(set(s.execute(select(Run.commit_id).where(Run.machine_id == mid)).scalars()),
                             key=lambda c: pos.get(c, -1))
                commits = {c.id: c for c in s.execute(select(Commit).where(Commit.id.in_(ids))).scalars()}
                tally: Counter[str] = Counter()
                for n, (b, h) in enumerate(zip(ids, ids[1:], strict=False), 1):
                    for rule, level in (("level", True), ("run", False)):
                        for c in compare_commits(s, commits[b], commits[h], machines=[machine], base_level=level):
                            if c.status in ("regressed", "improved"):
                                tally[f"{rule} {c.status}"] += 1
                    print(f"\r{machine}: {n:,} of {len(ids) - 1:,} pairs", end="", file=sys.stderr, flush=True)
                print(file=sys.stderr)
                tally["pairs"] = len(ids) - 1
                counts[machine] = tally
    print(f"{'machine':<20} {'pairs':>6} {'regressed (run)':>16} {'regressed (level)':>18} "
          f"{'improved (run)':>15} {'improved (level)':>17}")
    for machine, t in counts.items():
        print(f"{machine:<20} {t['pairs']:>6,} {t['run regressed']:>16,} {t['level regressed']:>18,} "
              f"{t['run improved']:>15,} {t['level improved']:>17,}")
    if args.json:
        args.json.write_text(json.dumps({m: dict(t) for m, t in counts.items()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
