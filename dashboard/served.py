"""`mlaperf dashboard` in a child process, for the tools that drive it in a browser (the screenshot script,
the speed benchmark, the browser test): start it on a free port, wait until it serves, stop it; and what
they share in the browser: Chromium's flags and ``Watcher``, which waits for a script run's end and its charts."""

from __future__ import annotations

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
# Every chart drawn: each Plotly chart element holds an SVG with at least one trace.
CHARTS_DRAWN = """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
    .every(c => c.querySelector('svg.main-svg g.trace'))"""


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
    """Counts the server's ``script_finished`` messages on a tab's websocket (Streamlit's ForwardMsg), so a
    tool knows when a run has ended instead of guessing from spinners."""

    def __init__(self, page: Any) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.finished = 0
        self.finished_at = 0.0
        self.errors: list[str] = []

        def frame(payload: str | bytes) -> None:
            if isinstance(payload, str):
                return
            try:
                msg = ForwardMsg.FromString(payload)
            except Exception:  # noqa: BLE001 - other frames (or a newer wire format) are not ours
                return
            kind = msg.WhichOneof("type")
            if kind == "script_finished":
                self.finished += 1
                self.finished_at = time.perf_counter()
            elif kind == "delta" and msg.delta.new_element.WhichOneof("type") == "exception":
                self.errors.append(msg.delta.new_element.exception.message)

        page.on("websocket", lambda ws: ws.on("framereceived", frame))

    def wait_run(self, page: Any, before: int, timeout: float = 120.0) -> float:
        """Wait for the next run to finish and its charts to draw; returns when the run finished."""
        deadline = time.monotonic() + timeout
        while self.finished <= before:
            if time.monotonic() > deadline:
                raise TimeoutError("no script_finished from the server")
            page.wait_for_timeout(5)
        if self.errors:
            raise RuntimeError(f"page raised: {self.errors[0]}")
        page.wait_for_function(CHARTS_DRAWN, timeout=60_000)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        return self.finished_at
