"""QA findings on what people read: numbers in human units, changes as the value's own relative change
(rates too), series named whole and ordered as asv orders them (parameters, numeric values)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from sqlalchemy.engine import Engine

from dashboard import summary
from db.engine import make_engine
from db.synthetic import write_synthetic_results
from mlaperf.cli import main
from regressions.compare import REGRESSED, Comparison
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE, direction_for
from regressions.labels import series_label
from regressions.text_table import compare_text
from regressions.units import fmt_before_after, fmt_change, fmt_time, fmt_value, fmt_value_change, sig

Ingest = Callable[[Engine, list[Path]], None]


def test_rounding_takes_the_magnitude_of_the_rounded_value() -> None:
    assert sig(99.99) == "100" and sig(-99.99) == "-100" and sig(12_324.4) == "12,324" and sig(0.0999) == "0.0999"
    assert fmt_time(99.99e-6) == "100 us" and fmt_time(9.9999e-3) == "10.0 ms" and fmt_time(999.99e-9) == "1.00 us"


def test_before_and_after_read_in_one_scale() -> None:
    # OpenBLAS's 10 ms kernels read "9,978 us → 10.8 ms" on the Regressions page: one side per scale.
    assert fmt_before_after(9.978e-3, 10.8e-3, "seconds") == "9.98 ms → 10.8 ms"
    assert fmt_before_after(19.5e-6, 90.1e-6, "seconds") == "19.5 us → 90.1 us"
    assert fmt_before_after(None, 1e-3, "seconds") == "failed → 1,000 us"
    assert fmt_before_after(4174.0, 18780.0, "tokens/s") == "4,174 tokens/s → 18,780 tokens/s"
    assert fmt_before_after(2.0, 5e-3, "seconds") == "2.00 s → 5,000 us"  # not "0.00500 s": each its own scale


def test_unitless_track_values_are_plain_numbers_and_bytes_are_scaled() -> None:
    assert fmt_value(996_565_683_615_826_816.0, None, benchmark="m.C.track_big") == "9.97e+17"
    assert fmt_value(12_345.0, None, benchmark="m.C.track_count") == "12,345"
    assert fmt_value(3e-11, "unit") == "3e-11"
    assert fmt_value(2e-4, None, benchmark="m.C.time_x") == "200 us"  # a time_ without a stored unit
    assert fmt_value(512 * 2**20, "bytes") == "512 MiB" and fmt_value(1536.0, "bytes") == "1.50 KiB"
    assert fmt_value(512 * 2**20, None, benchmark="m.M.peakmem_buf") == "512 MiB"
    assert fmt_value(3 * 2**30, None, benchmark="m.M.mem_cache") == "3.00 GiB" and fmt_value(100, "bytes") == "100 B"


def test_a_rate_that_went_up_reads_as_its_own_change() -> None:
    # tokens/s 1,000 -> 4,360: slowdown factor 1 / 4.36, the value up 336%, which is better for a rate.
    assert fmt_change(1 / 4.36, DOWN_IS_WORSE) == "+336% better" and fmt_change(4.36, DOWN_IS_WORSE) == "-77% worse"
    assert fmt_change(1.55) == "+55% worse" and fmt_change(0.82, UP_IS_WORSE) == "-18% better"
    assert fmt_value_change(1000.0, 4360.0, DOWN_IS_WORSE) == "+336% better"
    assert fmt_value_change(-5.0, -6.25, UP_IS_WORSE) == "-25% better"
    assert fmt_value_change(0.0, 0.5, UP_IS_WORSE) == "worse (from 0)"


def test_the_summary_grid_shows_a_rate_change_as_the_value_moved() -> None:
    series = pd.DataFrame({"benchmark": ["m.C.track_tokens_per_s", "m.C.time_x"], "params_key": ["{}", "{}"],
                           "unit": ["tokens/s", "seconds"]})  # fmt: skip
    values = pd.DataFrame({"benchmark": ["m.C.track_tokens_per_s"] * 3 + ["m.C.time_x"] * 3, "params_key": "{}",
                           "commit_id": [1, 2, 3] * 2, "value": [1000.0, 1000.0, 4360.0, 1.0, 1.0, 2.0]})  # fmt: skip
    regs = pd.DataFrame(columns=["benchmark", "params_key", "status", "ratio", "sha"])
    grid = summary.grid(series, values, [1, 2, 3], regs,
                        lambda b, u: DOWN_IS_WORSE if "per_s" in b else UP_IS_WORSE)  # fmt: skip
    assert grid["change_text"].tolist() == ["+336% better", "+100% worse"]
    assert grid["change"].tolist() == pytest.approx([1 / 4.36, 2.0])  # the sort and tone key keeps its meaning


def _row(module: str, head: float, direction: str = UP_IS_WORSE) -> Comparison:
    return Comparison(benchmark=f"{module}.S.time_f", params={}, machine="m", unit="seconds", direction=direction,
                      threshold=0.05, status=REGRESSED, base_status="ok", head_status="ok", base=1e-3, head=head,
                      ratio=head / 1e-3, slowdown=head / 1e-3, significant=True, regression=True, method="ci99",
                      p_value=None)  # fmt: skip


def test_the_text_table_keeps_the_module_name() -> None:
    text = compare_text([_row("mod0", 2e-3), _row("mod1", 3e-3)], base="a" * 40, head="b" * 40, machines=["m"],
                        threshold_note="5%", width=200)  # fmt: skip
    assert "mod0.S.time_f" in text and "mod1.S.time_f" in text and "+200% worse" in text
    assert series_label("b.C.time_x", {"concurrency": "64", "impl": "'mma'"}, ["impl", "concurrency"]) == \
        "b.C.time_x [impl=mma, concurrency=64]"


@pytest.fixture
def history(store_url: str, tmp_path: Path, ingest: Ingest) -> list[str]:
    h = write_synthetic_results(tmp_path / "results", commits=30, series=30, steps={20: 1.2}, seed=5)
    ingest(make_engine(store_url), [tmp_path / "results"])
    return h.shas


def _order_is_asvs(rows: list[dict]) -> None:
    """Params in asv's param_names order, values numerically (1, 4, 16, 64, 128, not 1, 128, 16, 4, 64)."""
    assert all(list(r["params"]) == ["impl", "concurrency", "topk"] for r in rows)
    keys = [(r["params"]["impl"], int(r["params"]["concurrency"]), int(r["params"]["topk"])) for r in rows]
    assert keys == sorted(keys) and len(keys) == 30


