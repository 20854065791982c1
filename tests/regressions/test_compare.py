"""Head-vs-base statistics and statuses, configuration, direction, the store's commit results and
`compare_commits` (the library function the dashboard's Compare page calls) against `mlaperf compare`."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db import queries
from db.engine import make_engine
from db.models import Commit
from db.synthetic import SyntheticHistory, write_synthetic_results
from mlaperf.cli import main
from regressions.compare import (
    METHODS,
    MIN_HISTORY_RUNS,
    SIDES,
    STATUSES,
    Comparison,
    Series,
    SeriesPair,
    change_ratio,
    compare_commits,
    compare_many,
    compare_pair,
    exit_status,
)
from regressions.compare_sides import environments_apart
from regressions.config import ConfigError, Settings, load_settings
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE, direction_for, infer_direction
from regressions.pr_schema import recheck
from regressions.report import MARKER, compare_json, compare_markdown, environments_note
from regressions.results import UsageError, history_noise, machines_with, resolve_commit, results_at
from regressions.text_table import compare_text

Ingest = Callable[[Engine, list[Path]], None]
ROOT = Path(__file__).resolve().parents[2]


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


def test_a_comparison_describes_its_series_as_the_pair_did() -> None:
    """What identifies and judges a series is one definition, shared by what goes in and what comes out."""
    names = [f.name for f in fields(Series)]
    assert names == ["benchmark", "params", "machine", "unit", "direction", "threshold"]
    assert [f.name for f in fields(SeriesPair)][:6] == names == [f.name for f in fields(Comparison)][:6]
    p = pair(100e-6, 110e-6, unit="tokens/s", threshold=0.2)
    assert compare_pair(p).series() == p.series() == {n: getattr(p, n) for n in names}


def test_clear_slowdown_with_samples_is_a_significant_regression() -> None:
    c = compare_pair(pair(100e-6, 110e-6))
    assert c.regression and c.significant and c.status == "regressed"
    assert c.method == "mann-whitney" and c.p_value is not None and c.p_value < 0.01
    assert c.ratio == pytest.approx(1.1)


def test_slowdown_within_sample_noise_is_not_significant() -> None:
    c = compare_pair(pair(100e-6, 106e-6, noise=0.2, n=5))
    assert not c.significant and not c.regression and c.status == "unchanged"


def test_significant_but_below_threshold_is_not_a_regression() -> None:
    c = compare_pair(pair(100e-6, 103e-6, noise=0.001))
    assert c.significant and not c.regression and c.status == "unchanged"


def test_history_noise_vetoes_a_run_to_run_offset() -> None:
    # Samples differ clearly (tight within-run spread), but the series moves 8% between runs anyway.
    c = compare_pair(pair(100e-6, 108e-6, history_sigma=0.05, history_runs=50))
    assert c.method == "mann-whitney+history" and not c.significant and not c.regression
    quiet = compare_pair(pair(100e-6, 108e-6, history_sigma=0.005, history_runs=50))
    assert quiet.regression


def test_a_base_run_off_its_own_level_does_not_make_a_change() -> None:
    """OpenBLAS's syrk sat at 35.5-36.2 us for 16 commits either side of one 28.2 us run: with that run as the base,
    the head's 35.7 us was a regression at p 1e-156 (a review). The history judges a change against the base's
    level (``base_offset``, log level / base) as well: back at the level is unchanged, past it still a change."""
    offset = math.log(35.7 / 28.2)
    kw: dict[str, Any] = dict(n=0, history_sigma=0.01, history_runs=30)
    assert compare_pair(pair(28.2e-6, 35.7e-6, **kw)).status == "regressed"  # no level known: as before
    back = compare_pair(pair(28.2e-6, 35.7e-6, base_offset=offset, **kw))
    assert back.status == "unchanged" and not back.regression and back.p_value is not None and back.p_value > 0.01
    assert abs(back.ratio - 35.7 / 28.2) < 1e-12  # the ratio is still head / base, as the CLI shows it
    worse = compare_pair(pair(28.2e-6, 45e-6, base_offset=offset, **kw))
    assert worse.status == "regressed" and worse.method == "history"  # 26% past the level: a regression
    # With samples too (the base run's samples all sit low): the same rule through the history part.
    sampled = compare_pair(pair(28.2e-6, 35.7e-6, history_sigma=0.01, history_runs=30, base_offset=offset))
    assert sampled.method == "mann-whitney+history" and sampled.status == "unchanged"
    # A base spike high, the head back at the level: no improvement either.
    assert compare_pair(pair(35.7e-6, 28.2e-6, base_offset=-offset, **kw)).status == "unchanged"


def test_a_base_run_off_its_level_in_real_openblas_results(tmp_path: Path, ingest: Ingest) -> None:
    """The review's pair (OpenBLAS's gha-ubuntu-noble, 5d1b8c25 -> 450c317e): syrk [100, d] at the base 28.2 us
    against 35.5-36.2 us around it is no regression; the steps `detect` finds there are compared as before."""
    engine = make_engine(f"sqlite:///{tmp_path / 'ob.sqlite'}")
    ingest(engine, [ROOT / "tests" / "fixtures" / "asv-openblas" / "results"])
    with Session(engine) as s:
        base, head = (resolve_commit(s, sha, "commit") for sha in ("5d1b8c25", "450c317e"))
        rows = compare_commits(s, base, head, machines=["gha-ubuntu-noble"])
    syrk = next(c for c in rows if c.benchmark == "benchmarks.syrk.time_syrk" and c.params.get("size") == "100"
                and c.params.get("variant") == "'d'")
    assert syrk.base is not None and syrk.head is not None and syrk.head / syrk.base > 1.2, syrk
    assert syrk.status == "unchanged" and syrk.method == "history", syrk


def test_compare_quiet_counts_both_rules(tmp_path: Path) -> None:
    """The measurement behind the base's level (benchmarks.scripts.compare_quiet) on one machine of the vendored
    OpenBLAS history: the level never adds a change, and it removes some of the run rule's."""
    from benchmarks.scripts.compare_quiet import main as quiet

    assert quiet(["--machine", "gha-ubuntu-noble", "--json", str(tmp_path / "q.json")]) == 0
    t = json.loads((tmp_path / "q.json").read_text())["gha-ubuntu-noble"]
    assert t["pairs"] > 80 and t["level regressed"] < t["run regressed"] and t["level improved"] <= t["run improved"]


