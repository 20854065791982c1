"""Synthetic sparse-MLA asv results, written by asv's own ``Results.save`` (real asv v2 files).

Used by the dashboard tests (small set, with samples) and ``benchmarks/scripts/dashboard_perf.py`` (1,000
commits x 500 series). Values follow the design card's H200 reference shapes: SIMT time grows with
concurrency almost linearly, MMA much less, bf16 indexer far below fp32 over max_context.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from asv import util
from asv.results import Results
from asv.runner import BenchmarkResult

GPU_PARAMS: dict[str, Any] = {
    "gpu_name": "NVIDIA H200", "gpu_cc": "9.0", "gpu_sm_count": 132, "gpu_memory_gb": 139.8,
    "gpu_driver": "570.86.15", "cuda": "12.8", "torch": "2.11.0", "triton": "3.6.0",
}
ValueFn = Callable[[int, dict[str, Any]], float | None]


@dataclass
class Bench:
    name: str
    param_names: list[str]
    params: list[list[str]]  # asv repr strings, as in benchmarks.json
    unit: str
    value: ValueFn  # (commit index, parsed params) -> value; None = failed
    type: str = "time"
    version: str = field(default="")

    def __post_init__(self) -> None:
        if not self.version:
            self.version = hashlib.sha256(self.name.encode()).hexdigest()
        if self.name.rsplit(".", 1)[-1].startswith("track_"):
            self.type = "track"

    def combos(self) -> list[dict[str, Any]]:
        return [
            {n: _parse(v) for n, v in zip(self.param_names, combo, strict=True)}
            for combo in itertools.product(*self.params)
        ]


def _parse(v: str) -> Any:
    return v.strip("'") if v.startswith("'") else (int(v) if v.lstrip("-").isdigit() else v)


def _slow(i: int, slow_from: int | None, fix_from: int | None) -> bool:
    """Commit ``i`` is inside the seeded regression: from ``slow_from`` on, until ``fix_from``."""
    return slow_from is not None and i >= slow_from and (fix_from is None or i < fix_from)


def _decode_time(i: int, p: dict[str, Any], slow_from: int | None, fix_from: int | None = None) -> float:
    c, k = p["concurrency"], p["topk"]
    if p["impl"] == "simt":
        t = 20e-6 + 1.5e-6 * c * 64 * k / 512
    else:
        t = 15e-6 + 2.5e-6 * c * k / 512
        if _slow(i, slow_from, fix_from):
            t *= 1.3  # the seeded regression (until the seeded fix)
    return t


def _indexer_time(i: int, p: dict[str, Any]) -> float:
    c, ctx = p["concurrency"], p["context"]
    if p["impl"] == "fp32_maxctx":
        return 200e-6 * c * 131072 / 65536 / 16
    return 5e-6 + 1.4e-9 * c * ctx


def _step_time(i: int, p: dict[str, Any], slow_from: int | None, fix_from: int | None = None) -> float:
    dec = _decode_time(i, {"impl": "simt" if p["variant"] == "baseline" else "mma", "concurrency":
                           p["concurrency"], "topk": 512}, slow_from, fix_from)
    idx = _indexer_time(i, {"impl": "bf16" if p["variant"] == "mma+indexer" else "fp32_maxctx",
                            "concurrency": p["concurrency"], "context": p["context"]})
    return dec + idx


def mla_benchmarks(
    *, concurrency: Sequence[int] = (1, 16, 64, 128), topk: Sequence[int] = (128, 512),
    context: Sequence[int] = (4096, 65536), slow_from: int | None = None, fix_from: int | None = None,
    metrics: bool = True,
) -> list[Bench]:
    """The suites of docs/CONTRACTS.md with the given sweep; ``slow_from`` seeds a 30% MMA slowdown from that
    commit index on, ``fix_from`` undoes it from that index on."""
    conc = [str(c) for c in concurrency]
    dec_names = ["impl", "concurrency", "topk"]
    dec_params = [["'simt'", "'mma'"], conc, [str(k) for k in topk]]
    idx_names = ["impl", "concurrency", "context"]
    idx_params = [["'fp32_maxctx'", "'bf16'"], conc, [str(c) for c in context]]
    step_names = ["variant", "concurrency", "context"]
    step_params = [["'baseline'", "'mma'", "'mma+indexer'"], conc, [str(c) for c in context]]

    def dec(i: int, p: dict[str, Any]) -> float:
        return _decode_time(i, p, slow_from, fix_from)

    def step(i: int, p: dict[str, Any]) -> float:
        return _step_time(i, p, slow_from, fix_from)

    out = [
        Bench("bench_decode.SparseDecode.time_decode", dec_names, dec_params, "seconds", dec),
        Bench("bench_indexer.Indexer.time_indexer", idx_names, idx_params, "seconds", _indexer_time),
        Bench("bench_step.DecodeStep.time_step", step_names, step_params, "seconds", step),
    ]
    if not metrics:
        return out

    # The kernel configuration each decode case ran with (the dashboard's launch-config convention): the
    # seeded slowdown is BLOCK_H 16 without split-K, as in the bundled history's deliberate regression.
    # SIMT has no head block and no split-K: NaN there, as the suites record a key that does not apply.
    def block_h(i: int, p: dict[str, Any]) -> float:
        return math.nan if p["impl"] == "simt" else 16.0 if _slow(i, slow_from, fix_from) else 64.0

    def splits(i: int, p: dict[str, Any]) -> float:
        return math.nan if p["impl"] == "simt" else 1.0 if _slow(i, slow_from, fix_from) else 2.0

    def block_n(i: int, p: dict[str, Any]) -> float:
        return 32.0

    out += [
        Bench("bench_decode.SparseDecodeMetrics.track_launch_block_h", dec_names, dec_params, "config", block_h),
        Bench("bench_decode.SparseDecodeMetrics.track_launch_num_splits", dec_names, dec_params, "config", splits),
        Bench("bench_decode.SparseDecodeMetrics.track_launch_block_n", dec_names, dec_params, "config", block_n),
    ]
    for cls, names, params, timer, bytes_per_tok in (
        ("bench_decode.SparseDecodeMetrics", dec_names, dec_params, dec, 584 * 512),
        ("bench_indexer.IndexerMetrics", idx_names, idx_params, _indexer_time, 132 * 4096),
    ):
        def tps(i: int, p: dict[str, Any], t: ValueFn = timer) -> float:
            return p["concurrency"] / t(i, p)

        def gbps(i: int, p: dict[str, Any], t: ValueFn = timer, b: int = bytes_per_tok) -> float:
            return p["concurrency"] * b / t(i, p) / 1e9

        def tflops(i: int, p: dict[str, Any], t: ValueFn = timer) -> float:
            return p["concurrency"] * 64 * 512 * 512 * 4 / t(i, p) / 1e12

        def roof(i: int, p: dict[str, Any], g: ValueFn = gbps) -> float:
            return min(1.0, g(i, p) / 4270.0)

        out += [
            Bench(f"{cls}.track_tokens_per_s", names, params, "tokens/s", tps),
            Bench(f"{cls}.track_gbps", names, params, "GB/s", gbps),
            Bench(f"{cls}.track_tflops", names, params, "TFLOP/s", tflops),
            Bench(f"{cls}.track_roofline_fraction", names, params, "fraction", roof),
        ]
    return out


def commit_shas(n: int, seed: str = "mla") -> list[str]:
    return [hashlib.sha1(f"{seed}-{i}".encode()).hexdigest() for i in range(n)]


def write_benchmarks_json(results_dir: Path, benches: Sequence[Bench]) -> None:
    data: dict[str, Any] = {}
    for b in benches:
        data[b.name] = {
            "code": f"# synthetic {b.name}", "name": b.name, "param_names": b.param_names, "params": b.params,
            "type": b.type, "unit": b.unit, "version": b.version, "timeout": 60.0,
            **({"number": 0, "repeat": 0, "rounds": 2, "sample_time": 0.01, "warmup_time": -1,
                "min_run_count": 2} if b.type == "time" else {}),
        }
    util.write_json(str(results_dir / "benchmarks.json"), data, api_version=2)


def write_results(
    results_dir: Path,
    machine: str,
    benches: Sequence[Bench],
    shas: Sequence[str],
    *,
    gpu: dict[str, Any] | None = None,
    start: dt.datetime = dt.datetime(2025, 1, 1, tzinfo=dt.UTC),
    samples: bool = True,
    noise: float = 0.01,
    seed: int = 0,
    failed: set[tuple[int, str]] | None = None,
    new_version_from: dict[str, int] | None = None,
    params_at: Callable[[int], dict[str, Any]] | None = None,
) -> list[Path]:
    """Write one asv results file per commit (plus machine.json and benchmarks.json); returns the files.

    ``samples=True`` gives 10 samples per timed case (asv computes median, q_25/q_75, 99% CI from them);
    ``failed`` holds (commit index, benchmark name) pairs whose values are None (a failed run);
    ``new_version_from`` maps a benchmark name to the commit index from which its asv version changes (its
    code changed: a new segment for the detector); ``params_at(i)`` overrides machine params of commit i's run
    (a driver or torch upgrade), machine.json then holding the newest run's, as asv leaves it.
    """
    rng = np.random.default_rng(seed)
    results_dir.mkdir(parents=True, exist_ok=True)
    write_benchmarks_json(results_dir, benches)
    mparams = {"machine": machine, "os": "Linux 6.8", "arch": "x86_64", "cpu": "AMD EPYC 9534",
               "num_cpu": "16", "ram": "137438953472", **(gpu if gpu is not None else GPU_PARAMS)}
    newest = {**mparams, **(params_at(len(shas) - 1) if params_at is not None and shas else {})}
    util.write_json(str(results_dir / machine / "machine.json"), newest, api_version=1)
    files = []
    for i, sha in enumerate(shas):
        date = start + dt.timedelta(hours=6 * i)
        run_params = {**mparams, **(params_at(i) if params_at is not None else {}), "python": "3.11"}
        res = Results(run_params, {}, sha, int(date.timestamp() * 1000), "3.11",
                      "existing-py_usr_bin_python3.11", {})
        for b in benches:
            combos = b.combos()
            bad = failed is not None and (i, b.name) in failed
            vals = [None if bad else b.value(i, p) for p in combos]
            if b.type == "time" and samples:
                samp = [None if v is None else list(v * (1 + noise * rng.standard_normal(10))) for v in vals]
                number = [None if v is None else 1 for v in vals]
            else:
                samp = [None] * len(vals)
                number = [None] * len(vals)
                exact = b.unit == "config"  # kernel configuration values are exact
                vals = [None if v is None else float(v if exact else v * (1 + noise * rng.standard_normal()))
                        for v in vals]
            changed = new_version_from is not None and i >= new_version_from.get(b.name, len(shas))
            bench_dict = {"name": b.name, "version": b.version + ("-v2" if changed else ""), "params": b.params}
            res.add_result(bench_dict, BenchmarkResult(vals, samp, number, 0 if not bad else 1, "", None),
                           started_at=date, duration=1.0, record_samples=samples)
        res.save(str(results_dir))
        files.append(results_dir / machine / f"{sha[:8]}-existing-py_usr_bin_python3.11.json")
    return files


def count_series(benches: Sequence[Bench]) -> int:
    return sum(math.prod(len(p) for p in b.params) if b.params else 1 for b in benches)


if __name__ == "__main__":  # quick look: python tests/dashboard/asv_synth.py OUT
    import sys

    out = Path(sys.argv[1])
    benches = mla_benchmarks(slow_from=4)
    write_results(out, "h200-sxm", benches, commit_shas(6))
    print(json.dumps({"files": 6, "series": count_series(benches)}))
