"""Head-vs-base statistics, configuration, direction and the PR markdown/JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from regressions.compare import MIN_HISTORY_RUNS, SeriesPair, compare_pair
from regressions.config import ConfigError, Settings, load_settings
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE, infer_direction
from regressions.report import MARKER, compare_json, compare_markdown


def pair(
    base: float, head: float, *, noise: float = 0.003, n: int = 10, seed: int = 0, **kw: object
) -> SeriesPair:
    rng = np.random.default_rng(seed)
    args: dict[str, object] = dict(
        benchmark="bench_decode.SparseDecode.time_decode",
        params={"impl": "'mma'", "concurrency": "64", "topk": "512"},
        machine="h200",
        unit="seconds",
        direction=UP_IS_WORSE,
        threshold=0.05,
        base=base,
        head=head,
        base_samples=list(base * np.exp(rng.normal(0, noise, n))),
        head_samples=list(head * np.exp(rng.normal(0, noise, n))),
    )
    args.update(kw)
    return SeriesPair(**args)  # type: ignore[arg-type]


def test_clear_slowdown_with_samples_is_a_significant_regression() -> None:
    c = compare_pair(pair(100e-6, 110e-6))
    assert c.regression and c.significant and c.change == "regression"
    assert c.method == "mann-whitney" and c.p_value is not None and c.p_value < 0.01
    assert c.ratio == pytest.approx(1.1)


def test_slowdown_within_sample_noise_is_not_significant() -> None:
    c = compare_pair(pair(100e-6, 106e-6, noise=0.2, n=5))
    assert not c.significant and not c.regression and c.change == "unchanged"


def test_significant_but_below_threshold_is_not_a_regression() -> None:
    c = compare_pair(pair(100e-6, 103e-6, noise=0.001))
    assert c.significant and not c.regression and c.change == "unchanged"


def test_history_noise_vetoes_a_run_to_run_offset() -> None:
    # Samples differ clearly (tight within-run spread), but the series moves 8% between runs anyway.
    c = compare_pair(pair(100e-6, 108e-6, history_sigma=0.05, history_runs=50))
    assert c.method == "mann-whitney+history" and not c.significant and not c.regression
    quiet = compare_pair(pair(100e-6, 108e-6, history_sigma=0.005, history_runs=50))
    assert quiet.regression


def test_a_short_history_is_not_trusted_for_noise() -> None:
    # Six runs that were mostly real kernel changes look like 30% noise; a 1.5x speedup must still count.
    short = compare_pair(pair(100e-6, 66e-6, history_sigma=0.3, history_runs=MIN_HISTORY_RUNS - 1))
    assert short.method == "mann-whitney" and short.change == "improvement"
    long = compare_pair(pair(100e-6, 66e-6, history_sigma=0.3, history_runs=MIN_HISTORY_RUNS))
    assert long.method == "mann-whitney+history" and long.change == "unchanged"


def test_no_samples_falls_back_to_history_then_ci_then_nothing() -> None:
    h = compare_pair(pair(100e-6, 120e-6, n=0, history_sigma=0.01, history_runs=30))
    assert h.method == "history" and h.regression and h.p_value is not None
    ci = compare_pair(pair(100e-6, 120e-6, n=0, base_ci=(98e-6, 102e-6), head_ci=(118e-6, 122e-6)))
    assert ci.method == "ci99" and ci.regression
    none = compare_pair(pair(100e-6, 120e-6, n=0))
    assert none.method == "none" and not none.significant and not none.regression


def test_throughput_drop_is_a_regression_and_rise_an_improvement() -> None:
    kw = dict(benchmark="bench_decode.SparseDecodeMetrics.track_tokens_per_s", unit="tokens/s")
    drop = compare_pair(pair(1e6, 0.8e6, direction=DOWN_IS_WORSE, **kw))
    rise = compare_pair(pair(1e6, 1.25e6, direction=DOWN_IS_WORSE, **kw))
    assert drop.regression and drop.slowdown == pytest.approx(1.25)
    assert rise.change == "improvement" and not rise.regression


def test_failed_head_is_reported_not_compared() -> None:
    c = compare_pair(pair(100e-6, float("nan")))
    assert c.change == "failed" and c.head is None and c.ratio is None and not c.regression
    assert json.loads(compare_json([c]))[0]["head"] is None


def test_markdown_order_and_collapsed_unchanged() -> None:
    rows = [
        compare_pair(pair(100e-6, 100.5e-6, seed=1)),
        compare_pair(pair(100e-6, 150e-6, seed=2)),
        compare_pair(pair(100e-6, 80e-6, seed=3)),
        compare_pair(pair(100e-6, 112e-6, seed=4)),
    ]
    md = compare_markdown(
        rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="threshold 5%"
    )
    lines = md.splitlines()
    assert lines[0] == MARKER
    summary = next(line for line in lines if "regressions" in line)
    assert "**2 regressions**" in summary and "1 improvement" in summary and "1 unchanged" in summary
    assert "`bbbbbbbbbbbb`" in summary and "`aaaaaaaaaaaa`" in summary
    assert md.index("### Regressions") < md.index("### Improvements") < md.index("<details>")
    regs = md[md.index("### Regressions") : md.index("### Improvements")]
    assert regs.index("| 1.500 |") < regs.index("| 1.120 |")  # worst first
    assert "<summary>Unchanged (1)</summary>" in md and md.rstrip().endswith("</details>")
    assert "150 us" in md and "impl='mma', concurrency=64, topk=512" in md


def test_markdown_separates_failing_on_head_from_failing_on_both() -> None:
    nan = float("nan")
    rows = [
        compare_pair(pair(100e-6, nan, seed=1)),  # broken by the PR
        compare_pair(pair(nan, nan, seed=2)),  # broken before it
        compare_pair(pair(nan, 100e-6, seed=3)),  # fixed by it
    ]
    md = compare_markdown(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="threshold 5%")
    summary = next(line for line in md.splitlines() if "regressions" in line)
    assert "1 failing on head" in summary and "1 with no result on base or head" in summary
    assert "1 without a base result" in summary
    on_head = md[md.index("### Failing on head (ran on base)") : md.index("### Running on head")]
    assert on_head.count("| failed |") == 1 and "100 us" in on_head
    both = md[md.index("### No result on base or head") :]
    assert both.count("| failed | failed |") == 1


def test_json_has_the_contract_fields() -> None:
    data = json.loads(compare_json([compare_pair(pair(100e-6, 150e-6))]))
    for key in ("benchmark", "params", "machine", "base", "head", "ratio", "significant", "regression"):
        assert key in data[0]
    assert data[0]["params"] == {"impl": "'mma'", "concurrency": "64", "topk": "512"}
    assert data[0]["regression"] is True


def test_settings_from_pyproject_and_patterns(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.mlaperf.thresholds]\n"
        "default = 0.07\n"
        '"bench_indexer.*" = 0.10\n'
        '"bench_indexer.Indexer.time_indexer" = 0.20\n'
        "[tool.mlaperf.directions]\n"
        '"*.track_occupancy" = "down_is_worse"\n'
    )
    s = load_settings(search_dir=tmp_path)
    assert s.threshold_for("bench_decode.SparseDecode.time_decode") == 0.07
    assert s.threshold_for("bench_indexer.IndexerMetrics.track_gbps") == 0.10
    assert s.threshold_for("bench_indexer.Indexer.time_indexer") == 0.20  # most specific wins
    assert s.direction_override("bench_step.X.track_occupancy") == "down_is_worse"
    cli = s.with_threshold(0.02)
    assert cli.threshold_for("bench_indexer.Indexer.time_indexer") == 0.02


def test_mlaperf_toml_wins_and_bad_values_are_named(tmp_path: Path) -> None:
    (tmp_path / "mlaperf.toml").write_text('[thresholds]\n"bench_*" = 0.3\n')
    assert load_settings(search_dir=tmp_path).threshold_for("bench_a.B.time_c") == 0.3
    bad = tmp_path / "bad.toml"
    bad.write_text('[thresholds]\n"bench_*" = -1\n')
    with pytest.raises(ConfigError, match=r"bad\.toml.*bench_\*"):
        load_settings(bad)
    bad.write_text('[directions]\n"x" = "sideways"\n')
    with pytest.raises(ConfigError, match="directions"):
        load_settings(bad)
    with pytest.raises(ConfigError, match="--config"):
        load_settings(tmp_path / "missing.toml")
    assert load_settings(search_dir=tmp_path / "nowhere") == Settings()


@pytest.mark.parametrize(
    ("name", "unit", "expected"),
    [
        ("bench_decode.SparseDecode.time_decode", "seconds", UP_IS_WORSE),
        ("bench_decode.SparseDecodeMetrics.track_tokens_per_s", "tokens/s", DOWN_IS_WORSE),
        ("bench_decode.SparseDecodeMetrics.track_gbps", "GB/s", DOWN_IS_WORSE),
        ("bench_decode.SparseDecodeMetrics.track_tflops", "TFLOP/s", DOWN_IS_WORSE),
        ("bench_decode.SparseDecodeMetrics.track_roofline_fraction", "fraction", DOWN_IS_WORSE),
        ("bench_x.Y.track_bytes", "bytes", UP_IS_WORSE),
        ("bench_x.Y.peakmem_z", "bytes", UP_IS_WORSE),
    ],
)
def test_direction_inference(name: str, unit: str, expected: str) -> None:
    assert infer_direction(name, unit) == expected
    assert infer_direction(name, unit, declared=UP_IS_WORSE) == UP_IS_WORSE
