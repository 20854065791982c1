"""One rule, one place: the static site shows what the dashboard and the CLI show for the same rows. The real
store of the README (the bundled H200 history ingested and detected with the CLI), published; the strings the
site's data hold and the strings Chromium draws from file:// are compared with the dashboard's pages (AppTest)
and `mlaperf detect --list`; every field the site's data hold is read by its script; axis labels stay human."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import APP, CHROMIUM, ROOT, md_table, mlaperf_cli, need_chromium, site_data
from streamlit.testing.v1 import AppTest
from test_pages import vega

from mlaperf.publish_axes import linear_ticks, value_axis

MACHINE = "h200"
HUMAN_TICK = re.compile(r"^(0|-?[\d,]+(\.\d+)?[kMG]?)$")


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The README's store: history/results ingested and detected, and its site."""
    tmp = tmp_path_factory.mktemp("bundled")
    url = f"sqlite:///{tmp / 'store.sqlite'}"
    mlaperf_cli("ingest", str(ROOT / "history" / "results"), "--db", url)
    mlaperf_cli("detect", "--db", url, "--full")
    mlaperf_cli("publish", "--db", url, "--out", str(tmp / "site"), "--repo-url", "https://github.com/example/mlaperf")
    return url, tmp / "site"


def _index(site: Path) -> dict[str, Any]:
    return site_data(site, "h200/index")


def _page(monkeypatch: pytest.MonkeyPatch, url: str, page: str, query: dict[str, str]) -> AppTest:
    monkeypatch.setenv("MLAPERF_DB", url)
    monkeypatch.setenv("MLAPERF_DASHBOARD_WRITABLE", "0")
    monkeypatch.setenv("MLAPERF_REPO_URL", "")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params.update({"machine": MACHINE, **query})
    at.run()
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _frame(at: AppTest, column: str) -> pd.DataFrame:
    return next(df.value for df in at.dataframe if column in df.value.columns)


def _dashboard_grid(monkeypatch: pytest.MonkeyPatch, url: str, query: str = "") -> pd.DataFrame:
    return _frame(_page(monkeypatch, url, "summary", {"sum_q": query} if query else {}), "latest change")


def test_overview_counts_are_the_dashboards(monkeypatch: pytest.MonkeyPatch, bundled: tuple[str, Path]) -> None:
    url, site = bundled
    shown = {label: value for value, label in _index(site)["metrics"]}
    dash = {m.label: m.value for m in _page(monkeypatch, url, "overview", {}).metric}
    for label in ("Open alert groups", "Failing series", "Commits", "Series"):
        assert shown[label] == dash[label], (label, shown, dash)


def test_grid_strings_are_the_dashboards(monkeypatch: pytest.MonkeyPatch, bundled: tuple[str, Path]) -> None:
    url, site = bundled
    grid = _index(site)["grid"]
    dash = _dashboard_grid(monkeypatch, url)
    assert len(grid) == len(dash) == 930
    mine = [(r["name"], r["latest"], r["change"], r["flag"]) for r in grid]
    theirs = list(zip(dash["series"], dash["latest"], dash["latest change"], dash["last flagged"], strict=True))
    assert mine == theirs
    flagged = [r["flag"] for r in grid if r["flag"]]
    assert flagged and all(re.fullmatch(r"fixed \d+\.\d\dx at [0-9a-f]{8}", f) for f in flagged), flagged


def test_largest_changes_are_the_dashboard_overviews(monkeypatch: pytest.MonkeyPatch,
                                                     bundled: tuple[str, Path]) -> None:
    """The site's overview opens with the dashboard Overview's "Failing and largest latest changes" rows, in its
    order: in the grid, sorted by name, a regressed series was row 14 of 930 (a review)."""
    url, site = bundled
    index = _index(site)
    by_id = {r["id"]: r for r in index["grid"]}
    mine = [(by_id[i]["name"], by_id[i]["latest"], by_id[i]["change"]) for i in index["largest"]]
    dash = _frame(_page(monkeypatch, url, "overview", {}), "latest change")
    assert len(mine) == len(dash) == 10
    assert mine == list(zip(dash["series"], dash["latest"], dash["latest change"], strict=True))
    assert [r["name"] for r in index["grid"]][:10] != [m[0] for m in mine]  # not the grid's first rows


