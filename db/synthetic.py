"""Synthetic asv result histories, written by asv's own ``Results`` class (real format version 2).

Used to measure ingestion and queries at scale (``benchmarks/scripts/ingest_perf.py``) and by tests.
Each commit gets one results file with ``series`` parameter combinations spread over ``time_`` benchmarks
(with samples and asv's statistics) and ``track_`` benchmarks; optional steps (regressions) can be
placed at chosen commits.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import random
import subprocess
from dataclasses import dataclass
from pathlib import Path

from asv import util as asv_util
from asv.results import Results
from asv.runner import BenchmarkResult

IMPLS = ["'simt'", "'mma'"]
CONCURRENCY = ["1", "4", "16", "64", "128"]
TOPK = ["128", "512", "2048"]
PARAM_NAMES = ["impl", "concurrency", "topk"]
_PER_CONCURRENCY = len(IMPLS) * len(TOPK)


@dataclass(frozen=True)
class SyntheticHistory:
    root: Path
    machine: str
    shas: list[str]
    benchmarks: dict[str, dict]
    results_per_file: int

    @property
    def total_results(self) -> int:
        return self.results_per_file * len(self.shas)


def _benchmark_entries(series: int) -> dict[str, dict]:
    """Benchmarks with impl x concurrency x topk params totalling ``series`` (rounded up to 6)."""
    entries: dict[str, dict] = {}
    left = max(series, 1)
    i = 0
    while left > 0:
        n_conc = min(len(CONCURRENCY), math.ceil(left / _PER_CONCURRENCY))
        kind = "time" if i % 2 == 0 else "track"
        name = f"bench_synth.Synth{i:03d}.{kind}_case"
        entries[name] = {
            "name": name,
            "type": kind,
            "unit": "seconds" if kind == "time" else "tokens/s",
            "param_names": PARAM_NAMES,
            "params": [IMPLS, CONCURRENCY[:n_conc], TOPK],
            "version": f"{i:064x}",
            "number": 0,
            "repeat": 0,
            "min_run_count": 2,
            "rounds": 2,
            "sample_time": 0.01,
            "warmup_time": -1,
        }
        left -= n_conc * _PER_CONCURRENCY
        i += 1
    return entries


def write_synthetic_results(
    root: str | Path,
    *,
    commits: int = 100,
    series: int = 300,
    machine: str = "synthetic-gpu",
    env_name: str = "existing-py3.11",
    seed: int = 0,
    samples: int = 10,
    steps: dict[int, float] | None = None,
    machine_params: dict[str, str] | None = None,
    shas: list[str] | None = None,
    dates: list[dt.datetime] | None = None,
) -> SyntheticHistory:
    """Write ``commits`` results files for ``machine`` under the asv results directory ``root``.

    ``steps`` maps a commit index to a factor applied to every value from that commit on (a step
    regression or speed-up). ``machine_params`` adds keys (e.g. GPU identity) to the machine entry.
    ``shas`` and ``dates`` (one per commit, aware or naive UTC) replace the random shas and the hourly
    dates, e.g. to describe a real git history (:func:`write_git_history`).
    """
    if shas is not None and len(shas) != commits:
        raise ValueError(f"shas: {len(shas)} given for {commits} commits")
    if dates is not None and len(dates) != commits:
        raise ValueError(f"dates: {len(dates)} given for {commits} commits")
    rng = random.Random(seed)
    root = Path(root)
    entries = _benchmark_entries(series)
    asv_util.write_json(str(root / "benchmarks.json"), entries, api_version=2)
    params = {
        "machine": machine,
        "arch": "x86_64",
        "cpu": "Synthetic CPU",
        "num_cpu": "16",
        "os": "Linux",
        "ram": "134217728",
        **(machine_params or {}),
    }
    asv_util.write_json(str(root / machine / "machine.json"), params, api_version=1)
    base = {
        name: [rng.uniform(1e-5, 1e-3) if e["type"] == "time" else rng.uniform(1e3, 1e6) for _ in range(96)]
        for name, e in entries.items()
    }
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    random_shas = [f"{rng.getrandbits(160):040x}" for _ in range(commits)]  # drawn anyway: same values
    shas = list(shas) if shas is not None else random_shas
    factor = 1.0
    for c, sha in enumerate(shas):
        factor *= (steps or {}).get(c, 1.0)
        date = start + dt.timedelta(hours=c) if dates is None else dates[c]
        if date.tzinfo is None:
            date = date.replace(tzinfo=dt.UTC)
        res = Results(
            {**params, "python": "3.11"},
            {},
            sha,
            asv_util.datetime_to_js_timestamp(date),
            "3.11",
            env_name,
            {},
        )
        for name, entry in entries.items():
            n = math.prod(len(p) for p in entry["params"])
            values, all_samples, numbers = [], [], []
            for j in range(n):
                centre = base[name][j] * factor
                if entry["type"] == "time":
                    all_samples.append([centre * rng.gauss(1.0, 0.01) for _ in range(samples)])
                    values.append(centre)
                    numbers.append(1)
                else:
                    all_samples.append(None)
                    values.append(centre * rng.gauss(1.0, 0.01))
                    numbers.append(None)
            result = BenchmarkResult(values, all_samples, numbers, 0, "", None)
            res.add_result(entry, result, started_at=date, duration=0.5, record_samples=True)
        res.save(str(root))
    per_file = sum(math.prod(len(p) for p in e["params"]) for e in entries.values())
    return SyntheticHistory(root, machine, shas, entries, per_file)


def write_git_history(path: str | Path, commits: int, *, date: dt.datetime) -> list[str]:
    """A throwaway git repository at ``path`` with ``commits`` linear commits that all carry the same
    author and committer ``date`` (as commits made in one second, or rebased, do); their shas, oldest
    first."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    stamp = f"{int(date.replace(tzinfo=date.tzinfo or dt.UTC).timestamp())} +0000"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Synthetic",
        "GIT_AUTHOR_EMAIL": "synthetic@example.invalid",
        "GIT_COMMITTER_NAME": "Synthetic",
        "GIT_COMMITTER_EMAIL": "synthetic@example.invalid",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(path), *args], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    shas = []
    for c in range(commits):
        git("commit", "-q", "--allow-empty", "--no-gpg-sign", "-m", f"commit {c}")
        shas.append(git("rev-parse", "HEAD"))
    return shas


def main() -> None:  # pragma: no cover - convenience for manual use
    import argparse

    parser = argparse.ArgumentParser(description="Write a synthetic asv results history.")
    parser.add_argument("root", help="asv results directory to write")
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--machine", default="synthetic-gpu")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    hist = write_synthetic_results(
        args.root, commits=args.commits, series=args.series, machine=args.machine, seed=args.seed
    )
    print(json.dumps({"files": len(hist.shas), "results": hist.total_results}))


if __name__ == "__main__":  # pragma: no cover
    main()
