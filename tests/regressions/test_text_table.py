"""`mlaperf compare --format text` without a terminal: every status that fails the check is listed and
counted, in the PR report's order."""

from __future__ import annotations

from regressions.compare import MISSING, REGRESSED, UNCHANGED, Comparison
from regressions.text_table import compare_text, counts_line


def _case(name: str, status: str, head: float | None, head_status: str = "ok") -> Comparison:
    ratio = None if head is None else head / 1e-5
    return Comparison(benchmark=f"bench_decode.SparseDecode.{name}", params={"impl": "'mma'"}, machine="h200",
                      unit="seconds", direction="up_is_worse", threshold=0.05, status=status, base_status="ok",
                      head_status=head_status, base=1e-5, head=head, ratio=ratio, slowdown=ratio,
                      significant=status == REGRESSED, regression=status == REGRESSED, method="mann-whitney",
                      p_value=None)  # fmt: skip


def test_a_missing_case_is_listed_and_counted() -> None:
    rows = [_case("time_same", UNCHANGED, 1e-5), _case("time_gone", MISSING, None, head_status="missing"),
            _case("time_slow", REGRESSED, 2e-5)]  # fmt: skip
    assert counts_line(rows) == "1 regression, 0 failed, 1 missing, 0 improvements, 1 unchanged"
    text = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=200)
    listed = [line for line in text.splitlines() if "SparseDecode." in line]
    assert [line.split()[0] for line in listed] == ["REGRESSED", "MISSING"]  # worst first, as the PR report
    assert "time_same" not in text


def test_a_narrow_terminal_drops_the_class_before_cutting_the_parameters() -> None:
    rows = [_case("time_slow", REGRESSED, 2e-5), _case("time_gone", MISSING, None, head_status="missing")]
    wide = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=200)
    assert "SparseDecode.time_slow [impl=mma]" in wide
    narrow = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=80)
    listed = [line for line in narrow.splitlines() if line.startswith(("REGRESSED", "MISSING"))]
    assert ["time_slow [impl=mma]" in listed[0], "time_gone [impl=mma]" in listed[1]] == [True, True]
    assert "SparseDecode." not in narrow and "…" not in narrow and max(map(len, listed)) <= 80
