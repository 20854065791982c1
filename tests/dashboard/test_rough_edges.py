"""The rough edges of issue 28, each with the test that would have caught it: a mistyped or too-short commit in
a Compare link, base == head, the largest-changes chart without its one regression, missing database
drivers and unsupported databases, speed-up formatting, "1 commits"."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import MLA_MACHINE, ROOT, SLOW_FROM, Seeded
from test_pages import app, goto, texts

from dashboard import charts, fmt, widgets


def _mlaperf(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mlaperf.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_mistyped_commit_in_a_compare_link_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch,
                                                                  seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url, query={"cmp_base": "deadbeef00", "cmp_head": seeded.shas[-1][:12]}),
              "compare")
    errors = [e.value for e in at.error]
    assert errors and "deadbeef00" in errors[0] and "cmp_base" in errors[0]
    assert not at.get("vega_lite_chart") and not at.dataframe  # no other pair shown instead
    at = goto(app(monkeypatch, seeded.url, query={"cmp_head": "e7"}), "compare")
    assert "too short" in at.error[0].value


def test_commit_problem_says_short_ambiguous_or_unknown() -> None:
    shas = ["abcd1234" + "0" * 32, "abcd9999" + "0" * 32]
    assert "too short" in widgets.commit_problem("abc", shas)
    ambiguous = widgets.commit_problem("abcd", shas)
    assert "ambiguous" in ambiguous and "abcd12340000" in ambiguous
    assert "no commit" in widgets.commit_problem("ffff", shas)


def test_base_equal_head_is_the_same_answer_in_cli_and_page(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    sha = seeded.shas[SLOW_FROM][:12]
    done = _mlaperf("compare", sha, sha, "--db", seeded.url, "--machine", MLA_MACHINE, "--format", "json")
    assert done.returncode == 0, done.stderr
    cli = pd.Series([r["status"] for r in json.loads(done.stdout)]).value_counts().to_dict()
    at = goto(app(monkeypatch, seeded.url, query={"cmp_base": sha, "cmp_head": sha}), "compare")
    assert "same commit" in texts(at)
    labels = {o.content for o in at.get("button_group")[0].proto.options}  # "Unchanged 184", "Regressed 0" ...
    unchanged = cli.get("unchanged", 0)
    assert unchanged > 0 and set(cli) <= {"unchanged", "not_run"}
    assert f"Unchanged {unchanged:,}" in labels and "Regressed 0" in labels
    assert not at.get("vega_lite_chart")  # no "largest changes" chart of zero-length bars


def test_largest_changes_chart_keeps_the_one_regression() -> None:
    rows = [{"status": "improved", "benchmark": f"m.C.track_gbps_{i}", "label": "n=1", "slowdown": 0.3,
             "base": 1.0, "head": 3.0, "unit": "GB/s", "ratio": 3.0, "p_value": 1e-4} for i in range(30)]
    rows += [{"status": "unchanged", "benchmark": f"m.C.track_roofline_{i}", "label": "n=1", "slowdown": 1.9,
              "base": 1.0, "head": 0.5, "unit": "fraction", "ratio": 0.5, "p_value": 0.2} for i in range(30)]
    rows.append({"status": "regressed", "benchmark": "m.C.time_decode", "label": "n=1", "slowdown": 1.08,
                 "base": 1e-5, "head": 1.08e-5, "unit": "seconds", "ratio": 1.08, "p_value": 1e-4})
    frame = pd.DataFrame(rows)
    spec = charts.compare_spec(frame.assign(series=frame["benchmark"] + " [n=1]", direction=[
        "up_is_worse" if u == "seconds" else "down_is_worse" for u in frame["unit"]]), title="t")
    bars = spec["data"]["values"]
    assert "regressed" in set(bars["status"]) and len(bars) == 15
    assert bars["status"].iloc[0] == "regressed"


def test_largest_changes_labels_tell_the_bars_apart() -> None:
    """One benchmark's cases with long parameter values (MuJoCo Warp's ``function=step.forward...``): cut at their
    end every label read the same (a review); cut in the middle, the shared ``benchmark.`` dropped, each differs
    and keeps the parameter's end."""
    params = ["step.forward.fwd_position.collision", "step.forward.fwd_position.crb", "step.forward.fwd_velocity.rne"]
    frame = pd.DataFrame({"status": "improved", "benchmark": "benchmark.AlohaPot.track_metric", "slowdown": 0.8,
                          "base": 1.0, "head": 0.8, "unit": "unit", "ratio": 0.8, "p_value": 1e-4,
                          "direction": "up_is_worse", "series": [f"benchmark.AlohaPot.track_metric [function={p}]"
                                                                 for p in params]})  # fmt: skip
    bars = charts.compare_spec(frame, title="t")["data"]["values"]
    labels = list(bars["label"])
    assert len(set(labels)) == 3 and all(len(label) <= 52 for label in labels), labels
    assert [label.rsplit(".", 1)[-1] for label in labels] == ["collision]", "crb]", "rne]"]
    assert all(label.startswith("AlohaPot.track_metric [") for label in labels) and list(bars["series"]) == list(
        frame["series"])


