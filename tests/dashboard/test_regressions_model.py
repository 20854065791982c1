"""The Regressions page's model without a browser: filters, the tables' rows and what triage acts on
(``dashboard.regressions_model``)."""

from __future__ import annotations

import json

import pandas as pd

from dashboard import fmt
from dashboard import regressions_model as model


def _key(impl: str, concurrency: int) -> str:
    return json.dumps({"impl": repr(impl), "concurrency": str(concurrency)}, sort_keys=True)


def _regs() -> pd.DataFrame:
    """Three regressions of two groups on one machine, as ``data.regressions`` lists them (enriched)."""
    sha, parent, other = "a" * 40, "b" * 40, "c" * 40
    return pd.DataFrame({
        "id": [1, 2, 3], "benchmark": ["bench_decode.SparseDecode.time_decode"] * 2 + ["bench_idx.Idx.time_index"],
        "params_key": [_key("mma", 1), _key("mma", 64), _key("simt", 1)], "machine": "h200",
        "unit": "seconds", "sha": [sha, sha, other], "parent_sha": [parent, parent, None],
        "message": "slow", "parent_message": "ok", "before": [1e-6, 2e-6, 3e-6], "after": [2e-6, 4e-6, 6e-6],
        "ratio": 2.0, "direction": "up_is_worse", "p_value": 0.001, "status": ["new", "new", "fixed"],
        "fixed_sha": [None, None, sha], "group_status": ["new", "new", "fixed"], "machine_wide": False,
        "group": [1, 1, 2], "category": ["open", "open", "fixed"], "note": ["", "", "came back"],
        "assignee": [None, "Ada", None], "issue_url": [None, "https://example.org/i/1", None],
    })


def _names() -> dict[str, list[str]]:
    return {"bench_decode.SparseDecode.time_decode": ["impl", "concurrency"]}


def test_filters_by_text_and_assignee() -> None:
    regs = model.with_names(_regs(), _names())
    assert regs["label"].iloc[0] == "impl=mma, concurrency=1"
    assert regs["series_name"].iloc[0] == "bench_decode.SparseDecode.time_decode [impl=mma, concurrency=1]"
    assert list(model.filtered(regs, "IMPL=MMA", None)["id"]) == [1, 2]
    assert list(model.filtered(regs, "bench_idx", None)["id"]) == [3]
    assert list(model.filtered(regs, None, "nobody")["id"]) == [1, 3]
    assert list(model.filtered(regs, None, " ada ")["id"]) == [2]
    assert list(model.filtered(regs, "", "")["id"]) == [1, 2, 3]


def test_rows_leave_out_what_every_row_says() -> None:
    view = model.with_names(_regs(), _names())

    def history(m: str, b: str, k: str) -> str:
        return f"h/{m}/{b.rsplit('.', 1)[-1]}"

    def compare(m: str, p: str | None, s: str) -> str:
        return f"c/{m}/{p[:2] if isinstance(p, str) else ''}..{s[:2]}"

    rows = model.regression_rows(view, all_machines=False, history_link=history, compare_link=compare)
    assert list(rows.columns[:4]) == ["group", "status", "assignee", "issue"]
    assert list(rows["compare"]) == ["c/h200/bb..aa", "c/h200/bb..aa", "c/h200/..cc"]
    assert rows["note"].iloc[2] == "came back" and rows["before → after"].iloc[0] == "1.00 us → 2.00 us"
    one_group = model.regression_rows(view[view["group"] == 1], all_machines=True, history_link=history,
                                      compare_link=compare)
    assert "group" not in one_group and "status" not in one_group and "fixed at" not in one_group
    assert "note" not in one_group and list(one_group.columns[:3]) == ["machine", "assignee", "issue"]
    closed = model.closed_rows(view.assign(reason="r"), _names(), all_machines=True, history_link=history)
    assert list(closed.columns[:2]) == ["status", "machine"]
    assert closed["series"].iloc[2] == "bench_idx.Idx.time_index [concurrency=1, impl=simt]"  # no declared order


