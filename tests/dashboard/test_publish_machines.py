"""The static site's cross-machine views, as the dashboard's (`reg_all=1`, `hist_vs`) and the CLI's: every
machine's alert groups on one page, and a series overlaid with the same series measured on another machine
(chosen from those that measured it), in Chromium from file:// with nothing fetched from elsewhere."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MLA_MACHINE, Seeded, mlaperf_cli, site_data, site_tab
from test_pages import app, goto, vega

OTHER = "rtx-pro-6000"
SERIES = "bench_decode.SparseDecode.time_decode [impl=mma, concurrency=64, topk=512]"
SERIES_QUERY = {"hist_bench": "bench_decode.SparseDecode.time_decode", "hp_impl": "mma", "hp_concurrency": "64",
                "hp_topk": "512"}


@pytest.fixture(scope="module")
def two(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, list[str]]:
    """The seeded store with a second GPU machine that measured some of the same series at the newest four
    commits and one commit of its own (newer than every other), its site and that machine's commits."""
    import asv_synth

    from db.engine import make_engine
    from db.ingest import ingest_paths

    tmp = tmp_path_factory.mktemp("two_machines")
    shutil.copy(seeded.path, tmp / "store.sqlite")
    url = f"sqlite:///{tmp / 'store.sqlite'}"
    benches = asv_synth.mla_benchmarks(concurrency=(1, 64), topk=(512,), context=(4096,))
    gpu = {**asv_synth.GPU_PARAMS, "gpu_name": "NVIDIA RTX PRO 6000", "gpu_cc": "12.0"}
    asv_synth.write_results(tmp / "results", OTHER, benches, seeded.shas[-4:], gpu=gpu)
    own = "f00d" * 10  # dated after every seeded commit: the newest in history
    asv_synth.write_results(tmp / "results", OTHER, benches, [own], gpu=gpu,
                            start=dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    shas = [*seeded.shas[-4:], own]
    engine = make_engine(url)
    assert ingest_paths(engine, [tmp / "results"], progress=False).ok
    engine.dispose()
    mlaperf_cli("publish", "--db", url, "--out", str(tmp / "site"))
    return url, tmp / "site", shas


def _cli_rows(url: str, *flags: str) -> list[tuple[str, str, str, str, str]]:
    """(machine, before, after, ratio, p) of each row `mlaperf detect --list` prints."""
    lines = mlaperf_cli("detect", "--list", *flags, "--db", url).stdout.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("status ")]
    out = []
    for head in heads:
        # Every column's start (a name between blanks); a row's field runs to the next column's start.
        starts = {m.group(): m.start() for m in re.finditer(r"\S+( at)?", lines[head])}
        cols = {n: starts[n] for n in ("machine", "before", "after", "ratio", "p")}
        cut = sorted(starts.values())
        for line in lines[head + 1:]:
            if not line.strip() or line.startswith(("group ", "no group", "status ")):
                break
            field = {n: line[c:next((x for x in cut if x > c), len(line))].strip() for n, c in cols.items()}
            out.append((field["machine"], field["before"], field["after"], field["ratio"], field["p"]))
    return out


def _site_rows(site: Path, categories: tuple[str, ...]) -> list[tuple[str, str, str, str, str]]:
    """The same, from every machine's alert groups the site lists in ``categories``."""
    out = []
    for machine in site_data(site, "site")["machines"]:
        for group in site_data(site, f"{machine['folder']}/index")["groups"]:
            if group["category"] not in categories:
                continue
            t = group["table"]
            idx = {c: t["columns"].index(c) for c in ("before → after", "ratio", "p")}
            for row in t["rows"]:
                before, after = row[idx["before → after"]].split(" → ")
                out.append((machine["folder"], before, after, row[idx["ratio"]], row[idx["p"]]))
    return out


def test_every_machines_alerts_are_the_clis(two: tuple[str, Path, list[str]]) -> None:
    url, site, _ = two
    every = _cli_rows(url, "--all")
    assert {m for m, *_ in every} >= {MLA_MACHINE}, every
    assert sorted(_site_rows(site, ("open", "suspect", "fixed", "closed"))) == sorted(every)
    assert sorted(_site_rows(site, ("open", "suspect"))) == sorted(_cli_rows(url))  # the open ones, as --list


