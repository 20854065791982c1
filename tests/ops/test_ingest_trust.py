"""A results file's commit hash reaches links and markdown (the nightly's issues link
`{repo}/commit/{sha}`): `mlaperf ingest` refuses one that is not hexadecimal, with exit 2 and the file's
path, and stores the good file beside it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from scratch import MLAPERF

ROW = {"b.S.time_x": [[1e-4], [], "v1"]}


def results(folder: Path, sha: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "machine.json").write_text(json.dumps({"machine": "m", "version": 1}))
    path = folder / f"{len(list(folder.iterdir())):02d}-existing-py3.11.json"
    path.write_text(json.dumps({"commit_hash": sha, "env_name": "existing-py3.11", "date": 1_700_000_000_000,
                                "params": {"machine": "m"}, "result_columns": ["result", "params", "version"],
                                "results": ROW, "durations": {}, "version": 2}))  # fmt: skip
    return path


@pytest.mark.parametrize("sha", ["[x](https://evil.example)", "a" * 39 + "g", "ABCDEF0", "abc", "a" * 40 + "\u202e"])
def test_a_commit_hash_that_is_not_hex_is_refused(tmp_path: Path, sha: str) -> None:
    results(tmp_path / "results" / "m", "a" * 40)
    bad = results(tmp_path / "results" / "m", sha)
    env = {**os.environ, "MLAPERF_DB": f"sqlite:///{tmp_path / 'store.sqlite'}"}
    proc = subprocess.run([str(MLAPERF), "ingest", str(tmp_path / "results")], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert str(bad) in out, out
    assert "'commit_hash' must be a git commit hash: 7 to 64 lowercase hexadecimal digits" in out, out
    assert "ingested 1 of 2 files" in out, out  # the good file beside it is stored
