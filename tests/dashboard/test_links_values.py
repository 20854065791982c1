"""What QA found in links and defaults: parameter values with a comma or Markdown in them, link values that
name nothing (a machine, an overlay), the machine a view opens on (dashboard and site alike), the commit
Throughput opens on when the newest run measured a few points, and the units of a fraction's axis.

The store: machine ``odd`` (odd parameter values, a roofline fraction) and machine ``part`` (the decode suite;
its newest run measured one concurrency of four), ``part`` measured last."""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
from pathlib import Path

import asv_synth
import pandas as pd
import pytest
from conftest import OPENBLAS, mlaperf_cli, site_data
from streamlit.testing.v1 import AppTest
from test_pages import app, goto, shown_table

from dashboard import fmt, links, machines, throughput_model

SHAPES = ["(64, 128)", "(32, 64)", "*x*", "a&amp;b"]
ODD_BENCH = "bench_odd.Odd.time_odd"
FRACTION = "bench_odd.Odd.track_roofline_fraction"
PART_COMMITS = 4


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths

    tmp = tmp_path_factory.mktemp("odd")
    odd = [asv_synth.Bench(ODD_BENCH, ["shape"], [[repr(s) for s in SHAPES]], "seconds",
                           lambda i, p: 1e-5 * (1 + SHAPES.index(p["shape"]))),
           asv_synth.Bench(FRACTION, [], [], "fraction", lambda i, p: 0.0038 + 0.0001 * i)]
    asv_synth.write_results(tmp / "odd", "odd", odd, asv_synth.commit_shas(3, "odd"),
                            start=dt.datetime(2025, 1, 1, tzinfo=dt.UTC))
    decode = [b for b in asv_synth.mla_benchmarks(metrics=False) if b.name.startswith("bench_decode")]
    for b in decode:  # the newest run measured concurrency 1 only (a partial re-run)
        b.value = lambda i, p, f=b.value: None if i == PART_COMMITS - 1 and p["concurrency"] > 1 else f(i, p)
    asv_synth.write_results(tmp / "part", "part", decode, asv_synth.commit_shas(PART_COMMITS, "part"),
                            start=dt.datetime(2025, 2, 1, tzinfo=dt.UTC))
    url = f"sqlite:///{tmp / 'store.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    summary = ingest_paths(engine, [tmp / "odd", tmp / "part"], progress=False)
    assert summary.ok, summary.failed
    engine.dispose()
    return url


def warnings(at: AppTest) -> str:
    return "\n".join(str(w.value) for w in at.warning)


# -- 3: values with a comma travel as repeated keys; old comma-joined links still read --------------------