def test_a_short_history_is_not_trusted_for_noise() -> None:
    # Six runs that were mostly real kernel changes look like 30% noise; a 1.5x speedup must still count.
    short = compare_pair(pair(100e-6, 66e-6, history_sigma=0.3, history_runs=MIN_HISTORY_RUNS - 1))
    assert short.method == "mann-whitney" and short.status == "improved"
    long = compare_pair(pair(100e-6, 66e-6, history_sigma=0.3, history_runs=MIN_HISTORY_RUNS))
    assert long.method == "mann-whitney+history" and long.status == "unchanged"


def test_no_samples_falls_back_to_history_then_ci_then_the_threshold() -> None:
    h = compare_pair(pair(100e-6, 120e-6, n=0, history_sigma=0.01, history_runs=30))
    assert h.method == "history" and h.regression and h.p_value is not None
    ci = compare_pair(pair(100e-6, 120e-6, n=0, base_ci=(98e-6, 102e-6), head_ci=(118e-6, 122e-6)))
    assert ci.method == "ci99" and ci.regression
    # One value a side and no history (asv's track_/peakmem_ results in a pull request's store): beyond the
    # threshold either way untested, listed and never failing; within it unchanged.
    bare = [compare_pair(pair(100e-6, head, n=0)) for head in (120e-6, 80e-6, 103e-6)]
    assert [c.status for c in bare] == ["untested", "untested", "unchanged"] and {c.method for c in bare} == {"none"}
    assert exit_status(bare) == 0 and not any(c.significant for c in bare)
    rate = compare_pair(pair(1e5, 1e4, n=0, benchmark="bench_m.track_tokens_per_s", unit="tokens/s",
                             direction=DOWN_IS_WORSE))  # fmt: skip
    assert rate.status == "untested" and rate.slowdown == pytest.approx(10.0)
    # A memory benchmark has no timing noise: the threshold alone, asv's fallback (a 10x growth fails the check).
    mem = [compare_pair(pair(100 * 2**20, head * 2**20, n=0, benchmark=f"bench_m.{kind}_decode", unit="bytes"))
           for kind, head in (("peakmem", 1024), ("mem", 50), ("peakmem", 102))]  # fmt: skip
    assert [c.status for c in mem] == ["regressed", "improved", "unchanged"] and mem[0].method == "threshold"
    assert [c.significant for c in mem] == [True, True, False]
    assert exit_status(mem) == 1
    signed = compare_pair(pair(-5.0, -7.0, n=0, benchmark="bench_m.track_offset", unit="count"))
    assert signed.status == "untested" and signed.ratio is None


def test_throughput_drop_is_a_regression_and_rise_an_improvement() -> None:
    kw = dict(benchmark="bench_decode.SparseDecodeMetrics.track_tokens_per_s", unit="tokens/s")
    drop = compare_pair(pair(1e6, 0.8e6, direction=DOWN_IS_WORSE, **kw))
    rise = compare_pair(pair(1e6, 1.25e6, direction=DOWN_IS_WORSE, **kw))
    assert drop.regression and drop.slowdown == pytest.approx(1.25)
    assert rise.status == "improved" and not rise.regression


def test_failed_head_is_reported_not_compared() -> None:
    c = compare_pair(pair(100e-6, float("nan")))
    assert c.status == "failed" and c.head is None and c.ratio is None and not c.regression
    assert (c.base_status, c.head_status) == ("ok", "failed")
    assert json.loads(compare_json([c]))[0]["head"] is None
    assert exit_status([c]) == 1 and exit_status([compare_pair(pair(100e-6, 100e-6))]) == 0


@pytest.mark.parametrize(
    ("base_side", "head_side", "status"),
    [
        ("ok", "failed", "failed"),
        ("failed", "ok", "repaired"),  # broken on base, fixed by the change: nothing the head broke
        ("failed", "failed", "failed"),
        ("not_run", "failed", "failed"),
        ("absent", "failed", "failed"),
        ("absent", "ok", "new"),
        ("ok", "absent", "removed"),
        ("absent", "not_run", "not_run"),
        ("not_run", "ok", "not_run"),
        ("ok", "not_run", "not_run"),
        ("ok", "ok", "regressed"),
    ],
)
def test_status_of_each_pair_of_sides(base_side: str, head_side: str, status: str) -> None:
    p = pair(100e-6, 150e-6, base_status=base_side, head_status=head_side)
    p.base = p.base if base_side == "ok" else None
    p.head = p.head if head_side == "ok" else None
    c = compare_pair(p)
    assert c.status == status and c.status in STATUSES
    assert (c.base_status, c.head_status) == (base_side, head_side)
    assert exit_status([c]) == (1 if status in ("failed", "regressed") else 0)
    if status != "regressed":
        assert c.ratio is None and not c.significant and c.method == "none"


def test_compare_many_equals_one_by_one() -> None:
    """Batched sample tests give each series the p-value of its own scipy call, tied small samples too."""
    from scipy import stats

    pairs = [pair(100e-6, (100 + i) * 1e-6, seed=i, n=10) for i in range(12)]
    pairs += [pair(100e-6, (100 + 3 * i) * 1e-6, seed=i, n=6) for i in range(6)]
    tied = pair(1.0, 1.5, n=0, base_samples=[1.0, 1.0, 1.1, 1.2, 1.0], head_samples=[1.5, 1.0, 1.6, 1.5, 1.7])
    pairs += [tied, pair(1.0, 1.5, n=1)]
    many = compare_many(pairs)
    assert many == [compare_pair(p) for p in pairs]
    for p, c in zip(pairs, many, strict=True):
        if c.method.startswith("mann-whitney"):
            expected = stats.mannwhitneyu(p.base_samples, p.head_samples, alternative="two-sided").pvalue
            assert c.p_value == pytest.approx(float(expected), rel=1e-12)
    assert many[-1].p_value is None and many[-2].method == "mann-whitney"


