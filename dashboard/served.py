"""`mlaperf dashboard` in a child process, for the tools that drive it in a browser (the screenshot script,
the speed benchmark, the browser test): start it on a free port, wait until it serves, stop it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parents[1]


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
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.base}/_stcore/health", timeout=2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"dashboard at {self.base} not serving (exit {self.proc.poll()})") from None
                time.sleep(0.2)

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
