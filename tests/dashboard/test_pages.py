"""AppTest of every page on a seeded store (synthetic MLA suites + the real OpenBLAS asv results, the real
detector): the numbers, the triage, the history and the URL state a kernel engineer relies on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import asv_synth
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import (
    APP,
    FAILED,
    FIX_FROM,
    MLA_MACHINE,
    NEW_VERSION,
    OPENBLAS,
    ROOT,
    SLOW_FROM,
    TORCH_FROM,
    Seeded,
    md_table,
)
from sqlalchemy import select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

from dashboard import links
from regressions.report import reversed_note
from regressions.units import fmt_ratio

TIMEOUT = 90
KEY_64 = json.dumps({"concurrency": "64", "impl": "'mma'", "topk": "512"}, sort_keys=True)


def app(monkeypatch: pytest.MonkeyPatch, url: str, *, writable: bool = False, repo: str = "",
        machine: str | None = None, query: dict[str, str | list[str]] | None = None) -> AppTest:
    """The app over the store at ``url`` as `mlaperf dashboard` starts it (``machine``: its --machine; None
    leaves the environment's)."""
    monkeypatch.setenv("MLAPERF_DB", url)
    monkeypatch.setenv("MLAPERF_DASHBOARD_WRITABLE", "1" if writable else "0")
    monkeypatch.setenv("MLAPERF_REPO_URL", repo)
    if machine is not None:
        monkeypatch.setenv("MLAPERF_DASHBOARD_MACHINE", machine)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def vega(at: AppTest) -> list[tuple[dict, dict[str, pd.DataFrame]]]:
    """Each Vega-Lite chart on the page: its spec and its frames: the top-level data (the frame the layers
    share, sent as Arrow) as "data", and each layer's named inline data by its name."""
    out = []
    for c in at.get("vega_lite_chart"):
        spec = json.loads(c.proto.spec)
        frames = {d.name: pa.ipc.open_stream(d.data.data).read_pandas() for d in c.proto.datasets}
        if c.proto.data.data:
            frames["data"] = pa.ipc.open_stream(c.proto.data.data).read_pandas()
        for layer in spec.get("layer", []):
            if "name" in layer.get("data", {}) and "values" in layer["data"]:
                frames[layer["data"]["name"]] = pd.DataFrame(layer["data"]["values"])
        out.append((spec, frames))
    return out


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("title", "subheader", "markdown", "caption", "info", "success", "warning",
                                  "error") for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def table(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe on the page that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no table with column {column!r}: {[list(d.value.columns) for d in at.dataframe]}")


def shown_table(at: AppTest, column: str) -> pd.DataFrame:
    """The first dataframe on the page that has ``column``, as it is drawn: a styled grid's display values
    (``links.grid``'s ``shown_as``) in place of its numbers."""
    for df in at.dataframe:
        if column in df.value.columns:
            styled = df.proto.arrow_data.styler.display_values
            return pa.ipc.open_stream(styled).read_pandas() if styled else df.value
    raise AssertionError(f"no table with column {column!r}")


def test_overview_counts_alert_groups(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = app(monkeypatch, seeded.url)
    assert at.title[0].value.startswith("mlaperf")
    assert at.sidebar.selectbox(key="machine").value == MLA_MACHINE  # the machine measured last (dashboard.machines)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Fixed groups"] == "1" and metrics["Open alert groups"] == "0" and metrics["Suspect groups"] == "0"
    assert metrics["Commits"] == "12"
    groups = table(at, "culprit")
    assert len(groups) == 1
    assert groups["commits"].iloc[0] == f"{seeded.shas[SLOW_FROM - 1][:8]}..{seeded.shas[SLOW_FROM][:8]}"
    assert groups["fixed at"].iloc[0] == seeded.shas[FIX_FROM][:8]
    assert groups["worst"].iloc[0].startswith("1.3") and groups["worst"].iloc[0].endswith("x")
    machine = at.table[0].value
    assert machine.loc["GPU", "value"] == "NVIDIA H200"
    assert machine.loc["RAM", "value"].endswith("GiB")  # not a byte count


def test_throughput_lines_per_impl_and_baseline(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "throughput")
    shown = vega(at)
    assert len(shown) == 1  # one suite at a time
    assert at.selectbox(key="tp_suite").options == ["Sparse MLA decode: SIMT vs MMA",
                                                    "Indexer + top-k: fp32 over max_context vs bf16",
                                                    "Whole decode step: variants"]
    spec, data = shown[0]
    points = data["data"]
    assert set(points["line"]) == {"mma", "simt"} and set(points["commit"]) == {seeded.shas[-1][:8]}
    assert spec["encoding"]["x"]["scale"]["type"] == "log"
    assert spec["encoding"]["x"]["axis"]["values"] == [1, 16, 64, 128]
    assert spec["encoding"]["y"]["scale"]["type"] == "log"
    assert points["text"].str.endswith(" tokens/s").all()  # hover in the unit people read
    assert {"field": "text", "title": "throughput"} in spec["layer"][1]["encoding"]["tooltip"]
    assert at.radio(key="tp_decode_filter").value == 512
    speedups = md_table(at, "c=1")  # a few rows: Markdown, not a data grid
    assert list(speedups["impl"]) == ["mma"]
    assert all(v.endswith("x") and float(v[:-1]) > 1 for v in speedups.filter(like="c=").iloc[0])

    # Overlay a commit from before the seeded MMA slowdown (the newest commit is after the fix).
    at.selectbox(key="tp_commit").set_value(seeded.shas[SLOW_FROM]).run()
    at.selectbox(key="tp_base").set_value(seeded.shas[0]).run()
    assert not at.exception
    spec, data = vega(at)[0]
    dashed = data["data"][data["data"]["baseline"]]
    assert set(dashed["line"]) == {"mma", "simt"} and set(dashed["commit"]) == {f"{seeded.shas[0][:8]} (baseline)"}
    dash = spec["layer"][0]["encoding"]["strokeDash"]["scale"]
    assert dash == {"domain": [seeded.shas[SLOW_FROM][:8], f"{seeded.shas[0][:8]} (baseline)"],
                    "range": [[1, 0], [6, 4]]}
    ratios = md_table(at, "speed-up")
    mma = ratios[ratios["impl"] == "mma"]["speed-up"].str.rstrip("x").astype(float)
    simt = ratios[ratios["impl"] == "simt"]["speed-up"].str.rstrip("x").astype(float)
    assert (mma < 0.85).all() and ((simt - 1).abs() < 0.1).all()
    assert ratios["tokens/s"].str.contains(",").any()  # thousands separators
    at.radio(key="tp_decode_filter").set_value(128).run()
    assert "topk=128" in vega(at)[0][0]["title"]["text"]
    assert at.query_params["tp_decode_filter"] == ["128"] or at.query_params["tp_decode_filter"] == "128"


def test_throughput_derives_tokens_per_s_from_time(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = app(monkeypatch, seeded.url, query={"tp_suite": "step"})
    at = goto(at, "throughput")
    assert "Whole decode step" in vega(at)[0][0]["title"]["text"]
    # The step suite has no track_tokens_per_s here: concurrency / time is used.
    assert "`concurrency / time`" in "\n".join(c.value for c in at.caption)


def test_baseline_drawn_only_where_measured() -> None:
    from dashboard import charts

    cur = pd.DataFrame({"line": ["mma"] * 4, "concurrency": [1, 2, 4, 8], "tokens_per_s": [1e4, 2e4, 4e4, 8e4]})
    base = pd.DataFrame({"line": ["mma"] * 2, "concurrency": [1, 8], "tokens_per_s": [1e4, 5e4]})
    spec = charts.throughput_spec(cur, title="t", line_label="impl", commit_label="h", baseline=base,
                                  baseline_label="b")
    points = spec["data"]["values"]
    dashed = points[points["baseline"]]
    assert list(dashed["concurrency"]) == [1, 2, 4, 8]
    y = list(dashed["tokens_per_s"])
    assert y[0] == 1e4 and y[3] == 5e4 and np.isnan(y[1]) and np.isnan(y[2])  # gaps, no straight line
    assert spec["layer"][0]["mark"]["invalid"] == charts.GAPS  # a missing value breaks the line


def test_history_defaults_to_the_flagged_series(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "history")
    assert at.selectbox(key="hist_bench").value == "bench_decode.SparseDecode.time_decode"
    assert at.pills(key="hp_impl").value == ["mma"]
    conc = at.pills(key="hp_concurrency")
    assert [o.content for o in conc.proto.options] == ["1", "16", "64", "128"]  # numeric order, not text order
    assert conc.value == [1, 16, 64, 128]  # every series flagged with it, overlaid
    spec, data = vega(at)[0]
    points, markers = data["data"], data["markers"]
    assert list(dict.fromkeys(points["series"])) == ["concurrency=1", "concurrency=16", "concurrency=64",
                                                     "concurrency=128"]
    one = points[points["series"] == "concurrency=1"].set_index("pos")
    assert len(one) == 12 and one["q25"].notna().all()  # IQR bars
    assert list(markers.loc[markers["kind"] == "flagged regression", "pos"]) == [SLOW_FROM] * 4
    assert list(markers.loc[markers["kind"] == "fixed here", "pos"]) == [FIX_FROM] * 4
    assert points.groupby("series")["lo"].agg(lambda v: v.notna().any()).all()  # the threshold band of each series
    band, _, line, dots = spec["layer"][:4]
    assert band["mark"]["type"] == "area" and band["encoding"]["y2"] == {"field": "hi"}
    # One band at a time: the first flagged series', or that of the series clicked in the legend.
    (pick,) = [p for p in line["params"] if p.get("bind") == "legend"]
    assert pick["value"] == [{"series": "concurrency=1"}] and pick["select"]["fields"] == ["series"]
    assert {"filter": {"param": pick["name"], "empty": False}} in band["transform"]
    assert line["encoding"]["y"]["title"] == "time (us)"
    # Commits on the axis: a label is the short SHA at its position, looked up in the chart's parameter.
    shas = next(p["value"] for p in spec["params"] if p["name"] in line["encoding"]["x"]["axis"]["labelExpr"])
    assert shas == [s[:8] for s in seeded.shas]
    assert line["params"][0]["bind"] == "scales"  # zoom and pan along history
    # Hover: value in us, the commit, run date, benchmark version, the kernel config and the run's versions.
    assert [t["field"] for t in dots["encoding"]["tooltip"]] == [
        "series", "value", "commit", "committed", "run", "benchmark version", "kernel config", "versions"]
    slow = one.loc[SLOW_FROM]
    assert " us (IQR " in slow["value"]
    assert slow["commit"].startswith(seeded.shas[SLOW_FROM][:8] + " ")
    assert slow["kernel config"] == "block_h=16 · block_n=32 · num_splits=1"  # the config the slow commit ran
    assert one.loc[0, "kernel config"] == "block_h=64 · block_n=32 · num_splits=2"
    # Each point's own run's versions (the machine now has the newer ones)
    assert slow["versions"] == "GPU NVIDIA H200 (sm 9.0) · driver 580.159.04 · CUDA 12.8 · torch 2.11.0 · triton 3.6.0"
    assert one.loc[TORCH_FROM - 1, "versions"] == \
        "GPU NVIDIA H200 (sm 9.0) · driver 570.86.15 · CUDA 12.8 · torch 2.10.0 · triton 3.6.0"
    flagged = md_table(at, "fixed at")
    # The step's compare link is a page link (same tab, same session), not a Markdown link (a new tab).
    compare_links = [e.proto for e in at.get("page_link") if e.proto.label.startswith("Compare ")]
    assert len(compare_links) == 1 and not compare_links[0].external
    assert f"cmp_base={seeded.shas[SLOW_FROM - 1][:12]}" in compare_links[0].query_string
    assert f"cmp_head={seeded.shas[SLOW_FROM][:12]}" in compare_links[0].query_string
    assert "](" not in str(md_table(at, "fixed at").to_numpy().tolist())
    assert set(flagged["commits"]) == {f"{seeded.shas[SLOW_FROM - 1][:8]}..{seeded.shas[SLOW_FROM][:8]}"}
    assert not flagged["p"].str.contains(r"0\.000").any()


def test_history_keeps_the_first_series_in_numeric_order(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """16 series picked, 12 drawn: the ones cut are the last in the selectors' order (simt at 64 and 128)."""
    at = app(monkeypatch, seeded.url, query={"hist_bench": "bench_decode.SparseDecode.time_decode",
                                               "hp_impl": "mma,simt", "hp_concurrency": "1,16,64,128",
                                               "hp_topk": "128,512"})  # fmt: skip
    at = goto(at, "history")
    assert any("16 series selected" in w.value for w in at.warning)
    names = list(dict.fromkeys(vega(at)[0][1]["data"]["series"]))
    assert len(names) == 12
    assert not [n for n in names if "impl=simt" in n and ("concurrency=64" in n or "concurrency=128" in n)]
    assert [n for n in names if "impl=mma" in n and "concurrency=64" in n]


def test_history_from_url_marks_failed_runs_and_versions(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = app(monkeypatch, seeded.url, query={"hist_bench": FAILED[1], "hp_variant": "mma+indexer",
                                               "hp_concurrency": "1,64", "hp_context": "4096", "hist_values": "1"})
    at = goto(at, "history")
    assert at.selectbox(key="hist_bench").value == FAILED[1]
    assert at.pills(key="hp_concurrency").value == [1, 64]
    markers = vega(at)[0][1]["markers"]
    assert set(markers.loc[markers["kind"] == "failed run", "pos"]) == {FAILED[0]}
    values = table(at, "subject")
    assert values.iloc[::-1]["concurrency=1"].iloc[FAILED[0]] == "failed"
    assert values["concurrency=64"].iloc[0].endswith("us")

    at.selectbox(key="hist_bench").set_value(NEW_VERSION[1]).run()
    rules = [layer for layer in vega(at)[0][0]["layer"] if "values" in layer.get("data", {})
             and "name" not in layer["data"]]
    assert [v["pos"] for v in rules[0]["data"]["values"]] == [NEW_VERSION[0] - 0.5]  # the version boundary
    assert at.query_params["hist_bench"] in (NEW_VERSION[1], [NEW_VERSION[1]])


def test_regressions_groups_and_rows(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "regressions")
    groups = table(at, "commit (first bad)")
    assert len(groups) == 1 and groups["state"].iloc[0].startswith("fixed")
    assert groups["parent (good)"].iloc[0].startswith(seeded.shas[SLOW_FROM - 1][:8])
    rows = shown_table(at, "before → after")
    assert table(at, "before → after")["ratio"].dtype == float  # sorted as numbers, drawn as text
    assert "status" not in rows and "group" not in rows  # one group, one status: said by the group table
    mma = r"impl=mma\b|variant=mma"  # the decode kernel and the step variants that run it
    assert rows["series"].str.contains(mma).all() and not rows["series"].str.contains("simt|baseline").any()
    row = rows[rows["series"] == "bench_decode.SparseDecode.time_decode [impl=mma, concurrency=64, topk=512]"].iloc[0]
    assert row["commits"] == f"{seeded.shas[SLOW_FROM - 1][:8]}..{seeded.shas[SLOW_FROM][:8]}"
    assert row["ratio"].startswith("1.3") and row["ratio"].endswith("x")
    assert row["before → after"].count("us") == 2
    assert groups["fixed at"].iloc[0] == seeded.shas[FIX_FROM][:8]
    assert row["history"] == "plot →" and row["compare"] == "parent..commit →"
    assert "--writable" in texts(at) and "Compare's ratio" in texts(at)
    # The detector's p is its normal noise model's (regressions.detect), not a test on samples (the caption said so).
    assert "normal model" in texts(at) and "Mann-Whitney" not in texts(at)
    assert len(at.button) == 1  # only the sidebar's reload button: read-only
    # Closed groups are hidden by default; the other machine's acknowledged one shows with all machines.
    at.toggle(key="reg_all").set_value(True).run()
    if OPENBLAS.exists():
        assert "gha-aws-graviton" in set(table(at, "before → after")["machine"])
        groups = table(at, "commit (first bad)")
        assert list(groups["fixed at"]) == [seeded.shas[FIX_FROM][:8], ""]  # text, not NaN, where not fixed


def _series_widths(at: AppTest) -> list[tuple[int, int]]:
    """(the series column's width, its longest label's length) of every grid on the page with a series column."""
    out = []
    for df in at.dataframe:
        config = json.loads(df.proto.columns or "{}").get("series", {})
        if "series" in df.value.columns and config.get("type_config", {}).get("type") == "text":
            out.append((config["width"], int(df.value["series"].astype(str).str.len().max())))
    return out


def test_series_names_are_not_cut(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """Regressions' series columns as wide as their longest name (within links.FIT_PX): at a fixed "large" the
    decode rows read "bench_decode.SparseDecode.time_decode [impl=mma, concurrenc" alike, the concurrency that tells
    them apart cut. (All benchmarks keeps "large": its plot column has to stay in view at 1,400 px.)"""
    at = goto(app(monkeypatch, seeded.url), "regressions")
    at.pills(key="reg_show").set_value(["open", "suspect", "fixed", "closed"]).run()
    widths = _series_widths(at)
    assert len(widths) == 2, [list(d.value.columns) for d in at.dataframe]  # open/fixed steps, closed steps
    for width, longest in widths:
        assert isinstance(width, int) and width == links.fit_width(["x" * longest]), (width, longest)
        assert width >= min(longest * 6, links.FIT_PX[1]), (width, longest)


def test_a_partly_fixed_groups_fixed_at_is_not_cut(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded) -> None:
    """The groups table's "fixed at" as wide as its text: "2 of 4: b07c3" was all a group partly fixed showed at
    80 px (a review)."""
    import sqlite3

    with sqlite3.connect(writable_copy.path) as con:  # one member of each group open again: "n of m: sha"
        con.execute("UPDATE regression SET status = 'new', fixed_commit_id = NULL WHERE id IN "
                    "(SELECT MIN(id) FROM regression WHERE fixed_commit_id IS NOT NULL GROUP BY group_id)")
    at = goto(app(monkeypatch, writable_copy.url), "regressions")
    groups = next(d for d in at.dataframe if "fixed at" in d.value.columns and "commit (first bad)" in d.value.columns)
    fixed = groups.value["fixed at"].astype(str)
    width = json.loads(groups.proto.columns or "{}")["fixed at"]["width"]
    longest = int(fixed.str.len().max())
    assert fixed.str.contains(" of ").any() and width >= min(longest * 6 + 24, 160), (width, list(fixed))


def test_a_bad_configuration_is_named_on_the_page(monkeypatch: pytest.MonkeyPatch, seeded: Seeded,
                                                  tmp_path: Path) -> None:
    """An mlaperf.toml with a key it does not know (a [tool.mlaperf.directions] table copied from a pyproject.toml)
    is an error naming the file above every page, not a traceback on Overview, History and Compare (a review)."""
    from dashboard import data

    (tmp_path / "mlaperf.toml").write_text('[tool.mlaperf.directions]\n"*.track_x" = "down_is_worse"\n')
    monkeypatch.chdir(tmp_path)
    data.settings.clear()
    try:
        for page in ("overview", "history", "compare"):
            at = goto(app(monkeypatch, seeded.url), page) if page != "overview" else app(monkeypatch, seeded.url)
            errors = [str(e.value) for e in at.error]
            assert any("Configuration: mlaperf.toml: unknown key" in e and "tool" in e for e in errors), (page, errors)
    finally:
        data.settings.clear()

def test_triage_needs_a_note_and_stores_it(monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded) -> None:
    from dashboard import notes
    from db.engine import make_engine
    from db.models import Regression

    at = goto(app(monkeypatch, writable_copy.url, writable=True), "regressions")
    group = at.selectbox(key="reg_pick").options[0]
    assert group.startswith("group")
    at.button(key="reg_ignored").click().run()
    assert "Write a note first" in texts(at)
    at.text_input(key="reg_note").input("expected: BLOCK_H=16 was deliberate").run()
    at.button(key="reg_ignored").click().run()
    assert not at.exception
    engine = make_engine(writable_copy.url, readonly=True)
    with Session(engine) as s:
        statuses = set(s.scalars(select(Regression.status).where(Regression.machine_id.is_not(None))))
        log = notes.triage_notes(s)
    engine.dispose()
    assert "ignored" in statuses
    assert log and all(n[-1]["note"] == "expected: BLOCK_H=16 was deliberate" for n in log.values())
    assert all(n[-1]["status"] == "ignored" for n in log.values())


def _cli_compare(url: str, base: str, head: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "mlaperf.cli", "compare", base, head, "--machine", MLA_MACHINE,
                          "--db", url, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_compare_page_equals_mlaperf_compare(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    base, head = seeded.shas[SLOW_FROM - 1], seeded.shas[SLOW_FROM]
    at = app(monkeypatch, seeded.url, query={"cmp_base": base[:12], "cmp_head": head[:12]})
    at = goto(at, "compare")
    from dashboard import data

    page = data.compare(seeded.url, MLA_MACHINE, base, head, None)
    cli = pd.DataFrame(_cli_compare(seeded.url, base[:8], head[:8]))
    cli["params_key"] = [json.dumps(p, sort_keys=True) for p in cli["params"]]
    merged = page.merge(cli, on=["benchmark", "params_key"], suffixes=("_page", "_cli"), validate="one_to_one")
    assert len(merged) == len(page) == len(cli)
    assert (merged["status_page"] == merged["status_cli"]).all()
    assert np.allclose(merged["ratio_page"].astype(float), merged["ratio_cli"].astype(float), equal_nan=True)
    counts = status_counts(at)
    assert list(counts) == ["Regressed", "Missing at head", "Improved", "Failed", "Repaired at head",
                            "Benchmark changed", "Untested",
                            "Not measured at base", "Not measured at head", "Not run", "Unchanged"]
    assert counts["Regressed"] == int((cli["status"] == "regressed").sum()) != 0
    assert sum(counts.values()) == len(cli)
    numbers, shown = table(at, "method"), shown_table(at, "method")
    assert set(shown["status"]) == {"regressed"}  # unchanged and not run are hidden by default
    # Ratio and p are numbers in the grid (a header click sorts them as numbers), drawn as the CLI prints them.
    assert (numbers["ratio"] > 1.05).all() and list(shown["ratio"]) == [fmt_ratio(r) for r in numbers["ratio"]]
    assert shown["series"].str.contains(r"impl=mma\b|variant=mma").all()
    assert shown["change"].str.endswith("worse").all() and shown["ratio"].str.endswith("x").all()
    assert not shown["p"].str.contains("0.000").any()
    spec, data = vega(at)[0]  # the largest changes as bars, coloured by status
    bars = data["data"]
    assert bars["pct"].abs().max() > 20 and "regressed" in set(bars["status"])
    color = spec["layer"][0]["encoding"]["color"]["scale"]
    assert dict(zip(color["domain"], color["range"], strict=True))["regressed"] == "#D55E00"


def status_counts(at: AppTest) -> dict[str, int]:
    """Compare's status pills, {title: series count} ("Regressed 3")."""
    options = [o.content for o in at.pills(key="cmp_show").proto.options]
    return {o.rsplit(" ", 1)[0]: int(o.rsplit(" ", 1)[1].replace(",", "")) for o in options}


def test_compare_hides_unchanged_series_by_default(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """Two commits with nothing regressed, improved, failed, new or removed (most nights): the counts, no table
    until a status is picked; picking one lists its series."""
    at = app(monkeypatch, seeded.url, query={"cmp_base": seeded.shas[7][:12], "cmp_head": seeded.shas[8][:12]})
    at = goto(at, "compare")
    counts = status_counts(at)
    assert counts["Unchanged"] > 0 and counts["Regressed"] == counts["Improved"] == counts["Failed"] == 0
    assert at.pills(key="cmp_show").value == [] and not [d for d in at.dataframe if "method" in d.value.columns]
    assert "click a status" in texts(at)
    at.pills(key="cmp_show").set_value(["unchanged"]).run()
    assert len(table(at, "method")) == counts["Unchanged"]
    assert at.query_params["cmp_show"] in ("unchanged", ["unchanged"])
    assert not at.warning  # in history order: nothing to say
    # The pair the wrong way round: compared as given, with `mlaperf compare`'s warning.
    back = goto(app(monkeypatch, seeded.url, query={"cmp_base": seeded.shas[8][:12], "cmp_head": seeded.shas[7][:12]}),
                "compare")
    assert [w.value for w in back.warning] == [reversed_note(seeded.shas[8], seeded.shas[7])]


def test_compare_names_failed_and_not_run(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = app(monkeypatch, seeded.url, query={"cmp_base": seeded.shas[FAILED[0] - 1][:12],
                                             "cmp_head": seeded.shas[FAILED[0]][:12]})
    at = goto(at, "compare")
    assert status_counts(at)["Failed"] == len(asv_cases(FAILED[1]))
    shown = table(at, "method")
    failed = shown[shown["status"] == "failed"]
    assert (failed["after"] == "failed").all() and failed["before"].str.contains(r"\d (?:us|ms)$").all()


def asv_cases(name: str) -> list[dict]:
    return next(b for b in asv_synth.mla_benchmarks() if b.name == name).combos()


def test_efficiency_peaks_and_log_axes(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "efficiency")
    shown = vega(at)  # roofline, GB/s and TFLOP/s of the chosen suite side by side, one chart each
    assert [spec["title"]["text"] for spec, _ in shown] == ["roofline (% of roofline)", "achieved bandwidth (GB/s)",
                                                            "achieved compute (TFLOP/s)"]
    labels = [t for _, data in shown for t in data["data"]["label"].dropna()]
    assert "roofline: 100%" in labels
    copy = next(t for t in labels if t.startswith("measured copy: "))
    assert float(copy.split(": ")[1].split()[0].replace(",", "")) == pytest.approx(4270, rel=0.05)  # synthetic
    # Datasheet peaks from settings.gpu's table (the seeded machine is an NVIDIA H200)
    assert "datasheet: 4,800 GB/s" in labels and "datasheet bf16 dense: 989 TFLOP/s" in labels
    curves = [spec["layer"][0]["encoding"] for spec, _ in shown]
    assert all(c["color"]["scale"]["domain"] == ["mma", "simt"] for c in curves)  # one colour per kernel
    assert all(c["color"]["legend"]["orient"] == "bottom" for c in curves)  # under the plots, not over the title
    assert all(c["y"]["scale"]["type"] == "log" for c in curves)
    assert all(spec.get("width") in (None, "container") for spec, _ in shown)  # as wide as its column
    assert "reaches" in texts(at)
    at.toggle(key="eff_logy").set_value(False).run()
    assert "scale" not in vega(at)[0][0]["layer"][0]["encoding"]["y"]  # linear
    at.selectbox(key="eff_suite").set_value("indexer").run()
    assert "Indexer" in texts(at)


PAGES = ["overview", "throughput", "history", "regressions", "compare", "efficiency"]


@pytest.mark.skipif(not OPENBLAS.exists(), reason="OpenBLAS asv fixture missing")
@pytest.mark.parametrize("page", PAGES)
def test_generic_asv_project(monkeypatch: pytest.MonkeyPatch, seeded: Seeded, page: str) -> None:
    at = app(monkeypatch, seeded.url, query={"machine": "gha-aws-graviton"})
    assert at.sidebar.selectbox(key="machine").value == "gha-aws-graviton"
    at = goto(at, page)
    body = texts(at)
    if page == "throughput":
        assert "No sparse-MLA suites" in body and "curves only" not in body
        at.query_params["tp_vs"] = "gha-aws-skylake"  # an overlay the generic chart cannot draw: said, not dropped
        at.run()
        assert "suites' throughput curves only" in texts(at)
        at.selectbox(key="tp_sweep_bench").set_value("benchmarks.axpy.time_axpy").run()
        spec, data = vega(at)[0]
        assert spec["encoding"]["x"]["title"] == "size"
        assert set(data["data"]["group"]) == {"variant=s", "variant=d", "variant=c", "variant=z"}
    elif page == "efficiency":
        assert "No efficiency metrics" in body
    elif page == "history":
        assert len(vega(at)) == 1
    elif page == "compare":
        assert sum(status_counts(at).values()) > 100
    elif page == "overview":
        assert "No sparse-MLA suites" in body
    elif page == "regressions":
        assert "Alert groups (1)" in body and table(at, "commit (first bad)")["state"].iloc[0] == "acknowledged"


def test_empty_store_explains_ingest(monkeypatch: pytest.MonkeyPatch, empty_store: str) -> None:
    at = app(monkeypatch, empty_store)
    assert "mlaperf ingest" in texts(at)
    assert not at.get("vega_lite_chart")


def test_missing_store_explains_ingest(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    at = app(monkeypatch, f"sqlite:///{tmp_path / 'nope.sqlite'}")
    body = texts(at)
    assert "No store at" in body and "mlaperf ingest" in body
    assert not (tmp_path / "nope.sqlite").exists()  # read-only: nothing created


def test_bad_url_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    at = app(monkeypatch, "nosuchdriver://x/y")
    assert "unknown database driver" in at.error[0].value


def test_history_hover_of_runs_stored_before_per_run_versions(monkeypatch: pytest.MonkeyPatch,
                                                              writable_copy: Seeded) -> None:
    """Runs ingested before Run.info existed (NULL there, as migration 0005 leaves them) show the machine's
    versions, marked as such; a SIMT point shows only the keys that apply to it (its tile)."""
    from db.engine import make_engine
    from db.models import Commit, Run

    engine = make_engine(writable_copy.url)
    with Session(engine) as s, s.begin():
        old = select(Commit.id).where(Commit.sha.in_(writable_copy.shas[:TORCH_FROM]))
        for run in s.execute(select(Run).where(Run.commit_id.in_(old))).scalars():
            run.info = None
    engine.dispose()
    at = goto(app(monkeypatch, writable_copy.url, query={"hist_bench": "bench_decode.SparseDecode.time_decode",
                                                         "hp_impl": "simt,mma", "hp_concurrency": "64",
                                                         "hp_topk": "512"}), "history")  # fmt: skip
    points = vega(at)[0][1]["data"]
    mma, simt = (points[points["series"] == f"impl={i}"].sort_values("pos") for i in ("mma", "simt"))
    assert mma["versions"].iloc[0] == (
        "GPU NVIDIA H200 (sm 9.0) · driver 580.159.04 · CUDA 12.8 · torch 2.11.0 · triton 3.6.0 "
        "(the machine's, as of its newest run: this run did not record its own)")
    now = mma["versions"].iloc[TORCH_FROM]
    assert "torch 2.11.0" in now and "machine's" not in now
    assert simt["kernel config"].iloc[0] == "block_n=32"  # no head block or split-K in the SIMT kernel


CPU_SMOKE = ROOT / "tests" / "dashboard" / "data" / "cpu-smoke"  # a real run of the decode suite, see its README


def test_history_hover_of_real_runs(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    """The bundled H200 history and a real CPU smoke-tier run ingested together: each point's hover has its
    run's torch version and, where the suite recorded it, the kernel config (all H200 runs but the newest
    predate it)."""
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths

    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    summary = ingest_paths(engine, [ROOT / "history" / "results", CPU_SMOKE], progress=False)
    engine.dispose()
    assert summary.ok and summary.ingested == 13, summary.line()
    query = {"hist_bench": "bench_decode.SparseDecode.time_decode", "hp_concurrency": "1"}
    at = goto(app(monkeypatch, url, query={**query, "machine": "smoke-cpu", "hp_impl": "simt,mma",
                                            "hp_topk": "64"}), "history")  # fmt: skip
    assert not any("track_launch" in o for o in at.selectbox(key="hist_bench").options)
    points = vega(at)[0][1]["data"]
    first = points.sort_values("pos").groupby("series").first()
    mma, simt = first.loc["impl=mma"], first.loc["impl=simt"]
    assert mma["kernel config"].startswith("block_h=16 · block_n=16 · num_splits=")
    assert "num_warps=4" in mma["kernel config"]
    assert "spill_bytes" not in mma["kernel config"], "the interpreter compiles nothing: no spill count"
    assert simt["kernel config"] == "block_n=16 · num_warps=4"
    assert mma["versions"] == "CPU (no GPU) · torch 2.13.0+cpu · triton 3.9.0 · runner arch profile native"

    at = goto(app(monkeypatch, url, query={**query, "machine": "h200", "hp_impl": "mma", "hp_topk": "512"}),
              "history")  # fmt: skip
    points = vega(at)[0][1]["data"].sort_values("pos")
    assert points["series"].nunique() == 1
    gpu = "GPU NVIDIA H200 (sm 9.0) · driver 580.159.04 · CUDA 13.0 · torch 2.11.0+cu130 · triton 3.6.0"
    # Every bundled point has its config (the older runs' were recorded later, history/README.md): the
    # deliberate regression (eee7909) ran without split-K at one request, its fix (b07c34e) split again.
    assert "not recorded" not in set(points["kernel config"])
    assert set(points["versions"]) == {f"{gpu} · runner arch profile native"}
    splits = points.set_index("commit")["kernel config"].str.extract(r"num_splits=(\d+)")[0]
    assert list(splits[splits.index.str.startswith("eee7909")]) == ["1"], splits
    assert list(splits[splits.index.str.startswith("b07c34e")]) == ["16"], splits
    newest = points.iloc[-1]
    assert newest["kernel config"].startswith("block_h=16 · block_n=32 · block_d=0 · num_splits=16")
    assert newest["kernel config"].endswith("spill_bytes=0")
    assert newest["versions"] == f"{gpu} · runner arch profile native"


@pytest.fixture(scope="module")
def long_history(tmp_path_factory: pytest.TempPathFactory) -> str:
    """262 commits of the decode suite alone, with an MMA slowdown at commit 20 that is never fixed (an open
    regression older than the newest ``history_model.WINDOW`` commits)."""
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths
    from regressions.config import parse_settings
    from regressions.store import detect_store

    tmp = tmp_path_factory.mktemp("long_history")
    benches = [b for b in asv_synth.mla_benchmarks(concurrency=(1, 64), topk=(512,), slow_from=20, metrics=False)
               if b.name == "bench_decode.SparseDecode.time_decode"]
    asv_synth.write_results(tmp / "results", "long", benches, asv_synth.commit_shas(262, seed="long"))
    url = f"sqlite:///{tmp / 'store.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    assert ingest_paths(engine, [tmp / "results"], progress=False).ok
    with Session(engine) as s, s.begin():
        detect_store(s, parse_settings({}, "tests/dashboard"), machine="long", full=True)
    engine.dispose()
    return url


def test_history_draws_a_window_unless_whole_history(monkeypatch: pytest.MonkeyPatch, long_history: str) -> None:
    query = {"machine": "long", "hist_bench": "bench_decode.SparseDecode.time_decode", "hp_impl": "mma",
             "hp_concurrency": "64", "hp_topk": "512"}  # fmt: skip
    at = goto(app(monkeypatch, long_history, query=query), "history")
    # The newest WINDOW commits, extended back to ten commits before the open regression at 20.
    assert "The newest 252 of 262 commits" in texts(at) and "switch on Whole history" in texts(at)  # results cut
    spec, data = vega(at)[0]
    assert sorted(set(data["data"]["pos"])) == list(range(10, 262))
    assert list(data["markers"].loc[data["markers"]["kind"] == "flagged regression", "pos"]) == [20]
    # The values table is built only when its expander is open (the state is in the URL), over the drawn commits.
    assert not [d for d in at.dataframe if "subject" in d.value.columns]
    opened = goto(app(monkeypatch, long_history, query={**query, "hist_values": "1"}), "history")
    assert len(table(opened, "subject")) == 252 and opened.query_params["hist_values"] in ("1", ["1"])
    assert at.pills(key="hist_view").value == []  # neither switch on (one series: linear axis)
    at.pills(key="hist_view").set_value(["Whole history (262 commits)"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "262 commits measured" in texts(at) and "The newest" not in texts(at)
    whole = vega(at)[0][1]["data"].set_index("pos")
    assert sorted(whole.index) == list(range(262))
    # The window reads its series from ten commits before it: the bands (median of the previous five values)
    # are those of the whole history.
    window = data["data"].set_index("pos")
    assert window[["lo", "hi"]].notna().all().all()
    assert np.allclose(window[["lo", "hi"]], whole.loc[window.index, ["lo", "hi"]])
    assert at.query_params["hist_all"] in ("1", ["1"])
    # A shared link with the switches on opens them on (each switch keeps its own key in the URL).
    shared = goto(app(monkeypatch, long_history, query={**query, "hist_all": "1", "hist_logy": "1"}), "history")
    assert sorted(shared.pills(key="hist_view").value) == ["Logarithmic value axis", "Whole history (262 commits)"]
    assert len(set(vega(shared)[0][1]["data"]["pos"])) == 262


def test_in_app_links_switch_page_in_the_session(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """A grid's link cell opens its page in this session (not a new tab): selecting the History cell of a
    regression's row lands on History with that series picked, the Compare cell on Compare with its pair."""
    at = goto(app(monkeypatch, seeded.url), "regressions")
    rows = table(at, "before → after")
    name = "bench_decode.SparseDecode.time_decode [impl=mma, concurrency=64, topk=512]"
    row = int(np.flatnonzero(rows["series"] == name)[0])
    at.session_state["reg_table"] = {"selection": {"cells": [[row, "history"]]}}
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "History"
    assert at.selectbox(key="hist_bench").value == "bench_decode.SparseDecode.time_decode"
    assert at.pills(key="hp_concurrency").value == [64] and at.pills(key="hp_impl").value == ["mma"]

    at = goto(at, "regressions")
    at.session_state["reg_table"] = {"selection": {"cells": [[row, "compare"]]}}
    at.run()
    assert at.title[0].value == "Compare commits"
    assert at.selectbox(key="cmp_base").value == seeded.shas[SLOW_FROM - 1]
    assert at.selectbox(key="cmp_head").value == seeded.shas[SLOW_FROM]
    # A plain cell goes nowhere.
    at = goto(at, "regressions")
    at.session_state["reg_table"] = {"selection": {"cells": [[row, "series"]]}}
    at.run()
    assert at.title[0].value == "Regressions"
    # Across machines: the link's machine replaces the sidebar's (the previous page's choice is dropped).
    if OPENBLAS.exists():
        at.toggle(key="reg_all").set_value(True).run()
        rows = table(at, "before → after")
        other = int(np.flatnonzero(rows["machine"] != MLA_MACHINE)[0])
        at.session_state["reg_table"] = {"selection": {"cells": [[other, "history"]]}}
        at.run()
        assert at.title[0].value == "History"
        assert at.sidebar.selectbox(key="machine").value == rows["machine"].iloc[other] != MLA_MACHINE


@pytest.mark.skipif(not OPENBLAS.exists(), reason="OpenBLAS asv fixture missing")
def test_history_starts_where_the_series_began(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """OpenBLAS's gemm [size=100, variant=d] began after most of its machine's commits (a renamed benchmark): the
    chart started at the machine's first commit, its left half empty, the caption counting the machine's commits
    (a review: the site reads 44 measured, the dashboard 92)."""
    query = {"machine": "gha-aws-skylake", "hist_bench": "benchmarks.gemm.time_gemm", "hp_size": "100",
             "hp_variant": "d", "hist_view": "hist_all"}
    at = goto(app(monkeypatch, seeded.url, query=query), "history")
    assert not at.exception, [e.value for e in at.exception]
    spec, frames = vega(at)[0]
    drawn = frames["data"]
    first = int(drawn["pos"].min())
    assert first > 0 and spec["layer"][0]["encoding"]["x"]["scale"]["domain"][0] == first - 0.5
    caption = next(c.value for c in at.caption if "in history order" in c.value)
    n = len(drawn)
    assert f"the series drawn ran at {n}" in caption and "Whole history" not in caption, caption
