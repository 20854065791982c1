"""`mlaperf compare --format text` without a terminal: every status that fails the check is listed and
counted, in the PR report's order."""

from __future__ import annotations

from regressions.compare import MISSING, NEW, NOT_RUN, REGRESSED, REMOVED, UNCHANGED, Comparison
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
    # No ratio, no p: '-' as the PR report and the dashboard write it, not a blank cell (a review's finding).
    assert listed[1].split()[-2:] == ["-", "-"] and listed[0].split()[-1] == "-", listed
    assert "time_same" not in text


def test_a_narrow_terminal_puts_each_name_under_its_numbers() -> None:
    """At 80 columns the rows of one benchmark must still differ where their parameters do."""
    def case(conc: str, status: str, head: float | None) -> Comparison:
        c = _case("time_decode", status, head, head_status="ok" if head else "missing")
        return Comparison(**{**c.__dict__, "params": {"concurrency": conc, "impl": "'mma'", "topk": "512"}})

    rows = [case("1", REGRESSED, 9e-5), case("128", REGRESSED, 2e-4), case("64", MISSING, None)]
    wide = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=200)
    assert "REGRESSED  bench_decode.SparseDecode.time_decode [concurrency=1, impl=mma, topk=512]" in wide
    narrow = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=80)
    lines = narrow.splitlines()
    names = [lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith(("REGRESSED", "MISSING"))]
    worst_first = ("128", "1", "64")
    name = "bench_decode.SparseDecode.time_decode"
    assert names == [f"{name} [concurrency={c}, impl=mma, topk=512]" for c in worst_first]
    assert max(map(len, lines[2:])) <= 80 and "…" not in narrow


def test_series_measured_on_one_side_are_counted_not_listed() -> None:
    """Hundreds of 'no base' rows buried the regressions, and the counts line called them 'not measured at
    base': they are counted as unchanged and not-run series are, in the counts line's (and the markdown
    report's and dashboard's) words."""
    rows = [_case("time_slow", REGRESSED, 2e-5), *(_case(f"time_new{i}", NEW, 1e-5) for i in range(300)),
            _case("time_gone", REMOVED, None, head_status="absent"), _case("time_same", UNCHANGED, 1e-5),
            _case("time_skip", NOT_RUN, None, head_status="not_run")]  # fmt: skip
    text = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=200)
    assert counts_line(rows) == ("1 regression, 0 failed, 0 improvements, 300 not measured at base, "
                                 "1 not measured at head, 1 unchanged, 1 not run")
    assert [line.split()[0] for line in text.splitlines() if "SparseDecode." in line] == ["REGRESSED"]
    assert "no base" not in text and "no head" not in text
    assert text.rstrip().endswith("Not listed: 300 not measured at base, 1 not measured at head, 1 unchanged, "
                                  "1 not run (--format markdown or json lists every series).")


def test_control_characters_from_data_never_reach_the_terminal() -> None:
    """A benchmark name holding an escape sequence and a carriage return (a review: it cleared the screen and
    wrote 'improved' over REGRESSED) and a parameter value holding a newline (it split the row): shown escaped,
    one line a row, in compare's table and detect's."""
    from regressions.commands import _grouped_table

    hostile = "time_x\x1b[2J\rimproved"
    c = _case(hostile, REGRESSED, 2e-5)
    c = Comparison(**{**c.__dict__, "params": {"impl": "'mma\nFAKE ROW'"}, "machine": "h\x1b]0;t\x07"})
    for text in (compare_text([c, _case("time_y", REGRESSED, 3e-5)], base="a" * 40, head="b" * 40,
                              machines=[c.machine, "h200"], threshold_note="5%", width=300),
                 _grouped_table([{"status": "new", "commit": "c" * 40, "machine": c.machine, "benchmark": c.benchmark,
                                  "params": c.params, "before": 1e-5, "after": 2e-5, "unit": "seconds", "ratio": 2.0,
                                  "p_value": 1e-6, "group": 1}])):  # fmt: skip
        assert not any(ch in text for ch in "\x1b\r\x07"), text
        assert "\\x1b[2J\\rimproved" in text and "mma\\nFAKE ROW" in text
        assert all("FAKE ROW" not in line or "mma\\nFAKE ROW" in line for line in text.splitlines())  # one line


def test_the_counts_line_says_where_the_failed_ones_failed() -> None:
    """As the PR report's header; a failure on both sides fails the check too (both ran the head's suite)."""
    from dataclasses import replace

    from regressions.compare import FAILED, exit_status

    both = replace(_case("time_broken", FAILED, None, head_status="failed"), base_status="failed", base=None)
    head_only = _case("time_new_break", FAILED, None, head_status="failed")
    assert counts_line([both, _case("time_same", UNCHANGED, 1e-5)]) == \
        "0 regressions, 1 failed (1 on both), 0 improvements, 1 unchanged"
    assert exit_status([both]) == 1 and exit_status([both, head_only]) == 1
    assert counts_line([both, head_only]).startswith("0 regressions, 2 failed (1 on head only, 1 on both)")


def test_the_largest_untested_changes_are_listed() -> None:
    """With nothing judged, counts alone read as a blank report while a +32% change sat among the untested (a review
    on Devito's asv results): the ten largest untested changes are listed after the judged rows, the rest
    counted."""
    from regressions.compare import UNTESTED

    rows = [_case("time_same", UNCHANGED, 1e-5), *(_case(f"time_u{i}", UNTESTED, 1e-5 * (1.1 + i / 10))
                                                  for i in range(13)), _case("time_slow", REGRESSED, 1.2e-5)]
    text = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=200)
    listed = [line.split()[:2] for line in text.splitlines() if "SparseDecode." in line]
    assert listed == [["REGRESSED", "bench_decode.SparseDecode.time_slow"],
                      *(["untested", f"bench_decode.SparseDecode.time_u{i}"] for i in range(12, 2, -1))], listed
    assert "the 10 largest of 13 changes beyond the threshold listed" in text
    assert "Not listed: 3 untested beyond the threshold, 1 unchanged" in text
