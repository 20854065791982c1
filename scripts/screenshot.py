"""Screenshot dashboard pages in headless Chromium: the whole page, not just the first screen.

Serves the store with ``mlaperf dashboard`` on a free port, opens each page in a window 3,000 px tall, waits
until the script run has finished and every chart is drawn, and shoots the content; a page taller than the
window is loaded again in a window that fits (resizing a drawn page makes its charts redraw: a shot then may
be blank).

    python scripts/screenshot.py --db sqlite:///.mlaperf/mlaperf.sqlite            # every page, docs/img
    python scripts/screenshot.py --db URL --page 'compare=compare?cmp_base=9c7d0b23&cmp_head=eee79092'

Exit status: 0 all pages shot, 2 bad usage, 3 the server or a page failed (the page is named).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

PAGES = ["overview=", "throughput=throughput", "history=history", "regressions=regressions",
         "compare=compare", "efficiency=efficiency"]
WIDTH = 1600  # default window width
TALL = 3000  # initial window height
HEIGHT_JS = """() => {
    const block = document.querySelector('[data-testid="stMainBlockContainer"]');
    const main = document.querySelector('[data-testid="stMain"]');
    return Math.ceil(block.getBoundingClientRect().bottom + (main ? main.scrollTop : 0));
}"""


def _load(page: Any, watch: Any, url: str) -> int:
    """Open ``url``, wait for the run to finish (raising if the page did) and every chart to draw; the
    content's height in pixels."""
    before = watch.begin()
    page.goto(url, wait_until="commit")
    watch.wait_run(page, before)
    page.wait_for_timeout(1000)  # tables draw after the run's end
    return int(page.evaluate(HEIGHT_JS))


def shoot(page: Any, watch: Any, url: str, out: Path, width: int = WIDTH) -> None:
    """A tall window from the start (resizing makes the charts redraw, and a shot taken then is blank); when the
    page is taller still, load it again in a window that fits, then clip to the content."""
    height = _load(page, watch, url)
    if height > TALL:
        page.set_viewport_size({"width": width, "height": min(height, 16_000)})
        height = _load(page, watch, url)
    page.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": max(600, min(height, 16_000))})


def main(argv: list[str] | None = None) -> int:
    from settings.args import add_db

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_db(ap)
    ap.add_argument("--out", type=Path, default=Path("docs/img"), help="folder for the PNGs (default docs/img)")
    ap.add_argument("--page", action="append", default=None, metavar="NAME=PATH",
                    help="file name and URL path with query, e.g. 'history=history?hp_concurrency=1,64' "
                    "(repeatable; default: every page in its default state)")
    ap.add_argument("--width", type=int, default=WIDTH,
                    help=f"window width in px (default {WIDTH}); 800 shows a laptop's split screen")
    ap.add_argument("--chromium", default="/usr/bin/chromium", help="Chromium binary (default /usr/bin/chromium)")
    args = ap.parse_args(argv)
    pages = args.page or PAGES
    for item in pages:
        if "=" not in item or not item.partition("=")[0]:
            ap.error(f"--page {item!r}: expected NAME=PATH, e.g. history=history")
    if args.width < 320:
        ap.error(f"--width {args.width}: at least 320 px")
    if not Path(args.chromium).exists():
        ap.error(f"--chromium {args.chromium}: not found")
    from playwright.sync_api import sync_playwright

    from dashboard.served import CHROMIUM_ARGS, Served, Watcher
    from settings.env import store_url

    args.out.mkdir(parents=True, exist_ok=True)
    try:
        server = Served(store_url(args.db))
    except RuntimeError as exc:
        print(f"screenshot: {exc}", file=sys.stderr)
        return 3
    with server, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        for item in pages:
            name, _, path = item.partition("=")
            page = browser.new_page(viewport={"width": args.width, "height": TALL})
            out = args.out / f"{name}.png"
            try:
                shoot(page, Watcher(page), f"{server.base}/{path}", out, args.width)
            except Exception as exc:  # noqa: BLE001 - name the page, keep the message short
                print(f"screenshot: page {name} ({path or '/'}): {exc}", file=sys.stderr)
                return 3
            finally:
                page.close()
            print(f"wrote {out}", flush=True)
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
