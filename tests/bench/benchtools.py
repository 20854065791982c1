"""Helpers of the asv-suite tests (imported by name: ``from benchtools import ...``; a ``from conftest
import`` would pick whichever conftest module pytest imported last)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# asv's own discovery (what `asv run` writes into benchmarks.json), in a fresh process per tier.
_DISCOVER = textwrap.dedent(
    """
    import io, sys
    from asv_runner.discovery import list_benchmarks
    fp = io.StringIO()
    list_benchmarks(sys.argv[1], fp)
    print(fp.getvalue())
    """
)


def discover(tier: str, benchmark_dir: Path | None = None, **env: str) -> dict[str, dict[str, object]]:
    """{name: asv's benchmark record (params, param_names, unit, type, version, ...)} for ``tier``."""
    full = dict(os.environ, MLAPERF_TIER=tier, **env)
    if "MLAPERF_CONCURRENCY" not in env:
        full.pop("MLAPERF_CONCURRENCY", None)
    proc = subprocess.run(
        [sys.executable, "-c", _DISCOVER, str(benchmark_dir or ROOT / "benchmarks")],
        env=full, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {b["name"]: b for b in json.loads(proc.stdout)}
