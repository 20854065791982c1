"""A regression the series has since come part of the way back from: the detector labels it
``partly_recovered`` and every step says where the series stands now (``Step.now``); the store keeps that as
``regression.now_ratio`` (migration 0010) while the alert keeps its step's numbers; `mlaperf detect` lists it
(a "now" column, the JSON's ``now_ratio`` and ``partly_recovered``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db.engine import downgrade, make_engine, upgrade
from db.models import Regression
from db.synthetic import SyntheticHistory, write_synthetic_results
from mlaperf.cli import main
from regressions.config import Settings
from regressions.detect import SeriesDetection, detect_steps
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE
from regressions.level_rules import PARTLY_RECOVERED, RETURNS_TO_EARLIER_LEVEL
from regressions.report import detect_table
from regressions.segments import Unit, find_steps
from regressions.store import DetectSummary, detect_store, regressions_frame
from regressions.units import fmt_ratio

Ingest = Callable[[Engine, list[Path]], None]
SERIES = 12  # one time_ benchmark (impl x concurrency x topk): every series up-is-worse


def levels(*runs: tuple[int, float], seed: int = 0, noise: float = 0.01) -> np.ndarray:
    """Runs at each (count, level) in turn, with relative normal noise."""
    rng = np.random.default_rng(seed)
    v = np.concatenate([np.full(n, level) for n, level in runs])
    return v * (1.0 + noise * rng.standard_normal(v.size))


def step_at(d: SeriesDetection, index: int) -> tuple[bool, tuple[str, ...], float]:
    (step,) = [s for s in d.steps if s.index == index]
    assert step.now is not None
    return step.regression, step.labels, step.now


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_partial_recovery_is_labelled_and_now_says_where_the_series_is(seed: int) -> None:
    """2.0x slower at 40, back to 1.3x of the original at 70: the step keeps its numbers (2.0x), is labelled,
    and ``now`` is 1.3; the later step is an improvement, not labelled."""
    d = detect_steps(levels((40, 100.0), (30, 200.0), (30, 130.0), seed=seed), threshold=0.1, direction=UP_IS_WORSE)
    assert [s.index for s in d.steps] == [40, 70]
    step = d.steps[0]
    assert step.regression and step.ratio == pytest.approx(2.0, rel=0.02)
    assert step.labels == (PARTLY_RECOVERED,) and step.now == pytest.approx(1.3, rel=0.02)
    assert step_at(d, 70)[:2] == (False, ())


@pytest.mark.parametrize(
    ("runs", "now"),
    [
        (((40, 100.0), (30, 200.0), (30, 100.0)), 1.0),  # full recovery: fixed, not partly recovered
        (((40, 100.0), (30, 200.0), (30, 104.0)), 1.04),  # within half the threshold: undone
        (((40, 100.0), (30, 130.0), (30, 200.0)), 2.0),  # a further regression: worse, not better
        (((40, 100.0), (60, 200.0)), 2.0),  # no later level
    ],
)
def test_no_partial_recovery_label(runs: tuple[tuple[int, float], ...], now: float) -> None:
    d = detect_steps(levels(*runs), threshold=0.1, direction=UP_IS_WORSE)
    regression, labels, seen_now = step_at(d, 40)
    assert regression and PARTLY_RECOVERED not in labels
    assert seen_now == pytest.approx(now, rel=0.02)
    assert all(PARTLY_RECOVERED not in s.labels for s in d.steps)


def test_partial_recovery_of_a_throughput_drop() -> None:
    """Down is worse: 100 -> 50 (a regression) -> 77; ``now`` is oriented as the ratio (newest / before)."""
    d = detect_steps(levels((40, 100.0), (30, 50.0), (30, 77.0)), threshold=0.1, direction=DOWN_IS_WORSE)
    regression, labels, now = step_at(d, 40)
    assert regression and labels == (PARTLY_RECOVERED,) and now == pytest.approx(0.77, rel=0.02)


def test_both_labels_at_once() -> None:
    """A short-lived improvement undone at 70 (returns to the earlier level), then part of the way back at 100."""
    d = detect_steps(levels((40, 100.0), (30, 50.0), (30, 100.0), (30, 65.0)), threshold=0.1)
    regression, labels, now = step_at(d, 70)
    assert regression and labels == (RETURNS_TO_EARLIER_LEVEL, PARTLY_RECOVERED)
    assert now == pytest.approx(1.3, rel=0.02)  # 65 over the level before the step (50)


def test_a_step_off_a_new_versions_first_run_gets_now_and_the_label() -> None:
    """``segments.find_steps``' own step (a new version whose first run is off the old level): its ``now`` is
    the segment's newest level over that first run, and the label follows the same rule."""

    def unit(values: np.ndarray, start: int, previous: Unit | None = None) -> Unit:
        positions = np.arange(start, start + values.size)
        return Unit((1, "{}", 1), positions, values, positions, values, 0.05, UP_IS_WORSE, previous=previous)

    old = unit(levels((20, 1e-4), noise=0.005), 0)
    tail = levels((15, 3e-4), (15, 1.95e-4), seed=1, noise=0.005)
    new = unit(np.r_[1.5e-4, tail], 20, previous=old)
    old.ended_at = 20
    found = find_steps([old, new])[1]
    step = found.steps[0]
    assert (step.index, step.regression, step.before) == (1, True, 1.5e-4)
    assert step.labels == (PARTLY_RECOVERED,) and step.now == pytest.approx(1.3, rel=0.02)


# --- the store and `mlaperf detect` -------------------------------------------------------------------------


def _files(h: SyntheticHistory, commits: range) -> list[Path]:
    return [next((h.root / h.machine).glob(f"{h.shas[c][:8]}-*.json")) for c in commits]


