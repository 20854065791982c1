"""The Throughput, Efficiency and Overview pages' models without a browser (``dashboard.throughput_model``,
``dashboard.efficiency_model``, ``dashboard.overview_model``, ``suites.default_filter``)."""

from __future__ import annotations

import pandas as pd

from dashboard import efficiency_model, overview_model, suites, throughput_model
from settings.gpu import gpu_spec


def test_default_filter_and_overlay_commit() -> None:
    decode, indexer = suites.SUITES[0], suites.SUITES[1]
    assert suites.default_filter(decode, [256, 512, 2048]) == 512
    assert suites.default_filter(decode, [256, 2048]) == 2048
    assert suites.default_filter(indexer, [512, 65536]) == 65536  # 512 is the decode's top-k only
    assert throughput_model.overlay_commit("b", ["a", "b", "c"]) == "b"
    assert throughput_model.overlay_commit("x", ["a", "b", "c"]) == "c"


def test_speedup_tables() -> None:
    speedups = pd.DataFrame({"line": ["mma"], "filter": [512], "c=1": [35.0], "c=64": [8.2345]})
    shown = throughput_model.speedup_rows(speedups, "impl")
    assert list(shown.columns) == ["impl", "c=1", "c=64"] and list(shown.iloc[0]) == ["mma", "35.0x", "8.23x"]
    ratios = pd.DataFrame({"line": ["mma"], "concurrency": [64.0], "filter": [512], "tokens_per_s": [2e6],
                           "baseline": [1e6], "speedup": [2.0]})
    rows = throughput_model.baseline_rows(ratios, "impl")
    assert list(rows.columns) == ["impl", "concurrency", "tokens/s", "baseline tokens/s", "speed-up"]
    assert list(rows.iloc[0]) == ["mma", 64, "2,000,000 tokens/s", "1,000,000 tokens/s", "2.00x"]


def test_efficiency_references_and_captions() -> None:
    names = ["bench_decode.SparseDecodeMetrics.track_gbps", "bench_step.DecodeStep.time_step"]
    assert [s.key for s in efficiency_model.metric_suites(names)] == ["decode"]  # step has no metric here
    sheet = gpu_spec("NVIDIA H200")
    assert sheet is not None
    peaks = efficiency_model.peaks({"copy_gbps": 4000.0}, sheet)
    assert peaks["track_gbps"] == [("measured copy", 4000.0), ("datasheet", sheet.bandwidth_gbps)]
    assert peaks["track_tflops"] == [("datasheet bf16 dense", sheet.bf16_tflops)]
    assert efficiency_model.peaks({}, None) == {"track_roofline_fraction": [("roofline", 1.0)], "track_gbps": [],
                                                "track_tflops": []}
    text = efficiency_model.device_caption({"gpu_name": "NVIDIA H200", "gpu_cc": "9.0"}, {"copy_gbps": 4000.0},
                                           sheet)
    assert text.startswith("Device: NVIDIA H200 (sm 9.0).") and "no case is compute-bound" in text
    assert efficiency_model.device_caption({"gpu_name": "none"}, {}, None) == ""
    eff = pd.DataFrame({"metric": ["track_roofline_fraction"] * 2, "line": ["simt", "mma"],
                        "concurrency": [1.0, 64.0], "value": [0.1, 0.5]})
    best = efficiency_model.best_caption(eff, "impl")
    assert best is not None and best.startswith("Best: impl=mma at concurrency 64 reaches")
    assert efficiency_model.best_caption(eff.iloc[:0], "impl") is None


def test_overview_tables() -> None:
    commits = pd.DataFrame({"sha": [f"{i:040x}" for i in range(10)], "message": [None, *(f"m{i}\n" for i in
                                                                                           range(1, 10))],
                            "date": pd.date_range("2026-01-01", periods=10, freq="D")})
    latest = overview_model.latest_commits(commits, None)
    assert len(latest) == overview_model.LATEST_COMMITS and latest["message"].iloc[0] == "m9"
    assert "link" not in latest
    linked = overview_model.latest_commits(commits.iloc[:1], lambda s: f"r/commit/{s}")
    assert linked["message"].iloc[0] == "" and linked["link"].iloc[0] == f"r/commit/{0:040x}"
    info = {"gpu_name": "NVIDIA H200", "gpu_memory_gb": 139.8, "ram": 2 ** 30, "cuda": "none", "os": "",
            "arch_profile": "native"}
    rows = overview_model.machine_rows(info)
    assert list(rows.index) == ["GPU", "GPU memory", "RAM", "kernel arch profile"]
    assert rows.loc["GPU memory", "value"].endswith(" GiB")  # settings.gpu records total_memory / 2**30
