"""End to end: serve the dashboard with `mlaperf dashboard` and use every page in headless Debian Chromium:
the page renders without an exception, its charts draw real marks, its selections come from the URL
and a widget change goes back into it (a shared link shows the same view); a History point shows its
provenance (commit, run, kernel configuration, versions) on hover.

Skips when /usr/bin/chromium is missing, unless MLAPERF_REQUIRE_BROWSER=1 (CI). Screenshots go to
artifacts/screenshots/ (uploaded by CI).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import ROOT, SLOW_FROM, Seeded

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = ROOT / "artifacts" / "screenshots"
CHART = '[data-testid="stVegaLiteChart"]'
PILLS = '[data-testid="stButtonGroup"]'
TABLES = '[data-testid="stDataFrame"], [data-testid="stTable"], [data-testid="stMarkdownContainer"] table'
MARKS = f"{CHART} svg.marks g.role-mark > path"  # drawn marks (lines, points, bars), not an empty frame
# url path -> (charts expected on the seeded store's default machine, whether a table is drawn (Compare's
# default pair changed nothing: its table waits for a status to be picked), query parameters the page publishes)
PAGES = {
    "": (0, True, {"machine", "ov_q"}),
    "summary": (0, True, {"sum_q"}),
    "throughput": (1, True, {"tp_commit", "tp_base", "tp_suite", "tp_decode_filter"}),
    "history": (1, True, {"hist_bench", "hp_impl", "hp_concurrency", "hp_topk"}),
    "regressions": (0, True, {"reg_show", "reg_group"}),
    "compare": (1, False, {"cmp_base", "cmp_head", "cmp_show"}),
    "efficiency": (3, False, {"eff_commit", "eff_suite", "eff_decode_filter"}),
}

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    if os.environ.get("MLAPERF_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"MLAPERF_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} missing", allow_module_level=True)


@pytest.fixture(scope="module")
def served(seeded: Seeded) -> Iterator[str]:
    """``mlaperf dashboard`` on a free port."""
    from dashboard.served import Served

    with Served(seeded.url, "--repo-url", "https://github.com/example/mlaperf") as server:
        assert server.base.startswith("http://127.0.0.1:")
        yield server.base


def _hover_tip(page: Any, wanted: str) -> str:
    """The text of the chart tooltip of the first point (in drawing order) whose tooltip holds ``wanted``."""
    tip = page.locator("#vg-tooltip-element")
    symbols = page.locator(f"{CHART} svg.marks g.mark-symbol > path")
    for i in range(symbols.count()):
        box = symbols.nth(i).bounding_box()
        if box is None:
            continue
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        try:
            page.wait_for_function("w => (document.querySelector('#vg-tooltip-element.visible') || {}).innerText"
                                   "?.includes(w)", arg=wanted, timeout=1_000)
        except Exception:  # noqa: BLE001 - a marker's tooltip, or none under the mouse: the next point
            continue
        return tip.inner_text()
    raise AssertionError(f"no point's tooltip holds {wanted!r}")


def _load(page: Any, watch: Any, url: str) -> None:
    """Open ``url`` and wait for the server's script_finished and every chart drawn (``Watcher`` reads
    Streamlit's websocket: no guessing from spinners)."""
    before = watch.begin()
    page.goto(url, wait_until="commit")
    watch.wait_run(page, before)


def _query(page: Any) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query, keep_blank_values=True)


