"""`mlaperf publish`: the seeded store as a static site, checked as files and in headless Chromium from file://
with every request that is not a file of the site refused (no server, no network)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MLA_MACHINE, ROOT, SLOW_FROM, Seeded, site_tab

from dashboard.gitremote import https_url
from dashboard.summary import latest_change

REPO = "https://github.com/example/mlaperf"


def _publish(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLAPERF_REPO_URL": ""}
    return subprocess.run([sys.executable, "-m", "mlaperf.cli", "publish", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def site(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    done = _publish("--db", seeded.url, "--out", str(out), "--repo-url", REPO)
    assert done.returncode == 0, done.stderr
    assert "index.html" in done.stdout and "series" in done.stdout
    return out


def test_site_files_need_no_network(site: Path) -> None:
    assert {"index.html", "app.js", "style.css", ".mlaperf-site", ".nojekyll"} <= {p.name for p in site.iterdir()}
    text = "\n".join(p.read_text(encoding="utf-8") for p in (site / "index.html", site / "app.js", site / "style.css"))
    # Nothing loaded from another host: no absolute URL in a src/href/@import/url() (the SVG namespace is a name).
    assert not re.search(r"""(src|href)\s*=\s*["']https?:|@import|url\(\s*["']?https?:""", text), "remote asset"
    assert "fetch(" not in text and "XMLHttpRequest" not in text
    data = (site / "data" / "site.js").read_text(encoding="utf-8")
    assert data.startswith('MLAPERF.put("site",')
    assert any(REPO + "/commit/" in p.read_text(encoding="utf-8") for p in (site / "data").glob("*/index.js"))
    total = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    assert total < 50e6


def test_out_that_is_not_a_site_is_refused(seeded: Seeded, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    done = _publish("--db", seeded.url, "--out", str(busy))
    assert done.returncode == 2 and "--out" in done.stderr and "not empty" in done.stderr
    assert (busy / "keep.txt").read_text() == "mine"  # nothing lost
    a_file = tmp_path / "file"
    a_file.write_text("x")
    done = _publish("--db", seeded.url, "--out", str(a_file))
    assert done.returncode == 2 and "is a file" in done.stderr


def test_republish_replaces_the_old_site(seeded: Seeded, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert _publish("--db", seeded.url, "--out", str(out), "--machine", MLA_MACHINE).returncode == 0
    stale = out / "data" / "m9" / "index.js"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    done = _publish("--db", seeded.url, "--out", str(out), "--machine", MLA_MACHINE)
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and (out / "index.html").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_full_disk_keeps_the_old_site(seeded: Seeded, tmp_path: Path) -> None:
    """On a filesystem with room for one site but not two (a tmpfs in a mount namespace of its own), a second
    publish exits 2 with one line saying the disk is full, and the site before it is there, byte for byte, with no
    half-built folder beside it."""
    from tests.db.test_readonly import in_mount_namespace

    probe = tmp_path / "probe"
    assert _publish("--db", seeded.url, "--out", str(probe), "--machine", MLA_MACHINE).returncode == 0
    size = sum(p.stat().st_size + 4096 for p in probe.rglob("*"))  # a page or more a file on tmpfs
    disk, report = tmp_path / "disk", tmp_path / "report"
    disk.mkdir()
    report.mkdir()
    publish = f"{sys.executable} -m mlaperf.cli publish --db {seeded.url} --out {disk / 'site'} --machine {MLA_MACHINE}"
    sums = f"(cd {disk} && find . -type f | sort | xargs md5sum)"
    script = (f"mount -t tmpfs -o size={size * 3 // 2} tmpfs {disk} && {publish} > /dev/null 2>&1; echo $? > "
              f"{report}/rc1; {sums} > {report}/before; {publish} --quiet 2> {report}/err; echo $? > {report}/rc2; "
              f"{sums} > {report}/after; ls -a {disk} > {report}/listing")  # fmt: skip
    done = in_mount_namespace(script, cwd=ROOT, env={**os.environ, "MLAPERF_REPO_URL": ""})
    assert done.returncode == 0, done.stderr
    assert (report / "rc1").read_text().strip() == "0", "the first site fits"
    assert (report / "rc2").read_text().strip() == "2", (report / "err").read_text()
    assert (report / "err").read_text() == ("mlaperf: error: No space left on device (make room on that disk, or "
                                             "write elsewhere, and run it again)\n")  # fmt: skip
    before = (report / "before").read_text()
    assert "./site/index.html" in before and (report / "after").read_text() == before
    assert (report / "listing").read_text().split() == [".", "..", "site"], "no half-built site left beside it"


def test_a_folder_it_may_not_write_is_named_and_the_old_site_kept(seeded: Seeded, tmp_path: Path) -> None:
    """--out in a folder this user cannot write (a web root owned by another user): exit 2 naming --out and the
    folder, not an internal error; the site already there is left as it was. Root runs the publish without the
    capabilities that ignore file modes (``tests.db.conftest.unprivileged_prefix``)."""
    from tests.db.conftest import unprivileged_prefix

    www = tmp_path / "www"
    www.mkdir()
    assert _publish("--db", seeded.url, "--out", str(www / "site"), "--machine", MLA_MACHINE).returncode == 0
    before = sorted(p.relative_to(www) for p in www.rglob("*"))
    www.chmod(0o555)
    try:
        env = {**os.environ, "MLAPERF_REPO_URL": ""}
        for out in (www / "site", www / "new"):
            done = subprocess.run([*unprivileged_prefix(), sys.executable, "-m", "mlaperf.cli", "publish", "--db",
                                   seeded.url, "--out", str(out), "--machine", MLA_MACHINE, "--quiet"], cwd=ROOT,
                                  env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
            assert done.returncode == 2, done.stderr
            assert done.stderr.startswith("mlaperf publish: error: --out: Permission denied"), done.stderr
            assert f"{www} must be writable" in done.stderr
            assert "internal error" not in done.stderr and len(done.stderr.splitlines()) == 1
    finally:
        www.chmod(0o755)
    assert sorted(p.relative_to(www) for p in www.rglob("*")) == before


def test_publish_says_where_it_is(seeded: Seeded, tmp_path: Path) -> None:
    """A big store's publish ran a minute without a word: a line on stderr as each machine starts and ends
    (stdout keeps the one summary line); --quiet leaves only the summary."""
    done = _publish("--db", seeded.url, "--out", str(tmp_path / "site"), "--machine", MLA_MACHINE)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"publish: {MLA_MACHINE} (1 of 1): reading its overview, alerts and series' histories"
    assert re.fullmatch(rf"publish: {MLA_MACHINE} \(1 of 1\): [\d,]+ series, [\d,]+ files in \d+\.\d s", lines[1])
    assert len(lines) == 2 and done.stdout.startswith("mlaperf publish: ")
    quiet = _publish("--db", seeded.url, "--out", str(tmp_path / "site"), "--machine", MLA_MACHINE, "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.startswith("mlaperf publish: ")


def test_site_folder_mode_is_a_plain_folders(seeded: Seeded, tmp_path: Path) -> None:
    """A web server running as another user can read the site: a new folder gets the mode ``mkdir`` gives under
    the umask (not ``mkdtemp``'s 0700); a republished one keeps its own."""
    from mlaperf.publish import publish

    out = tmp_path / "site"
    old = os.umask(0o022)
    try:
        publish(seeded.url, out, machines=[MLA_MACHINE])
        assert out.stat().st_mode & 0o777 == 0o755
        out.chmod(0o750)
        # Another group of ours (root: any), as a folder shared with a web server's group would have.
        group = 54322 if os.geteuid() == 0 else next((g for g in os.getgroups() if g != out.stat().st_gid), None)
        if group is not None:
            os.chown(out, -1, group)
        publish(seeded.url, out, machines=[MLA_MACHINE])
        assert out.stat().st_mode & 0o777 == 0o750
        if group is not None:  # served through group permission (www-data): the group stays
            assert out.stat().st_gid == group
        os.umask(0o027)
        publish(seeded.url, tmp_path / "other", machines=[MLA_MACHINE])
        assert (tmp_path / "other").stat().st_mode & 0o777 == 0o750
    finally:
        os.umask(old)


def test_bad_arguments_exit_2(seeded: Seeded, tmp_path: Path) -> None:
    done = _publish("--db", seeded.url, "--out", str(tmp_path / "s"), "--machine", "nope")
    assert done.returncode == 2 and "--machine" in done.stderr and "nope" in done.stderr
    done = _publish("--db", seeded.url, "--out", str(tmp_path / "s"), "--repo-url", "javascript:alert(1)")
    assert done.returncode == 2 and "--repo-url" in done.stderr
    done = _publish("--db", f"sqlite:///{tmp_path / 'none.sqlite'}", "--out", str(tmp_path / "s"))
    assert done.returncode == 2 and "none.sqlite" in done.stderr
    assert not (tmp_path / "s").exists()


def test_help() -> None:
    done = subprocess.run([sys.executable, "-m", "mlaperf.cli", "publish", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "--out" in done.stdout and "file://" in done.stdout
    assert "``" not in done.stdout, "plain text, not the module docstring's reStructuredText"


@pytest.mark.parametrize(("remote", "url"), [
    ("git@github.com:org/repo.git", "https://github.com/org/repo"),
    ("ssh://git@gitlab.example.com:2222/grp/sub/repo.git", "https://gitlab.example.com/grp/sub/repo"),
    ("https://user@github.com/org/repo.git\n", "https://github.com/org/repo"),
    ("/srv/git/repo.git", ""),
    ("file:///srv/git/repo", ""),
])
def test_https_url_of_remote(remote: str, url: str) -> None:
    assert https_url(remote) == url


def test_latest_change_is_direction_aware() -> None:
    assert latest_change([1.0, 1.0, 1.0, 2.0], "up_is_worse") == pytest.approx(2.0)
    assert latest_change([1.0, 1.0, 1.0, 2.0], "down_is_worse") == pytest.approx(0.5)
    assert latest_change([None, 3.0], "up_is_worse") is None


# -- in the browser, from file:// --------------------------------------------------------------------------
TICK = re.compile(r"^(0|-?[\d,]+(\.\d+)?[kMG]?)$")


@pytest.fixture(scope="module")
def browser_page(site: Path) -> Iterator[tuple[Any, list[str]]]:
    with site_tab(site) as tab:
        yield tab


def _error_at(page: Any, url: str) -> str:
    """The error paragraph the site shows at ``url``."""
    page.goto(url)
    page.wait_for_selector("p.error")
    return page.inner_text("p.error")


def _ticks(page: Any) -> list[str]:
    return page.locator("svg.chart .axis.y .tick text").all_text_contents()


@pytest.mark.browser
def test_site_in_chromium_from_file(site: Path, seeded: Seeded, browser_page: tuple[Any, list[str]]) -> None:
    page, refused = browser_page
    index = site.as_uri() + "/index.html"
    page.goto(index)
    page.wait_for_selector("#grid tbody tr")
    assert page.locator("#machine option").count() >= 1
    rows = page.locator("#grid tbody tr").count()
    assert rows > 10 and page.locator("#grid svg.spark polyline").count() > 0
    page.fill("input.search", "time_decode mma 64")  # search: every word, in any order
    shown = page.locator("#grid tbody tr")
    assert 0 < shown.count() < rows
    assert all("time_decode" in t and "mma" in t for t in shown.locator("td:first-child").all_inner_texts())
    assert "q=time_decode" in page.url  # the search is part of the link

    # History of a flagged series: its line, the regression triangle, the fix star, commit links.
    page.locator("#grid tbody tr td:first-child a").first.click()
    page.wait_for_selector("svg.chart .lines path")
    assert "/history/" in page.url
    folder = page.locator("#machine option", has_text=MLA_MACHINE).get_attribute("value")
    page.goto(f"{index}#/{folder}")
    page.wait_for_selector("table.groups")  # the seeded step was fixed: its group is listed, as on the dashboard
    assert "fixed" in page.inner_text("table.groups tbody")
    page.get_by_role("link", name="view group").first.click()
    page.wait_for_selector(".group table a")
    assert page.locator(".group").count() == 1 and "fixed" in page.inner_text(".group h3")
    page.get_by_role("link", name="plot").first.click()
    page.wait_for_selector("svg.chart .marker-reg")
    assert page.locator("svg.chart .marker-fix").count() >= 1
    # The fix's commit, and the culprit range as the repository's compare view.
    assert page.locator(f'a[href^="{REPO}/commit/"]').count() >= 1
    assert page.locator(f'a[href^="{REPO}/compare/"]').count() >= 1
    ticks = _ticks(page)
    assert ticks and all(TICK.match(t) for t in ticks), ticks
    assert re.search(r"\d+ commits measured", page.inner_text("main"))
    # A chosen commit is marked; a mistyped one says so, naming it.
    hist = page.url.split("?")[0]
    page.goto(f"{hist}?at={seeded.shas[SLOW_FROM][:8]}")
    page.wait_for_selector("svg.chart line.event", state="attached")
    assert "zzzz9" in _error_at(page, f"{hist}?at=zzzz9")
    # One character started 6 commits and marked the first of them without a word: 4 at least, as the dashboard.
    assert "shorter than 4 characters" in _error_at(page, f"{hist}?at={seeded.shas[SLOW_FROM][:2]}")
    assert page.locator("svg.chart line.event").count() == 0
    # In an 800 px window the chart is drawn at its width: its text at 11 px, not a 1,100 px drawing scaled down
    # to 7.6 px (a review), and the commit labels it keeps do not overlap.
    size = page.viewport_size
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(hist)
    page.wait_for_selector("svg.chart .lines path")
    heights = page.eval_on_selector_all("svg.chart .axis text", "ts => ts.map(t => t.getBoundingClientRect().height)")
    boxes = page.eval_on_selector_all("svg.chart .axis.x .tick text", """ts => ts.map(t => {
        const b = t.getBoundingClientRect(); return [b.left, b.right]; })""")
    page.set_viewport_size(size)
    assert min(heights) >= 11, heights
    assert len(boxes) >= 3 and all(a[1] <= b[0] for a, b in zip(boxes, boxes[1:], strict=False)), boxes

    # Throughput: one line per implementation, a log axis (as the dashboard's) without "0M" or "2e+2".
    page.goto(f"{index}#/{folder}/throughput")
    page.wait_for_selector("svg.chart .lines path")
    assert page.locator("svg.chart .lines > path").count() >= 2
    ticks = _ticks(page)
    assert len(ticks) >= 3 and "0" not in ticks and all(TICK.match(t) for t in ticks), ticks
    assert page.locator("text=Speed-up over").count() == 1
    assert not refused, refused


@pytest.mark.browser
def test_an_unknown_machine_in_the_link_is_named_not_replaced(site: Path, browser_page: tuple[Any, list[str]]) -> None:
    """#/nosuch/alerts used to land silently on the first machine's Overview; it says which machine it lacks."""
    page, refused = browser_page
    page.goto(f"{site.as_uri()}/index.html#/nosuch/alerts")
    page.wait_for_selector("p.error")
    assert page.inner_text("p.error").startswith("No machine 'nosuch' on this site (known: ")
    assert page.url.endswith("#/nosuch/alerts") and page.locator("#grid").count() == 0
    assert page.locator("#nav a").count() == 0
    page.locator("main a").first.click()  # the way back: a machine's Overview
    page.wait_for_selector("#grid tbody tr")
    # A state the alerts page does not know is named (it showed "No alert group with the states picked.").
    folder = page.url.split("#/")[1].split("/")[0]
    alerts = f"{site.as_uri()}/index.html#/{folder}/alerts"
    assert "No state 'bogus' (known: open, suspect, fixed, closed): showing the others" in \
        _error_at(page, f"{alerts}?show=bogus,open")
    assert "showing the default" in _error_at(page, f"{alerts}?show=bogus")
    assert page.locator(".chips button[aria-pressed=true]").count() >= 3  # machine chip + open, suspect, fixed
    assert not refused, refused


def test_empty_store_publishes_a_site_that_says_so(empty_store: str, tmp_path: Path) -> None:
    done = _publish("--db", empty_store, "--out", str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr
    assert "0 machines" in done.stdout
    data = (tmp_path / "site" / "data" / "site.js").read_text(encoding="utf-8")
    assert '"machines":[]' in data