def test_grid_orders_parameter_values_as_numbers(monkeypatch: pytest.MonkeyPatch, bundled: tuple[str, Path]) -> None:
    """Site and dashboard list a benchmark's series by its values in asv's param_names order, numbers as numbers
    (concurrency 1, 2, 4, 8, 16, ..., not the params_key text's 1, 128, 16, 2, ...)."""
    url, site = bundled
    decode = re.compile(r"bench_decode\.SparseDecode\.time_decode \[impl=(\w+), concurrency=(\d+), topk=(\d+)\]")

    def points(names: Any) -> list[tuple[str, int, int]]:
        return [(m[1], int(m[2]), int(m[3])) for n in names if (m := decode.fullmatch(str(n)))]

    on_site = points(r["name"] for r in _index(site)["grid"])
    assert len(on_site) > 20 and on_site == sorted(on_site)
    assert [c for i, c, t in on_site if (i, t) == ("mma", 512)][:5] == [1, 2, 4, 8, 16]
    assert points(_dashboard_grid(monkeypatch, url)["series"]) == on_site


def test_throughput_and_speedups_are_the_dashboards(monkeypatch: pytest.MonkeyPatch,
                                                    bundled: tuple[str, Path]) -> None:
    url, site = bundled
    decode = next(t for t in _index(site)["throughput"] if t["key"] == "decode")
    pick = next(f for f in decode["filters"] if f["value"] == decode["default"])
    assert decode["default"] == "512"  # the dashboard's default_filter: top-k 512 where offered
    dash = md_table(_page(monkeypatch, url, "throughput", {}), "c=1")
    assert pick["speedup"]["table"] == {"columns": list(dash.columns),
                                        "rows": [[str(v) for v in row] for row in dash.itertuples(index=False)]}
    # Not at the newest commit (a566702 measured concurrency 1 and 64 only): at the newest with the fullest grid,
    # as the dashboard opens, each kernel against SIMT at every concurrency.
    assert _index(site)["throughput_note"].startswith("the newest commit with the fullest grid")
    assert "a566702" in _index(site)["throughput_note"]
    assert len(pick["speedup"]["table"]["columns"]) > 3


def _cli_listing(url: str) -> list[tuple[str, str, str, str]]:
    """(before, after, ratio, p) of each row `mlaperf detect --list --all` prints."""
    lines = mlaperf_cli("detect", "--list", "--all", "--db", url).stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("status "))
    cols = {name: lines[head].index(name) for name in ("before", "after", "ratio", "p ", "closed at")}
    cut = sorted(cols.values())

    def field(line: str, name: str) -> str:
        start = cols[name]
        end = next((c for c in cut if c > start), len(line))
        return line[start:end].strip()

    rows = [line for line in lines[head + 1:] if line.strip() and not line.startswith("group ")]
    return [(field(r, "before"), field(r, "after"), field(r, "ratio"), field(r, "p ")) for r in rows]


def test_regression_rows_are_the_clis(bundled: tuple[str, Path]) -> None:
    url, site = bundled
    cli = _cli_listing(url)
    assert len(cli) == 4 and ("19.5 us", "90.1 us", "4.63x", "< 1e-12") in cli
    mine = []
    for group in _index(site)["groups"]:
        t = group["table"]
        idx = {c: t["columns"].index(c) for c in ("before → after", "ratio", "p")}
        for row in t["rows"]:
            before, after = row[idx["before → after"]].split(" → ")
            mine.append((before, after, row[idx["ratio"]], row[idx["p"]]))
    assert sorted(mine) == sorted(cli)