def test_every_page_in_chromium(served: str, seeded: Seeded) -> None:
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Watcher

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        watch = Watcher(page)
        try:
            for path, (charts, tables, params) in PAGES.items():
                _load(page, watch, f"{served}/{path}")
                name = path or "overview"
                page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
                assert page.locator('[data-testid="stException"]').count() == 0, f"exception on /{path}"
                assert page.locator(CHART).count() == charts, path
                if charts:
                    assert page.locator(MARKS).count() > 0, path
                if tables:  # drawn after the run's end
                    page.wait_for_selector(TABLES, timeout=30_000)
                assert params <= set(_query(page)), (path, page.url)  # the view is a shareable link

            # A shared link opens the same view: the flagged series at concurrency 64 of the seeded step.
            base, head = seeded.shas[SLOW_FROM - 1][:12], seeded.shas[SLOW_FROM][:12]
            _load(page, watch, f"{served}/compare?cmp_base={base}&cmp_head={head}")
            regressed = page.locator(f"{PILLS} button").filter(has_text="Regressed")
            assert int(regressed.inner_text().split()[-1].replace(",", "")) > 0
            assert regressed.get_attribute("aria-pressed") == "true"  # shown in the table
            page.wait_for_selector(TABLES, timeout=30_000)
            assert _query(page)["cmp_base"] == [base] and _query(page)["cmp_head"] == [head]

            _load(page, watch, f"{served}/history?hist_bench=bench_decode.SparseDecode.time_decode"
                        "&hp_impl=mma&hp_concurrency=64&hp_topk=512")
            picked = page.locator(PILLS).filter(has_text="concurrency").locator('button[aria-pressed="true"]')
            assert picked.all_inner_texts() == ["64"]
            assert page.locator(f"{CHART} svg.marks g.mark-line > path").count() >= 1
            assert page.locator(f"{CHART} svg.marks g.mark-symbol > path").count() >= 12  # a point per commit
            # Hovering a point shows its provenance: commit, run, kernel configuration and versions.
            tip = _hover_tip(page, "kernel config")
            for field in ("commit", "run", "kernel config", "versions"):
                assert f"\n{field}\t" in f"\n{tip}", (field, tip)
            assert "kernel config\t\nblock_h=64 · block_n=32 · num_splits=2" in tip, tip  # the seeded launch records
            assert "GPU NVIDIA H200" in tip and "triton" in tip, tip
            assert "<" not in tip, tip  # no markup shown as text
            # A widget change goes into the URL.
            before = watch.begin()
            page.locator(PILLS).filter(has_text="View").get_by_role("button", name="Logarithmic value axis").click()
            watch.wait_run(page, before)
            page.wait_for_function("() => location.search.includes('hist_logy=1')", timeout=30_000)
            assert page.locator('[data-testid="stException"]').count() == 0
        finally:
            browser.close()
    assert {f.stem for f in SHOTS.glob("*.png")} >= {"overview", *[p for p in PAGES if p]}


AXIS_LABELS = f"{CHART} svg g.role-axis-label text"


def test_axis_labels_and_no_request_off_the_server(served: str) -> None:
    """Value axes label in plain numbers (no ``2e+2``, no ``0M``), linear and log; nothing is fetched from
    another host (fonts, icons): the dashboard works offline."""
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Watcher

    elsewhere: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.on("request", lambda r: elsewhere.append(r.url) if not r.url.startswith((served, "data:", "blob:"))
                else None)
        watch = Watcher(page)
        try:
            for path in ("history?hist_bench=bench_step.DecodeStep.time_step&hist_logy=0",
                         "history?hist_bench=bench_decode.SparseDecode.time_decode&hist_logy=1",
                         "throughput?tp_logy=0", "throughput?tp_logy=1", "efficiency"):
                _load(page, watch, f"{served}/{path}")
                page.wait_for_selector(AXIS_LABELS, state="attached", timeout=30_000)
                labels = [t for t in page.locator(AXIS_LABELS).all_text_contents() if t]
                assert labels, path
                assert not [t for t in labels if re.fullmatch(r"[+−-]?[\d.,]+e[+-]?\d+", t)], (path, labels)
                assert not [t for t in labels if re.fullmatch(r"[+−-]?0(\.0+)?[kMGTm]", t)], (path, labels)
        finally:
            browser.close()
    assert not elsewhere, elsewhere


GRID = '[data-testid="stDataFrame"]'