def _run(engine: Engine, **kw: bool) -> DetectSummary:
    with Session(engine) as s, s.begin():
        return detect_store(s, Settings(), **kw)


def _stored(engine: Engine) -> list[Regression]:
    with Session(engine) as s:
        regs = list(s.execute(select(Regression).order_by(Regression.id)).scalars())
        s.expunge_all()
        return regs


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def _table(text: str) -> dict[str, list[str]]:
    """The columns of a `detect` text table: header name to cells, cut where each name starts (columns are two
    spaces apart or more, so "closed at" stays one name)."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith(("group ", "("))]
    i = next(k for k, line in enumerate(lines) if line.startswith("status "))
    head, rows = lines[i], lines[i + 1 :]
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", head)]
    cuts = [*starts[1:], None]
    return {head[a:b].strip(): [row[a:b].strip() for row in rows] for a, b in zip(starts, cuts, strict=True)}


def test_store_keeps_now_and_the_cli_lists_it(
    store_url: str, engine: Engine, tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """2.0x at 40 flagged; commits to 99 bring the series back to 1.3x: the same open alerts keep ratio 2.0 and
    now say 1.3 with the label, and a moved now_ratio alone is no update of the step's numbers."""
    h = write_synthetic_results(tmp_path / "results", commits=100, series=SERIES, steps={40: 2.0, 70: 1.3 / 2.0})
    ingest(engine, _files(h, range(70)))
    _run(engine)
    first = _stored(engine)
    assert len(first) == SERIES and all(r.status == "new" and r.labels == [] for r in first)
    assert all(r.now_ratio == pytest.approx(2.0, rel=0.02) for r in first)
    assert "now" not in _table(_cli(capsys, "detect", "--db", store_url, "--list"))  # nothing partly recovered

    ingest(engine, _files(h, range(70, 100)))
    summary = _run(engine)
    assert summary.incremental and summary.new == [] and summary.fixed == [] and summary.updated == []
    regs = _stored(engine)
    assert [r.id for r in regs] == [r.id for r in first]
    assert all(r.status == "new" and r.labels == [PARTLY_RECOVERED] for r in regs)
    assert all(r.ratio == old.ratio and r.now_ratio == pytest.approx(1.3, rel=0.02) for r, old in zip(
        regs, first, strict=True))  # fmt: skip

    recs = json.loads(_cli(capsys, "detect", "--db", store_url, "--list", "--json"))["regressions"]
    assert len(recs) == SERIES and all(r["partly_recovered"] is True for r in recs)
    assert all(r["now_ratio"] == pytest.approx(1.3, rel=0.02) and r["returns_to_earlier_level"] is False
               for r in recs)  # fmt: skip
    table = _table(_cli(capsys, "detect", "--db", store_url, "--list"))
    assert list(table)[list(table).index("ratio") + 1] == "now"
    assert set(table["ratio"]) <= {"1.98x", "1.99x", "2.00x", "2.01x", "2.02x"}
    assert sorted(table["now"]) == sorted(fmt_ratio(r["now_ratio"]) for r in recs) and len(table["now"]) == SERIES


def test_rows_from_before_0010_have_no_now_until_detected_again(
    store_url: str, engine: Engine, tmp_path: Path, ingest: Ingest, capsys: pytest.CaptureFixture[str]
) -> None:
    """Down to 0009 and up again: the alerts are kept, now_ratio is NULL (listed as None, "-" in the table)
    while their label stands; the next full detection writes it again."""
    h = write_synthetic_results(tmp_path / "results", commits=100, series=SERIES, steps={40: 2.0, 70: 1.3 / 2.0})
    ingest(engine, [h.root])
    _run(engine, full=True)
    assert all(r.now_ratio == pytest.approx(1.3, rel=0.02) for r in _stored(engine))
    engine.dispose()
    downgrade(store_url, "0009")
    with engine.connect() as conn:
        assert "now_ratio" not in {c["name"] for c in sa.inspect(conn).get_columns("regression")}
        assert conn.execute(sa.text("SELECT count(*) FROM regression")).scalar_one() == SERIES
    upgrade(store_url)
    assert all(r.now_ratio is None and r.labels == [PARTLY_RECOVERED] for r in _stored(engine))
    with Session(engine) as s:
        frame = regressions_frame(s)
    assert frame["now_ratio"].isna().all() and frame["partly_recovered"].all()
    assert _table(_cli(capsys, "detect", "--db", store_url, "--list"))["now"] == ["-"] * SERIES
    _run(engine, full=True)
    assert all(r.now_ratio == pytest.approx(1.3, rel=0.02) for r in _stored(engine))
    other = make_engine(store_url)  # a fresh engine sees the same: written, not cached
    with other.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM regression WHERE now_ratio IS NULL")).scalar_one() == 0
    other.dispose()


def test_detect_table_adds_now_only_when_some_row_is_partly_recovered() -> None:
    base = {"status": "new", "commit": "a" * 40, "machine": "m", "benchmark": "b.S.time_x", "params": {},
            "before": 1e-4, "after": 2e-4, "ratio": 2.0, "p_value": 1e-6, "unit": "seconds"}  # fmt: skip
    partly = {**base, "now_ratio": 1.3, "partly_recovered": True, "labels": [PARTLY_RECOVERED]}
    plain = {**base, "now_ratio": 2.0, "partly_recovered": False, "labels": []}
    table = _table(detect_table([partly, plain, {**plain, "assignee": "ada"}]))
    assert list(table) == ["status", "commit", "machine", "benchmark", "params", "before", "after", "ratio", "now",
                           "p", "assignee", "issue"]  # fmt: skip
    assert table["now"] == ["1.30x", "-", "-"] and table["ratio"] == ["2.00x"] * 3
    assert "now" not in _table(detect_table([plain, plain]))
