"""The Compare page's model without a browser (``dashboard.compare_model``)."""

from __future__ import annotations

import json
import math

import pandas as pd

from dashboard import compare_model as model


def _cmp(thresholds: list[float]) -> pd.DataFrame:
    keys = [json.dumps({"impl": repr(i)}) for i in ("a", "b", "c", "d")]
    return pd.DataFrame({
        "benchmark": "bench_decode.SparseDecode.time_decode", "params_key": keys, "series_key": keys, "unit": "seconds",
        "status": ["unchanged", "regressed", "regressed", "not_run"], "base": [1e-6, 1e-6, 1e-6, math.nan],
        "head": [1e-6, 1.5e-6, 3e-6, math.nan], "base_status": ["ok", "ok", "ok", "not_run"],
        "head_status": ["ok", "ok", "ok", "not_run"], "ratio": [1.0, 1.5, 3.0, math.nan],
        "slowdown": [1.0, 1.5, 3.0, math.nan], "p_value": 0.01, "method": "mann-whitney", "direction": "up_is_worse",
        "threshold": thresholds,
    })


def test_defaults() -> None:
    commits = pd.DataFrame({"sha": ["s0", "s1", "s2"], "pos": [0, 1, 2]})
    assert model.default_base(commits, "s2") == "s1" and model.default_base(commits, "s0") == "s0"
    assert model.default_statuses({"unchanged": 200, "regressed": 1, "improved": 0, "new": 3}) == ["regressed"]
    assert model.flagged_shas(pd.DataFrame()) == []
    regs = pd.DataFrame({"sha": ["x", "y"], "parent_sha": ["p", None]})
    assert model.flagged_shas(regs) == ["x", "y", "p"]
    assert "**Regressed**" in model.status_help()


def test_rows_worst_first_and_one_threshold_said_once() -> None:
    cmp = model.with_labels(_cmp([0.05] * 4), {"bench_decode.SparseDecode.time_decode": ["impl"]})
    assert list(model.changed(cmp)["label"]) == ["impl=b", "impl=c"]  # no bar for "a" (no change at all)
    table, note = model.table_rows(cmp, ["regressed", "unchanged"], lambda b, k: f"h/{json.loads(k)['impl']}")
    assert list(table["history"]) == ["h/'c'", "h/'b'", "h/'a'"]  # regressed worst first, then unchanged
    assert list(table["status"]) == ["regressed", "regressed", "unchanged"]
    assert "threshold" not in table and note == " Threshold 5% for every series shown."
    mixed, note = model.table_rows(model.with_labels(_cmp([0.05, 0.05, 0.1, 0.05]), {}), ["regressed"],
                                   lambda b, k: "")
    assert list(mixed["threshold"]) == ["10%", "5%"] and note == ""
    assert list(mixed["after"]) == ["3.00 us", "1.50 us"]


def test_every_compare_status_has_a_title_and_help() -> None:
    # A status compare adds (e.g. 'missing') must reach the page, not vanish from its pills and table.
    from regressions.compare import STATUSES

    assert set(model.STATUS_TITLES) == set(model.STATUS_HELP) == set(STATUSES)


def test_a_rate_change_reads_as_its_own_relative_change() -> None:
    rate = pd.DataFrame({
        "benchmark": "bench_decode.SparseDecodeMetrics.track_tokens_per_s", "unit": "tokens/s",
        "params_key": [json.dumps({"impl": repr(i)}) for i in ("a", "b", "c")],
        "series_key": [json.dumps({"impl": repr(i)}) for i in ("a", "b", "c")],
        "direction": "down_is_worse", "status": ["improved", "regressed", "not_run"],
        "base": [4174.0, 1000.0, 5.0], "head": [18780.0, 800.0, math.nan],
        "base_status": ["ok", "ok", "ok"], "head_status": ["ok", "ok", "not_run"],
        "ratio": [18780 / 4174, 0.8, math.nan], "slowdown": [4174 / 18780, 1.25, math.nan], "p_value": 0.01,
        "method": "mann-whitney", "threshold": 0.05})
    table, _ = model.table_rows(model.with_labels(rate, {}), ["improved", "regressed", "not_run"], lambda b, k: "")
    assert list(table["change"]) == ["-20% worse", "+350% better", "-"]  # regressed first, then improved


def test_the_change_cell_reads_as_in_the_text_table() -> None:
    # One rule (regressions.compare.change_text): a series of values at or below 0 has no ratio but still a
    # change, a changed benchmark's is not compared, a missing side reads "-", in the page as in the terminal.
    from regressions.compare import Comparison
    from regressions.text_table import compare_text

    rows = [("regressed", -5.0, -6.25), ("changed", 1e-6, 2e-6), ("missing", 1e-6, math.nan)]
    frame = pd.DataFrame({
        "benchmark": "bench_x.X.track_offset", "unit": "seconds", "direction": "down_is_worse",
        "params_key": [json.dumps({"case": repr(s)}) for s, _, _ in rows],
        "series_key": [json.dumps({"case": repr(s)}) for s, _, _ in rows], "status": [s for s, _, _ in rows],
        "base": [b for _, b, _ in rows], "head": [h for _, _, h in rows], "base_status": "ok",
        "head_status": ["ok", "ok", "missing"], "ratio": [math.nan, 2.0, math.nan],
        "slowdown": [math.nan, 2.0, math.nan], "p_value": math.nan, "method": "threshold", "threshold": 0.05})
    table, _ = model.table_rows(model.with_labels(frame, {}), [s for s, _, _ in rows],
                                lambda b, k: json.loads(k)["case"].strip("'"))
    cells = dict(zip(table["history"], table["change"], strict=True))
    assert cells == {"regressed": "-25% worse", "changed": "not compared", "missing": "-"}
    cases = [Comparison(benchmark="bench_x.X.track_offset", params={"case": repr(s)}, machine="m", unit="seconds",
                        direction="down_is_worse", threshold=0.05, status=s, base_status="ok", head_status="ok",
                        base=b, head=None if math.isnan(h) else h, ratio=None, slowdown=None, significant=False,
                        regression=s == "regressed", method="threshold", p_value=None) for s, b, h in rows]
    text = compare_text(cases, base="a" * 40, head="b" * 40, machines=["m"], threshold_note="5%", width=300)
    for status, cell in cells.items():
        line = next(ln for ln in text.splitlines() if f"case={status}]" in ln)
        assert f" {cell} " in f"{line} ", (status, cell, line)  # the text table's cell, same words


def test_a_row_of_one_asv_environment_links_to_its_series() -> None:
    """A compare row split per asv environment (``asv env`` among its params) opens its series' History, which
    has no such parameter (a review: the link carried it, and History dropped it with a warning)."""
    cmp = _cmp([0.05] * 4)
    cmp["params_key"] = [json.dumps({"asv env": "py3.12", "impl": repr(i)}) for i in ("a", "b", "c", "d")]
    table, _ = model.table_rows(model.with_labels(cmp, {}), ["regressed"], lambda b, k: k)
    assert list(table["history"]) == [json.dumps({"impl": "'c'"}), json.dumps({"impl": "'b'"})]
    assert table["series"].str.contains("asv env=py3.12").all()  # the row still says which environment