def _overlaid(site: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The series' id, its History page on the MLA machine and on ``OTHER``."""
    sid = next(r["id"] for r in site_data(site, f"{MLA_MACHINE}/index")["grid"] if r["name"] == SERIES)
    return sid, site_data(site, f"{MLA_MACHINE}/s{sid}"), site_data(site, f"{OTHER}/s{sid}")


def test_history_offers_the_machines_with_the_series(two: tuple[str, Path, list[str]],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    url, site, shas = two
    sid, mine, theirs = _overlaid(site)
    assert mine["elsewhere"] == [OTHER] and theirs["elsewhere"] == [MLA_MACHINE]
    lone = next(r["id"] for r in site_data(site, f"{MLA_MACHINE}/index")["grid"] if "concurrency=128" in r["name"])
    assert site_data(site, f"{MLA_MACHINE}/s{lone}")["elsewhere"] == []  # OTHER did not measure it
    # The values the overlay draws are the dashboard's hist_vs overlay, at the same commits.
    other_commits = site_data(site, f"{OTHER}/index")["commits"]["sha"]
    assert [other_commits[p] for p in theirs["pos"]] == shas
    at = goto(app(monkeypatch, url, query={**SERIES_QUERY, "machine": MLA_MACHINE, "hist_vs": OTHER}), "history")
    points = vega(at)[0][1]["data"]
    dash = points[points["series"].astype(str).str.endswith(f"· {OTHER}")].sort_values("pos")
    assert len(dash) == len(shas)
    assert [v.split(" (IQR")[0] for v in dash["value"]] == theirs["text"]


# -- in Chromium, from file:// -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tab(two: tuple[str, Path, list[str]]) -> Iterator[tuple[Any, list[str]]]:
    with site_tab(two[1]) as (page, refused):
        yield page, refused
    assert not refused, refused


def _drawn_rows(page: Any) -> list[tuple[str, str, str, str, str]]:
    """(machine, before, after, ratio, p) of every row of every group drawn."""
    got = page.eval_on_selector_all(".group", """groups => groups.flatMap(g => {
        const cols = [...g.querySelectorAll('thead th')].map(th => th.innerText);
        const at = (name) => cols.indexOf(name);
        return [...g.querySelectorAll('tbody tr')].map(r => {
            const cells = [...r.cells].map(c => c.innerText);
            const [before, after] = cells[at('before → after')].split(' → ');
            return [g.dataset.machine, before, after, cells[at('ratio')], cells[at('p')]];
        });
    })""")
    return [tuple(r) for r in got]


@pytest.mark.browser
def test_all_machines_alerts_page(two: tuple[str, Path, list[str]], tab: tuple[Any, list[str]]) -> None:
    url, site, _ = two
    page, _ = tab
    index = f"{site.as_uri()}/index.html#/{MLA_MACHINE}"
    page.goto(f"{index}/alerts")
    page.wait_for_selector(".group table")
    assert {r[0] for r in _drawn_rows(page)} == {MLA_MACHINE}  # this machine's only
    page.get_by_role("button", name="all machines").click()
    page.wait_for_selector("h1:has-text('every machine')")
    assert "all=1" in page.url
    page.get_by_role("button", name="closed", exact=True).click()
    page.wait_for_selector("button.chip[aria-pressed=true]:text-is('closed')")
    page.wait_for_selector(".group table")
    assert sorted(_drawn_rows(page)) == sorted(_cli_rows(url, "--all"))
    page.goto(f"{index}/alerts?all=On&show=open,suspect")  # any of the dashboard's words for on, any case
    page.wait_for_selector("h1:has-text('every machine')")
    assert sorted(_drawn_rows(page)) == sorted(_cli_rows(url))
    # A group's series links to its own machine's History page.
    href = page.locator(".group table a", has_text="plot").first.get_attribute("href")
    machine = page.locator(".group").first.get_attribute("data-machine")
    assert href.startswith(f"#/{machine}/history/")


@pytest.mark.browser
def test_history_overlays_another_machine(two: tuple[str, Path, list[str]], tab: tuple[Any, list[str]]) -> None:
    _, site, shas = two
    page, _ = tab
    sid, _, theirs = _overlaid(site)
    hist = f"{site.as_uri()}/index.html#/{MLA_MACHINE}/history/{sid}"
    page.goto(hist)
    page.wait_for_selector("svg.chart .lines path")
    assert page.locator("svg.chart .lines > path").count() == 1
    assert [t.split(" (")[0] for t in page.locator("#vs button").all_inner_texts()] == [OTHER]  # none pressed
    assert page.locator("#vs button[aria-pressed=true]").count() == 0
    page.locator("#vs button", has_text=OTHER).click()
    page.wait_for_selector("svg.chart .lines > path:nth-of-type(2)")  # (no wait_for_function: the CSP forbids eval)
    assert f"vs={OTHER}" in page.url and page.locator("#vs button[aria-pressed=true]").count() == 1
    # Each machine at its own commits, as the dashboard's: the commit only OTHER measured too, right of the rest.
    assert page.locator("svg.chart .lines .points").nth(1).locator("circle").count() == len(shas) == len(theirs["pos"])
    xs = [page.eval_on_selector_all(f"svg.chart .lines .points:nth-of-type({i}) circle",
                                    "cs => cs.map(c => c.cx.baseVal.value)") for i in (1, 2)]
    assert max(xs[1]) > max(xs[0]) and sorted(xs[1][:-1]) == sorted(xs[0])[-4:], xs
    assert len(page.locator(".legend span").all_inner_texts()) == 2
    assert OTHER in page.inner_text(".legend")
    page.goto(f"{hist}?vs=nowhere")
    page.wait_for_selector("p.error")
    assert "nowhere" in page.inner_text("p.error") and page.locator("svg.chart .lines > path").count() == 1
    # Another machine picked on a History page: the same series there, as the dashboard keeps it (it opened that
    # machine's overview, a review); a series it lacks says so, with a way to its overview.
    page.goto(hist)
    page.wait_for_selector("svg.chart .lines path")
    page.select_option("#machine", OTHER)
    page.wait_for_selector(f"p.note.mono:has-text('{OTHER}')")
    assert page.url.endswith(f"#/{OTHER}/history/{sid}") and page.locator("svg.chart .lines > path").count() == 1
    lone = next(r["id"] for r in site_data(site, f"{MLA_MACHINE}/index")["grid"] if "concurrency=128" in r["name"])
    page.goto(f"{site.as_uri()}/index.html#/{MLA_MACHINE}/history/{lone}")
    page.wait_for_selector("svg.chart .lines path")
    page.select_option("#machine", OTHER)
    page.wait_for_selector("p.error")
    assert f"No series {lone}" in page.inner_text("p.error")
    assert page.locator("main a", has_text="overview").get_attribute("href") == f"#/{OTHER}"