def test_missing_driver_and_unsupported_database_exit_2(seeded: Seeded) -> None:
    for url, needle in (("postgresql+pg8000://u@localhost/x", "'pg8000' is not installed"),
                        ("mysql+pymysql://u@localhost/x", "SQLite or PostgreSQL")):
        for argv in (("compare", "aaaa", "bbbb"), ("detect", "--list"), ("publish", "--out", "/tmp/never-made")):
            done = _mlaperf(*argv, "--db", url)
            assert done.returncode == 2, (argv, done.stderr)
            assert needle in done.stderr and "internal error" not in done.stderr, (argv, done.stderr)


def test_short_commit_prefix_in_the_cli_says_so(seeded: Seeded) -> None:
    done = _mlaperf("compare", "abc", seeded.shas[-1][:12], "--db", seeded.url)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.endswith("BASE: 'abc' is too short: give at least 4 characters of a commit sha "
                         "(and it names no git ref here)"), line
    assert line.count("give") == 1  # one instruction, not two


def test_speedups_and_counts_read_alike() -> None:
    assert [fmt.fmt_speedup(v) for v in (35.0, 8.234, 1.0, 123.4, 0.5)] == ["35.0x", "8.23x", "1.00x", "123x",
                                                                            "0.500x"]
    assert fmt.fmt_speedup(None) == "-"
    assert (fmt.plural(1, "commit"), fmt.plural(1000, "commit")) == ("1 commit", "1,000 commits")


def test_history_reads_in_dark_mode_and_keeps_its_legend(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url, query={"hist_bench": "bench_decode.SparseDecode.time_decode"}), "history")
    text = at.get("vega_lite_chart")[0].proto.spec
    spec = json.loads(text)
    assert '"black"' not in text and "#000000" not in text.upper()  # invisible on a dark background
    assert spec["config"]["legend"]["unselectedOpacity"] == 1  # series not shaded stay fully drawn
    at = goto(app(monkeypatch, seeded.url, query={"cmp_base": seeded.shas[SLOW_FROM - 1][:12],
                                                  "cmp_head": seeded.shas[SLOW_FROM][:12]}), "compare")
    text = at.get("vega_lite_chart")[0].proto.spec
    assert '"black"' not in text and "#000000" not in text.upper()


DARK_BACKGROUND = "#0e1117"  # Streamlit's dark theme


def _luminance(hex_color: str) -> float:
    channels = [int(hex_color[i:i + 2], 16) / 255.0 for i in (1, 3, 5)]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_every_chart_colour_reads_on_the_dark_theme(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """Lines, markers, bands, peaks and legend symbols of every chart stand out on the dark background
    (contrast >= 3:1, the WCAG figure for graphics): eight series on History use the whole palette."""
    import re

    views = [("history", {"hist_bench": "bench_decode.SparseDecode.time_decode", "hp_impl": "mma,simt",
                          "hp_concurrency": "1,16,64,128", "hp_topk": "512"}),
             ("throughput", {"tp_base": seeded.shas[0][:12]}), ("efficiency", {}),
             ("compare", {"cmp_base": seeded.shas[SLOW_FROM - 1][:12], "cmp_head": seeded.shas[SLOW_FROM][:12]})]
    seen: set[str] = set()
    for page, query in views:
        at = goto(app(monkeypatch, seeded.url, query=query), page)
        specs = [c.proto.spec for c in at.get("vega_lite_chart")]
        assert specs, page
        colours = {c.lower() for spec in specs for c in re.findall(r'"(#[0-9a-fA-F]{6})"', spec)}
        colours -= {charts.OUTLINE}  # the white outline around markers, drawn on top of a line
        weak = {c: round(_contrast(c, DARK_BACKGROUND), 2) for c in colours if _contrast(c, DARK_BACKGROUND) < 3}
        assert not weak, (page, weak)
        assert '"black"' not in "".join(specs), page
        seen |= colours
    assert {c.lower() for c in charts.OKABE_ITO[:7]} <= seen  # the palette's first seven were checked


def test_a_sweep_over_a_text_parameter_draws_no_line() -> None:
    """MuJoCo Warp's one parameter names 28 metrics of a benchmark (``function=step.forward...``): the sweep joined
    them by a line, bytes beside us, a trend that is none (a review). Points alone there, labels that differ; a
    numeric parameter keeps its line."""
    names = ["step.forward.fwd_position.collision", "step.forward.fwd_position.crb", "device_memory_allocated"]
    text = pd.DataFrame({"p:function": names, "value": [1.0, 2.0, 3.0]})
    spec = charts.sweep_spec(text, x="p:function", color=None, unit="unit", title="t")
    assert spec["mark"]["type"] == "point" and spec["encoding"]["x"]["type"] == "ordinal"
    assert len(set(spec["data"]["values"]["x"])) == 3 and set(spec["data"]["values"]["value of x"]) == set(names)
    numeric = pd.DataFrame({"p:concurrency": ["1", "16", "64"], "value": [1.0, 2.0, 3.0]})
    line = charts.sweep_spec(numeric, x="p:concurrency", color=None, unit="seconds", title="t")
    assert line["mark"]["type"] == "line"
