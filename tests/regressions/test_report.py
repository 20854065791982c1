"""The PR report under hostile data: every value escaped, nothing that notifies, links, renders HTML or
passes for the marker; the body capped under GitHub's limit, worst rows kept; failed benchmarks fail."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cmarkgfm  # GitHub's renderer, a dev dependency: never skipped
import pytest
from cmarkgfm.cmark import Options
from sqlalchemy.engine import Engine

from db.engine import make_engine
from db.synthetic import write_synthetic_results
from mlaperf.cli import main
from regressions.compare import Comparison, SeriesPair, compare_pair
from regressions.direction import direction_for
from regressions.report import (
    MARKER,
    MAX_BODY_CHARS,
    MAX_CELL_CHARS,
    ZWSP,
    body_size,
    compare_markdown,
    md_code,
    md_text,
)

Ingest = Callable[[Engine, list[Path]], None]
NAN = float("nan")
HOSTILE = [
    "@team",
    "9fceb02d0ae598e95dc970b74767f19372d61af8",  # a unit GitHub would link as a commit (a fork's too)
    "[x](http://e)",
    "<img src=x>",
    "a|b",
    "`tick` ``double``",
    MARKER,
    "two\nlines\r\n| --- |",
    "https://evil.example/p?q=1",
    "www.evil.example",
    "see #123 and GH-7 and o/r#9",
    "me@example.com",
    "$\\sqrt{x}$ **bold** _it_ ~~s~~",
    "&#64;team &lt;b&gt;",
    "<!-- x --> <details><summary>y</summary>",
    "trailing\\",
    "<script>alert(1)</script>",
    "x" * 100_000,
]
LINKISH = re.compile(r"@(?!\u200b)|#\d|(?i:https?|ftp|www)(?=[:.])")


def _pair(i: int, name: str, base: float | None, head: float | None, **kw: Any) -> Comparison:
    bench = f"bench_evil.{name}.time_case" if i % 2 == 0 else f"bench_evil.{name}.track_gbps"
    unit = "seconds" if i % 2 == 0 else name
    return compare_pair(
        SeriesPair(
            benchmark=bench,
            params={"impl": repr(name), "concurrency": str(i)},
            machine=name,
            unit=unit,
            direction=direction_for(bench, unit),
            threshold=0.05,
            base=base,
            head=head,
            base_samples=[base * (1 + 0.001 * k) for k in range(10)] if base else [],
            head_samples=[head * (1 + 0.001 * k) for k in range(10)] if head else [],
            **kw,
        )
    )


def _hostile_report() -> tuple[str, list[Comparison]]:
    rows = []
    for i, name in enumerate(HOSTILE):
        rows.append(_pair(i, name, 100e-6, 150e-6))  # regressed or improved
        rows.append(_pair(i, name, 100e-6, None))  # failed on head
        rows.append(_pair(i, name, None, 100e-6, base_status="absent"))  # new
    md = compare_markdown(
        rows,
        base="a" * 40,
        head="b" * 40,
        machines=HOSTILE,
        threshold_note="threshold 5% (@config [x](http://e))",
        base_message=HOSTILE[0],
        head_message="Fix <img src=x> for @team (#12)\n\nbody [link](http://e)",
    )
    return md, rows


def test_hostile_values_are_inert_in_the_markdown() -> None:
    md, rows = _hostile_report()
    assert md.startswith(MARKER + "\n") and md.count(MARKER) == 1
    assert LINKISH.search(md) is None, LINKISH.search(md)
    outside_code = re.sub(r"(`+).*?\1", "", md)  # GitHub links no commit inside a code span
    assert re.search(r"[0-9a-fA-F]{7,}", outside_code) is None, re.search(r".{20}[0-9a-fA-F]{7,}.{5}", outside_code)
    assert "x" * MAX_CELL_CHARS not in md and "x" * (MAX_CELL_CHARS - 1) + "\u2026" in md
    # One table row per comparison, each with its 9 cells: no value split a row or a cell.
    table_rows = [line for line in md.splitlines() if line.startswith("| `") or line.startswith("| ``")]
    assert len(table_rows) == len(rows)
    for line in table_rows:
        assert len(re.findall(r"(?<!\\)\|", line)) == 10, line
    assert body_size(md) < MAX_BODY_CHARS


def test_hostile_values_render_as_text_in_githubs_markdown() -> None:
    """Rendered by cmark-gfm (GitHub's renderer, raw HTML allowed as on GitHub): no link, image,
    script or extra details element appears, and every benchmark name reads back as written."""
    md, rows = _hostile_report()
    out = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    for tag in ("<a ", "<img", "<script", "<em>", "<del>", "<b>"):
        assert tag not in out, tag
    assert out.count("<details>") == 1 and out.count("<summary>") == 1  # ours ("New"): no value opened one
    assert out.count("<tr>") == len(rows) + out.count("<thead>")
    assert all(row.count("<td") == 9 for row in re.findall(r"<tr>\n(<td.*?)</tr>", out, flags=re.S))
    codes = {html.unescape(c).replace(ZWSP, "") for c in re.findall(r"<code>(.*?)</code>", out, flags=re.S)}
    for name in HOSTILE[:-1]:
        flat = re.sub(r"[\r\n]", " ", name)
        assert f"bench_evil.{flat}.time_case" in codes or f"bench_evil.{flat}.track_gbps" in codes, name


@pytest.mark.parametrize("value", HOSTILE)
def test_escapers_keep_one_line_and_no_marker(value: str) -> None:
    for out in (md_text(value), md_code(value), md_code(value, table=False)):
        assert "\n" not in out and "\r" not in out and "<!--" not in out
        assert LINKISH.search(out) is None
        assert len(out) < 2 * MAX_CELL_CHARS + 10


def test_the_body_is_capped_worst_rows_first() -> None:
    rows = [_pair(0, f"same{i:04d}" + "y" * 60, 100e-6, 100e-6) for i in range(1500)]
    rows += [_pair(0, f"slow{i:03d}", 100e-6, (110 + i) * 1e-6) for i in range(40)]
    rows += [_pair(0, f"gone{i:03d}", 100e-6, None) for i in range(30)]
    rows += [_pair(0, f"fast{i:03d}", 100e-6, 50e-6) for i in range(30)]
    kw: dict[str, Any] = dict(base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="threshold 5%")
    full = compare_markdown(rows, **kw, max_chars=None)
    capped = compare_markdown(rows, **kw)
    assert body_size(full) > MAX_BODY_CHARS > body_size(capped) > MAX_BODY_CHARS - 1000
    shown = [line for line in capped.splitlines() if line.startswith("| `")]
    assert sum("gone" in line for line in shown) == 30 and sum("slow" in line for line in shown) == 40
    assert sum("fast" in line for line in shown) == 30  # every failure, regression and improvement kept
    left_out = len(rows) - len(shown)
    assert left_out > 0 and f"_{left_out:,} of {len(rows):,} rows left out" in capped
    # Where every row is: what the workflow's artifact holds (report.json; it held no markdown, a review's find).
    assert "every row is in the workflow run's artifact (`report.json`)" in capped
    assert f"Unchanged ({len(shown) - 100} of 1500)" in capped
    regs = [line for line in shown if "slow" in line]
    assert regs[0].count("slow039") and regs[-1].count("slow000")  # worst first
    assert sum(line.startswith("| `") for line in full.splitlines()) == len(rows)
    assert "rows left out" not in full


# -- through the store and the command line ----------------------------------------------------------

EVIL_NAME = "bench_evil.@team[x](http://e).time_<img src=x>|`tick`"
EVIL_MACHINE = "gpu-@ops-<b>"
EVIL_PARAM = repr("<!-- mlaperf-benchmark-report --> @team")


def _make_hostile(root: Path, old_machine: str) -> None:
    """Rename a synthetic history's first benchmark, its 'mma' parameter and its machine to hostile
    strings (as asv would write them), so they go through real ingestion."""
    old = "bench_synth.Synth000.time_case"
    bench = json.loads((root / "benchmarks.json").read_text())
    entry = bench.pop(old)
    entry["name"] = EVIL_NAME
    entry["params"][0] = ["'simt'", EVIL_PARAM]
    bench[EVIL_NAME] = entry
    (root / "benchmarks.json").write_text(json.dumps(bench))
    (root / EVIL_MACHINE).mkdir()
    for path in (root / old_machine).glob("*.json"):
        doc = json.loads(path.read_text())
        if path.name == "machine.json":
            doc["machine"] = EVIL_MACHINE
        else:
            doc["params"]["machine"] = EVIL_MACHINE
            row = doc["results"].pop(old)
            row[doc["result_columns"].index("params")][0] = ["'simt'", EVIL_PARAM]
            doc["results"][EVIL_NAME] = row
        (root / EVIL_MACHINE / path.name).write_text(json.dumps(doc))
    shutil.rmtree(root / old_machine)


def test_cli_report_of_a_hostile_store_is_escaped_capped_and_complete_in_the_artifact(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_synthetic_results(tmp_path / "r", commits=2, series=600, machine="m", steps={1: 1.3}, seed=9)
    _make_hostile(h.root, "m")
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    ingest(make_engine(url), [h.root])
    capped, full, js = tmp_path / "comment.md", tmp_path / "full.md", tmp_path / "c.json"
    rc = main(
        ["compare", h.shas[0], h.shas[1], "--db", url, "--markdown-out", str(capped),
         "--full-markdown-out", str(full), "--json-out", str(js)]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert rc == 1 and printed == capped.read_text()
    comment, whole, rows = capped.read_text(), full.read_text(), json.loads(js.read_text())
    assert len(rows) == 600 and {r["machine"] for r in rows} == {EVIL_MACHINE}
    assert EVIL_NAME in {r["benchmark"] for r in rows}  # JSON keeps the data as it is
    assert body_size(comment) < MAX_BODY_CHARS < body_size(whole)
    assert comment.count(MARKER) == whole.count(MARKER) == 1
    assert LINKISH.search(comment) is None and LINKISH.search(whole) is None
    assert sum(line.startswith("| `") for line in whole.splitlines()) == 600
    assert "rows left out" in comment and "rows left out" not in whole


def test_cli_failed_benchmark_fails_the_check_and_bad_output_path_is_usage(
    tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    h = write_synthetic_results(tmp_path / "r", commits=2, series=6, machine="m", seed=10)
    head = next((h.root / "m").glob(f"{h.shas[1][:8]}-*.json"))
    doc = json.loads(head.read_text())
    name = "bench_synth.Synth000.time_case"
    doc["results"][name][doc["result_columns"].index("result")][3] = None  # asv: the case raised
    head.write_text(json.dumps(doc))
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    ingest(make_engine(url), [h.root])
    rc = main(["compare", h.shas[0], h.shas[1], "--db", url])
    out = capsys.readouterr().out
    assert rc == 1 and "**0 regressions**, **1 failed** (1 on head only)" in out and ":x:" in out
    assert re.search(r"\| [0-9.]+ [mu]?s \| \*\*failed\*\* \|", out)
    rc = main(["compare", h.shas[0], h.shas[1], "--db", url, "--markdown-out", str(tmp_path / "no" / "c.md")])
    err = capsys.readouterr().err
    assert rc == 2 and "--markdown-out" in err and "no such directory" in err


def test_untested_changes_are_listed_largest_first() -> None:
    """A 5.90x change with one value a side was row 89 of its section, in name order (a review on third-party
    data); the heading says what "untested" lacks: fewer than MIN_HISTORY_RUNS earlier commits, not "no history"."""
    from regressions.compare import MIN_HISTORY_RUNS, SeriesPair, compare_pair
    from regressions.report import ordered

    rows = [compare_pair(SeriesPair(benchmark=f"b.C.track_{i}", params={}, machine="m", unit="unit",
                                    direction="up_is_worse", threshold=0.05, base=1.0, head=h))
            for i, h in enumerate([1.2, 5.9, 0.5, 1.1])]  # fmt: skip
    assert {c.status for c in rows} == {"untested"}
    assert [c.head for c in ordered(rows)] == [5.9, 0.5, 1.2, 1.1]  # 0.5 is 2x the other way
    md = compare_markdown(rows, base="a" * 40, head="b" * 40, machines=["m"], threshold_note="threshold 5%")
    assert f"fewer than {MIN_HISTORY_RUNS} earlier commits" in md and "no history" not in md


def test_unchanged_rows_beyond_the_threshold_come_first_and_are_named() -> None:
    """A 1.47x slowdown the test could not call significant (stingray's, wide 99% intervals) sat among 140
    unchanged rows in name order (a review): unchanged rows beyond the threshold come first, largest first, and
    the section's heading says how many moved that far."""
    from regressions.compare import UNCHANGED

    def row(name: str, head: float) -> Comparison:
        c = _pair(0, name, 1e-5, head)
        return Comparison(**{**c.__dict__, "status": UNCHANGED, "significant": False, "regression": False})

    rows = [row("Alpha", 1.01e-5), row("Bravo", 1.2e-5), row("Charlie", 0.99e-5), row("Delta", 1.47e-5),
            row("Echo", 0.8e-5)]
    body = compare_markdown(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%")
    section = body[body.index("<summary>Unchanged"):]
    assert section.startswith("<summary>Unchanged (5): the first 3 moved beyond the threshold, but no test could "
                              "tell it from noise (largest first)</summary>"), section[:200]
    names = [n for n in ("Alpha", "Bravo", "Charlie", "Delta", "Echo") if n in section]
    assert sorted(names, key=section.index) == ["Delta", "Echo", "Bravo", "Alpha", "Charlie"]
    from regressions.text_table import compare_text

    text = compare_text(rows, base="a" * 40, head="b" * 40, machines=["h200"], threshold_note="5%", width=200)
    assert "Not listed: 5 unchanged (3 beyond the threshold, not significant)" in text, text
