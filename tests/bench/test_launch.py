"""Kernel-config provenance: each ``*Metrics`` class records the launch configuration of every case it
measured as ``track_launch_<key>`` (unit ``config``), read from the launch record kept with that case,
never from another launch. Real kernels under the Triton interpreter, tiny shapes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from benchtools import discover

import mla_kernels as mk
from benchmarks import _harness, _suite, bench_decode, bench_indexer, bench_step
from benchmarks._gate import KernelMismatch

SUITES = {
    "bench_decode.SparseDecode": bench_decode.SparseDecodeMetrics,
    "bench_indexer.Indexer": bench_indexer.IndexerMetrics,
    "bench_step.DecodeStep": bench_step.DecodeStepMetrics,
}


def test_asv_sees_one_config_benchmark_per_key_with_explicit_versions() -> None:
    found = discover("cpu")
    for timed, metrics in SUITES.items():
        case = next(b for n, b in found.items() if n.startswith(timed + ".time_"))
        names = {n.rsplit(".", 1)[-1] for n in found if n.startswith(timed + "Metrics." + _suite.LAUNCH_PREFIX)}
        assert names == {_suite.LAUNCH_PREFIX + key for key in metrics.launch_fields}, timed
        for name in names:
            entry = found[f"{timed}Metrics.{name}"]
            assert (entry["unit"], entry["type"], entry["version"]) == ("config", "track", "1")
            assert (entry["params"], entry["param_names"]) == (case["params"], case["param_names"])


def test_launch_versions_must_match_the_fields() -> None:
    with pytest.raises(TypeError, match="launch_versions must name exactly the keys of launch_fields"):

        class Broken(_suite.Metrics, versions={k: "1" for k in _suite.TRACKS}, launch_versions={"block_h": "1"}):
            launch_fields = {"block_n": ("BLOCK_N",)}


def test_launch_numbers_reads_paths_and_keeps_only_numbers() -> None:
    record = {"BLOCK_H": 64, "PREFETCH": 0, "source": "cache", "interpreted": True, "x": math.inf,
              "indexer": {"BLOCK_T": 256, "num_warps": 8}}  # fmt: skip
    fields = {"block_h": ("BLOCK_H",), "prefetch": ("PREFETCH",), "tuned": ("source",), "flag": ("interpreted",),
              "inf": ("x",), "block_t": ("indexer", "BLOCK_T"), "select_block": ("indexer", "SELECT_BLOCK"),
              "deep": ("BLOCK_H", "more"), "missing": ("NUM_SPLITS",)}  # fmt: skip
    got = _harness.launch_numbers(record, fields)
    assert got == {"block_h": 64.0, "prefetch": 0.0, "tuned": None, "flag": None, "inf": None, "block_t": 256.0,
                   "select_block": None, "deep": None, "missing": None}  # fmt: skip
    assert _harness.launch_numbers(None, {"block_h": ("BLOCK_H",)}) == {"block_h": None}


def test_an_older_commits_global_record_reads_as_a_record_today() -> None:
    """The suites also run commits from before typed records: their ``LAST_LAUNCH`` dicts (decode flat,
    indexer nested) come out under today's names, so the same ``launch_fields`` read both."""
    old_indexer = {"op": "indexer_topk", "impl": "bf16", "kernel": "_bf16_scores_kernel+_radix_select_kernel",
                   "scores": {"BLOCK_H": 16, "BLOCK_T": 64, "num_warps": 4, "num_stages": 3},
                   "select": {"BLOCK": 2048, "num_warps": 8}}  # fmt: skip
    view = _harness.record_view(old_indexer)
    assert _harness.launch_numbers(view, bench_indexer.LAUNCH_FIELDS) == {
        "block_t": 64.0, "num_warps": 4.0, "num_stages": 3.0, "select_block": 2048.0, "select_num_warps": 8.0}
    old_decode = {"impl": "mma", "kernel": "_mma_decode_kernel", "BLOCK_H": 64, "tuned": "cache", "n_regs": 200}
    view = _harness.record_view(old_decode)
    assert view is not None and (view["source"], view["registers"], view["BLOCK_H"]) == ("cache", 200, 64)
    assert _harness.record_view({}) is None and _harness.record_view(None) is None


