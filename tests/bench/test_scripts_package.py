"""``benchmarks/scripts`` is a package (scripts run as ``python -m benchmarks.scripts.x``), and asv
imports every module under ``benchmarks/`` at discovery: no script may become a benchmark, and each
must import with the core dependencies alone (what ``pip install mlaperf`` brings, no dev extras)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from benchtools import ROOT, discover

SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks" / "scripts").glob("*.py") if p.stem != "__init__")

# Imports a module with the dev extras of pyproject.toml made unimportable.
IMPORT_CORE_ONLY = textwrap.dedent(
    """
    import importlib, importlib.abc, sys
    DEV = {"pytest", "_pytest", "hypothesis", "playwright", "psycopg", "xdist", "pytest_timeout", "ruff"}

    class NoDevExtras(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in DEV:
                raise ModuleNotFoundError(f"No module named {name!r} (a dev extra, not a core dependency)")
            return None

    sys.meta_path.insert(0, NoDevExtras())
    importlib.import_module(sys.argv[1])
    """
)


def test_scripts_is_a_package() -> None:
    assert (ROOT / "benchmarks" / "scripts" / "__init__.py").is_file()
    assert SCRIPTS, "no scripts found"


def test_asv_discovers_no_benchmark_in_scripts() -> None:
    found = [name for name in discover("cpu") if name.startswith("scripts.")]
    assert not found, f"asv takes these script functions for benchmarks (rename them): {found}"


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_imports_with_core_dependencies_only(script: str) -> None:
    env = dict(os.environ, MLAPERF_TIER="cpu", TRITON_INTERPRET="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_CORE_ONLY, f"benchmarks.scripts.{script}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, f"python -c 'import benchmarks.scripts.{script}' failed:\n{proc.stderr[-3000:]}"