def test_every_comparison_compare_writes_passes_the_recheck_of_report_json() -> None:
    """The trusted side refuses a report.json row that disagrees with itself (``recheck``): every row compare
    itself writes, over values, sides, samples, history, intervals, zeros, thresholds and directions, passes."""
    rng = np.random.default_rng(11)
    pairs = []
    for i in range(600):
        base = float(rng.choice([0.0, -1e-6, 1e-4, 5e-3])) if i % 7 == 0 else float(rng.uniform(1e-5, 1e-3))
        head = base * float(rng.choice([0.5, 0.9, 0.97, 1.0, 1.03, 1.1, 2.0, 10.0])) + float(rng.choice([0, 0, 1e-6]))
        kw: dict[str, object] = {"threshold": float(rng.choice([0.02, 0.05, 0.5])),
                                 "direction": str(rng.choice([UP_IS_WORSE, DOWN_IS_WORSE])),
                                 "n": int(rng.choice([0, 1, 3, 10])), "seed": i}  # fmt: skip
        if i % 3 == 0:
            kw.update(history_sigma=float(rng.uniform(0.001, 0.2)), history_runs=int(rng.choice([3, 20])))
        if i % 5 == 0:
            kw.update(base_ci=(base * 0.99, base * 1.01), head_ci=(head * 0.99, head * 1.01))
        if i % 11 == 0:
            kw.update(base_status=str(rng.choice(SIDES[:-1])), head_status=str(rng.choice(SIDES)))  # missing: head's
        if i % 13 == 0:
            kw.update(benchmark="bench_mem.Mem.peakmem_cache", unit="bytes", changed=bool(i % 2))
        pairs.append(pair(base, head, **kw))
    rows = compare_many(pairs)
    assert {c.method for c in rows} <= set(METHODS) and len({c.status for c in rows}) >= 6
    assert [(i, recheck(c)) for i, c in enumerate(rows) if recheck(c) is not None] == []


def test_compare_ratio_is_head_over_base_and_zero_is_not_a_failure() -> None:
    assert change_ratio(2.0, 3.0) == 1.5 and change_ratio(0.0, 3.0) is None and change_ratio(None, 1.0) is None
    zero = compare_pair(pair(0.0, 0.0, unit="count", benchmark="b.C.track_spills", n=0))
    assert zero.status == "unchanged" and zero.ratio is None and exit_status([zero]) == 0


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
    assert regs.index("| 1.50x |") < regs.index("| 1.12x |")  # worst first
    assert "<summary>Unchanged (1)</summary>" in md and md.rstrip().endswith("</details>")
    assert "150 us" in md and "impl=mma, concurrency=64, topk=512" in md


def test_markdown_lists_failures_first_and_says_where() -> None:
    nan = float("nan")
    rows = [
        compare_pair(pair(100e-6, 150e-6, seed=4)),  # a regression
        compare_pair(pair(nan, 100e-6, seed=3)),  # failed on base only: repaired by the PR
        compare_pair(pair(nan, nan, seed=2)),  # failed on both
        compare_pair(pair(100e-6, nan, seed=1)),  # broken by the PR
        compare_pair(pair(nan, nan, seed=5, head_status="not_run")),  # failed on base, not run at head
    ]
    md = compare_markdown(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="threshold 5%")
    summary = next(line for line in md.splitlines() if "regression" in line)
    assert summary.startswith(":x: **1 regression**, **3 failed** (1 on head only, 1 on base only, 1 on both)")
    assert ", 1 repaired," in summary
    failed = md[md.index("### Failed") : md.index("### Regressions")]
    cells = [line.split(" | ")[3:5] for line in failed.splitlines() if line.startswith("| `")]
    assert cells == [["100 us", "**failed**"], ["**failed**", "**failed**"], ["**failed**", "not run"]]
    repaired = md[md.index("### Repaired") :]
    assert [line.split(" | ")[3:5] for line in repaired.splitlines() if line.startswith("| `")][0] == \
        ["**failed**", "100 us"]


def test_a_case_failing_at_base_and_measured_at_head_does_not_fail_the_check() -> None:
    """A pull request that makes a broken benchmark run again failed its check (`6 failed`, exit 1: found on
    AdirondaxProject's real results, where one night's every value is null)."""
    nan = float("nan")
    rows = [compare_pair(pair(nan, 100e-6, seed=3)), compare_pair(pair(100e-6, 101e-6, seed=4))]
    assert [c.status for c in rows] == ["repaired", "unchanged"] and exit_status(rows) == 0
    md = compare_markdown(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="threshold 5%")
    assert md.startswith(MARKER) and ":white_check_mark:" in md
    text = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="threshold 5%", width=200)
    row = text.splitlines()[4].split()
    assert "1 repaired" in text and row[0] == "repaired" and row[5:8] == ["failed", "100", "us"], row


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
    # A table in the wrong place or misspelt is refused with its name, never skipped (defaults silently in force).
    bad.write_text('[tool.mlaperf.directions]\n"*.track_gpointss" = "down_is_worse"\n')
    with pytest.raises(ConfigError, match=r"bad\.toml: unknown key 'tool'.*no tool\.mlaperf\. prefix"):
        load_settings(bad)
    (tmp_path / "pyproject.toml").write_text('[tool.mlaperf.direction]\n"x" = "up_is_worse"\n')
    with pytest.raises(ConfigError, match=r"\[tool\.mlaperf\]: unknown key 'direction'; it holds thresholds"):
        load_settings(tmp_path / "pyproject.toml")
    project = tmp_path / "project"  # no mlaperf.toml: pyproject.toml is read
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.mlaperf-directions]\n"x" = "up_is_worse"\n')
    with pytest.raises(ConfigError, match=r"\[tool\.mlaperf-directions\] is no mlaperf table"):
        load_settings(search_dir=project)
    (project / "pyproject.toml").write_text('[tool.ruff]\nline-length = 120\n')
    assert load_settings(search_dir=project) == Settings()  # a pyproject.toml of other tools: the defaults
    with pytest.raises(ConfigError, match=r"--config .*pyproject\.toml: no \[tool\.mlaperf\] table"):
        load_settings(project / "pyproject.toml")  # named on purpose: an error, not the defaults
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
    assert direction_for(name, unit) == expected == infer_direction(name, unit)
    assert infer_direction(name, unit, declared=UP_IS_WORSE) == UP_IS_WORSE


