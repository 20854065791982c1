"""Measure asv ingestion into SQLite (results/s, first ingest vs unchanged re-ingest) and query latency.

Inputs: a synthetic history written by asv's own Results class (default 1,000 commits x 300 series)
and the real asv fixture (tests/fixtures/asv-openblas). Prints a table; targets from issue 5:
>= 20,000 results/s on a first ingest and unchanged files skipped >= 10x faster.

    .venv/bin/python -m benchmarks.scripts.ingest_perf [--commits 1000] [--series 300] [--query-series 500]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# Project and third-party imports live in the functions: asv imports every module under benchmarks/ at
# discovery, where this script must cost nothing and need nothing beyond the standard library.

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"


def measure_ingest(label: str, results_dir: Path, work: Path) -> list[str]:
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths

    url = f"sqlite:///{work / (label.replace(' ', '_') + '.sqlite')}"
    upgrade(url)  # schema creation is not part of the measured ingest
    engine = make_engine(url)
    cpu = time.process_time()
    first = ingest_paths(engine, [results_dir], progress=False)
    cpu = time.process_time() - cpu
    again = ingest_paths(engine, [results_dir], progress=False)
    engine.dispose()
    assert first.ok and again.ok and again.ingested == 0, (first.failed, again.failed)
    return [
        label,
        f"{first.files:,}",
        f"{first.results:,}",
        f"{first.seconds:.2f}",
        f"{first.results / first.seconds:,.0f}",
        f"{first.results / cpu:,.0f}",
        f"{again.seconds:.3f}",
        f"{first.seconds / again.seconds:,.0f}x",
    ]


def measure_queries(work: Path, commits: int, series: int) -> list[list[str]]:
    from sqlalchemy.orm import Session

    from db import queries
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths
    from db.synthetic import write_synthetic_results

    hist = write_synthetic_results(work / "query-history", commits=commits, series=series, seed=1)
    url = f"sqlite:///{work / 'queries.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    ingest_paths(engine, [hist.root], progress=False)
    engine.dispose()
    ro = make_engine(url, readonly=True)
    rows = []
    with Session(ro) as s:
        sha = queries.commits(s, hist.machine)["sha"].iloc[-1]
        listed = queries.series(s, machine=hist.machine)
        bench = listed["benchmark"].iloc[0]  # a benchmark that exists at any --series
        keys = list(listed.loc[listed["benchmark"] == bench, "params_key"].iloc[:12])  # History draws up to 12
        calls = [
            ("machines", lambda: queries.machines(s)),
            ("commits", lambda: queries.commits(s, hist.machine)),
            ("series", lambda: queries.series(s, machine=hist.machine)),
            ("history (1 series)", lambda: queries.history(s, bench, keys[0], hist.machine)),
            (f"history ({len(keys)} series)", lambda: queries.history(s, bench, keys, hist.machine)),
            ("results_at_commit", lambda: queries.results_at_commit(s, sha, hist.machine)),
        ]
        for name, call in calls:
            start = time.perf_counter()
            frame = call()
            rows.append([name, f"{len(frame):,}", f"{time.perf_counter() - start:.3f}"])
    ro.dispose()
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main() -> None:
    from db.synthetic import write_synthetic_results

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scripts.ingest_perf", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--commits", type=int, default=1000, help="synthetic commits (default 1000)")
    parser.add_argument("--series", type=int, default=300, help="synthetic series per commit (default 300)")
    parser.add_argument("--query-series", type=int, default=500, help="series for the query timings (0: skip)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep files here (default: a temp dir)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ingest-perf-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"writing synthetic history: {args.commits} commits x {args.series} series ...", file=sys.stderr)
        synth = write_synthetic_results(work / "synthetic", commits=args.commits, series=args.series)
        rows = [measure_ingest(f"synthetic {args.commits}x{args.series}", synth.root, work)]
        if FIXTURE.is_dir():
            rows.append(measure_ingest("asv-openblas fixture", FIXTURE, work))
        header = [
            "input",
            "files",
            "results",
            "first ingest s",
            "results/s",
            "results/cpu-s",
            "re-ingest s",
            "speed-up",
        ]
        print(table(header, rows))
        print(
            "(results/cpu-s: per second of this process's CPU time, a figure other load on the machine "
            "does not distort)"
        )
        if args.query_series:
            print(f"\nqueries on {args.commits} commits x {args.query_series} series (read-only SQLite):")
            print(table(["query", "rows", "seconds"], measure_queries(work, args.commits, args.query_series)))


if __name__ == "__main__":
    main()
