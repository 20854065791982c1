"""`mlaperf demo` runs each step as the command a user would type, in a child process; a CI cancel
(SIGTERM to the demo) reaches the step that is running, which cleans up (here: the dashboard's Streamlit)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from scratch import MLAPERF, ROOT, alive, children, serving, wait_for


def _descendants(pid: int) -> list[int]:
    return [d for child in children(pid) for d in (child, *_descendants(child))]


def test_demo_shows_each_command_and_passes_sigterm_to_the_running_step(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/demo.sqlite"
    proc = subprocess.Popen([str(MLAPERF), "demo", "--no-bench", "--port", "0", "--db", db], cwd=ROOT,
                            env={**os.environ, "HOME": str(tmp_path)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        while not (lines and lines[-1].startswith("mlaperf dashboard: http")):
            line = proc.stdout.readline()
            assert line, "the demo ended before serving:\n" + "".join(lines)
            lines.append(line)
        url = lines[-1].split()[2]

        wait_for(lambda: serving(url), 120, "the dashboard to serve")
        tree = _descendants(proc.pid)
        assert len(tree) >= 2, "the dashboard step and its Streamlit server run under the demo"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    shown = "".join(lines)
    for step in ("$ mlaperf db upgrade --db", "$ mlaperf ingest", "$ mlaperf detect --db", "$ mlaperf dashboard --db"):
        assert step in shown, shown
    assert proc.returncode == 143, err
    assert "stopped by SIGTERM" in err.strip().splitlines()[-1]
    assert not any(alive(pid) for pid in tree), "every step process and Streamlit are stopped"
    assert not serving(url)
