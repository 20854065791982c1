"""Time each dashboard page's first render on a large store (target: <= 2 s per page).

Seeds SQLite with COMMITS commits x ~550 series of synthetic sparse-MLA asv results (real asv v2 files written
by asv's ``Results.save``, ingested through ``db.ingest``), plus flagged regressions, then renders every page
with ``streamlit.testing.v1.AppTest`` on cold caches (first render) and again warm.

    .venv/bin/python benchmarks/scripts/dashboard_perf.py               # 1,000 commits, temp dir
    .venv/bin/python benchmarks/scripts/dashboard_perf.py --db sqlite:////tmp/big.sqlite --keep
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "dashboard"))

PAGES = ["overview", "throughput", "history", "regressions", "compare", "efficiency"]
TARGET_S = 2.0


def seed(url: str, workdir: Path, commits: int) -> int:
    """Write and ingest the synthetic history; returns the number of series."""
    import asv_synth
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths
    from db.models import Benchmark, Commit, Machine, Regression

    benches = asv_synth.mla_benchmarks(
        concurrency=(1, 2, 4, 8, 16, 32, 64, 128), topk=(128, 512, 2048), context=(4096, 16384, 65536),
        slow_from=commits - 3,
    )
    shas = asv_synth.commit_shas(commits, seed="perf")
    t0 = time.perf_counter()
    results = workdir / "results"
    print(f"writing {commits} asv result files x {asv_synth.count_series(benches)} series ...", flush=True)
    asv_synth.write_results(results, "h200-sxm", benches, shas)
    print(f"  written in {time.perf_counter() - t0:.1f} s; ingesting ...", flush=True)
    upgrade(url)
    engine = make_engine(url)
    summary = ingest_paths(engine, [results], progress=True)
    print("  " + summary.line(), flush=True)
    # A few dozen flagged regressions so the regressions page has a realistic table.
    with Session(engine) as s:
        machine_id = s.scalars(select(Machine.id).where(Machine.name == "h200-sxm")).one()
        bench_id = s.scalars(select(Benchmark.id).where(
            Benchmark.name == "bench_decode.SparseDecode.time_decode")).one()
        commit_ids = s.scalars(select(Commit.id).order_by(Commit.date)).all()
        for i, cid in enumerate(commit_ids[:: max(1, len(commit_ids) // 40)]):
            key = f'{{"concurrency": "{2 ** (i % 8)}", "impl": "\'mma\'", "topk": "512"}}'
            s.add(Regression(benchmark_id=bench_id, params_key=key, params={}, machine_id=machine_id,
                             commit_id=cid, before=1e-4, after=1.2e-4, ratio=1.2, direction="up_is_worse",
                             status="new" if i % 3 else "acknowledged"))
        s.commit()
    engine.dispose()
    return asv_synth.count_series(benches)


def render_times(url: str, repeats: int) -> dict[str, tuple[list[float], float]]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["MLAPERF_DB"] = url
    app = str(ROOT / "dashboard" / "app.py")
    out: dict[str, tuple[list[float], float]] = {}
    for page in PAGES:
        cold: list[float] = []
        warm = float("nan")
        for _ in range(repeats):
            st.cache_data.clear()
            st.cache_resource.clear()
            at = AppTest.from_file(app, default_timeout=120)
            if page != "overview":
                at.switch_page(f"views/{page}.py")
            t0 = time.perf_counter()
            at.run()
            cold.append(time.perf_counter() - t0)
            if at.exception:
                raise RuntimeError(f"page {page} raised: {[e.value for e in at.exception]}")
            t0 = time.perf_counter()
            at.run()
            warm = time.perf_counter() - t0
        out[page] = (cold, warm)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1000, help="commits to seed (default 1000)")
    parser.add_argument("--db", default=None, help="store URL; seeded unless --no-seed (default: temp file)")
    parser.add_argument("--no-seed", action="store_true", help="use the store at --db as it is")
    parser.add_argument("--repeats", type=int, default=3, help="cold renders per page (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if args.no_seed and not args.db:
        parser.error("--no-seed needs --db")

    workdir = Path(tempfile.mkdtemp(prefix="mlaperf-dashperf-"))
    url = args.db or f"sqlite:///{workdir / 'store.sqlite'}"
    if not args.no_seed:
        n_series = seed(url, workdir, args.commits)
        print(f"seeded {args.commits} commits x {n_series} series into {url}")
    times = render_times(url, args.repeats)

    print(f"\n{'page':<12} {'first render (median of ' + str(args.repeats) + ')':>28} {'max':>8} "
          f"{'warm rerun':>11}  target <= {TARGET_S:.0f} s")
    worst = 0.0
    for page, (cold, warm) in times.items():
        med = statistics.median(cold)
        worst = max(worst, med)
        print(f"{page:<12} {med:>26.2f} s {max(cold):>6.2f} s {warm:>9.2f} s  "
              f"{'ok' if med <= TARGET_S else 'SLOW'}")
    if not args.keep and not args.db:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    elif args.keep:
        print(f"kept {workdir}")
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
