"""Series failing now (`regressions.failing`): a benchmark that broke raises no alert (detection skips failed runs),
so `mlaperf detect` lists it beside the alerts, with the commit it has failed since and its last value's (Jaxion's
real history: 6 of 8 benchmarks failed at the 11 newest commits, and nothing said so)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine

from db.engine import make_engine
from db.synthetic import write_synthetic_results
from mlaperf.cli import main

Ingest = Callable[[Engine, list[Path]], None]
BROKEN = "bench_synth.Synth002.time_case"


def _broken_commits(results: Path, newest: str, shas: list[str], skipped: str) -> None:
    """Result files for ``shas``, newer than ``newest``'s and copied from it, where ``BROKEN`` failed (null
    results) and ``skipped`` was skipped (asv writes NaN for a skipped case)."""
    source = next(results.rglob(f"{newest[:8]}-*.json"))
    base = json.loads(source.read_text())
    for i, sha in enumerate(shas, 1):
        doc = copy.deepcopy(base)
        doc["commit_hash"], doc["date"] = sha, base["date"] + i * 3_600_000
        for name, value in ((BROKEN, None), (skipped, float("nan"))):
            row = doc["results"][name]
            row[0] = [value] * len(row[0])
        source.with_name(f"{sha[:8]}-{base['env_name']}.json").write_text(json.dumps(doc))


def test_detect_lists_the_series_failing_now(store_url: str, tmp_path: Path, ingest: Ingest,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    history = write_synthetic_results(tmp_path / "results", commits=12, series=120, steps={}, seed=3)
    skipped = next(b for b in history.benchmarks if b != BROKEN)
    later = ["ab" * 20, "cd" * 20]
    _broken_commits(tmp_path / "results", history.shas[-1], later, skipped)
    engine = make_engine(store_url)
    ingest(engine, [tmp_path / "results"])
    engine.dispose()

    assert main(["detect", "--db", store_url, "--full"]) == 0
    out = capsys.readouterr().out
    lines = out[out.index("failing now:"):].splitlines()
    n_cases = sum(1 for line in lines[2:] if BROKEN in line)
    assert lines[0].startswith(f"failing now: {n_cases} series failed") and n_cases > 1, out
    row = next(line for line in lines[2:] if BROKEN in line)
    assert f"{later[0][:10]}  " in row and "  2  " in row and history.shas[-1][:10] in row, row
    assert skipped not in out  # skipped ("not run here") is no failure

    assert main(["detect", "--db", store_url, "--list", "--json"]) == 0
    failing = json.loads(capsys.readouterr().out)["failing"]
    assert {f["benchmark"] for f in failing} == {BROKEN} and len(failing) == n_cases
    assert all(f["since"] == later[0] and f["commits"] == 2 and f["last_ok"] == history.shas[-1] for f in failing)
    assert all(isinstance(f["params"], dict) and f["params"] for f in failing)


def test_nothing_failing_adds_nothing(store_url: str, tmp_path: Path, ingest: Ingest,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    write_synthetic_results(tmp_path / "results", commits=12, series=120, steps={}, seed=3)
    engine = make_engine(store_url)
    ingest(engine, [tmp_path / "results"])
    engine.dispose()
    assert main(["detect", "--db", store_url, "--full"]) == 0
    assert "failing" not in capsys.readouterr().out
    assert main(["detect", "--db", store_url, "--list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["failing"] == []


def test_a_series_removed_while_failing_is_listed_apart(store_url: str, tmp_path: Path, ingest: Ingest,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A benchmark that broke and was then taken out of the suite no longer fails at the newest commit: `detect
    --json` lists it under `failing_unrun` (until: its newest failed result), so the nightly's issue can say it was
    not fixed; one that runs again with a value, or never failed, is not listed."""
    history = write_synthetic_results(tmp_path / "results", commits=12, series=120, steps={}, seed=3)
    later = ["ab" * 20, "cd" * 20, "ef" * 20]
    _broken_commits(tmp_path / "results", history.shas[-1], later[:2], next(b for b in history.benchmarks
                                                                             if b != BROKEN))
    newest = json.loads(next((tmp_path / "results").rglob(f"{later[1][:8]}-*.json")).read_text())
    newest["commit_hash"], newest["date"] = later[2], newest["date"] + 3_600_000
    del newest["results"][BROKEN]  # removed from the suite at the newest commit
    (tmp_path / "results" / history.machine / f"{later[2][:8]}-{newest['env_name']}.json").write_text(
        json.dumps(newest))
    engine = make_engine(store_url)
    ingest(engine, [tmp_path / "results"])
    engine.dispose()

    assert main(["detect", "--db", store_url, "--full"]) == 0
    assert "failing now" not in capsys.readouterr().out
    assert main(["detect", "--db", store_url, "--list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["failing"] == [] and doc["failing_unrun"], doc["failing_unrun"]
    assert {f["benchmark"] for f in doc["failing_unrun"]} == {BROKEN}
    assert all((f["since"], f["until"], f["commits"], f["last_ok"]) == (later[0], later[1], 2, history.shas[-1])
               for f in doc["failing_unrun"])
    assert main(["detect", "--db", store_url, "--list", "--json", "--machine", "nowhere"]) == 2
