"""``benchmarks/scripts`` is a package (scripts run as ``python -m benchmarks.scripts.x``), and asv
imports every module under ``benchmarks/`` at discovery, on the GPU runner too: no script may become a
benchmark, and importing one must need nothing beyond the standard library (project and third-party
imports belong inside its functions; an H200 run once failed discovery because a script pulled alembic
at import)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from benchtools import ROOT, discover

SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks" / "scripts").glob("*.py") if p.stem != "__init__")

# Imports a module while refusing every import that is neither the standard library nor the module's own
# package (`benchmarks`), then lists any such module that got loaded anyway. A refusal caught by
# try/except ImportError is fine: the standard library probes optional modules (copy tries `org`).
IMPORT_STDLIB_ONLY = textwrap.dedent(
    """
    import importlib, importlib.abc, sys
    own = sys.argv[1].split(".")[0]
    class StdlibOnly(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top == own:
                return None
            raise ModuleNotFoundError(f"No module named {name!r} (not the standard library)")

    before = set(sys.modules)
    sys.meta_path.insert(0, StdlibOnly())
    importlib.import_module(sys.argv[1])  # a refused import it needs raises: the check fails
    loaded = sorted(m for m in set(sys.modules) - before
                    if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != own)
    for name in loaded:
        print("non-stdlib module loaded:", name)
    sys.exit(1 if loaded else 0)
    """
)


def _import_stdlib_only(module: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MLAPERF_TIER="cpu", TRITON_INTERPRET="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-c", IMPORT_STDLIB_ONLY, module], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_scripts_is_a_package() -> None:
    assert (ROOT / "benchmarks" / "scripts" / "__init__.py").is_file()
    assert SCRIPTS, "no scripts found"


def test_asv_discovers_no_benchmark_in_scripts() -> None:
    found = [name for name in discover("cpu") if name.startswith("scripts.")]
    assert not found, f"asv takes these script functions for benchmarks (rename them): {found}"


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_imports_only_the_standard_library(script: str) -> None:
    proc = _import_stdlib_only(f"benchmarks.scripts.{script}")
    assert proc.returncode == 0, (
        f"import benchmarks.scripts.{script} needs more than the standard library at its top level (move "
        f"the import into the function that uses it, or under TYPE_CHECKING):\n{proc.stdout}{proc.stderr[-3000:]}"
    )


def test_the_import_check_catches_a_third_party_import(tmp_path: Path) -> None:
    """The check itself: a module importing numpy at its top fails it, one importing it in a function passes."""
    pkg = tmp_path / "benchmarks_probe"
    pkg.mkdir()
    (pkg / "top.py").write_text("import json\nimport numpy\n")
    (pkg / "lazy.py").write_text("import json\n\ndef f():\n    import numpy\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run = lambda m: subprocess.run(  # noqa: E731
        [sys.executable, "-c", IMPORT_STDLIB_ONLY, m],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    top = run("benchmarks_probe.top")
    assert top.returncode != 0 and "No module named 'numpy' (not the standard library)" in top.stderr, top.stderr
    lazy = run("benchmarks_probe.lazy")
    assert lazy.returncode == 0, lazy.stdout + lazy.stderr