def test_every_field_written_is_read(bundled: tuple[str, Path]) -> None:
    """No field the site's script never reads: each key of every data file is named in app.js."""
    _, site = bundled
    script = (ROOT / "mlaperf" / "publish_site" / "app.js").read_text(encoding="utf-8")
    keys: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            keys.update(value)
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value[:50]:
                walk(v)

    walk(site_data(site, "site"))
    walk(_index(site))
    flagged = next(r["id"] for r in _index(site)["grid"] if r["flag"])
    walk(site_data(site, f"h200/s{flagged}"))
    unread = sorted(k for k in keys if not re.search(rf"[.\[\"']{re.escape(k)}\b", script))
    assert not unread, f"written but never read by app.js: {unread}"


@pytest.mark.parametrize(("values", "unit", "kw"), [
    ([180.0, 231.0], "GB/s", {}),
    ([1.95e-5, 9.01e-5], "seconds", {}),
    ([1.2e-5, 9.4e-3], "seconds", {}),
    ([0.0, 2.46e6], "tokens/s", {"zero": True, "si": True}),
    ([0.0, 860.0], "tokens/s", {"zero": True, "si": True}),
    ([0.5011, 0.5012], "fraction", {}),
    ([5.0, 5.0], "unit", {}),
])
def test_axis_labels_are_human(values: list[float], unit: str, kw: dict[str, Any]) -> None:
    axis = value_axis(values, unit, **kw)
    labels = axis["labels"]
    assert labels and len(set(labels)) == len(labels), labels
    assert all(HUMAN_TICK.match(t) for t in labels), labels  # no 2e+2, no 0M, no unit glued on
    assert axis["domain"][0] <= min(values) and axis["domain"][1] >= max(values)
    if kw.get("zero"):
        assert labels[0] == "0"


def test_linear_ticks_take_1_2_5_steps() -> None:
    ticks, step = linear_ticks(180.0, 231.0)
    assert step == 10 and ticks[0] == 180 and ticks[-1] == 240


# -- in Chromium, from file:// -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def page(bundled: tuple[str, Path]) -> Iterator[Any]:
    need_chromium()
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS

    _, site = bundled
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(site.as_uri()) else r.abort())
        try:
            yield tab
        finally:
            browser.close()
    assert not errors, errors


def _rows(tab: Any, selector: str) -> list[list[str]]:
    return tab.eval_on_selector_all(f"{selector} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))")


