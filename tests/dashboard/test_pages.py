"""AppTest of every page on a seeded store (synthetic MLA suites + the real OpenBLAS asv results)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import pytest
from conftest import APP, MLA_MACHINE, OPENBLAS, SLOW_FROM, Seeded
from sqlalchemy import select
from sqlalchemy.orm import Session
from streamlit.testing.v1 import AppTest

TIMEOUT = 60


def app(monkeypatch: pytest.MonkeyPatch, url: str, *, writable: bool = False, repo: str = "") -> AppTest:
    monkeypatch.setenv("MLAPERF_DB", url)
    monkeypatch.setenv("MLAPERF_DASHBOARD_WRITABLE", "1" if writable else "0")
    monkeypatch.setenv("MLAPERF_REPO_URL", repo)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def figures(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def arr(v: object) -> list:
    """A trace array from the figure JSON: Plotly 6+ sends numpy arrays as base64 ``bdata``."""
    if isinstance(v, dict) and "bdata" in v:
        flat = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return flat.reshape(v["shape"]).tolist() if "shape" in v else flat.tolist()
    return list(v)  # type: ignore[call-overload]


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("title", "subheader", "markdown", "caption", "info", "success", "warning",
                                  "error") for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def test_overview(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = app(monkeypatch, seeded.url)
    assert at.title[0].value.startswith("mlaperf")
    assert at.sidebar.selectbox(key="machine").value == MLA_MACHINE  # GPU machines come first
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Commits"] == "6"
    assert metrics["Open regressions"] == "1"
    assert "Sparse MLA decode" in at.success[0].value
    machine_table = at.dataframe[0].value
    assert "NVIDIA H200" in set(machine_table["value"])


def test_throughput_lines_per_impl_and_baseline(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "throughput")
    figs = figures(at)
    assert len(figs) == 3  # decode, indexer, step
    decode = figs[0]
    names = [t["name"] for t in decode["data"]]
    assert any(n.startswith("mma @") for n in names) and any(n.startswith("simt @") for n in names)
    assert decode["layout"]["xaxis"]["type"] == "log"
    assert arr(decode["layout"]["xaxis"]["tickvals"]) == [1, 16, 64, 128]
    assert "tokens/s" in decode["layout"]["yaxis"]["title"]["text"]
    assert at.radio(key="tp_decode_filter").value == 512
    # Speed-up of MMA over SIMT at the newest commit: > 1 everywhere on this data.
    speedups = at.dataframe[0].value
    assert list(speedups["line"]) == ["mma"]
    assert (speedups.filter(like="c=") > 1).all().all()

    # Overlay the oldest commit (before the seeded MMA slowdown): dashed traces and ratios < 1 for MMA.
    at.selectbox(key="tp_base").set_value(seeded.shas[0]).run()
    assert not at.exception
    decode = figures(at)[0]
    dashed = [t for t in decode["data"] if t.get("line", {}).get("dash") == "dash"]
    assert {t["legendgroup"] for t in dashed} == {"mma", "simt"}
    ratios = at.dataframe[1].value
    mma = ratios[ratios["impl"] == "mma"]["speedup"]
    simt = ratios[ratios["impl"] == "simt"]["speedup"]
    assert (mma < 0.85).all() and (simt.sub(1).abs() < 0.1).all()

    # Top-k filter: switching to 128 redraws with that slice.
    at.radio(key="tp_decode_filter").set_value(128).run()
    assert "topk=128" in figures(at)[0]["layout"]["title"]["text"]


def test_throughput_derives_tokens_per_s_from_time(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "throughput")
    captions = "\n".join(c.value for c in at.caption)
    # The step suite has no track_tokens_per_s: concurrency / time is used there.
    assert "`concurrency / time`" in captions and "`track_tokens_per_s`" in captions


def test_history_marks_flagged_regression(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url, repo="https://github.com/example/mlaperf"), "history")
    assert at.selectbox(key="hist_bench").value == "bench_decode.SparseDecode.time_decode"
    key = json.dumps({"concurrency": "64", "impl": "'mma'", "topk": "512"}, sort_keys=True)
    at.selectbox(key="hist_params").set_value(key).run()
    assert not at.exception
    fig = figures(at)[0]
    main, flagged = fig["data"][0], fig["data"][1]
    assert len(arr(main["x"])) == 6
    assert main["error_y"]["type"] == "data"  # IQR bars from q_25/q_75
    assert flagged["name"] == "flagged regression" and arr(flagged["x"]) == [SLOW_FROM]
    assert "µs" in fig["layout"]["yaxis"]["title"]["text"]
    commits = at.dataframe[-1].value
    assert commits["link"].iloc[0] == f"https://github.com/example/mlaperf/commit/{seeded.shas[-1]}"
    assert commits.loc[commits["sha"] == seeded.shas[SLOW_FROM], "flagged"].item()


def test_history_deep_link(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    """The regressions table links to history?machine=..&benchmark=..&params=..: it opens that series."""
    monkeypatch.setenv("MLAPERF_DB", seeded.url)
    key = json.dumps({"concurrency": "16", "impl": "'simt'", "topk": "128"}, sort_keys=True)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params.update(machine=MLA_MACHINE, benchmark="bench_decode.SparseDecodeMetrics.track_gbps",
                           params=key)
    at.switch_page("views/history.py").run()
    assert not at.exception
    assert at.selectbox(key="hist_bench").value == "bench_decode.SparseDecodeMetrics.track_gbps"
    assert at.selectbox(key="hist_params").value == key
    assert "GB/s" in figures(at)[0]["layout"]["yaxis"]["title"]["text"]


def test_history_failed_run_leaves_gap(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "history")
    at.selectbox(key="hist_bench").set_value("bench_step.DecodeStep.time_step").run()
    assert not at.exception
    y = arr(figures(at)[0]["data"][0]["y"])
    # Commit 2 failed: a gap (or no point at all).
    assert sum(1 for v in y if v is None or v != v) == 1 or len(y) == 5


def test_regressions_read_only(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "regressions")
    table = at.dataframe[0].value
    assert list(table["benchmark"]) == ["bench_decode.SparseDecode.time_decode"]
    assert table["ratio"].iloc[0] == pytest.approx(1.3)
    assert "→" in table["before → after"].iloc[0]
    assert table["history"].iloc[0].startswith("history?machine=h200-sxm&benchmark=bench_decode.")
    assert len(at.button) == 1  # only the sidebar's reload button
    assert "--writable" in texts(at)
    # All machines + every status: the OpenBLAS one appears too.
    at.toggle(key="reg_all").set_value(True).run()
    at.multiselect(key="reg_status").set_value(["new", "acknowledged", "fixed", "ignored"]).run()
    if OPENBLAS.exists():
        assert len(at.dataframe[0].value) == 2


def test_regressions_acknowledge_when_writable(
    monkeypatch: pytest.MonkeyPatch, writable_copy: Seeded
) -> None:
    from db.engine import make_engine
    from db.models import Regression

    at = goto(app(monkeypatch, writable_copy.url, writable=True), "regressions")
    at.button(key="reg_acknowledged").click().run()
    assert not at.exception
    engine = make_engine(writable_copy.url, readonly=True)
    with Session(engine) as s:
        rid = writable_copy.regression_ids["mla"]
        assert s.scalars(select(Regression.status).where(Regression.id == rid)).one() == "acknowledged"
    engine.dispose()
    # The default filter (new + acknowledged) still shows it, now acknowledged.
    assert at.dataframe[0].value["status"].tolist() == ["acknowledged"]


def test_compare_flags_mma_slowdown(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "compare")
    at.selectbox(key="cmp_base").set_value(seeded.shas[SLOW_FROM - 1]).run()
    assert not at.exception
    table = at.dataframe[0].value
    worse = table[table["change"] == "+"]
    assert len(worse) > 0
    # Exactly the series that run the MMA decode kernel got slower: decode impl=mma and the step variants.
    assert worse["params"].str.contains(r"impl=mma\b|variant=mma", regex=True).all()
    assert not worse["params"].str.contains("simt|baseline|fp32_maxctx|bf16", regex=True).any()
    assert worse["benchmark"].str.contains("time_decode").any()
    assert {m.label: m.value for m in at.metric}["Slower (significant)"] == str(len(worse))
    bars = figures(at)[0]["data"][0]
    assert max(arr(bars["x"])) > 20  # ~30% slower MMA series lead the chart


def test_efficiency(monkeypatch: pytest.MonkeyPatch, seeded: Seeded) -> None:
    at = goto(app(monkeypatch, seeded.url), "efficiency")
    figs = figures(at)
    assert len(figs) == 6  # decode + indexer x (roofline, GB/s, TFLOP/s)
    roof = figs[0]
    assert "% of roofline" in roof["layout"]["yaxis"]["title"]["text"]
    assert max(max(arr(t["y"])) for t in roof["data"]) <= 100.0
    assert "of the device's roofline" in texts(at)


PAGES = ["overview", "throughput", "history", "regressions", "compare", "efficiency"]


@pytest.mark.skipif(not OPENBLAS.exists(), reason="OpenBLAS asv fixture missing")
@pytest.mark.parametrize("page", PAGES)
def test_generic_asv_project(monkeypatch: pytest.MonkeyPatch, seeded: Seeded, page: str) -> None:
    at = app(monkeypatch, seeded.url)
    at.sidebar.selectbox(key="machine").set_value("gha-aws-graviton").run()
    at = goto(at, page)
    body = texts(at)
    if page == "throughput":
        assert "No sparse-MLA suites" in body
        # Generic sweep: pick a two-parameter benchmark, x = size, colour = variant.
        at.selectbox(key="tp_sweep_bench").set_value("benchmarks.axpy.time_axpy").run()
        fig = figures(at)[0]
        assert fig["layout"]["xaxis"]["title"]["text"] == "size"
        assert {t["name"] for t in fig["data"]} == {"variant=s", "variant=d", "variant=c", "variant=z"}
    elif page == "efficiency":
        assert "No efficiency metrics" in body
    elif page == "history":
        assert len(figures(at)) == 1
    elif page == "compare":
        assert at.metric[0].label == "Series compared" and int(at.metric[0].value) > 100
    elif page == "overview":
        assert "No sparse-MLA suites" in body


def test_empty_store_explains_ingest(monkeypatch: pytest.MonkeyPatch, empty_store: str) -> None:
    at = app(monkeypatch, empty_store)
    assert "mlaperf ingest" in texts(at)
    assert not at.get("plotly_chart")


def test_missing_store_explains_ingest(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    at = app(monkeypatch, f"sqlite:///{tmp_path / 'nope.sqlite'}")
    body = texts(at)
    assert "No store at" in body and "mlaperf ingest" in body
    assert not (tmp_path / "nope.sqlite").exists()  # read-only: nothing created


def test_bad_url_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    at = app(monkeypatch, "nosuchdriver://x/y")
    assert "unknown database driver" in at.error[0].value


def test_frames_params_roundtrip() -> None:
    from dashboard import frames

    df = pd.DataFrame({"params_key": ['{"impl": "\'mma\'", "concurrency": "64"}'], "value": [1.0]})
    out, cols = frames.expand_params(df)
    assert cols == ["p:impl", "p:concurrency"]
    assert out["p:impl"].item() == "mma" and out["p:concurrency"].item() == 64
