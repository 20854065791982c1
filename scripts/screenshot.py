"""Screenshot dashboard pages in headless Chromium (for the README and for eyeballing a store).

    python scripts/screenshot.py --db sqlite:////tmp/h.sqlite --out docs/img [--path 'history?benchmark=...']
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--out", type=Path, default=Path("docs/img"))
    ap.add_argument("--page", action="append", default=None, metavar="NAME=PATH",
                    help="file name and URL path, e.g. history=history?benchmark=...")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    pages = args.page or ["throughput=throughput", "history=history", "regressions=regressions"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "mlaperf.cli", "dashboard", "--db", args.db, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            for item in pages:
                name, _, path = item.partition("=")
                page.goto(f"{base}/{path}")  # path is already URL-encoded
                page.wait_for_selector('.js-plotly-plot, [data-testid="stDataFrame"]', timeout=60_000)
                time.sleep(3)  # let Plotly finish drawing
                page.screenshot(path=str(args.out / f"{name}.png"), full_page=True)
                print(f"wrote {args.out / f'{name}.png'}")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