def _settled_box(page: Any, grid: Any, timeout: float = 30.0) -> dict[str, float]:
    """The grid canvas's box once it has stopped moving (the same over 300 ms): elements drawn above it
    after the run (slow under load) push it down, and a click computed before would land elsewhere."""
    grid.scroll_into_view_if_needed()
    deadline = time.monotonic() + timeout
    box = grid.locator("canvas").first.bounding_box()
    while time.monotonic() < deadline:
        page.wait_for_timeout(300)
        again = grid.locator("canvas").first.bounding_box()
        if box is not None and again == box:
            return box
        box = again
    raise AssertionError(f"the grid kept moving for {timeout} s: {box}")


def _click_last_column(page: Any, grid: Any, row: int, from_right: int = 25) -> None:
    """Click the grid's last column at ``row`` (0 = first data row; rows and header are 35 px), ``from_right``
    pixels left of the grid's right edge."""
    box = _settled_box(page, grid)
    page.mouse.click(box["x"] + box["width"] - from_right, box["y"] + 35 * (row + 1) + 17)


def _wait_run_end(page: Any, watch: Any, before: int, timeout: float) -> bool:
    """Whether the session's next run (after ``watch.begin()`` gave ``before``) ended within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while watch.finished <= before and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    return watch.finished > before


def _run_ended(page: Any, watch: Any, before: int, timeout: float = 60.0) -> None:
    """Wait for the session's next run to end, however slow."""
    assert _wait_run_end(page, watch, before, timeout), f"no run ended in {timeout} s"


def _follow_cell(page: Any, watch: Any, grid: Any, row: int, path: str, tries: int = 3) -> None:
    """Click a link cell of the grid (its last column) and wait until the tab is on ``path``. A click that
    started no run within 15 s came before the grid took input (a loaded machine) and is made again; one that
    started a run must lead to ``path``."""
    for _ in range(tries):
        before = watch.begin()
        _click_last_column(page, grid, row)
        if _wait_run_end(page, watch, before, 15):
            page.wait_for_function("p => location.pathname.endsWith(p)", arg=path, timeout=30_000)
            return
    raise AssertionError(f"{tries} clicks on the grid started no run")


def test_in_app_links_stay_in_the_tab(served: str, seeded: Seeded) -> None:
    """A link to another page of the app (a grid's "plot" or "view group" cell, History's compare link) opens
    it in the same tab and session with the link's selections; a commit link (another site) opens a new tab."""
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Watcher

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        watch = Watcher(page)
        try:
            # All benchmarks: the first row's "plot" opens its History.
            _load(page, watch, f"{served}/summary?sum_q=decode%20mma%2064%20512")
            page.wait_for_selector(GRID, timeout=30_000)
            _follow_cell(page, watch, page.locator(GRID).first, 0, "/history")
            page.wait_for_selector(CHART, timeout=30_000)
            query = _query(page)
            assert query["hist_bench"] == ["bench_decode.SparseDecode.time_decode"], page.url
            assert query["hp_concurrency"] == ["64"] and query["hp_topk"] == ["512"], page.url
            picked = page.locator(PILLS).filter(has_text="concurrency").locator('button[aria-pressed="true"]')
            assert picked.all_inner_texts() == ["64"]
            assert len(context.pages) == 1

            # History's flagged step: its compare link opens Compare on parent..commit in this tab.
            base, head = seeded.shas[SLOW_FROM - 1][:12], seeded.shas[SLOW_FROM][:12]
            before = watch.begin()
            page.locator('[data-testid="stPageLink"] a').filter(has_text="Compare").first.click()
            page.wait_for_function("() => location.pathname.endsWith('/compare')", timeout=30_000)
            _run_ended(page, watch, before)  # no run left going when the sidebar is clicked below
            page.wait_for_selector(CHART, timeout=30_000)
            assert _query(page)["cmp_base"] == [base] and _query(page)["cmp_head"] == [head], page.url
            assert len(context.pages) == 1
            # Back on the grid's page through the sidebar: the followed cell does not send it off again (checked
            # once the page's run has ended, however long that takes, and a while after).
            before = watch.begin()
            page.get_by_role("link", name="All benchmarks").click()
            page.wait_for_function("() => location.pathname.endsWith('/summary')", timeout=30_000)
            _run_ended(page, watch, before)
            page.wait_for_selector(GRID, timeout=30_000)
            page.wait_for_timeout(2_000)
            assert urlparse(page.url).path.endswith("/summary"), page.url

            # Overview: an alert group's "view group" opens Regressions on that group (a new tab of its own: the
            # one before may still be drawing).
            page.close()
            page = context.new_page()
            watch = Watcher(page)
            _load(page, watch, f"{served}/")
            page.wait_for_selector(GRID, timeout=30_000)
            _follow_cell(page, watch, page.locator(GRID).first, 0, "/regressions")
            page.wait_for_selector(GRID, timeout=30_000)
            assert _query(page)["reg_group"] == ["1"], page.url
            assert len(context.pages) == 1
            assert page.locator('[data-testid="stException"]').count() == 0

            # Another site (the commit on the repository) still opens in a new tab.
            page.close()
            page = context.new_page()
            watch = Watcher(page)
            _load(page, watch, f"{served}/")
            commits = page.locator(GRID).last
            page.wait_for_selector(GRID, timeout=30_000)
            # The grid opens a link cell's URL on a click once the cell is selected: click until a tab opens
            # (each click waits 3 s for it; a loaded machine may need more than the second click).
            for _ in range(8):
                _click_last_column(page, commits, 0, from_right=30)
                try:
                    context.wait_for_event("page", timeout=3_000)
                    break
                except Exception:  # noqa: BLE001 - playwright's TimeoutError: no tab yet, click again
                    continue
            page.wait_for_timeout(1_000)  # a second tab from an extra click would show by now
            assert len(context.pages) == 2
        finally:
            browser.close()