def test_triage_picks() -> None:
    from dashboard import triage

    view = model.with_names(_regs(), _names())
    groups = triage.groups(view)
    options, labels = model.triage_choices(view, groups)
    assert options == ["group 1", "group 2", "#1", "#2", "#3"]
    assert labels["group 1"].startswith("group 1: 2 series at aaaaaaaa")
    assert labels["#3"].endswith("@ cccccccc (fixed)")
    assert model.picked_ids("group 1", view) == [1, 2] and model.picked_ids("#3", view) == [3]
    assert model.current_triage(view, [1, 2]) == ("Ada", "https://example.org/i/1")
    assert model.current_triage(view, [3]) == ("", "")
    assert model.issue_problem("ftp://x") is not None
    assert model.issue_problem(" https://x ") is None and model.issue_problem("") is None
    part, part_groups = model.in_group(view, groups, "2")
    assert list(part["id"]) == [3] and list(part_groups["group"]) == [2]
    assert model.in_group(view, groups, "all")[0] is view


def test_group_state_names_its_kind_as_the_cli_does() -> None:
    """`mlaperf detect` says "event across benchmarks" of a group of many series of several benchmarks; the
    dashboard's and the site's group tables said only ", machine-wide" (review on uxarray's real results)."""
    from dashboard import triage

    regs = _regs().assign(group_kind=["event", "event", None], machine_wide=[False, False, True])
    rows = model.group_rows(triage.groups(regs), all_machines=False, compare_link=lambda m, p, s: "")
    assert list(rows["state"]) == ["new, event across benchmarks", "fixed, machine-wide"]


def test_regression_rows_show_now_after_the_ratio_only_when_partly_recovered() -> None:
    """A partly recovered alert keeps its step's ratio; "now" (where its series stands, from the listing's
    now_ratio) follows the ratio, "-" for the other rows; no such row (or a listing without the column): none."""
    view = model.with_names(_regs(), _names())

    def history(m: str, b: str, k: str) -> str:
        return ""

    def compare(m: str, p: str | None, s: str) -> str:
        return ""

    partly = view.assign(now_ratio=[1.3, 2.0, None], partly_recovered=[True, False, False])
    rows = model.regression_rows(partly, all_machines=False, history_link=history, compare_link=compare)
    columns = list(rows.columns)
    assert columns[columns.index("ratio") + 1] == "now" and list(rows["now"]) == ["1.30x", "-", "-"]
    assert list(rows["ratio"]) == [2.0] * 3  # a number, so the grid sorts it as one (fmt.SHOWN_AS draws it)
    for plain in (view.assign(now_ratio=[1.3, 2.0, None], partly_recovered=False), view):
        assert "now" not in model.regression_rows(plain, all_machines=True, history_link=history,
                                                  compare_link=compare)


def test_a_gradual_regressions_range_says_so() -> None:
    """An alert of steps too small alone that add up: its commit range spans the drift and is marked; a
    listing without labels (not built by regressions_frame) marks nothing."""
    view = model.with_names(_regs(), _names())

    def link(*_args: object) -> str:
        return ""

    marked = view.assign(labels=[["gradual"], [], ["partly_recovered"]])
    commits = list(model.regression_rows(marked, all_machines=False, history_link=link, compare_link=link)["commits"])
    assert commits[0].endswith(" (gradual)") and not any(c.endswith("(gradual)") for c in commits[1:])
    first = marked.iloc[0]
    assert commits[0] == f"{fmt.commit_range(first['parent_sha'], first['sha'])} (gradual)"
    plain = model.regression_rows(view, all_machines=False, history_link=link, compare_link=link)["commits"]
    assert not plain.str.contains("gradual").any()


def test_a_group_partly_fixed_says_how_many_came_back() -> None:
    """A group still new showed "fixed at 1c6b3169" because 2 of its 31 members came back there (a review)."""
    from dashboard.triage import _fixed_at

    a, b = "1c6b3169" + "0" * 32, "2d7c4270" + "0" * 32
    assert _fixed_at(pd.Series([a, a, None])) == "2 of 3: 1c6b3169"
    assert _fixed_at(pd.Series([a, a])) == "1c6b3169"
    assert _fixed_at(pd.Series([a, b])) == "2 commits" and _fixed_at(pd.Series([a, b, None])) == "2 of 3: 2 commits"
    assert _fixed_at(pd.Series([None, None], dtype=object)) == ""