@pytest.mark.parametrize(
    ("name", "unit", "expected"),
    [
        # Where the detector and the dashboard used to disagree: the users' reading wins.
        ("bench_x.Y.track_speedup", "speedup", DOWN_IS_WORSE),  # a speed-up falling is worse
        ("bench_x.Y.track_gbps", None, DOWN_IS_WORSE),  # no unit: the name says GB/s
        ("bench_x.Y.track_gbps", "unit", DOWN_IS_WORSE),  # asv's default unit is "unit"
        ("bench_x.Y.track_tokens_per_s", "", DOWN_IS_WORSE),
        ("bench_x.Y.track_roofline", None, DOWN_IS_WORSE),
        # A declared unit that is no rate wins over the name; unit-less counts grow worse.
        ("bench_x.Y.track_bandwidth", "bytes", UP_IS_WORSE),
        ("bench_x.Y.track_spills", None, UP_IS_WORSE),
        ("bench_x.Y.track_persecond_cache", None, UP_IS_WORSE),
        ("bench_x.Y.time_tokens_per_s", "seconds", UP_IS_WORSE),  # a time is a time
        # A model's score in asv's default unit (fastcan's track_test_score): a drop is the regression.
        ("bench_x.Y.track_test_score", "unit", DOWN_IS_WORSE),
        ("bench_x.Y.track_accuracy", None, DOWN_IS_WORSE),
        ("bench_x.Y.track_f1_macro", "unit", DOWN_IS_WORSE),
        ("bench_x.Y.track_scorer_calls", "unit", UP_IS_WORSE),  # a count of calls, not a score
        ("bench_x.Y.track_score_time", "unit", UP_IS_WORSE),  # holding the word is not being a score
        ("bench_x.Y.track_num_scores", None, UP_IS_WORSE),
        ("bench_x.Y.track_accuracy_drop", "unit", UP_IS_WORSE),
        ("bench_x.Y.track_recall_calls", "unit", UP_IS_WORSE),
        ("bench_x.Y.track_val_precision", "unit", DOWN_IS_WORSE),
        ("bench_x.Y.track_test_score", "seconds", UP_IS_WORSE),  # a declared time wins
        # Devito's TheMatrix: per second as a trailing "s" on a plural count (its runtime fell as these grew).
        ("acoustic_tti_adj.TTIAcousticAdjoint.track_gpointss", "gpointss", DOWN_IS_WORSE),
        ("acoustic_tti_adj.TTIAcousticAdjoint.track_gflopss", "gflopss", DOWN_IS_WORSE),
        ("acoustic_tti_adj.TTIAcousticAdjoint.track_gpointss", None, DOWN_IS_WORSE),
        ("bench_x.Y.track_stencil", "MLUPS", DOWN_IS_WORSE),
        ("bench_x.Y.track_points", "points", UP_IS_WORSE),  # a count, not a rate
        ("bench_x.Y.track_points", None, UP_IS_WORSE),
        ("bench_x.Y.track_npoints", "unit", UP_IS_WORSE),
        ("bench_x.Y.track_cells", "cells", UP_IS_WORSE),
    ],
)
def test_direction_where_the_two_copies_disagreed(name: str, unit: str | None, expected: str) -> None:
    assert direction_for(name, unit) == expected


def test_declared_direction_wins(tmp_path: Path) -> None:
    (tmp_path / "mlaperf.toml").write_text('[directions]\n"*.track_speedup" = "up_is_worse"\n')
    settings = load_settings(search_dir=tmp_path)
    assert direction_for("bench_x.Y.track_speedup", "speedup", settings) == UP_IS_WORSE
    assert direction_for("bench_x.Y.track_gbps", "GB/s", settings) == DOWN_IS_WORSE


# -- the store: a commit's result, commit resolution, compare_commits ---------------------------------


def _files(h: SyntheticHistory, commit: int) -> list[Path]:
    return sorted((h.root / h.machine).glob(f"{h.shas[commit][:8]}-*.json"))