def test_wide_pages_fit_a_1280_px_window(served: str, seeded: Seeded) -> None:
    """At 1280 px: Efficiency's three panels share the content column's width (none cut off, none leaving most
    of it empty), and every column of Compare's table is in view without scrolling sideways."""
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Watcher

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        watch = Watcher(page)
        try:
            _load(page, watch, f"{served}/efficiency")
            column = page.locator('[data-testid="stMainBlockContainer"]').bounding_box()
            assert column is not None
            inner = column["width"] - 2 * 48  # less the container's padding
            boxes = [page.locator(CHART).nth(i).locator("canvas, svg").first.bounding_box() for i in range(3)]
            assert all(b is not None for b in boxes)
            assert max(b["x"] + b["width"] for b in boxes) <= column["x"] + column["width"], (boxes, column)
            assert sum(b["width"] for b in boxes) >= 0.8 * inner, (boxes, column)
            page.screenshot(path=str(SHOTS / "efficiency_1280.png"))

            base, head = seeded.shas[SLOW_FROM - 1][:12], seeded.shas[SLOW_FROM][:12]
            _load(page, watch, f"{served}/compare?cmp_base={base}&cmp_head={head}")
            page.wait_for_selector(GRID, timeout=30_000)
            widths = page.evaluate("""() => { const s = document.querySelector(
                '[data-testid="stDataFrame"] .dvn-scroller'); return [s.scrollWidth, s.clientWidth]; }""")
            page.screenshot(path=str(SHOTS / "compare_1280.png"))
            assert widths[0] <= widths[1] + 2, widths  # no column out of view
        finally:
            browser.close()


# Every pill of History's parameter pickers, with whether it is the element on top at its own centre and
# inside the content column (a pill run under the next picker or past the column's edge cannot be clicked).
PILL_REACH = """() => {
  const column = document.querySelector('[data-testid="stMainBlockContainer"]').getBoundingClientRect();
  const out = [];
  for (const group of document.querySelectorAll('[data-testid="stButtonGroup"]')) {
    const label = group.closest('[data-testid="stElementContainer"]').innerText.split('\\n')[0];
    for (const pill of group.querySelectorAll('button')) {
      const r = pill.getBoundingClientRect();
      const top = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
      out.push([label, pill.innerText, pill.contains(top) && r.right <= column.right + 0.5]);
    }
  }
  return out;
}"""


