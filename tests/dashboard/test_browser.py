"""End to end: serve the dashboard with its CLI and open every page in headless Debian Chromium.

Skips when /usr/bin/chromium is missing, unless MLAPERF_REQUIRE_BROWSER=1 (CI). Screenshots go to
artifacts/screenshots/ (uploaded by CI).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, Seeded

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = ROOT / "artifacts" / "screenshots"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
# url path -> whether the page draws Plotly charts on the seeded store's default machine
PAGES = {"": False, "throughput": True, "history": True, "regressions": False, "compare": True,
         "efficiency": True}

pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    if os.environ.get("MLAPERF_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"MLAPERF_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM} missing", allow_module_level=True)


def _wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dashboard exited with {proc.returncode}: {proc.stdout.read()}")  # type: ignore[union-attr]
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"dashboard at {base} not healthy after {timeout:.0f} s")


@pytest.fixture(scope="module")
def served(seeded: Seeded) -> Iterator[str]:
    """``mlaperf dashboard`` on a free port."""
    # The real `mlaperf dashboard` once the top-level CLI exists; the same handler standalone before.
    console = Path(sys.executable).with_name("mlaperf")
    entry = [str(console), "dashboard"] if (ROOT / "mlaperf" / "cli.py").exists() and console.exists() \
        else [sys.executable, "-m", "dashboard.cli"]
    proc = subprocess.Popen(
        [*entry, "--db", seeded.url, "--port", "0", "--repo-url", "https://github.com/example/mlaperf"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        seen = []
        for _ in range(50):  # the URL line comes first, after any warnings from imports
            line = proc.stdout.readline()  # type: ignore[union-attr]
            seen.append(line)
            if line.startswith("mlaperf dashboard: http://") or not line:
                break
        assert seen[-1].startswith("mlaperf dashboard: http://127.0.0.1:"), "".join(seen)
        base = seen[-1].split()[2]
        _wait_healthy(base, proc)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_every_page_renders_in_chromium(served: str) -> None:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            for path, has_chart in PAGES.items():
                page.goto(f"{served}/{path}", wait_until="domcontentloaded")
                page.wait_for_selector("h1", timeout=60_000)
                if has_chart:
                    page.wait_for_selector('[data-testid="stPlotlyChart"] svg.main-svg', timeout=60_000)
                else:
                    page.wait_for_selector('[data-testid="stDataFrame"]', timeout=60_000)
                # Let the script run finish (the status widget disappears when idle).
                page.wait_for_function(
                    "() => !document.querySelector('[data-testid=\"stStatusWidget\"] button')",
                    timeout=60_000,
                )
                name = path or "overview"
                page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
                assert page.locator('[data-testid="stException"]').count() == 0, f"exception on /{path}"
                if has_chart:
                    # Plotly drew real SVG traces (lines/points), not an empty frame.
                    assert page.locator('[data-testid="stPlotlyChart"] g.trace').count() > 0, path
        finally:
            browser.close()
    assert {f.stem for f in SHOTS.glob("*.png")} >= {"overview", *[p for p in PAGES if p]}
