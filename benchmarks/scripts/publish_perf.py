"""`mlaperf publish` at scale: time to write the static site of a big store, its size, and its pages' first
render in headless Chromium from file://.

Seeds the store of ``dashboard_perf`` (COMMITS commits x 552 series of the sparse-MLA suites, real asv files,
ingested and detected, plus a small second machine) unless --no-seed, runs ``mlaperf publish`` on it as a user
would (a child process; --repeats times, each replacing the site before), then opens the overview, a history
page, the throughput page and the alert groups from disk, each in a new tab, timing navigation to the page's
content drawn, and then one change on each page (the overview's search, the history page's machine picker,
a throughput filter chip, an alert-group state chip), timed from the input to the page drawn again.

Targets (issue 28): publish <= 60 s and the site <= 50 MB at 1,000 commits x 500 series; every page's first
render <= 1.5 s, a change <= 1 s. Nothing here is a test; it reports.

    python -m benchmarks.scripts.publish_perf                                 # 1,000 commits, temporary store
    python -m benchmarks.scripts.publish_perf --db sqlite:////tmp/big.sqlite --no-seed

Exit status: 0 every figure within target, 1 some figure over target, 2 bad usage, 3 a page failed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.scripts.dashboard_perf import MACHINE, ROOT, add_store_options, check_store_options, seed

PUBLISH_TARGET_S = 60.0
SIZE_TARGET_MB = 50.0
FIRST_TARGET_S = 1.5
CHANGE_TARGET_S = 1.0
# page -> (location hash after the machine's folder, selector drawn when the page is ready)
PAGES = {
    "overview": ("", "#grid tbody tr svg.spark"),
    "history": ("/history/{series}", "svg.chart .lines path"),  # the overview grid's first series
    "throughput": ("/throughput", "svg.chart .lines path"),
    "alerts": ("/alerts?show=open,suspect,fixed,closed", "main h1"),
}


def _search(page: Any) -> None:
    page.fill("input.search", "time_decode mma 64")
    page.wait_for_function("() => { const rows = [...document.querySelectorAll('#grid tbody tr')]; return rows.length"
                           " > 0 && rows.every(r => r.cells[0].innerText.includes('time_decode')); }", polling="raf")


def _other_machine(page: Any) -> None:
    other = page.locator("#machine option:not(:checked)").first.get_attribute("value")
    page.select_option("#machine", value=other)
    page.wait_for_function("() => !location.hash.includes('/history') && document.querySelector('#grid tbody tr "
                           "svg.spark')", polling="raf")  # the other machine's overview


def _chip(page: Any, row: Any, pressed: str) -> None:
    """Click the first chip of ``row`` whose aria-pressed is ``pressed`` and wait for the page drawn with it
    flipped (the site draws again on the hash change)."""
    chip = row.locator(f'button.chip[aria-pressed="{pressed}"]').first
    text = chip.inner_text()
    chip.click()
    flipped = "false" if pressed == "true" else "true"
    page.wait_for_function("([t, f]) => [...document.querySelectorAll('button.chip')].some(b => b.innerText === t "
                           "&& b.getAttribute('aria-pressed') === f)", arg=[text, flipped], polling="raf")


# page -> (what changes, the input and the wait until the page shows it).
CHANGES: dict[str, tuple[str, Callable[[Any], None]]] = {
    "overview": ("search 'time_decode mma 64'", _search),
    "history": ("machine -> the small machine", _other_machine),
    "throughput": ("another filter value", lambda p: _chip(p, p.locator(".chips").nth(1), "false")),
    "alerts": ("a state chip off", lambda p: _chip(p, p.locator(".chips").first, "true")),
}


def publish(url: str, out: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mlaperf.cli", "publish", "--db", url, "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"mlaperf publish exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    print("  " + done.stdout.strip(), flush=True)
    return seconds


def render_times(out: Path, repeats: int, chromium: str) -> dict[str, tuple[list[float], list[float]]]:
    """Per page: (first render seconds, change seconds), one of each per repeat."""
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS

    index = out.resolve().as_uri() + "/index.html"
    times: dict[str, tuple[list[float], list[float]]] = {p: ([], []) for p in PAGES}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            probe = browser.new_page()
            probe.goto(index)
            probe.wait_for_selector("#machine option", state="attached")
            folder = probe.locator("#machine option", has_text=MACHINE).get_attribute("value")
            # A series' address is a digest of its name (mlaperf.publish_ids): take the grid's first one.
            probe.goto(f"{index}#/{folder}")
            first = probe.locator('#grid tbody tr a[href*="/history/"]').first.get_attribute("href") or ""
            series = first.rsplit("/history/", 1)[-1]
            probe.close()
            for _ in range(repeats):
                for name, (suffix, ready) in PAGES.items():
                    page = browser.new_page(viewport={"width": 1400, "height": 1000})
                    t0 = time.perf_counter()
                    page.goto(f"{index}#/{folder}{suffix.format(series=series)}")
                    page.wait_for_selector(ready, state="attached", timeout=30_000)
                    times[name][0].append(time.perf_counter() - t0)
                    page.wait_for_timeout(300)
                    t0 = time.perf_counter()
                    try:
                        CHANGES[name][1](page)
                    except Exception as exc:  # noqa: BLE001 - said with the page's name
                        raise RuntimeError(f"{name}, {CHANGES[name][0]}: {exc}") from exc
                    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                    times[name][1].append(time.perf_counter() - t0)
                    page.close()
        finally:
            browser.close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_store_options(parser, repeats_help="publishes, and first renders per page (default 3)",
                      keep_help="keep the temporary folder (store and site)")  # fmt: skip
    args = parser.parse_args(argv)
    check_store_options(parser, args)
    work = Path(tempfile.mkdtemp(prefix="publish_perf."))
    url = args.db or f"sqlite:///{work / 'store.sqlite'}"
    try:
        if not args.no_seed:
            seed(url, work, args.commits)
        out = work / "site"
        # Each publish after the first replaces the site the one before wrote, as a nightly's would.
        runs = [publish(url, out) for _ in range(args.repeats)]
        seconds = statistics.median(runs)
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6
        files = sum(1 for p in out.rglob("*") if p.is_file())
        print(f"publish: median {seconds:.1f} s of {len(runs)} (max {max(runs):.1f} s, target "
              f"{PUBLISH_TARGET_S:.0f} s), site {size:.1f} MB in {files:,} files (target {SIZE_TARGET_MB:.0f} MB)",
              flush=True)
        try:
            times = render_times(out, args.repeats, args.chromium)
        except Exception as exc:  # noqa: BLE001 - a page that did not draw is reported, not a traceback
            print(f"a page failed: {exc}", file=sys.stderr)
            return 3
        ok = seconds <= PUBLISH_TARGET_S and size <= SIZE_TARGET_MB
        for name, (first, change) in times.items():
            median, changed = statistics.median(first), statistics.median(change)
            ok &= median <= FIRST_TARGET_S and changed <= CHANGE_TARGET_S
            print(f"  {name:<11} first render median {median:.2f} s (max {max(first):.2f} s, target "
                  f"{FIRST_TARGET_S} s); {CHANGES[name][0]}: median {changed:.2f} s (max {max(change):.2f} s, "
                  f"target {CHANGE_TARGET_S} s)")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