def test_history_parameter_pills_fit_a_1280_px_window(tmp_path: Path) -> None:
    """At 1280 px, with the sidebar open, a benchmark with eight values of one parameter and three of another
    (the sweep of the speed benchmark's store): every value's pill is in view and is what a click there hits."""
    import asv_synth
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Served, Watcher
    from db.engine import make_engine, upgrade
    from db.ingest import ingest_paths

    bench = "bench_decode.SparseDecode.time_decode"
    benches = [b for b in asv_synth.mla_benchmarks(concurrency=(1, 2, 4, 8, 16, 32, 64, 128), topk=(128, 512, 2048),
                                                   metrics=False) if b.name == bench]
    asv_synth.write_results(tmp_path / "results", "wide", benches, asv_synth.commit_shas(3, seed="wide"))
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    assert ingest_paths(engine, [tmp_path / "results"], progress=False).ok
    engine.dispose()

    with Served(url) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        watch = Watcher(page)
        try:
            _load(page, watch, f"{server.base}/history?hist_bench={bench}")
            page.screenshot(path=str(SHOTS / "history_pills_1280.png"))
            pills = [(label, text, ok) for label, text, ok in page.evaluate(PILL_REACH) if label != "View"]
            assert {label for label, _, _ in pills} == {"impl", "concurrency", "topk"}, pills
            assert len(pills) == 2 + 8 + 3, pills
            assert [(label, text) for label, text, ok in pills if not ok] == [], pills
        finally:
            browser.close()


def _sorted_column(page: Any, grid: Any, column: str) -> list[str]:
    """Click along the grid's header row until ``column`` is the sorted one (its header reads "↑ column" in the
    grid's accessible table, a frame or more after the click), then the texts of that column's drawn cells, top
    to bottom."""
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    heads = grid.locator("table th")
    for x in range(int(box["x"]) + 12, int(box["x"] + box["width"]) - 4, 24):
        page.mouse.click(x, box["y"] + 17)
        page.keyboard.press("Escape")  # a click on a narrow header's menu button opens its menu: closed again
        for _ in range(10):
            texts = [" ".join(t.split()) for t in heads.all_inner_texts()]
            if f"↑ {column}" in texts:
                index = texts.index(f"↑ {column}") + 1
                return grid.locator(f'table td[aria-colindex="{index}"]').all_inner_texts()
            page.wait_for_timeout(50)
    raise AssertionError(f"no header click sorted {column!r}: {heads.all_inner_texts()}")


def test_a_header_click_sorts_numbers_as_numbers(tmp_path: Path) -> None:
    """Compare's ratio is a number drawn as text: a click on its header puts 2.00x before 12.0x (as text, "12.0x"
    < "2.00x": the grid sorted the drawn words)."""
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Served, Watcher
    from tests.db.conftest import bench_row, results_doc, write_results

    ratios = [0.5, 0.8, 1.5, 2.0, 3.0, 9.0, 12.0, 25.0]
    base, head = "a" * 40, "b" * 40
    for sha, when, values in ((base, 1_700_000_000_000, [1.0] * 8), (head, 1_700_001_000_000, ratios)):
        rows = {f"m.A.time_{i}": bench_row([v], []) for i, v in enumerate(values)}
        write_results(tmp_path / "r", results_doc(rows, machine="m", commit=sha, date=when))
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    done = subprocess.run([sys.executable, "-m", "mlaperf.cli", "ingest", str(tmp_path / "r"), "--db", url],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with Served(url) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        watch = Watcher(page)
        try:
            _load(page, watch, f"{server.base}/compare?cmp_base={base[:12]}&cmp_head={head[:12]}&cmp_show=untested")
            grid = page.locator(GRID).filter(has=page.locator('table th:text-is("method")'))
            grid.wait_for(timeout=30_000)
            # The accessible table holds the cells' values (the grid draws them as fmt_ratio does: test_pages).
            shown = [float(t.rstrip("x")) for t in _sorted_column(page, grid, "ratio")]
            assert shown == ratios, shown
        finally:
            browser.close()
