"""Fixtures of the asv-suite tests: the repository root on sys.path (``benchmarks`` is not installed)
and a throwaway git repository holding a copy of the project for end-to-end ``mlaperf run``s."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# A wrong kernel as a commit would introduce it: MMA output 10% off (a fast wrong kernel).
WRONG_MMA = """

_correct_sparse_mla_decode = sparse_mla_decode_with_record


def sparse_mla_decode_with_record(q, kv_cache, indices, sm_scale=None, impl="mma", **kwargs):  # noqa: D103
    out, lse, record = _correct_sparse_mla_decode(q, kv_cache, indices, sm_scale, impl, **kwargs)
    if impl == "mma":
        out = out * 1.1
    return out, lse, record
"""


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class SmokeRepo:
    path: Path
    home: Path  # HOME of the runs: ~/.asv-machine.json and the ceilings cache live here
    base: str
    good: str  # correct kernels
    bad: str  # the MMA decode returns wrong values

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(HOME=str(self.home), MLAPERF_CEILINGS_FILE=str(self.home / "ceilings.json"))
        for key in ("MLAPERF_TIER", "MLAPERF_CONCURRENCY", "PYTHONPATH", "ASV_PYTHONPATH"):
            env.pop(key, None)
        return env

    def results(self, machine: str) -> Path:
        return self.path / ".asv" / "results" / machine


@pytest.fixture(scope="module")
def smoke_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmokeRepo]:
    """base -> good (a harmless change) -> bad (wrong MMA kernel); the working tree is at bad."""
    repo = tmp_path_factory.mktemp("smoke") / "repo"
    home = repo.parent / "home"
    home.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "scripts")
    for name in ("mla_kernels", "benchmarks", "mlaperf", "settings"):  # the suites pin this checkout's settings
        shutil.copytree(ROOT / name, repo / name, ignore=ignore)
    shutil.copy(ROOT / "asv.conf.json", repo / "asv.conf.json")
    (repo / ".gitignore").write_text(".asv/\n__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD")
    (repo / "NOTES.md").write_text("a change that does not touch the kernels\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "good: notes")
    good = _git(repo, "rev-parse", "HEAD")
    init = repo / "mla_kernels" / "__init__.py"
    init.write_text(init.read_text() + WRONG_MMA)
    _git(repo, "commit", "-q", "-am", "bad: mma 10% off")
    bad = _git(repo, "rev-parse", "HEAD")
    yield SmokeRepo(repo, home, base, good, bad)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU-marked tests of this folder skip without CUDA."""
    import torch

    if torch.cuda.is_available():
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("gpu") and here in Path(str(item.fspath)).parents:
            item.add_marker(skip)
