"""Detection against a real store (SQLite and PostgreSQL) filled by real ingestion of asv result files."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db.ingest import ingest_paths
from db.models import Commit, Meta, Regression, Run
from db.synthetic import SyntheticHistory, write_git_history, write_synthetic_results
from regressions.config import Settings
from regressions.store import (
    WATERMARK_KEY,
    _lookback_windows,
    detect_store,
    history_noise,
    regressions_frame,
)

Ingest = Callable[[Engine, list[Path]], None]
SERIES = 12  # one time_ benchmark: impl x concurrency x topk


def files_of(h: SyntheticHistory, commits: range) -> list[Path]:
    out = []
    for c in commits:
        (f,) = (h.root / h.machine).glob(f"{h.shas[c][:8]}-*.json")
        out.append(f)
    return out


def detect(engine: Engine, **kw: object) -> tuple[list[int], list[int], int, bool]:
    with Session(engine) as s, s.begin():
        r = detect_store(s, Settings(), **kw)  # type: ignore[arg-type]
        return r.new, r.fixed, r.series_examined, r.incremental


def stored(engine: Engine) -> list[Regression]:
    with Session(engine) as s:
        regs = list(s.execute(select(Regression).order_by(Regression.id)).scalars())
        s.expunge_all()
        return regs


def sha_of(engine: Engine, commit_id: int | None) -> str | None:
    with Session(engine) as s:
        return None if commit_id is None else s.get(Commit, commit_id).sha  # type: ignore[union-attr]


def test_newest_step_flagged_once_then_fixed_and_kept(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=45, series=SERIES, steps={39: 1.2, 42: 1 / 1.2})
    ingest(engine, files_of(h, range(39)))
    new, _, examined, incremental = detect(engine)
    assert new == [] and examined == SERIES and not incremental  # first run: everything

    ingest(engine, files_of(h, range(39, 40)))
    new, _, examined, incremental = detect(engine)
    assert incremental and examined == SERIES
    assert len(new) == SERIES  # the step on the newest commit, without waiting for more runs
    regs = stored(engine)
    assert {sha_of(engine, r.commit_id) for r in regs} == {h.shas[39]}
    assert all(r.ratio == pytest.approx(1.2, rel=0.02) and r.status == "new" for r in regs)
    assert all(
        r.direction == "up_is_worse" and r.params.keys() == {"impl", "concurrency", "topk"} for r in regs
    )

    # The nightly re-runs: nothing new in the store, nothing re-examined, nothing duplicated.
    new, fixed, examined, _ = detect(engine)
    assert (new, fixed, examined) == ([], [], 0)
    new, fixed, _, incremental = detect(engine, full=True)
    assert (new, fixed, incremental) == ([], [], False)
    assert len(stored(engine)) == SERIES

    with Session(engine) as s, s.begin():
        first, second = s.execute(select(Regression).order_by(Regression.id).limit(2)).scalars()
        first.status, second.status = "acknowledged", "ignored"
        ignored_id = second.id

    # The step is reverted three commits later: fixed, kept, ignored ones left alone.
    ingest(engine, files_of(h, range(40, 45)))
    new, fixed, _, _ = detect(engine)
    assert new == [] and len(fixed) == SERIES - 1
    regs = stored(engine)
    assert len(regs) == SERIES
    for r in regs:
        if r.id == ignored_id:
            assert r.status == "ignored" and r.fixed_commit_id is None
        else:
            assert r.status == "fixed" and sha_of(engine, r.fixed_commit_id) == h.shas[42]
    with Session(engine) as s:
        mark = s.get(Meta, WATERMARK_KEY)
        assert mark is not None and mark.value["result_id"] > 0
        frame = regressions_frame(s, statuses=["fixed"])
        assert len(frame) == SERIES - 1 and set(frame["fixed_commit"]) == {h.shas[42]}


def test_full_detect_finds_a_historic_step_at_its_commit(
    engine: Engine, tmp_path: Path, ingest: Ingest
) -> None:
    h = write_synthetic_results(tmp_path / "results", commits=40, series=SERIES, steps={17: 1.1}, seed=3)
    ingest(engine, [tmp_path / "results"])
    new, _, examined, _ = detect(engine, full=True)
    assert examined == SERIES and len(new) == SERIES
    assert {sha_of(engine, r.commit_id) for r in stored(engine)} == {h.shas[17]}
    with Session(engine) as s:
        assert s.execute(select(func.count(Regression.id))).scalar_one() == SERIES


def test_machine_filter_and_unknown_machine(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    write_synthetic_results(tmp_path / "results", commits=20, series=SERIES, steps={10: 1.3}, machine="gpu-a")
    ingest(engine, [tmp_path / "results"])
    new, _, _, _ = detect(engine, machine="gpu-a")
    assert len(new) == SERIES
    from regressions.store import UsageError

    with pytest.raises(UsageError, match="--machine.*'nope'"):
        detect(engine, machine="nope")


def test_tied_dates_detected_in_git_order(engine: Engine, tmp_path: Path) -> None:
    """Commits sharing one asv timestamp (made in one second, or rebased): git order decides where the
    step is and where it is fixed, even when the files arrive newest first (commit ids reversed)."""
    tie = dt.datetime(2025, 6, 1, 12, 0, 0)
    shas = write_git_history(tmp_path / "repo", 20, date=tie)
    h = write_synthetic_results(
        tmp_path / "results", commits=20, series=SERIES, steps={12: 1.2, 16: 1 / 1.2}, shas=shas, dates=[tie] * 20
    )
    newest_first = files_of(h, range(18, -1, -1))
    summary = ingest_paths(engine, newest_first, progress=False, repo=tmp_path / "repo")
    assert summary.ok and summary.described == 19
    new, fixed, examined, incremental = detect(engine, lookback=5)
    assert not incremental and examined == SERIES and len(new) == SERIES and len(fixed) == SERIES
    regs = stored(engine)
    assert {sha_of(engine, r.commit_id) for r in regs} == {shas[12]}
    assert {sha_of(engine, r.fixed_commit_id) for r in regs} == {shas[16]}
    # One more commit, same second: the incremental pass reads the 5 newest commits by rank.
    assert ingest_paths(engine, files_of(h, range(19, 20)), progress=False, repo=tmp_path / "repo").ok
    new, fixed, examined, incremental = detect(engine, lookback=5)
    assert incremental and examined == SERIES and (new, fixed) == ([], [])
    assert len(stored(engine)) == SERIES
    with Session(engine) as s:
        m = s.execute(select(Run.machine_id).limit(1)).scalar_one()
        windows = _lookback_windows(s, [m], 5)
        by_id = {c.id: c.sha for c in s.execute(select(Commit)).scalars()}
        assert [by_id[i] for i in windows[m] or []] == shas[:-6:-1]  # the 5 newest, by rank not date
        assert _lookback_windows(s, [m], 20) == {m: None}
        # Noise window of `compare`: up to the newer of two commits, in git order.
        key = json.dumps({"concurrency": "1", "impl": "'simt'", "topk": "128"}, sort_keys=True)
        bench = next(iter(h.benchmarks))
        ids = {sha: i for i, sha in by_id.items()}
        noise = history_noise(s, h.machine, [(bench, key)], upto=[ids[shas[3]], ids[shas[9]]])
        assert noise[(bench, key)][1] == 10
