"""The static site on third-party data (the vendored OpenBLAS history, three machines): an alert group's commit
range is the group's own, as `mlaperf detect --json` prints it (the site and the dashboard both read
``dashboard.triage.groups``: a gradual member joins a group at a later commit than its step), a series
overlaid with another machine's whose values lie outside this machine's axis is drawn whole, on an axis over both,
and every machine's at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import OPENBLAS, mlaperf_cli, site_data, site_tab

from mlaperf.publish_history import series_history

pytestmark = pytest.mark.skipif(not OPENBLAS.exists(), reason="vendored OpenBLAS results missing")


@pytest.fixture(scope="module")
def openblas(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """`mlaperf detect --json --all` of the OpenBLAS store, and its site."""
    tmp = tmp_path_factory.mktemp("openblas_site")
    url = f"sqlite:///{tmp / 'store.sqlite'}"
    mlaperf_cli("ingest", str(OPENBLAS), "--db", url, "-q")
    mlaperf_cli("detect", "--db", url, "--full")
    listing = json.loads(mlaperf_cli("detect", "--db", url, "--json", "--all").stdout)
    mlaperf_cli("publish", "--db", url, "--out", str(tmp / "site"), "-q",
                "--repo-url", "https://github.com/OpenMathLib/OpenBLAS")
    return listing, tmp / "site"


def test_site_group_range_is_the_detectors(openblas: tuple[dict[str, Any], Path]) -> None:
    listing, site = openblas
    member_commits = {g["id"]: {r["commit"] for r in listing["regressions"] if r["group"] == g["id"]}
                      for g in listing["groups"]}
    # The case the test is for: a group whose newest member is not at the group's commit.
    assert any(member_commits[g["id"]] - {g["range"]["commit"]} for g in listing["groups"])
    checked, pages = 0, 0
    for machine in {g["machine"] for g in listing["groups"]}:
        shown = {int(g["group"]): g for g in site_data(site, f"{machine}/index")["groups"]}
        pages += len(shown)
        for g in (g for g in listing["groups"] if g["machine"] == machine and g["id"] in shown):
            page = shown[g["id"]]
            assert page["head"]["text"] == g["range"]["commit"][:8], (g["id"], page["head"], g["range"])
            assert page["head"]["href"].endswith(f"/commit/{g['range']['commit']}")
            if g["range"]["parent"]:
                assert page["parent"]["text"] == g["range"]["parent"][:8], (g["id"], page["parent"], g["range"])
            # Each member's culprit range opens the repository's compare view of it, not its last commit (review).
            col = page["table"]["columns"].index("commits")
            ranges = {(r["parent"], r["commit"]) for r in listing["regressions"] if r["group"] == g["id"]}
            hrefs = {row[col]["href"] for row in page["table"]["rows"]}
            assert hrefs == {f"https://github.com/OpenMathLib/OpenBLAS/compare/{p}...{c}" if p else
                             f"https://github.com/OpenMathLib/OpenBLAS/commit/{c}" for p, c in ranges}, hrefs
            checked += 1
    assert checked == pages > 0  # every group page the site has is one the detector listed


@pytest.mark.browser
def test_an_overlaid_machine_outside_this_axis_is_drawn_whole(openblas: tuple[dict[str, Any], Path]) -> None:
    # gemm [size=100, variant=d]: 38-50 us on gha-aws-skylake, 52-53 us on gha-aws-graviton, whose line the
    # skylake axis left off the chart (the legend still named it).
    _, site = openblas
    sid = next(r["id"] for r in site_data(site, "gha-aws-skylake/index")["grid"]
               if r["name"] == "benchmarks.gemm.time_gemm [size=100, variant=d]")
    mine, theirs = site_data(site, f"gha-aws-skylake/s{sid}"), site_data(site, f"gha-aws-graviton/s{sid}")
    values = [v for v in theirs["value"] if v is not None]
    assert min(values) > mine["y"]["domain"][1]  # the case: the other machine's values all above this axis
    with site_tab(site) as (page, refused):
        page.goto(f"{site.as_uri()}/index.html#/gha-aws-skylake/history/{sid}?vs=gha-aws-graviton")
        page.wait_for_selector("svg.chart .lines > path:nth-of-type(2)")
        box = page.eval_on_selector("svg.chart clipPath rect", "r => [r.y.baseVal.value, r.height.baseVal.value]")
        ys = page.eval_on_selector_all("svg.chart .lines .points circle", "cs => cs.map(c => c.cy.baseVal.value)")
        labels = page.eval_on_selector_all("svg.chart .axis.y .tick text", "ts => ts.map(t => t.textContent)")
        title = page.eval_on_selector("svg.chart .axis.y > text", "t => t.textContent")
    assert not refused
    assert len(ys) >= len(values) and all(box[0] <= y <= box[0] + box[1] for y in ys), (box, min(ys), max(ys))
    assert title == "time (us)" and 4 <= len(labels) <= 9 and all(float(x) <= 60 for x in labels), labels


@pytest.mark.browser
def test_every_machine_overlaid_at_once(openblas: tuple[dict[str, Any], Path]) -> None:
    """The three machines' gemm [size=100, variant=d] on one chart (?vs=a,b), as asv's graphs draw every machine:
    a line and a legend entry per machine, a chip pressed per machine drawn, one press taking its line away."""
    _, site = openblas
    sid = next(r["id"] for r in site_data(site, "gha-aws-skylake/index")["grid"]
               if r["name"] == "benchmarks.gemm.time_gemm [size=100, variant=d]")
    hist = f"{site.as_uri()}/index.html#/gha-aws-skylake/history/{sid}"
    with site_tab(site) as (page, refused):
        page.goto(f"{hist}?vs=gha-aws-graviton,gha-ubuntu-noble")
        page.wait_for_selector("svg.chart .lines > path:nth-of-type(3)")
        legend = page.inner_text(".legend")
        pressed = page.locator("#vs button[aria-pressed=true]").count()
        page.locator("#vs button", has_text="gha-ubuntu-noble").click()
        page.wait_for_selector("svg.chart .lines > path:nth-of-type(3)", state="detached")
        after = (page.locator("svg.chart .lines > path").count(), page.url)
        # The repository's commit and compare views open in a new tab, as the dashboard's links to other sites.
        page.goto(f"{site.as_uri()}/index.html#/gha-aws-skylake/alerts")
        page.wait_for_selector(".group table a[href^='https://github.com/']")
        away = page.eval_on_selector_all("a[href^='https://github.com/']", "as => as.map(a => [a.target, a.rel])")
    assert not refused
    assert all(m in legend for m in ("gha-aws-skylake", "gha-aws-graviton", "gha-ubuntu-noble")) and pressed == 2
    assert after[0] == 2 and after[1].endswith("vs=gha-aws-graviton"), after
    assert away and all(a == ["_blank", "noopener"] for a in away), away


def test_a_series_that_only_failed_says_so_under_its_chart() -> None:
    """uxarray's real results hold series whose every run failed: the site said '0 commits measured' over the
    failed runs' marks (review); it counts them now."""
    hist = pd.DataFrame({"value": [float("nan"), float("nan"), 2e-6], "status": ["failed", "failed", "ok"],
                         "commit_id": [1, 2, 3], "benchmark_version": ["v"] * 3})  # fmt: skip
    page = series_history(hist.iloc[:2], {1: 0, 2: 1, 3: 2}, label="b", subtitle="", unit="seconds",
                          direction="up_is_worse", short=["a", "b", "c"])  # fmt: skip
    assert page["caption"].startswith("0 commits measured, 2 more failed;") and page["failed"] == [0, 1]
    page = series_history(hist, {1: 0, 2: 1, 3: 2}, label="b", subtitle="", unit="seconds", direction="up_is_worse",
                          short=["a", "b", "c"])  # fmt: skip
    assert page["caption"].startswith("1 commit measured, 2 more failed;")


def test_a_value_without_a_version_continues_its_segment_on_the_site() -> None:
    """A run of older asv (no version) between two of one version: no version line (the site drew two, one
    either side of it, where detection and the dashboard see one segment); a real change draws one."""
    hist = pd.DataFrame({"value": [1e-6, 1e-6, 1e-6, 2e-6, 2e-6], "status": ["ok"] * 5, "commit_id": [1, 2, 3, 4, 5],
                         "benchmark_version": ["v1", None, "v1", "v2", None]})  # fmt: skip
    page = series_history(hist, {c: c - 1 for c in range(1, 6)}, label="b", subtitle="", unit="seconds",
                          direction="up_is_worse", short=list("abcde"))  # fmt: skip
    assert page["versions"] == [3]
