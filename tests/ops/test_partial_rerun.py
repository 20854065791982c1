"""asv re-running part of a commit's suite (`asv run --bench X` where the commit's results file exists, as
`mlaperf run COMMIT --bench X --no-skip-existing` does) rewrites that file with every other benchmark's row as it
was, its ``started_at`` included. Ingest stores only what asv measured again: a carried-over row is not a second
run of its series, which would confirm a suspect step that nobody measured again. Real asv, real ingest."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from scratch import MLAPERF, make_scratch
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.engine import make_engine
from db.models import Benchmark, Result

OTHER = '''
class Other:
    number = 1
    repeat = 4
    rounds = 1
    warmup_time = 0.0
    version = "other-1"

    def time_other(self):
        sum(range(1000))
'''


def _results_per_benchmark(url: str) -> dict[str, int]:
    engine = make_engine(url, readonly=True)
    try:
        with Session(engine) as s:
            rows = s.execute(select(Benchmark.name, func.count(Result.id)).join(Result).group_by(Benchmark.name))
            return {str(name): int(n) for name, n in rows}
    finally:
        engine.dispose()


def test_a_partial_rerun_stores_only_what_asv_measured_again(tmp_path: Path) -> None:
    scratch = make_scratch(tmp_path / "workspace")
    (scratch.path / "benchmarks" / "bench_other.py").write_text(OTHER)
    head = scratch.commit("c1")
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(MLAPERF_DB=url, HOME=str(tmp_path))
    results = scratch.path / ".asv" / "results"

    def mlaperf(*args: str) -> str:
        proc = subprocess.run([str(MLAPERF), *args], cwd=scratch.path, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout

    run = ["run", "--tier", "cpu", "--machine", "ci", "--no-skip-existing", "--db", "none"]
    mlaperf(*run)
    mlaperf("ingest", str(results), "--repo", str(scratch.path))
    assert _results_per_benchmark(url) == {"bench_other.Other.time_other": 1, "bench_work.Work.time_work": 2}

    (path,) = results.glob(f"ci-cpu/{head[:8]}-*.json")
    before = json.loads(path.read_text())["results"]
    mlaperf(*run, "--bench", "time_other")
    after = json.loads(path.read_text())["results"]
    assert after["bench_work.Work.time_work"] == before["bench_work.Work.time_work"], "asv carried the row over"
    assert after["bench_other.Other.time_other"] != before["bench_other.Other.time_other"], "and measured this one"

    out = mlaperf("ingest", str(results), "--repo", str(scratch.path))
    assert "ingested 1 of 1 file (1 result," in out, out
    # time_other has two runs now; time_work's two cases still one each (before: a second run of each).
    assert _results_per_benchmark(url) == {"bench_other.Other.time_other": 2, "bench_work.Work.time_work": 2}
