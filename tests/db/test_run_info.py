"""``Run.info``: each run keeps its results file's own top-level ``params`` (GPU identity, driver, CUDA, torch,
triton, arch profile, ...), so a point's versions are its run's; ``Machine.info`` keeps the newest description.
Real ingest on SQLite and PostgreSQL; the file's params pass the same limits as every stored object."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from db.engine import make_engine
from db.ingest import ingest_paths
from db.limits import MAX_NESTING
from db.models import Machine, Result, Run
from tests.db.conftest import bench_row, results_doc, write_results

GPU = {"gpu_name": "NVIDIA H200", "gpu_cc": "9.0", "gpu_driver": "580.159.04", "cuda": "13.0",
       "arch_profile": "native"}  # fmt: skip
ROW = {"bench.Suite.time_x": bench_row([1e-4], [])}


def _doc(commit: str, torch: str, **params: Any) -> dict[str, Any]:
    return results_doc(ROW, commit=commit * 40, params={**GPU, "torch": torch, "triton": "3.6.0", **params})


def _infos(url: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any], str | None]:
    engine = make_engine(url)
    with Session(engine) as s:
        from db.models import Commit

        runs = {sha[:1]: info for sha, info in s.execute(select(Commit.sha, Run.info).join(Run.commit)).all()}
        machine = s.execute(select(Machine.info, Machine.torch)).one()
    engine.dispose()
    return runs, machine[0], machine[1]


def test_each_run_keeps_its_own_versions(db_url: str, tmp_path: Path) -> None:
    root = tmp_path / "results"
    write_results(root, _doc("a", "2.10.0"))
    write_results(root, _doc("b", "2.11.0", triton="3.7.0", arch_profile="sm_120"))
    # machine.json holds what asv last wrote (the newest run's machine entry)
    (root / "test-machine" / "machine.json").write_text(json.dumps(
        {"machine": "test-machine", **GPU, "torch": "2.11.0", "triton": "3.7.0", "extra": "only here", "version": 1}
    ))  # fmt: skip
    engine = make_engine(db_url)
    summary = ingest_paths(engine, [root], progress=False, repo=None)
    engine.dispose()
    assert summary.ok and summary.ingested == 2, summary.line()
    runs, machine, torch_column = _infos(db_url)
    assert runs["a"] == {"machine": "test-machine", **GPU, "torch": "2.10.0", "triton": "3.6.0", "python": "3.11"}
    assert (runs["b"]["torch"], runs["b"]["triton"], runs["b"]["arch_profile"]) == ("2.11.0", "3.7.0", "sm_120")
    assert "extra" not in runs["a"], "a run's info is its file's params, not machine.json"
    assert machine["extra"] == "only here" and torch_column == "2.11.0"


def test_a_file_without_a_machine_name_takes_machine_json_s(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "results"
    doc = _doc("a", "2.11.0")
    del doc["params"]["machine"]
    path = write_results(root, {**doc, "params": {**doc["params"], "machine": "dir"}})
    path.write_text(json.dumps(doc))
    (path.parent / "machine.json").write_text(json.dumps({"machine": "named-in-json", "version": 1}))
    engine = make_engine(sqlite_url)
    summary = ingest_paths(engine, [root], progress=False, repo=None)
    assert summary.ok, summary.line()
    with Session(engine) as s:
        name, info = s.execute(select(Machine.name, Run.info).join(Run.machine)).one()
    engine.dispose()
    assert name == "named-in-json" and info["machine"] == "named-in-json" and info["torch"] == "2.11.0"


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    ("params", "machine_json", "reason"),
    [
        ({"cuda": math.nan}, None, "holds nan, not a finite number"),
        ({"gpu": _nested(MAX_NESTING + 1)}, None, f"nested deeper than {MAX_NESTING} levels"),
        ({}, {"cpu": "x" * 300}, "machine 'cpu'"),
    ],
    ids=["nan", "too-deep", "machine-json-text-over-its-column"],
)
def test_bad_params_are_refused_and_change_nothing(
    db_url: str, tmp_path: Path, params: dict[str, Any], machine_json: dict[str, Any] | None, reason: str
) -> None:
    root = tmp_path / "results"
    good = write_results(root, _doc("a", "2.11.0"))
    if machine_json is None:
        bad = write_results(root, _doc("b", "2.11.0", **params))
    else:  # another machine's folder, whose machine.json does not fit the machine columns
        bad = write_results(root, _doc("b", "2.11.0", machine="other"))
        (bad.parent / "machine.json").write_text(json.dumps({"machine": "other", **machine_json, "version": 1}))
    engine = make_engine(db_url)
    summary = ingest_paths(engine, [root], progress=False, repo=None)
    with Session(engine) as s:
        stored = s.execute(select(Run.source_path)).scalars().all()
        results = s.execute(select(Result.id)).scalars().all()
    engine.dispose()
    assert [Path(p).name for p, _ in summary.refused] == [bad.name]
    assert reason in summary.refused[0][1], summary.refused
    assert [Path(p).name for p in stored] == [good.name] and len(results) == 1
