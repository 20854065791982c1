"""`mlaperf dashboard` in a child process, for the tools that drive it in a browser (the screenshot script,
the speed benchmark, the browser test): start it on a free port, wait until it serves, stop it; and what
they share in the browser: Chromium's flags and ``Watcher``, which waits for a script run's end and its charts."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Headless Chromium in a container or CI: no sandbox, no GPU, no background network or updates.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CHART_TYPE = "vega_lite_chart"  # the pages' only chart element (dashboard/charts.py)
CHART = '[data-testid="stVegaLiteChart"]'
# Stamps each chart container with when it was last drawn (Date.now(), ms). SVG (Streamlit's Vega-Lite on
# small data): a node added, a path or a position changed (only those attributes: observing every attribute
# of the page costs the browser time of its own). Canvas (Streamlit's Vega-Lite on large data): the end of a
# render pass, the renderer's final ``restore``. Installed before the page's scripts.
PAINT_STAMPS = """(() => {
  const chart = node => node.closest && node.closest('CHART');
  new MutationObserver(records => {
    for (const r of records) {
      const c = chart(r.target);
      if (c) c.__svgAt = Date.now();
    }
  }).observe(document, {subtree: true, childList: true, attributeFilter: ['d', 'transform', 'points']});
  const restore = CanvasRenderingContext2D.prototype.restore;
  CanvasRenderingContext2D.prototype.restore = function (...a) {
    const c = chart(this.canvas);
    if (c) c.__canvasAt = Date.now();
    return restore.apply(this, a);
  };
})();""".replace("CHART", CHART)
# At least ``n`` charts of the current run (not stale) drawn since ``since``: a Vega mark in SVG, or a Vega
# canvas after a render pass.
CHARTS_DRAWN = """([n, since]) => {
  let drawn = 0;
  for (const c of document.querySelectorAll('[data-testid="stElementContainer"]:not([data-stale="true"])')) {
    const chart = c.querySelector('CHART');
    if (!chart) continue;
    const svg = chart.querySelector('svg.marks g.role-mark > path');
    const canvas = chart.querySelector('canvas.marks');
    if ((svg && (chart.__svgAt || 0) >= since) || (canvas && (chart.__canvasAt || 0) >= since)) drawn++;
  }
  return drawn >= n;
}""".replace("CHART", CHART)


def wait_serving(base: str, proc: subprocess.Popen[Any], what: str, timeout: float = 90.0) -> None:
    """Return once the Streamlit server at ``base`` answers its health check; RuntimeError naming ``what``
    when ``proc`` exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} at {base} not serving (exit {proc.poll()})") from None
            time.sleep(0.2)


class Served:
    """``with Served(url) as s: s.base`` is ``http://127.0.0.1:PORT`` of a running dashboard on ``url``."""

    def __init__(self, url: str, *extra: str, timeout: float = 90.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlaperf.cli", "dashboard", "--db", url, "--port", "0", *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self.base = ""
        seen = []
        for _ in range(60):  # the URL line comes first, after any warnings from imports
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            seen.append(line)
            if line.startswith("mlaperf dashboard: http://"):
                self.base = line.split()[2]
                break
            if not line:
                break
        if not self.base:
            self.stop()
            raise RuntimeError(f"dashboard did not start (exit {self.proc.poll()}): {''.join(seen)[-2000:]}")
        # Drain the server's output so it never blocks on a full pipe.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()  # type: ignore[union-attr]
        try:
            wait_serving(self.base, self.proc, "dashboard", timeout)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class Watcher:
    """Follows a tab's websocket (Streamlit's ForwardMsg) so a tool knows when a run has ended and its charts
    are drawn, instead of guessing from spinners: counts ``script_finished`` messages, and per run the chart
    elements whose content changed since the previous run (those the browser must draw again; an unchanged
    one arrives as the same content or as a reference to it and is left as it is)."""

    def __init__(self, page: Any) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.finished = 0
        self.finished_at = 0.0
        self.errors: list[str] = []
        self.since_ms = 0.0  # charts must be painted after this wall-clock time (ms), see begin()
        self._charts: set[tuple[tuple[int, ...], str]] = set()  # this run's (delta path, content)
        self._last: set[tuple[tuple[int, ...], str]] = set()  # the previous finished run's
        self._chart_content: set[str] = set()  # contents of chart messages seen, to resolve references
        self._to_draw = 0  # charts of the last finished run the browser has to (re)draw

        def frame(payload: str | bytes) -> None:
            if isinstance(payload, str):
                return
            try:
                msg = ForwardMsg.FromString(payload)
            except Exception:  # noqa: BLE001 - other frames (or a newer wire format) are not ours
                return
            kind = msg.WhichOneof("type")
            path = tuple(msg.metadata.delta_path)
            if kind == "new_session":
                self._charts = set()
            elif kind == "ref_hash" and msg.ref_hash in self._chart_content:
                self._charts.add((path, msg.ref_hash))
            elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                if element.WhichOneof("type") == CHART_TYPE:
                    content = msg.hash or hashlib.sha1(element.SerializeToString()).hexdigest()
                    self._chart_content.add(content)
                    self._charts.add((path, content))
                elif element.WhichOneof("type") == "exception":
                    self.errors.append(element.exception.message)
            elif kind == "script_finished":
                self._to_draw = len(self._charts - self._last)
                self._last = self._charts
                self.finished += 1
                self.finished_at = time.perf_counter()

        def connected(ws: Any) -> None:
            self._last = set()  # a new connection (page load) is a new session: every chart drawn anew
            ws.on("framereceived", frame)

        page.add_init_script(PAINT_STAMPS)
        page.on("websocket", connected)

    def begin(self) -> int:
        """Call just before an action that reruns the page; returns the count of finished runs to give
        ``wait_run``. Charts drawn before this moment no longer count as drawn."""
        self.since_ms = time.time() * 1000.0
        return self.finished

    def wait_run(self, page: Any, before: int, timeout: float = 120.0) -> float:
        """Wait for the next run to finish and every chart it changed to be drawn again; returns when the
        run finished."""
        deadline = time.monotonic() + timeout
        while self.finished <= before:
            if time.monotonic() > deadline:
                raise TimeoutError("no script_finished from the server")
            page.wait_for_timeout(5)
        if self.errors:
            raise RuntimeError(f"page raised: {self.errors[0]}")
        page.wait_for_function(CHARTS_DRAWN, arg=[self._to_draw, self.since_ms], timeout=60_000, polling=10)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        return self.finished_at
