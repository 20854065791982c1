"""Renamed benchmarks between two commits: asv files with a class renamed and a module moved, through the store,
`compare_commits`, the PR report and the text table; the removal the report spells out makes the check pass."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from regressions.compare import Comparison, compare_commits, exit_status
from regressions.config import Settings, load_settings, parse_settings
from regressions.renames import removal_patterns, renames
from regressions.report import compare_markdown
from regressions.results import resolve_commit
from regressions.text_table import compare_text
from tests.db.conftest import bench_row, results_doc, write_results

Ingest = Callable[[Engine, list[Path]], None]
BASE, HEAD = "a" * 40, "b" * 40
# bench_a's class Decode becomes DecodeSuite (bench_a still runs at head: missing); bench_c moves to bench_d (bench_c
# runs no more: not measured at head); two old cases end in time_run and one new: a tie, no pairing.
# asv's template suite gone and a new class with one method of the same name: alone, no rename (Kedro's results).
AT_BASE = {"bench_a.Decode.time_x": 1.0, "bench_a.Decode.time_y": 2.0, "bench_a.Keep.time_k": 1.0,
           "bench_c.C.time_w": 3.0, "bench_a.P.time_run": 1.0, "bench_a.Q.time_run": 1.0,
           "benchmark_dummy.TimeSuite.time_keys": 1.0, "benchmark_dummy.TimeSuite.time_range": 1.0}
AT_HEAD = {"bench_a.DecodeSuite.time_x": 1.0, "bench_a.DecodeSuite.time_y": 2.2, "bench_a.Keep.time_k": 1.0,
           "bench_d.C.time_w": 3.0, "bench_a.R.time_run": 1.0, "bench_e.Catalog.time_keys": 3.8}


def _compare(tmp_path: Path, engine: Engine, ingest: Ingest, settings: Settings | None = None) -> list[Comparison]:
    t = 1_700_000_000_000
    for sha, values, when in ((BASE, AT_BASE, t), (HEAD, AT_HEAD, t + 10**6)):
        rows = {name: bench_row([v], []) for name, v in values.items()}
        write_results(tmp_path, results_doc(rows, machine="m", commit=sha, date=when))
    ingest(engine, [tmp_path])
    with Session(engine) as s:
        b, h = resolve_commit(s, BASE, "BASE"), resolve_commit(s, HEAD, "HEAD")
        return compare_commits(s, b, h, **({"settings": settings} if settings else {}))


def test_renamed_cases_pair_by_the_end_of_their_names(tmp_path: Path, engine: Engine, ingest: Ingest) -> None:
    rows = _compare(tmp_path, engine, ingest)
    status = {c.benchmark: c.status for c in rows}
    assert status["bench_a.Decode.time_x"] == "missing" and status["bench_c.C.time_w"] == "removed", status
    pairs = {r.old.benchmark: r.new.benchmark for r in renames(rows)}
    assert pairs == {"bench_a.Decode.time_x": "bench_a.DecodeSuite.time_x",
                     "bench_a.Decode.time_y": "bench_a.DecodeSuite.time_y",
                     "bench_c.C.time_w": "bench_d.C.time_w"}, pairs  # P and Q tie for R; time_keys alone
    # bench_a keeps Keep and the new class: only the old names, never a pattern that covers the new ones
    assert removal_patterns([r for r in renames(rows) if r.old.status == "missing"], rows) == [
        "bench_a.Decode.time_x", "bench_a.Decode.time_y"]
    md = compare_markdown(rows, base=BASE, head=HEAD, machines=["m"], threshold_note="threshold 5%")
    assert "2 of these look renamed" in md and "1.00x to 1.10x" in md, md
    assert "the largest 1.10x (`bench_a.Decode.time_y` -> `bench_a.DecodeSuite.time_y`)" in md, md
    assert '```toml\nremoved = [\n  "bench_a.Decode.time_x",\n  "bench_a.Decode.time_y",\n]\n```' in md, md
    assert "renamed? `bench_a.DecodeSuite.time_y` (1.10x) |" in md and "1 of these looks renamed" in md, md
    assert "across the rename 1.00x." in md, md
    text = compare_text(rows, base=BASE, head=HEAD, machines=["m"], threshold_note="threshold 5%", width=200)
    assert "bench_a.Decode.time_y -> bench_a.DecodeSuite.time_y (1.10x)" in text, text
    assert "bench_c.C.time_w -> bench_d.C.time_w (1.00x)" in text and "2 of the missing look renamed" in text, text
    assert "renamed? from `bench_a.Decode.time_x` (1.00x) |" in md
    assert '    removed = [\n      "bench_a.Decode.time_x",' in text, text
    assert exit_status(rows) == 1


def test_the_removal_the_report_spells_out_passes_the_check(tmp_path: Path, engine: Engine, ingest: Ingest) -> None:
    """The fenced block pasted into mlaperf.toml, where the note says (a review pasted it under [tool.mlaperf]
    there, as an earlier wording said, and the file was refused)."""
    md = compare_markdown(_compare(tmp_path / "1", engine, ingest), base=BASE, head=HEAD, machines=["m"],
                          threshold_note="threshold 5%")
    assert "declare the old names removed in mlaperf.toml (or under [tool.mlaperf] in pyproject.toml)" in md
    (block,) = re.findall(r"```toml\n(.*?)```", md, flags=re.S)
    (tmp_path / "mlaperf.toml").write_text(block)
    rows = _compare(tmp_path / "2", engine, ingest, load_settings(tmp_path / "mlaperf.toml"))
    status = {c.benchmark: c.status for c in rows}
    assert status["bench_a.Decode.time_x"] == status["bench_a.Decode.time_y"] == "removed", status
    assert {b for b, s in status.items() if s == "missing"} == {"bench_a.P.time_run", "bench_a.Q.time_run"}, status
    without_tie = [c for c in rows if c.benchmark not in ("bench_a.P.time_run", "bench_a.Q.time_run")]
    assert exit_status(without_tie) == 0 and exit_status(rows) == 1  # the unpaired tie still fails it


def test_a_whole_module_renamed_is_declared_by_one_pattern(tmp_path: Path, engine: Engine, ingest: Ingest) -> None:
    """Every benchmark of bench_c renamed into bench_d: ``bench_c.*`` covers them and nothing of head."""
    rows = _compare(tmp_path, engine, ingest)
    assert removal_patterns([r for r in renames(rows) if r.old.benchmark.startswith("bench_c.")], rows) == [
        "bench_c.*"]


def _row(benchmark: str, status: str, base_status: str, **params: str) -> SimpleNamespace:
    return SimpleNamespace(benchmark=benchmark, params=params, machine="m", unit="seconds", status=status,
                           base_status=base_status, base=1.0, head=1.0, threshold=0.05)


def test_removal_patterns_name_no_case_that_was_not_renamed() -> None:
    """One case of three renamed (another still measured under the old name, one gone unpaired): the renamed
    cases by ``name(params)``, not the name (which would declare the unpaired case removed too); a name with
    fnmatch's own characters bracketed, so the pattern matches it alone."""
    rows = [_row("bp.A.time_x", "missing", "ok", p0="1"), _row("bp.A.time_x", "missing", "ok", p0="2"),
            _row("bp.A.time_x", "missing", "ok", p0="3"), _row("bp.B.time_x", "new", "absent", p0="1"),
            _row("bp.B.time_x", "new", "absent", p0="2"), _row("m.A.time_[x]", "missing", "ok"),
            _row("m.A.time_x", "unchanged", "ok"), _row("m.B.time_[x]", "new", "absent"),
            _row("m.A.time_[y]", "missing", "ok"), _row("m.B.time_[y]", "new", "absent")]
    found = renames(rows)
    assert [(r.old.benchmark, r.old.params, r.new.benchmark) for r in found] == [
        ("bp.A.time_x", {"p0": "1"}, "bp.B.time_x"), ("bp.A.time_x", {"p0": "2"}, "bp.B.time_x"),
        ("m.A.time_[x]", {}, "m.B.time_[x]"), ("m.A.time_[y]", {}, "m.B.time_[y]")]
    patterns = removal_patterns(found, rows)
    assert patterns == ["bp.A.time_x(p0=1)", "bp.A.time_x(p0=2)", "m.A.time_[[]x]", "m.A.time_[[]y]"], patterns
    settings = parse_settings({"removed": patterns}, "t")
    assert [settings.is_removed(r.benchmark, r.params) for r in rows if r.status != "new"] == [
        True, True, False, True, False, True]