@pytest.mark.browser
def test_page_shows_the_dashboards_strings(monkeypatch: pytest.MonkeyPatch, bundled: tuple[str, Path],
                                           page: Any) -> None:
    url, site = bundled
    index = f"{site.as_uri()}/index.html#/h200"
    page.goto(index)
    page.wait_for_selector("#grid tbody tr svg.spark")
    dash = _dashboard_grid(monkeypatch, url)
    drawn = _rows(page, "#grid")
    shown = [r for r in drawn if len(r) == 5]
    assert len(shown) == 600 and "330 more" in drawn[-1][0]
    expected = list(zip(dash["series"], dash["latest"], dash["latest change"], dash["last flagged"], strict=True))
    assert [(r[0], r[1], r[3], r[4]) for r in shown] == expected[:600]
    top = _frame(_page(monkeypatch, url, "overview", {}), "latest change")
    assert [r[0] for r in _rows(page, "#largest")] == list(top["series"]) and len(top) == 10

    # The search: the dashboard's rows for the same words, in the same order.
    page.fill("input.search", "mma 64 512")
    page.wait_for_function("document.querySelectorAll('#grid tbody tr').length < 100")
    dash = _dashboard_grid(monkeypatch, url, "mma 64 512")
    assert [r[0] for r in _rows(page, "#grid")] == list(dash["series"]) and len(dash) > 1

    # Throughput: the speed-up table as the dashboard's, the axis labels as publish wrote them.
    page.goto(f"{index}/throughput")
    page.wait_for_selector("svg.chart .lines path")
    tp = _page(monkeypatch, url, "throughput", {})
    speed = md_table(tp, "c=1")
    assert _rows(page, "main table") == [[str(v) for v in r] for r in speed.itertuples(index=False)]
    decode = next(t for t in _index(site)["throughput"] if t["key"] == "decode")
    pick = next(f for f in decode["filters"] if f["value"] == decode["default"])
    ticks = page.locator("svg.chart .axis.y .tick text").all_text_contents()
    assert ticks == pick["y"]["labels"] and all(HUMAN_TICK.match(t) for t in ticks), ticks
    # The dashboard's axis (log by default: SIMT's 30k tokens/s drawn flat at 0 under MMA's 2M on the site's linear
    # one, a review): the same scale and ticks.
    dash_y = next(s for s, _ in vega(tp))["encoding"]["y"]
    assert pick["y"]["log"] and dash_y["scale"]["type"] == "log"
    assert pick["y"]["ticks"] == pytest.approx(dash_y["axis"]["values"])

    # A flagged series' history: the CLI's numbers in its table, human ticks, the regression and its fix.
    sid = next(r["id"] for r in _index(site)["grid"] if r["flag"].startswith("fixed 4.63x"))
    page.goto(f"{index}/history/{sid}")
    page.wait_for_selector("svg.chart .marker-reg")
    assert page.locator("svg.chart .marker-fix").count() == 1
    table = _rows(page, "main table")
    assert len(table) == 1 and "19.5 us → 90.1 us" in table[0] and "4.63x" in table[0] and "< 1e-12" in table[0]
    hist = site_data(site, f"h200/s{sid}")
    # Markers on the points of the first bad and the fixing commit, as the dashboard's (not the detector's levels:
    # Jaxion's real first bad run sat 14% above its level, the site's triangle off the line; a review).
    at = dict(zip(hist["pos"], hist["value"], strict=True))
    assert [(m["y"], m["fixed_y"]) for m in hist["markers"]] == [(at[m["pos"]], at[m["fixed_pos"]])
                                                                   for m in hist["markers"]]
    ticks = page.locator("svg.chart .axis.y .tick text").all_text_contents()
    assert ticks == hist["y"]["labels"] and all(HUMAN_TICK.match(t) for t in ticks), ticks
    assert hist["y"]["title"] == "time (us)" and "12 commits measured" in page.inner_text("main")

    # The alert group: the CLI's rows.
    page.goto(f"{index}/alerts?group=1")
    page.wait_for_selector(".group table")
    cli = _cli_listing(url)
    rows = _rows(page, ".group table")
    assert len(rows) == len(cli)
    for before, after, ratio, p in cli:
        assert any(f"{before} → {after}" in r and ratio in r and p in r for r in rows), (before, after, rows)

    # Short cells (status, ratio, p, SHAs) stay on one line in a narrow window, where long names take the row's
    # room: they were broken mid-value ("suspec/t", "26.9/x", "< 1e-/12"; a review at 800 and 1440 px).
    page.set_viewport_size({"width": 700, "height": 900})
    lines = page.evaluate("""() => [...document.querySelectorAll('.group table td')]
        .filter((td) => td.innerText.trim().length > 0 && td.innerText.trim().length <= 24)
        .map((td) => { const r = document.createRange(); r.selectNodeContents(td);
                       return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size; })""")
    assert lines and max(lines) == 1, lines


def test_a_short_log_axis_labels_each_tick_apart() -> None:
    """Throughput at 2.5M tokens/s alone: the log axis's linear fallback read "2M" four times and "3M" three (a
    review); labelled by its step, as the dashboard's SI labels read it."""
    from dashboard.charts import log_scale

    axis = value_axis([2.5e6], "tokens/s", si=True, log=True)
    assert axis["log"] and len(set(axis["labels"])) == len(axis["labels"]) >= 3, axis["labels"]
    assert value_axis([30e3, 33e3], "tokens/s", si=True, log=True)["labels"][:2] == ["30k", "30.5k"]
    assert log_scale(float("nan"), 3.0) == ({"type": "log"}, []) and log_scale(0.0, 5.0)[1] == []


def test_a_log_axis_leaves_room_past_its_outermost_values() -> None:
    """MuJoCo Warp's 8,004 -> 215,084 series: the newest point sat on the plot's top border, under its flag's
    triangle (a review); past the outer ticks a log axis now leaves a little room either side."""
    axis = value_axis([7970.98, 8037.05, 215084.0], "unit")
    assert axis["log"] and axis["domain"][1] >= 215084.0 * 1.1 and axis["domain"][0] <= 7970.98 / 1.1