def test_a_failed_or_skipped_case_fails_or_skips_its_config() -> None:
    cache = {"cases": {("mma", 1, 32): {"status": "fail", "reason": "KernelMismatch: out: off"},
                       ("simt", 1, 32): {"status": "skip", "reason": "impl 'simt' is not available"}}}  # fmt: skip
    metrics = bench_decode.SparseDecodeMetrics()
    with pytest.raises(KernelMismatch, match="out: off"):
        metrics.track_launch_block_h(cache, "mma", 1, 32)
    with pytest.raises(NotImplementedError, match="not available"):
        metrics.track_launch_block_h(cache, "simt", 1, 32)


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Count the calls of ``mla_kernels.<name>`` (by impl) that the suites make from here on."""
    calls: list[str] = []
    real: Callable[..., Any] = getattr(mk, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(str(kwargs.get("impl")))
        return real(*args, **kwargs)

    monkeypatch.setattr(mk, name, counted)
    return calls


def test_decode_config_is_the_timed_cases_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure_all keeps the record of the case it timed; reading the configs launches nothing; the kept
    record is what the timed call runs; SIMT's keys that do not apply are NaN (asv's skipped value)."""
    calls = _counting(monkeypatch, "sparse_mla_decode_with_record")
    keys = [("mma", 1, 32), ("simt", 1, 32)]
    cache = _harness.measure_all(keys, bench_decode.build_case, bench_decode.model, lambda *k: k[1], calls=1,
                                 launch_fields=bench_decode.LAUNCH_FIELDS)  # fmt: skip
    assert all(cache["cases"][k]["status"] == "ok" for k in keys), cache
    launched = len(calls)
    metrics = bench_decode.SparseDecodeMetrics()
    values = {k: {key: getattr(metrics, _suite.LAUNCH_PREFIX + key)(cache, *k) for key in bench_decode.LAUNCH_FIELDS}
              for k in keys}  # fmt: skip
    assert len(calls) == launched, "reading a config must not launch a kernel"
    mma, simt = values[("mma", 1, 32)], values[("simt", 1, 32)]
    assert mma["block_h"] in (16.0, 32.0, 64.0) and mma["num_splits"] >= 1 and mma["prefetch"] >= 0
    assert mma["num_warps"] >= 1 and mma["num_stages"] >= 1 and mma["block_n"] >= 16
    assert simt["block_n"] >= 1 and simt["num_warps"] >= 1
    for key in ("block_h", "num_splits", "prefetch", "num_stages"):
        assert math.isnan(simt[key]), key
    assert math.isnan(mma["spill_bytes"]), "the interpreter compiles nothing: spills unknown"

    # The kept record is the timed call's: run the timed function once more and compare its record.
    replayer = bench_decode.build_case("mma", 1, 32)
    kept = _harness.launch_numbers(replayer.launch, bench_decode.LAUNCH_FIELDS)
    _, again = replayer.fns[0]()
    assert _harness.launch_numbers(again, bench_decode.LAUNCH_FIELDS) == kept
    assert {k: v for k, v in kept.items() if v is not None} == {k: v for k, v in mma.items() if not math.isnan(v)}


def test_step_records_both_ops() -> None:
    key = ("mma+indexer", 1, 256)
    cache = _harness.measure_all([key], bench_step.build_case, bench_step.model, lambda *k: k[1], calls=1,
                                 launch_fields=bench_step.LAUNCH_FIELDS)  # fmt: skip
    got = cache["cases"][key]["launch"]
    assert got["block_h"] in (16.0, 32.0, 64.0) and got["num_splits"] >= 1
    assert got["indexer_block_t"] >= 1 and got["indexer_select_block"] >= 1
    assert got["spill_bytes"] is None