def _case(benchmark: str, status: str, **params: str) -> Comparison:
    sides = {"missing": ("ok", "missing"), "new": ("absent", "ok"), "unchanged": ("ok", "ok")}[status]
    base, head = (1.0 if s == "ok" else None for s in sides)
    return Comparison(benchmark=benchmark, params=params, machine="m", unit="seconds", direction="up_is_worse",
                      threshold=0.05, status=status, base_status=sides[0], head_status=sides[1], base=base, head=head,
                      ratio=1.0 if base and head else None, slowdown=None, significant=False, regression=False,
                      method="none", p_value=None)


def test_the_pasted_block_declares_exactly_the_renamed_cases_whatever_their_names(tmp_path: Path) -> None:
    """Names a review brought: a dotted name the comment's link guard split with a zero-width space (the pasted
    pattern then matched nothing), a case of 11 parameters (its line was cut at 200 characters: not TOML), an
    emoji (written as a surrogate pair: not TOML), and a module whose other case went unpaired (``bench_attn.*``
    declared it removed too)."""
    wide = {f"p{i:02d}": f"'value-number-{i}'" for i in range(11)}
    rows = [_case("bench_http.Client.time_get", "missing"), _case("bench_http2.Client.time_get", "new"),
            _case("bench_http.Server.time_serve", "unchanged"),
            _case("bench_wide.W.time_w", "missing", **wide), _case("bench_wider.W.time_w", "new", **wide),
            _case("bench_wide.W.time_w", "unchanged", p00="'other'"),
            _case("bench_str.Encode.time_utf8", "missing", text="'\U0001f600'"),
            _case("bench_text.Encode.time_utf8", "new", text="'\U0001f600'"),
            _case("bench_str.Encode.time_utf8", "unchanged", text="'a'"),
            _case("bench_attn.F.time_fwd", "missing", backend="'triton'"),
            _case("bench_attention.F.time_fwd", "new", backend="'triton'"),
            _case("bench_attn.F.time_fwd", "missing", backend="'torch'")]
    assert len(renames(rows)) == 4
    md = compare_markdown(rows, base=BASE, head=HEAD, machines=["m"], threshold_note="threshold 5%")
    (block,) = re.findall(r"\n```toml\n(.*?)\n```", md, flags=re.S)
    assert block.isascii() and "\u2026" not in block and max(map(len, block.splitlines())) > 200, block
    (tmp_path / "mlaperf.toml").write_text(block)
    settings = load_settings(tmp_path / "mlaperf.toml")
    gone = [c for c in rows if c.status == "missing"]
    assert [settings.is_removed(c.benchmark, c.params) for c in gone] == [True, True, True, True, False], block
    assert not any(settings.is_removed(c.benchmark, c.params) for c in rows if c.status != "missing")


def test_report_perf_times_the_pairs_it_means(capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/scripts/report_perf``'s rows pair as its docstring says (else it would time something else)."""
    from benchmarks.scripts import report_perf

    assert report_perf.measure(100, "mixed")["pairs"] == 8 and report_perf.measure(100, "moved")["pairs"] == 50
    assert report_perf.main(["--rows", "100"]) == 0 and "target: each step at most 2 s" in capsys.readouterr().out