def test_compare_and_detect_order_series_as_asv_does(
    store_url: str, history: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", history[19], history[20], "--db", store_url, "--json"]) == 1
    _order_is_asvs(json.loads(capsys.readouterr().out))
    assert main(["detect", "--db", store_url, "--json"]) == 0
    _order_is_asvs(json.loads(capsys.readouterr().out)["regressions"])
    assert main(["detect", "--db", store_url, "--list"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if "time_case" in line]
    concurrency = [line.split("concurrency=")[1].split(",")[0] for line in listed if "impl=mma," in line
                   and "topk=128" in line]  # fmt: skip
    assert concurrency == ["1", "4", "16", "64", "128"]


@pytest.mark.parametrize(
    ("name", "unit", "expected"),
    [
        # Rate units in any case and spelling: a drop is worse.
        ("m.K.track_tflops", "TFLOPS", DOWN_IS_WORSE),
        ("m.K.track_x", "GFLOPS", DOWN_IS_WORSE),
        ("m.K.track_x", "tflops", DOWN_IS_WORSE),
        ("m.K.track_x", "TFLOP/s", DOWN_IS_WORSE),
        ("m.K.track_x", "GB/s", DOWN_IS_WORSE),
        ("m.K.track_x", "Gbps", DOWN_IS_WORSE),
        ("m.K.track_x", "qps", DOWN_IS_WORSE),
        ("m.K.track_x", "tokens/s", DOWN_IS_WORSE),
        ("m.K.track_x", "it/s", DOWN_IS_WORSE),
        ("m.K.track_x", "samples per second", DOWN_IS_WORSE),
        # An unknown unit: the rate name decides; a known non-rate unit wins over the name.
        ("m.K.track_tflops", "widgets", DOWN_IS_WORSE),
        ("m.K.track_qps", None, DOWN_IS_WORSE),
        ("m.K.track_tflops", "bytes", UP_IS_WORSE),
        ("m.K.track_bandwidth", "GiB", UP_IS_WORSE),
        ("m.K.track_x", "widgets", UP_IS_WORSE),
        ("m.K.track_x", "ps", UP_IS_WORSE),  # picoseconds, not a rate word
        ("m.K.track_x", "steps", UP_IS_WORSE),
        ("m.K.track_stops", None, UP_IS_WORSE),
        # "ratio" and "efficiency" as words only: iterations, operations, a duration, a coefficient are no rates.
        ("m.K.track_x", "iterations", UP_IS_WORSE),
        ("m.K.track_x", "operations", UP_IS_WORSE),
        ("m.K.track_x", "duration", UP_IS_WORSE),
        ("m.K.track_x", "coefficient", UP_IS_WORSE),
        ("m.K.track_generation_latency", None, UP_IS_WORSE),
        ("m.K.track_x", "ratio", DOWN_IS_WORSE),
        ("m.K.track_hit_ratio", None, DOWN_IS_WORSE),
        ("m.K.track_cache_efficiency", None, DOWN_IS_WORSE),
    ],
)
def test_rate_units_and_names_decide_the_direction(name: str, unit: str | None, expected: str) -> None:
    assert direction_for(name, unit) == expected


def test_detect_json_numbers_carry_no_log_space_noise() -> None:
    """``detect --json`` wrote ``"after": 318291968.00000054`` for a level of 318291968 bytes (a median taken in
    log space); its numbers keep 12 significant digits, and NaN is null."""
    from regressions.listing import _NOT_LISTED, records

    frame = pd.DataFrame({"id": [1], "before": [294912000.0000003], "after": [318291968.00000054],
                          "ratio": [1.0792753623188406], "p_value": [float("nan")]})
    rec = records(frame.assign(**dict.fromkeys(_NOT_LISTED)), {})[0]
    assert json.dumps([rec["before"], rec["after"], rec["ratio"], rec["p_value"]]) == \
        "[294912000.0, 318291968.0, 1.07927536232, null]"


def test_thresholds_read_as_written() -> None:
    """0.5% and 2.5% thresholds printed as 0% and 2% (``:.0%``; a review's find), in the PR report's note too."""
    from regressions.pr_render import threshold_note
    from regressions.units import fmt_percent

    assert [fmt_percent(t) for t in (0.05, 0.005, 0.025, 0.125, 1.5)] == ["5%", "0.5%", "2.5%", "12.5%", "150%"]
    rows = [SimpleNamespace(threshold=t) for t in (0.005, 0.025)]
    assert threshold_note(rows) == "thresholds 0.5% to 2.5% per benchmark"  # type: ignore[arg-type]
