"""One verdict, whatever the mode (issue 27.2): ingesting a history night by night, with the incremental
`detect` after each night, ends in the statuses `detect --full` gives the whole history at once, on the
vendored OpenBLAS history and on generated ones (steps, excursions that return, one-run events, version
changes).

Alerts are compared per series and commit. An alert only the nightly raised (a spike it saw as the newest
run) must be closed, as it is to `--full`, which never flags it; apart from those the two stores hold the
same alerts with the same statuses.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db.engine import make_engine, upgrade
from db.synthetic import write_synthetic_results
from regressions.policy import OPEN_STATUSES
from regressions.store import detect_store, regressions_frame

Ingest = Callable[[Engine, list[Path]], None]
ROOT = Path(__file__).resolve().parents[2]
OPENBLAS = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"
Alerts = dict[tuple[str, str, str, str], str]  # (machine, benchmark, params_key, commit) -> status


def alerts(engine: Engine) -> Alerts:
    with Session(engine) as s:
        frame = regressions_frame(s)
    return {
        (m, b, k, c): st
        for m, b, k, c, st in zip(
            frame["machine"], frame["benchmark"], frame["params_key"], frame["sha"], frame["status"], strict=True
        )
    }


def nights(results: Path) -> list[list[Path]]:
    """The results files of an asv results directory grouped by commit, in commit-date order."""
    by_commit: dict[str, tuple[float, list[Path]]] = {}
    for f in results.glob("*/*.json"):
        if f.name == "machine.json":
            continue
        data = json.loads(f.read_text())
        date, files = by_commit.setdefault(data["commit_hash"], (float(data["date"]), []))
        files.append(f)
    return [files for _date, files in sorted(by_commit.values(), key=lambda df: df[0])]


def store(tmp_path: Path, name: str) -> Engine:
    url = f"sqlite:///{tmp_path / name}"
    upgrade(url)
    return make_engine(url)


def detect(engine: Engine, **kw: Any) -> None:
    with Session(engine) as s, s.begin():
        detect_store(s, **kw)


def _results_files(_folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(".json") and n not in ("machine.json", "benchmarks.json")]


def replay(tmp_path: Path, results: Path, ingest: Ingest, *, start: int) -> tuple[Alerts, Alerts]:
    """(full, nightly): `--full` over the whole history, and the first ``start`` commits at once then one
    commit a night with an incremental detect after each."""
    staged = tmp_path / "staged"
    shutil.copytree(results, staged, ignore=_results_files)
    full, nightly = store(tmp_path, "full.sqlite"), store(tmp_path, "nightly.sqlite")
    ingest(full, [results])
    detect(full, full=True)
    groups = nights(results)
    batches = [[f for g in groups[:start] for f in g], *groups[start:]]
    for files in batches:
        copies = [shutil.copy(f, staged / f.parent.name / f.name) for f in files]
        ingest(nightly, [Path(c) for c in copies])
        detect(nightly)
    out = alerts(full), alerts(nightly)
    full.dispose()
    nightly.dispose()
    return out


def disagreements(full: Alerts, nightly: Alerts) -> list[str]:
    out = []
    for key in sorted(set(full) | set(nightly)):
        a, b = full.get(key), nightly.get(key)
        if a == b or (a is None and b not in OPEN_STATUSES):
            continue
        out.append(f"{key}: --full {a}, nightly {b}")
    return out


def bump_versions(results: Path, shas: list[str], machine: str, first: int) -> None:
    """Every benchmark gets a new asv version from commit ``first`` on."""
    for f in (results / machine).glob("*.json"):
        if f.name == "machine.json":
            continue
        data = json.loads(f.read_text())
        if shas.index(data["commit_hash"]) >= first:
            version = data["result_columns"].index("version")
            for row in data["results"].values():
                row[version] = "e" * 64
            f.write_text(json.dumps(data))


def test_synthetic_history_replays_to_the_full_verdicts(tmp_path: Path, ingest: Ingest) -> None:
    """Steps, an excursion that returns, a one-run event, a step at the newest commits, and a benchmark
    version change followed by a step at the new version's second run."""
    results = tmp_path / "results"
    h = write_synthetic_results(
        results, commits=48, series=12, seed=3,
        steps={12: 1.25, 20: 1.3, 22: 1 / 1.3, 30: 1.4, 31: 1 / 1.4, 40: 1.15, 46: 1.2},
    )  # fmt: skip
    bump_versions(results, h.shas, h.machine, 39)  # version change at 39, step at its second run (40)
    full, nightly = replay(tmp_path, results, ingest, start=8)
    assert full and not disagreements(full, nightly)
    at = {h.shas.index(k[3]): st for k, st in full.items()}
    # 12: its level goes on into the version of 39, which joins it, so it stays open; 30: a spike, never flagged
    assert at == {12: "new", 20: "fixed", 40: "new", 46: "new"}
    assert {h.shas.index(k[3]): st for k, st in nightly.items()}[30] == "transient"


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_generated_histories_replay_to_the_full_verdicts(tmp_path: Path, ingest: Ingest, seed: int) -> None:
    """The property on random histories: steps and reverts of random sizes at random commits (one-run
    spikes, two-run excursions, lasting steps), maybe a version change."""
    rng = random.Random(seed)
    n = 40
    steps: dict[int, float] = {}
    for c in sorted(rng.sample(range(6, n), 5)):
        factor = (1 + rng.uniform(0.06, 0.4)) ** rng.choice([1, -1])  # slower or faster
        steps[c] = steps.get(c, 1.0) * factor
        if rng.random() < 0.5 and c + 1 < n:  # undone one or two commits later
            back = c + rng.choice([1, 2])
            if back < n:
                steps[back] = steps.get(back, 1.0) / factor
    results = tmp_path / "results"
    h = write_synthetic_results(results, commits=n, series=6, seed=seed, steps=steps)
    if rng.random() < 0.5:
        bump_versions(results, h.shas, h.machine, rng.randrange(15, n - 5))
    full, nightly = replay(tmp_path, results, ingest, start=6)
    bad = disagreements(full, nightly)
    assert full and not bad, f"steps {steps}:\n" + "\n".join(bad[:10])


@pytest.mark.slow
def test_openblas_replays_to_the_full_verdicts(tmp_path: Path, ingest: Ingest) -> None:
    """The vendored third-party history, one machine, night by night from its 20th commit."""
    results = tmp_path / "ob"
    shutil.copytree(OPENBLAS, results, ignore=shutil.ignore_patterns("gha-aws-graviton", "gha-ubuntu-noble"))
    full, nightly = replay(tmp_path, results, ingest, start=20)
    assert len(full) >= 5 and len(nightly) > len(full)  # the nightly also saw spikes as newest runs
    bad = disagreements(full, nightly)
    assert not bad, "\n".join(bad[:20])