def _edit(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Change an asv results file the way asv writes it (null: failed, NaN: not run)."""
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def _set(doc: dict[str, Any], benchmark: str, index: int, value: float | None) -> None:
    row = dict(zip(doc["result_columns"], doc["results"][benchmark], strict=False))
    row["result"][index] = value
    if row.get("samples"):
        row["samples"][index] = None
    doc["results"][benchmark] = [row.get(c) for c in doc["result_columns"]]


TIME0 = "bench_synth.Synth000.time_case"
TRACK1 = "bench_synth.Synth001.track_case"
TIME2 = "bench_synth.Synth002.time_case"


@pytest.fixture
def statuses_store(store_url: str, tmp_path: Path, ingest: Ingest) -> Iterator[tuple[str, SyntheticHistory]]:
    """Commits 0..3 on machine "m" (66 series; a 30% step at commit 3): at base (commit 2) one series
    failed and Synth001 is missing; at head (commit 3) one series failed, one was not selected (NaN) and
    Synth002 is missing. Machine "late" ran head only."""
    h = write_synthetic_results(tmp_path / "r", commits=4, series=66, machine="m", steps={3: 1.3}, seed=2)
    (base,), (head,) = _files(h, 2), _files(h, 3)

    def at_base(doc: dict[str, Any]) -> None:
        _set(doc, TIME0, 2, None)
        del doc["results"][TRACK1]

    def at_head(doc: dict[str, Any]) -> None:
        _set(doc, TIME0, 0, None)
        _set(doc, TIME0, 1, math.nan)
        del doc["results"][TIME2]

    _edit(base, at_base)
    _edit(head, at_head)
    late = write_synthetic_results(tmp_path / "late", commits=4, series=6, machine="late", shas=h.shas, seed=3)
    eng = make_engine(store_url)
    ingest(eng, [h.root, *_files(late, 3)])
    eng.dispose()
    yield store_url, h


def test_compare_commits_statuses(statuses_store: tuple[str, SyntheticHistory]) -> None:
    url, h = statuses_store
    with Session(make_engine(url, readonly=True)) as s:
        base, head = (s.execute(select(Commit).where(Commit.sha == h.shas[i])).scalar_one() for i in (2, 3))
        assert machines_with(s, [base.id, head.id]) == ["m"]
        rows = compare_commits(s, base, head)
        late = compare_commits(s, base, head, machines=["late"])
    by = {}
    for c in rows:
        by.setdefault(c.status, []).append(c)
    assert {k: len(v) for k, v in by.items()} == {
        "regressed": 27,  # time_ series of Synth000, 30% slower, minus the three edited ones
        "failed": 1,
        "repaired": 1,  # failed at base, measured at head
        "missing": 7,  # Synth002 gone and one case skipped (NaN) at head, while bench_synth ran: undeclared
        "new": 30,  # Synth001 only at head
    }
    assert all(recheck(c) is None for c in rows + late)  # what report.json carries passes the trusted side
    assert {(c.base_status, c.head_status) for c in by["missing"]} == {("ok", "missing")}
    assert {(c.base_status, c.head_status) for c in by["failed"]} == {("ok", "failed")}
    assert {(c.base_status, c.head_status) for c in by["repaired"]} == {("failed", "ok")}
    assert all(c.base is None and c.head is not None and c.unit == "tokens/s" for c in by["new"])
    assert all(c.regression and c.ratio == pytest.approx(1.3, rel=0.05) for c in by["regressed"])
    assert exit_status(rows) == 1
    # A machine measured only at head: nothing to compare there, every series not run (not "new").
    assert len(late) == 6 and {(c.status, c.base_status, c.head_status) for c in late} == {
        ("not_run", "not_run", "ok")
    }


def test_compare_page_function_equals_mlaperf_compare(
    statuses_store: tuple[str, SyntheticHistory], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The dashboard's Compare page calls compare_commits: its rows are exactly `mlaperf compare`'s."""
    url, h = statuses_store
    full = tmp_path / "full.md"
    rc = main(["compare", h.shas[2][:10], h.shas[3], "--db", url, "--json", "--full-markdown-out", str(full)])
    cli = json.loads(capsys.readouterr().out)
    with Session(make_engine(url, readonly=True)) as s:
        base, head = resolve_commit(s, h.shas[2][:10], "BASE"), resolve_commit(s, h.shas[3], "HEAD")
        lib = compare_commits(s, base, head)
    assert rc == exit_status(lib) == 1
    assert cli == json.loads(compare_json(lib)) and len(cli) == 66
    assert {r["status"] for r in cli} == {"regressed", "failed", "missing", "new", "repaired"}
    md = full.read_text()
    assert "**27 regressions**, **1 failed** (1 on head only), **7 missing**" in md and "1 repaired" in md
    assert "30 not measured at base" in md and "### Failed" in md and "### Missing at head" in md


def test_reruns_pool_by_median_everywhere(tmp_path: Path, ingest: Ingest) -> None:
    """A commit measured three times (x1, x2, x10): its result is the median (x2), not the latest run,
    in compare's results_at and the dashboard's history and throughput queries."""
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    root = tmp_path / "r"
    first = write_synthetic_results(root, commits=3, series=6, machine="m", seed=4)
    for factor, env in ((2.0, "existing-py3.12"), (10.0, "existing-py3.13")):
        write_synthetic_results(
            root, commits=3, series=6, machine="m", seed=4, shas=first.shas, env_name=env, steps={0: factor}
        )
    ingest(make_engine(url), [root])
    with Session(make_engine(url, readonly=True)) as s:
        commit = resolve_commit(s, first.shas[1], "HEAD")
        pooled = results_at(s, commit.id, "m").set_index("params_key")
        key = json.dumps({"concurrency": "1", "impl": "'simt'", "topk": "128"}, sort_keys=True)  # result 0
        hist = queries.history(s, TIME0, key, "m")
        at = queries.results_at_commit(s, first.shas[1], "m").set_index("params_key")
    one = json.loads(first.root.joinpath("m", _files(first, 1)[0].name).read_text())
    assert len(_files(first, 1)) == 3
    x1 = dict(zip(one["result_columns"], one["results"][TIME0], strict=False))["result"][0]
    assert pooled.loc[key, "value"] == pytest.approx(2 * x1) and pooled.loc[key, "runs"] == 3
    assert len(pooled.loc[key, "samples"]) == 30  # every run's samples
    assert hist["value"].iloc[1] == pytest.approx(2 * x1) and hist["runs"].iloc[1] == 3
    assert at.loc[key, "value"] == pytest.approx(2 * x1)


def test_resolve_commit_one_contract(tmp_path: Path, ingest: Ingest) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    h = write_synthetic_results(tmp_path / "r", commits=3, series=6, machine="m", seed=5)
    ingest(make_engine(url), [h.root])
    with Session(make_engine(url)) as s, s.begin():
        assert resolve_commit(s, h.shas[1], "BASE").sha == h.shas[1]
        assert resolve_commit(s, h.shas[1][:7].upper(), "BASE").sha == h.shas[1]
        s.add(Commit(sha=h.shas[0][:6] + "0" * 34))
        s.add(Commit(sha=h.shas[0][:6] + "1" * 34))
        s.flush()
        ambiguous = rf"^BASE: '{h.shas[0][:6]}' is ambiguous: 3 commits in the store start with it \(.*, .*\)"
        with pytest.raises(UsageError, match=ambiguous):
            resolve_commit(s, h.shas[0][:6], "BASE")
        assert resolve_commit(s, h.shas[0], "BASE").sha == h.shas[0]  # a full sha is never ambiguous
        for ref, why in (("", "empty commit"), ("zzzz", "no commit in the store starts"),
                         ("0123abcd", "no commit in the store starts")):
            with pytest.raises(UsageError, match=f"^HEAD: .*{why}"):
                resolve_commit(s, ref, "HEAD", repo=tmp_path)
        s.rollback()


def test_history_noise_window_and_unknown_machine(tmp_path: Path, ingest: Ingest) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    h = write_synthetic_results(tmp_path / "r", commits=14, series=6, machine="m", seed=6)
    ingest(make_engine(url), [h.root])
    with Session(make_engine(url, readonly=True)) as s:
        ids = {c.sha: c.id for c in s.execute(select(Commit)).scalars()}
        key = results_at(s, ids[h.shas[0]], "m")["params_key"].iloc[0]
        upto_9 = history_noise(s, "m", [(TIME0, key)], upto=[ids[h.shas[3]], ids[h.shas[9]]])
        assert upto_9[(TIME0, key)][1] == 10 and 0 < upto_9[(TIME0, key)][0] < 0.1
        assert history_noise(s, "m", [(TIME0, key)], window=5)[(TIME0, key)][1] == 5
        assert history_noise(s, "nope", [(TIME0, key)]) == {}


def test_git_ref_needs_a_repository(tmp_path: Path, ingest: Ingest) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    h = write_synthetic_results(tmp_path / "r", commits=2, series=6, machine="m", seed=7)
    ingest(make_engine(url), [h.root])
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    no_ref = "^BASE: 'main~1' is no git ref here"
    with Session(make_engine(url, readonly=True)) as s, pytest.raises(UsageError, match=no_ref):
        resolve_commit(s, "main~1", "BASE", repo=repo)


def test_a_removal_declared_by_version_bump_or_config_is_not_missing(
    statuses_store: tuple[str, SyntheticHistory], tmp_path: Path
) -> None:
    """Item 9: the check passes when the pull request declares the removal: the configuration's
    ``removed`` list (a benchmark, or one case as ``name(params)``), or a new asv version at head."""
    from regressions.config import parse_settings

    url, h = statuses_store
    settings = parse_settings(
        {"removed": ["bench_synth.Synth002.*", "bench_synth.Synth000.time_case(concurrency=1, impl='simt', topk=512)"]},
        "t",
    )
    with Session(make_engine(url, readonly=True)) as s:
        base, head = (s.execute(select(Commit).where(Commit.sha == h.shas[i])).scalar_one() for i in (2, 3))
        rows = compare_commits(s, base, head, settings=settings)
    assert not [c for c in rows if c.status == "missing"] and exit_status(rows) == 1  # still the regressions
    removed = [c for c in rows if c.status == "removed"]
    assert len(removed) == 6 and all(c.benchmark == TIME2 for c in removed)
    (skipped,) = [c for c in rows if c.status == "not_run"]
    assert skipped.benchmark == TIME0 and skipped.params == {"impl": "'simt'", "concurrency": "1", "topk": "512"}
    with pytest.raises(Exception, match="removed must be a list"):
        parse_settings({"removed": "bench_synth.*"}, "t")



def _compare_1_2(store_url: str, h: SyntheticHistory, ingest: Ingest) -> list[Comparison]:
    """Ingest ``h`` into the store at ``store_url`` and compare its commit 2 against commit 1."""
    eng = make_engine(store_url)
    ingest(eng, [h.root])
    try:
        with Session(eng) as s:
            base, head = (s.execute(select(Commit).where(Commit.sha == h.shas[i])).scalar_one() for i in (1, 2))
            return compare_commits(s, base, head)
    finally:
        eng.dispose()


def test_compare_pairs_the_environments_both_commits_measured(store_url: str, tmp_path: Path, ingest: Ingest) -> None:
    """Base measured under one asv environment, head under it and a second one 1.5x slower (a Python upgrade
    measured beside the old one): head's value pooled both into a level never measured and the PR report called
    a regression (found on stingray's real results, py3.10 and py3.12). Only the environment both measured counts;
    where they share none, every run counts (a change of environment is still judged)."""
    root = tmp_path / "r"
    h = write_synthetic_results(root, commits=3, series=6, machine="m", seed=4)
    other = write_synthetic_results(root, commits=3, series=6, machine="m", seed=4, shas=h.shas,
                                    env_name="existing-py3.12", steps={0: 1.5})  # fmt: skip
    for i in (0, 1):  # the second environment measured head only
        for f in _files(other, i):
            if "py3.12" in f.name:
                f.unlink()
    got = _compare_1_2(store_url, h, ingest)
    # One row an environment (asv's compare lists them so): the shared one judged, head's second one new.
    shared = [c for c in got if c.params.get("asv env") == "py3.11"]
    assert len(shared) == 6 and all(0.8 < c.ratio < 1.25 and not c.regression for c in shared), got
    assert [c.status for c in got if c.params.get("asv env") == "py3.12"] == ["new"] * 6, got
    # Base's environment gone from head too: the new environment's runs are what head has, and they are judged.
    for f in _files(h, 2):
        if "py3.12" not in f.name:
            f.unlink()
    fresh = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    got = _compare_1_2(fresh, h, ingest)
    assert len(got) == 6 and all(c.ratio > 1.3 for c in got), [c.ratio for c in got]
    # ... and said: the CLI warns (the dashboard's Compare page too, the same words) only where none is shared.
    warned = {}
    for url in (store_url, fresh):
        done = subprocess.run([sys.executable, "-m", "mlaperf.cli", "compare", h.shas[1], h.shas[2], "--db", url,
                               "--format", "text"], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode in (0, 1), done.stderr
        warned[url] = [line for line in done.stderr.splitlines() if "asv environment" in line]
    assert warned[store_url] == [] and warned[fresh] == [
        "mlaperf compare: warning: on m, the one benchmark ran in no asv environment common to BASE "
        "(existing-py3.11) and HEAD (existing-py3.12): each side's value is the median of its runs in those "
        "environments, so a change may be the environment's (Python, compilers, libraries), not the code's"], warned



def test_a_benchmark_that_alone_changed_environment_is_named(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    """One benchmark moved to a new Python while another kept the old one: the machine shares an environment, the
    moved benchmark does not, and the warning counts it (a review: its 2x read as a regression without a word)."""
    from tests.db.conftest import bench_row, results_doc, write_results

    t = 1_700_000_000_000
    for commit, env, names, when in (("a" * 40, "existing-py3.12", ("e.A.time_a", "e.B.time_b"), t),
                                     ("b" * 40, "existing-py3.12", ("e.A.time_a",), t + 10**6),
                                     ("b" * 40, "existing-py3.13", ("e.B.time_b",), t + 10**6)):
        rows = {name: bench_row([1.0], []) for name in names}
        write_results(tmp_path, results_doc(rows, machine="m", commit=commit, env_name=env, date=when))
    ingest(engine, [tmp_path])
    with Session(engine) as s:
        b, h = resolve_commit(s, "a" * 40, "BASE"), resolve_commit(s, "b" * 40, "HEAD")
        change = environments_apart(s, b.id, h.id, "m")
    assert change is not None and (change.benchmarks, change.total, change.base, change.head) == (
        1, 2, ("existing-py3.12",), ("existing-py3.13",)), change
    assert environments_note("m", change).startswith("on m, 1 of 2 benchmarks ran in no asv environment common to "
                                                     "BASE (existing-py3.12) and HEAD (existing-py3.13)")


def _doubled(doc: dict[str, Any], name: str, version: str | None) -> None:
    """Twice the time for benchmark ``name`` (values, intervals, quartiles, samples), at asv ``version`` if given."""
    row = dict(zip(doc["result_columns"], doc["results"][name], strict=False))
    for column in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
        row[column] = [None if v is None else 2 * v for v in row.get(column) or []] or row.get(column)
    row["samples"] = [None if v is None else [2 * x for x in v] for v in row.get("samples") or []] or None
    if version is not None:
        row["version"] = version
    doc["results"][name] = [row.get(c) for c in doc["result_columns"]]


def test_a_base_measured_again_after_a_version_bump_compares_at_the_version_both_have(
    store_url: str, tmp_path: Path, ingest: Ingest
) -> None:
    """The nightly measures old commits again after a benchmark's version changes, so a base holds runs of both
    versions. Head at the new version, twice the old time, as the base's new-version run: unchanged (the base's
    old-version run does not pool in). A result without a version (a file without the column) is no change of
    benchmark: the doubled head against it is a regression, not hidden as `changed`."""
    h = write_synthetic_results(tmp_path / "r", commits=3, series=6, machine="m", seed=7)
    (base_file,) = _files(h, 1)
    (head,) = _files(h, 2)
    again = json.loads(base_file.read_text())
    _doubled(again, TIME0, "f" * 64)  # the base measured again in its environment (another run of commit 1)
    base_file.with_name(base_file.stem + "-again.json").write_text(json.dumps(again))
    _edit(head, lambda doc: _doubled(doc, TIME0, "f" * 64))
    rows = [c for c in _compare_1_2(store_url, h, ingest) if c.benchmark == TIME0]
    assert rows and {c.status for c in rows} <= {"unchanged", "improved", "regressed"}
    assert all(c.ratio is not None and 0.8 < c.ratio < 1.25 for c in rows), [c.ratio for c in rows]


def test_a_side_without_versions_is_no_change_of_benchmark(store_url: str, tmp_path: Path, ingest: Ingest) -> None:
    """A result without a version (a file without the column) matches any, as detection continues its segment: the
    doubled head at a version against it is a regression, not hidden as `changed`."""

    def without_version(doc: dict[str, Any]) -> None:
        at = doc["result_columns"].index("version")
        for row in doc["results"].values():
            row[at] = None

    h = write_synthetic_results(tmp_path / "r", commits=3, series=6, machine="m", seed=7)
    _edit(_files(h, 1)[0], without_version)
    _edit(_files(h, 2)[0], lambda doc: _doubled(doc, TIME0, "f" * 64))
    rows = [c for c in _compare_1_2(store_url, h, ingest) if c.benchmark == TIME0]
    assert rows and {c.status for c in rows} == {"regressed"}


@pytest.mark.parametrize("bump", [False, True], ids=["same-version", "new-version"])
def test_a_benchmark_changed_at_head_is_shown_not_judged(
    store_url: str, tmp_path: Path, ingest: Ingest, bump: bool
) -> None:
    """Twice the time at head: a regression of the code under test, unless the benchmark itself changed (a new asv
    version), where the two sides measure different code: asv's compare marks the pair "x", detection starts a new
    segment, and the check lists it apart and passes."""
    h = write_synthetic_results(tmp_path / "r", commits=3, series=6, machine="m", seed=7)
    (head,) = _files(h, 2)

    _edit(head, lambda doc: _doubled(doc, TIME0, "f" * 64 if bump else None))
    rows = _compare_1_2(store_url, h, ingest)
    doubled = [c for c in rows if c.benchmark == TIME0]
    assert doubled and {c.status for c in doubled} == {"changed" if bump else "regressed"}
    assert all(c.ratio is not None and c.ratio > 1.5 for c in doubled)  # shown for reference either way
    assert exit_status(rows) == (0 if bump else 1)
    assert not any(c.status == "changed" for c in rows if c.benchmark != TIME0)
    md = compare_markdown(rows, base=h.shas[1], head=h.shas[2], machines=["m"], threshold_note="threshold 5%")
    assert ("### Benchmark changed at head (a new asv version" in md) == bump
    assert (f"{len(doubled)} changed (new benchmark version)" in md.splitlines()[2]) == bump
    text = compare_text(rows, base=h.shas[1], head=h.shas[2], machines=["m"], threshold_note="threshold 5%")
    listed = [line for line in text.splitlines() if line.startswith(("changed ", "REGRESSED "))]
    assert len(listed) == len(doubled) and all(("not compared" in line) == bump for line in listed), listed


@pytest.mark.parametrize("bump", [False, True])
def test_a_case_that_now_skips_is_missing_unless_the_version_changed(
    store_url: str, tmp_path: Path, ingest: Ingest, bump: bool
) -> None:
    h = write_synthetic_results(tmp_path / "r", commits=3, series=6, machine="m", seed=7)
    (head,) = _files(h, 2)

    def at_head(doc: dict[str, Any]) -> None:
        _set(doc, TIME0, 4, math.nan)  # asv NaN: setup raised NotImplementedError, or not selected
        if bump:
            version = doc["result_columns"].index("version")
            doc["results"][TIME0][version] = "f" * 64

    _edit(head, at_head)
    rows = _compare_1_2(store_url, h, ingest)
    (case,) = [c for c in rows if c.status not in ("unchanged", "improved", "regressed", "changed")]
    assert (case.status, exit_status(rows)) == (("not_run", 0) if bump else ("missing", 1))
    # The bump's other cases measure new code: shown as changed, not compared (and only those).
    assert {c.status == "changed" for c in rows if c.benchmark == TIME0 and c is not case} == {bump}
    assert not any(c.status == "changed" for c in rows if c.benchmark != TIME0)


def test_both_commits_at_two_versions_compare_one_version(tmp_path: Path, engine: Engine, ingest: Ingest) -> None:
    """Base measured at v1 then v2, head at v2 then v1 (each commit measured again with the other suite): each side
    took the version it measured last, so base's v2 stood against head's v1 as one series, 'not changed'. Both
    sides now take the one head measured last, v1: 1.0 against 1.0."""
    from tests.db.conftest import bench_row, results_doc, write_results

    bench, params = "bench_x.B.time_x", [["'a'"]]

    def doc(commit: str, env: str, version: str, value: float, started: int) -> dict[str, Any]:
        row = bench_row([value], params, version=version, started_at=started, duration=1)
        return results_doc({bench: row}, machine="m", env_name=env, commit=commit, date=started)

    t = 1_700_000_000_000
    base, head = "a" * 40, "b" * 40
    for commit, first, then, offset in ((base, "v1", "v2", 0), (head, "v2", "v1", 10**7)):
        value = {"v1": 1.0, "v2": 2.0}
        write_results(tmp_path, doc(commit, "e1", first, value[first], t + offset))
        write_results(tmp_path, doc(commit, "e2", then, value[then], t + offset + 10**6))
    ingest(engine, [tmp_path])
    with Session(engine) as s:
        rows = compare_commits(s, resolve_commit(s, base, "BASE"), resolve_commit(s, head, "HEAD"))
    assert [(c.base, c.head, c.status) for c in rows] == [(1.0, 1.0, "unchanged")], rows


def test_a_real_suites_scores_are_higher_is_better() -> None:
    """fastcan's real suite (tests/fixtures/asv-fastcan) tracks its models' test and train scores in asv's default
    unit: they read lower-is-better, so a drop in accuracy would have been an improvement."""
    suite = json.loads((Path(__file__).parents[1] / "fixtures" / "asv-fastcan" / "results" / "benchmarks.json")
                       .read_text(encoding="utf-8"))  # fmt: skip
    directions = {name: direction_for(name, meta.get("unit")) for name, meta in suite.items() if name != "version"}
    scores = {n for n in directions if n.rsplit(".", 1)[-1] in ("track_test_score", "track_train_score")}
    assert len(scores) == 4 and {directions[n] for n in scores} == {DOWN_IS_WORSE}
    assert {d for n, d in directions.items() if n not in scores} == {UP_IS_WORSE}  # times and peak memory


def test_a_pull_requests_whole_suite_cannot_drop_a_module(tmp_path: Path, engine: Engine, ingest: Ingest) -> None:
    """Head without any benchmark of base's module ``bench_b`` (deleted, or failing to import): by default
    removed (a partial run, asv run --bench, says nothing of a module it left out); with ``whole_suite`` (a pull
    request's run, scripts/pr.sh) missing, so the check fails (review: a PR dropping a module went green). A case
    broken on base and gone from head is removed, not failed: nothing measured is lost (asv's compare does not
    count it either)."""
    from tests.db.conftest import bench_row, results_doc, write_results

    t = 1_700_000_000_000
    base, head = "a" * 40, "b" * 40
    kept, dropped, broken = "bench_a.A.time_x", "bench_b.B.time_y", "bench_a.A.time_z"
    write_results(tmp_path, results_doc({kept: bench_row([1.0], []), dropped: bench_row([2.0], []),
                                         broken: bench_row([None], [])}, machine="m", commit=base, date=t))  # fmt: skip
    write_results(tmp_path, results_doc({kept: bench_row([1.0], [])}, machine="m", commit=head, date=t + 10**6))
    ingest(engine, [tmp_path])
    with Session(engine) as s:
        b, h = resolve_commit(s, base, "BASE"), resolve_commit(s, head, "HEAD")
        partial = {c.benchmark: c.status for c in compare_commits(s, b, h)}
        whole = {c.benchmark: c.status for c in compare_commits(s, b, h, whole_suite=True)}
    assert partial == {kept: "unchanged", dropped: "removed", broken: "removed"}, partial
    assert whole == {kept: "unchanged", dropped: "missing", broken: "removed"}, whole


def test_an_environment_head_lacks_is_missing_and_a_declared_removal_holds_in_every_one(
    tmp_path: Path, engine: Engine, ingest: Ingest
) -> None:
    """Base measured ``time_x`` in Python 3.10 and 3.12, head in 3.12 only (its 3.10 build failed, say): the 3.10
    rows were dropped unseen and the check passed (a review). They are missing now; a removal declared for a case
    (``name(param1=1)``) holds in each environment's row, whose params also name the environment."""
    from regressions.config import parse_settings
    from tests.db.conftest import bench_row, results_doc, write_results

    t, base, head = 1_700_000_000_000, "a" * 40, "b" * 40
    x, y, cases = "bench_a.A.time_x", "bench_a.A.time_y", [["1", "2"]]
    for commit, offset, envs_x in ((base, 0, ("conda-py3.10", "conda-py3.12")), (head, 10**6, ("conda-py3.12",))):
        for env in ("conda-py3.10", "conda-py3.12"):
            doc = {y: bench_row([1.0, 1.0], cases), **({x: bench_row([1.0, 1.0], cases)} if env in envs_x else {})}
            write_results(tmp_path, results_doc(doc, machine="m", commit=commit, env_name=env, date=t + offset))
    ingest(engine, [tmp_path])
    removed = parse_settings({"removed": [f"{x}(param1=1)"]}, "t")
    with Session(engine) as s:
        b, h = resolve_commit(s, base, "BASE"), resolve_commit(s, head, "HEAD")
        plain = {(c.benchmark, c.params["param1"], c.params["asv env"]): c.status for c in compare_commits(s, b, h)}
        declared = {(c.benchmark, c.params["param1"], c.params["asv env"]): c.status
                    for c in compare_commits(s, b, h, settings=removed)}  # fmt: skip
    assert plain[(x, "1", "py3.10")] == plain[(x, "2", "py3.10")] == "missing", plain
    assert plain[(x, "1", "py3.12")] == plain[(y, "1", "py3.10")] == "unchanged", plain
    assert (declared[(x, "1", "py3.10")], declared[(x, "2", "py3.10")]) == ("removed", "missing"), declared