def test_a_value_with_a_comma_round_trips(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    at = goto(app(monkeypatch, store, query={"machine": "odd", "hist_bench": ODD_BENCH,
                                       "hp_shape": ["(64, 128)", "*x*"]}), "history")
    assert at.pills(key="hp_shape").value == ["(64, 128)", "*x*"]
    assert at.query_params["hp_shape"] == ["(64, 128)", "*x*"]  # written back as two keys, not "a,b"
    at.pills(key="hp_shape").set_value(["(64, 128)"]).run()
    assert at.query_params["hp_shape"] in ("(64, 128)", ["(64, 128)"])
    # A link to one series whose value holds a comma (links.history), followed in the app.
    link = links.history("odd", ODD_BENCH, json.dumps({"shape": repr("(32, 64)")}))
    _, params = links.target(link)
    at = goto(app(monkeypatch, store, query=params), "history")
    assert at.pills(key="hp_shape").value == ["(32, 64)"] and not warnings(at)
    assert links.target(links.to("history", hp_shape=["(64, 128)", "a,b"]))[1]["hp_shape"] == ["(64, 128)", "a,b"]


def test_an_old_comma_joined_link_still_reads(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    at = goto(app(monkeypatch, store, query={"machine": "part", "hist_bench": "bench_decode.SparseDecode.time_decode",
                                       "hp_concurrency": "16,64", "hp_impl": "mma", "hp_topk": "512"}), "history")
    assert at.pills(key="hp_concurrency").value == [16, 64] and not warnings(at)


# -- 7: pill and radio labels are literal text ---------------------------------------------------------------


def test_pill_labels_are_literal_text(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    at = goto(app(monkeypatch, store, query={"machine": "odd", "hist_bench": ODD_BENCH}), "history")
    # Streamlit reads a pill's label as Markdown: escaped, "*x*" shows its stars and "a&amp;b" its entity.
    options = at.pills(key="hp_shape").options
    assert set(options) == {fmt.md_text(s) for s in SHAPES}
    assert r"\*x\*" in options and r"a\&amp;b" in options and "*x*" not in options
    at.pills(key="hp_shape").set_value(["*x*"]).run()  # the value, not its label, is what is picked
    assert at.pills(key="hp_shape").value == ["*x*"] and at.query_params["hp_shape"] in ("*x*", ["*x*"])


# -- 2: a link's value that names nothing is said, not silently replaced ------------------------------------


def test_unknown_machine_in_a_link_or_the_environment_is_named(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    at = app(monkeypatch, store, query={"machine": "bogus"})
    assert at.sidebar.selectbox(key="machine").value == "part"
    assert "`bogus`" in warnings(at) and "Machine" in warnings(at)
    at.run()  # said once: the URL now holds the machine shown
    assert not warnings(at) and at.query_params["machine"] in ("part", ["part"])
    at = app(monkeypatch, store, machine="bogus")
    assert "no machine named 'bogus' (known: odd, part)" in warnings(at).replace("\\", "")


@pytest.mark.parametrize(("page", "key", "more"), [("throughput", "tp_vs", {}), ("history", "hist_vs", {})])
def test_unknown_overlay_machine_in_a_link_is_named(monkeypatch: pytest.MonkeyPatch, store: str, page: str,
                                                    key: str, more: dict[str, str]) -> None:
    at = goto(app(monkeypatch, store, query={"machine": "part", key: "nosuch", **more}), page)
    assert (at.selectbox(key=key).value is None) if page == "throughput" else (at.pills(key=key).value == [])
    assert "`nosuch`" in warnings(at) and "odd" in warnings(at)
    assert "(none)" not in warnings(at).replace("\\", "")  # the "no overlay" choice is no machine a link names


# -- 6: one rule for the machine a view opens on -------------------------------------------------------------


def test_dashboard_and_site_open_on_the_machine_measured_last(monkeypatch: pytest.MonkeyPatch, store: str,
                                                              tmp_path: Path) -> None:
    frame = pd.DataFrame({"name": ["a-gpu", "cpu", "b"], "gpu_name": ["H200", "none", "H100"],
                          "last_run_at": pd.to_datetime(["2025-01-01", "2025-03-01", None])})
    assert machines.order(frame) == ["cpu", "a-gpu", "b"]
    at = app(monkeypatch, store)
    assert at.sidebar.selectbox(key="machine").value == "part"  # not "odd", the alphabetically first
    mlaperf_cli("publish", "--db", store, "--out", str(tmp_path / "site"))
    assert [m["folder"] for m in site_data(tmp_path / "site", "site")["machines"]][0] == "part"


# -- 8: Throughput opens on the newest commit with the fullest grid -----------------------------------------


def test_throughput_opens_on_the_fullest_grid(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    shas = asv_synth.commit_shas(PART_COMMITS, "part")
    at = goto(app(monkeypatch, store, query={"machine": "part"}), "throughput")
    assert at.selectbox(key="tp_commit").value == shas[-2]
    assert at.selectbox(key="tp_base").placeholder == "Pick a commit or type its sha"  # not "Choose or add ..."
    said = "\n".join(str(c.value) for c in at.caption)
    assert f"Opened on {shas[-2][:8]}" in said and "16 points" in said and f"{shas[-1][:8]} 4 points" in said
    # Efficiency opens there too (a partial newest run drew two points a line). Compare counts the results that
    # ran: the newest commit's cases failed, which is what Compare is opened for, so it opens on the newest.
    at = goto(app(monkeypatch, store, query={"machine": "part"}), "efficiency")
    assert at.selectbox(key="eff_commit").value == shas[-2]
    assert any(f"Opened on {shas[-2][:8]}" in str(c.value) for c in at.caption)
    at = goto(app(monkeypatch, store, query={"machine": "part"}), "compare")
    assert at.selectbox(key="cmp_head").value == shas[-1] and at.selectbox(key="cmp_base").value == shas[-2]
    assert not any("Opened on" in str(c.value) for c in at.caption)
    # A link naming the newest commit still opens it.
    at = goto(app(monkeypatch, store, query={"machine": "part", "tp_commit": shas[-1][:12]}), "throughput")
    assert at.selectbox(key="tp_commit").value == shas[-1]
    commits = pd.DataFrame({"commit_id": [1, 2, 3], "sha": ["a" * 40, "b" * 40, "c" * 40]})
    assert throughput_model.default_commit(commits, pd.Series({1: 4, 2: 4, 3: 4})) == (None, "")
    assert throughput_model.default_commit(commits, pd.Series({1: 4, 2: 4, 3: 1}))[0] == "b" * 40
    # A partial run is one of fewer than half the fullest's (Compare's 60 of 240 series read "missing at head
    # 180"); one case failed or removed is not (it pinned Compare to a commit 30 old: a review).
    half = {"unit": "results", "fullest": "the most results", "share": throughput_model.PARTIAL_SHARE}
    sha, why = throughput_model.default_commit(commits, pd.Series({1: 240, 2: 240, 3: 60}), **half)
    assert sha == "b" * 40 and why.startswith("the newest commit with the most results (240 results)"), why
    assert throughput_model.default_commit(commits, pd.Series({1: 240, 2: 239, 3: 239}), **half) == (None, "")
    sha, why = throughput_model.default_commit(commits, pd.Series({1: 240, 2: 239, 3: 30}), **half)
    assert sha == "b" * 40 and "at least half of the most results (239 of 240 results)" in why, why
    # A chart's grid stays the fullest: 239 of 240 points opens on the 240.
    assert throughput_model.default_commit(commits, pd.Series({1: 240, 2: 239, 3: 239}))[0] == "a" * 40


# -- 5: a fraction's axis in percent, as its values are shown ------------------------------------------------


def test_fraction_axes_read_in_percent(monkeypatch: pytest.MonkeyPatch, store: str, tmp_path: Path) -> None:
    from mlaperf.publish_axes import value_axis

    axis = value_axis([0.0038, 0.0040], "fraction")
    assert axis["title"] == "value (%)" and axis["labels"][0].startswith("0.3"), axis
    assert axis["ticks"][0] <= 0.0038 and axis["domain"][1] >= 0.0040  # positions stay in the values' unit
    at = goto(app(monkeypatch, store, query={"machine": "odd", "hist_bench": FRACTION}), "history")
    spec = at.get("vega_lite_chart")[0].proto.spec
    assert '"title": "value (%)"' in spec.replace('":"', '": "') and "value (fraction)" not in spec
    site = tmp_path / "site"
    mlaperf_cli("publish", "--db", store, "--out", str(site), "--machine", "odd")
    pages = [site_data(site, p.relative_to(site / "data").with_suffix("").as_posix())
             for p in (site / "data").glob("*/s*.js")]
    frac = next(p for p in pages if p["text"][0].endswith("%"))
    assert frac["y"]["title"] == "value (%)"
    # The labels bracket the values as the hover writes them (0.38%..0.40%).
    labels = [float(t) for t in frac["y"]["labels"]]
    assert labels[0] <= 0.38 and labels[-1] >= 0.40 and labels[-1] < 1, frac["y"]


def test_url_encoding_of_links_is_repeated_keys() -> None:
    assert urllib.parse.parse_qs(links.to("history", hp=["a,b", "c"]).split("?", 1)[1]) == {"hp": ["a,b", "c"]}


# -- review of session 57: link values that were dropped without a word, or read as something else -------------


@pytest.mark.parametrize("bad", ["nan", "abc", "inf", "5000", "-0.5"])
def test_a_bad_threshold_in_a_link_is_named_not_used(monkeypatch: pytest.MonkeyPatch, store: str, bad: str) -> None:
    """``cmp_threshold=nan`` stopped the Compare page with a ConfigError traceback; abc, inf, 0, 5000 and -0.5 were
    dropped without a word."""
    at = goto(app(monkeypatch, store, query={"machine": "part", "cmp_threshold": bad}), "compare")
    assert f"`{bad}`" in warnings(at) and "Threshold override" in warnings(at), warnings(at)
    assert "a number from 0.1 to 900" in warnings(at)
    assert at.number_input(key="cmp_threshold").value is None


def test_a_good_threshold_in_a_link_is_used_silently(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    at = goto(app(monkeypatch, store, query={"machine": "part", "cmp_threshold": "7.5"}), "compare")
    assert at.number_input(key="cmp_threshold").value == 7.5 and not warnings(at)


@pytest.mark.parametrize(("text", "on"), [("true", True), ("1", True), ("off", False), ("maybe", None)])
def test_on_off_words_in_a_link(monkeypatch: pytest.MonkeyPatch, store: str, text: str, on: bool | None) -> None:
    """``reg_all=true`` showed one machine's alerts without a word (only 1 and 0 were read)."""
    at = goto(app(monkeypatch, store, query={"machine": "part", "reg_all": text}), "regressions")
    assert at.toggle(key="reg_all").value is bool(on)
    assert (f"`{text}`" in warnings(at) and "1 or 0" in warnings(at)) is (on is None), warnings(at)


def test_one_bad_value_among_good_ones_keeps_the_good(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    """``hp_concurrency=16&hp_concurrency=999`` named 999 and showed the default series instead of 16's."""
    query = {"machine": "part", "hist_bench": "bench_decode.SparseDecode.time_decode", "hp_impl": "mma",
             "hp_topk": "512"}
    for values in (["16", "999"], "16,999"):
        at = goto(app(monkeypatch, store, query={**query, "hp_concurrency": values}), "history")
        assert at.pills(key="hp_concurrency").value == [16]
        assert "`999`" in warnings(at) and "showing the link's other values" in warnings(at)


def test_a_prefix_names_a_commit_only(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    """``machine=gha-aws-g`` opened gha-aws-graviton and ``hist_bench=benchmarks.gemm`` gemm.time_gemm without a
    word: a unique prefix is how a commit sha travels, not a machine's or a benchmark's name."""
    at = app(monkeypatch, store, query={"machine": "od"})
    assert "`od`" in warnings(at) and at.sidebar.selectbox(key="machine").value == "part"  # the default, named
    short = "bench_decode.SparseDecode.time_dec"
    at = goto(app(monkeypatch, store, query={"machine": "part", "hist_bench": short}), "history")
    assert f"`{short}`" in warnings(at), warnings(at)


def test_a_parameter_the_benchmark_lacks_is_named_and_dropped(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    """``hp_nosuch=1`` was ignored without a word and stayed in the URL."""
    at = goto(app(monkeypatch, store, query={"machine": "odd", "hist_bench": ODD_BENCH, "hp_nosuch": "1"}), "history")
    assert "no parameter `nosuch`" in warnings(at) and "shape" in warnings(at), warnings(at)
    assert "hp_nosuch" not in at.query_params and "hp_shape" in at.query_params
    at = at.selectbox(key="hist_bench").set_value(FRACTION).run()  # this session's own hp_shape: dropped silently
    assert not at.exception and not warnings(at), warnings(at)
    assert "hp_shape" not in at.query_params


def test_every_value_of_a_link_bad_says_the_default_is_shown(monkeypatch: pytest.MonkeyPatch, store: str) -> None:
    """``reg_show=bogus`` showed the default states under a warning that said "showing the link's other values"."""
    at = goto(app(monkeypatch, store, query={"machine": "part", "reg_show": ["bogus", "nope"]}), "regressions")
    assert "showing the default instead" in warnings(at) and "other values" not in warnings(at), warnings(at)


def test_a_short_commit_sha_still_travels_as_a_prefix() -> None:
    """asv names a commit by 7 to 64 hex digits; a store of 16-digit shas lost its links' prefixes (only 40 and 64
    were taken for commits), while a machine's name is never matched by its beginning."""
    from dashboard import url_values

    assert url_values._decode_one("0123456789ab", ["0123456789abcdef", "fedcba9876543210"]) == "0123456789abcdef"
    with pytest.raises(ValueError):
        url_values._decode_one("gha-aws-g", ["gha-aws-graviton", "gha-aws-skylake"])


def test_a_machine_without_a_description_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The Overview's Machine table of a machine whose runs recorded no description (OpenBLAS's machine.json holds
    only its name) read a bare "empty"."""
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    mlaperf_cli("ingest", str(OPENBLAS / "gha-aws-skylake"), "--db", url, "-q")
    at = app(monkeypatch, url)
    assert "recorded no machine description" in " ".join(c.value for c in at.caption)
    assert not at.table


def _many_rows_page() -> None:
    import pandas as pd

    from dashboard import fmt, links

    n = 30_000  # 9 columns: 270,000 cells, past pandas' Styler limit of 262,144
    table = pd.DataFrame({f"name{i}": [f"bench.C.time_{r}" for r in range(n)] for i in range(6)})
    table["ratio"] = [1 + r / n for r in range(n)]
    table["p"] = [1e-11] * n
    table["history"] = [f"history?benchmark=bench.C.time_{r}" for r in range(n)]
    links.grid(table, key="many", links={"history": "plot"}, shown_as={"ratio": fmt.fmt_ratio, "p": fmt.fmt_p})


def test_a_grid_of_more_cells_than_pandas_styles_is_drawn_whole() -> None:
    # A Compare of 30,000 series: Streamlit refused the styled grid ("styler-exceeds-max-elements").
    at = AppTest.from_function(_many_rows_page, default_timeout=60).run()
    assert not at.exception, at.exception
    shown = shown_table(at, "ratio")
    assert len(shown) == 30_000 and shown["ratio"].iloc[0] == "1.00x" and shown["p"].iloc[-1] == "1e-11"
