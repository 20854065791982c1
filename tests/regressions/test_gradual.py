"""Gradual regressions: steps each under the threshold that add up past it (``level_rules.chains``), from the
chain rule alone to the detector and the store."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db.engine import make_engine, upgrade
from db.synthetic import SyntheticHistory, write_synthetic_results
from mlaperf.cli import main
from regressions import level_rules
from regressions.config import Settings
from regressions.detect import detect_steps
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE
from regressions.level_rules import GRADUAL
from regressions.segments import Unit, find_steps
from regressions.store import detect_store, regressions_frame

D = math.log1p(0.05)  # the 5% threshold in log space


@pytest.mark.parametrize(
    ("shifts", "flagged", "want"),
    [
        ([0.03, 0.03], [False, False], [(0, 1)]),  # 6% in two steps of 3%
        ([0.03], [False], []),  # one step under the threshold is noise's call, not a chain
        ([0.06], [False], []),  # one step over it that the detector did not flag stays unflagged
        ([0.02, 0.02], [False, False], []),  # 4% in all
        ([0.03, 0.03, 0.03, 0.03], [False] * 4, [(0, 1), (2, 3)]),  # the sum starts again after a chain
        ([0.03, 0.10, 0.03], [False, True, False], [(0, 1)]),  # a flagged step a drift leads up to stands for it
        ([-0.01, 0.10, 0.03, 0.03], [False, True, False, False], [(2, 3)]),  # a flagged step alone stays alone
        # A drift under a quarter of the flagged step's shift does not lead up to it (MuJoCo Warp's real
        # history: +2.7% then 26x was one "gradual" regression whose range began two months before the jump).
        ([0.027, 3.29], [False, True], []),
        ([0.02, 0.02, 0.058], [False, False, True], [(0, 2)]),  # +2%, +2%, +6%: one drift
        ([0.06, -0.005], [False, False], []),  # never at a gain: one unflagged step past it is no chain
        ([0.03, -0.04, 0.03, 0.03], [False] * 4, [(2, 3)]),  # better than the start: a new start
        ([0.03, -0.01, 0.03], [False] * 3, [(0, 2)]),  # a small gain in between is netted
        ([-0.03, -0.03], [False, False], []),  # improvements never chain
    ],
)
def test_chains(shifts: list[float], flagged: list[bool], want: list[tuple[int, int]]) -> None:
    assert level_rules.chains(shifts, flagged, D) == want


def test_chains_never_hold_or_cross_a_break() -> None:
    """A change point whose level before began in another benchmark version: no chain holds it or starts before
    it (a joined version's small move must not add up with a later step)."""
    assert level_rules.chains([0.03, 0.03], [False, False], D, [True, False]) == []
    assert level_rules.chains([0.03, 0.03, 0.03], [False, False, False], D, [True, False, False]) == [(1, 2)]
    assert level_rules.chains([0.03, 0.10], [False, True], D, [True, False]) == []


def test_chains_refuses_mismatched_lists() -> None:
    with pytest.raises(ValueError, match="shifts has 2 change points but flagged has 1"):
        level_rules.chains([0.1, 0.1], [False], D)


def _drift(slope: float, seed: int = 0, noise: float = 0.01) -> np.ndarray:
    """40 flat runs, 70 runs each ``slope`` (log) worse than the one before, 40 flat runs at the end level."""
    rng = np.random.default_rng(seed)
    log = np.r_[np.zeros(40), np.arange(1, 71) * slope, np.full(40, 70 * slope)]
    return 100.0 * np.exp(log + rng.normal(0.0, noise, log.size))


def test_a_slow_drift_no_step_of_which_passes_the_threshold_is_flagged() -> None:
    values = _drift(0.002)  # 15% over 70 commits, no change point of its own past 5%
    found = detect_steps(values, threshold=0.05)
    plain = [s for s in found.steps if s.regression and GRADUAL not in s.labels]
    chained = [s for s in found.steps if s.regression and GRADUAL in s.labels]
    assert not plain, "no single step passes the threshold: the drift is what is flagged"
    assert chained, [(s.index, round(s.ratio, 3)) for s in found.steps]
    first = chained[0]
    assert first.ratio > 1.05 and first.parent_index is not None and 38 <= first.parent_index < first.index <= 110
    assert all(s.ratio > 1.05 and s.z >= 3.0 for s in chained)
    # where the drift ends, the level is 15% above the start: the chains' ratios multiply up to about that
    assert 1.10 < math.prod(s.ratio for s in chained) < 1.25


def test_flat_noise_and_an_improving_drift_are_not_flagged() -> None:
    for seed in range(5):
        rng = np.random.default_rng(seed)
        flat = 100.0 * np.exp(rng.normal(0.0, 0.01, 150))
        assert not detect_steps(flat, threshold=0.05).regressions, seed
    better = detect_steps(100.0 / _drift(0.003) * 100.0, threshold=0.05)  # times that fall
    assert not better.regressions
    # a rate that falls is worse: the same drift read as TFLOP/s is flagged
    assert detect_steps(100.0 / _drift(0.003) * 100.0, threshold=0.05, direction=DOWN_IS_WORSE).regressions


# --- the store: one alert for the chain, the same night by night as in one full pass -------------------------

SERIES = 12


def _files(h: SyntheticHistory, commits: range) -> list[Path]:
    return [next((h.root / h.machine).glob(f"{h.shas[c][:8]}-*.json")) for c in commits]


def _alerts(engine: Engine) -> list[tuple[str, str | None, str, list[str], float]]:
    with Session(engine) as s:
        frame = regressions_frame(s)
    return sorted((r.sha, r.parent, r.status, list(r.labels), round(r.ratio, 2)) for r in frame.itertuples())


def test_the_store_flags_a_drift_once_night_by_night_as_in_a_full_pass(
    store_url: str, engine: Engine, tmp_path: Path, ingest: Callable[[Engine, list[Path]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Three 3% steps (under the 5% threshold) at 40, 50 and 60: one `gradual` alert per series where the sum
    passes 5% (commit 50, its range back to the last commit at the old level, 39), in a full pass and night by
    night alike; the third step starts a new sum that stays under the threshold."""
    h = write_synthetic_results(tmp_path / "r", commits=90, series=SERIES, steps={40: 1.03, 50: 1.03, 60: 1.03})
    ingest(engine, _files(h, range(90)))
    with Session(engine) as s, s.begin():
        detect_store(s, Settings(), full=True)
    full = _alerts(engine)
    assert len(full) == SERIES, full
    assert {(sha, parent, labels[0]) for sha, parent, _st, labels, _r in full} == {(h.shas[50], h.shas[39], GRADUAL)}
    assert all(status == "new" and 1.05 < ratio < 1.08 for _sha, _p, status, _l, ratio in full)

    url = f"sqlite:///{tmp_path / 'nightly.sqlite'}"
    upgrade(url)
    nightly = make_engine(url)
    ingest(nightly, _files(h, range(45)))
    for night in range(45, 90):
        ingest(nightly, _files(h, range(night, night + 1)))
        with Session(nightly) as s, s.begin():
            detect_store(s, Settings())
    assert _alerts(nightly) == full
    nightly.dispose()
    assert main(["detect", "--db", store_url, "--list", "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)["regressions"]
    assert all(r["labels"] == [GRADUAL] and r["parent"] == h.shas[39] for r in recs)
    assert main(["detect", "--db", store_url, "--list"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("new")]
    assert len(rows) == SERIES and all(line.startswith("new (gradual)") and h.shas[50][:10] in line for line in rows)


def test_a_drift_with_one_steep_stretch_stays_one_regression_from_its_start() -> None:
    """0.4% a run for 24 runs: the segmentation may flag one stretch alone (5%); the alert still stands for the
    whole drift, from the level before it, as more runs arrive."""
    rng = np.random.default_rng(0)
    log = np.r_[np.zeros(60), np.cumsum(np.full(24, 0.004)), np.full(30, 0.096)] + rng.normal(0.0, 0.004, 114)
    values = np.exp(log)
    seen = set()
    for n in (94, 95, 114):
        (alert,) = detect_steps(values[:n]).regressions
        assert GRADUAL in alert.labels and alert.ratio > 1.09, (n, alert)
        seen.add((alert.index, alert.parent_index))
    assert len(seen) == 1 and next(iter(seen))[1] < 64  # one place, its range from before the drift


def test_a_fixed_alert_is_not_partly_recovered_by_a_later_regression() -> None:
    """2x at 30, back at 60 (fixed), 1.3x at 90: the first alert is fixed, unlabelled; the 1.3x is its own."""
    rng = np.random.default_rng(0)
    log = np.r_[np.zeros(30), np.full(30, math.log(2)), np.zeros(30), np.full(30, math.log(1.3))]
    found = detect_steps(np.exp(log + rng.normal(0.0, 0.005, 120)))
    first, later = found.regressions
    assert first.index == 30 and first.labels == ()
    assert later.index == 90 and later.ratio == pytest.approx(1.3, rel=0.02)


def test_no_chain_across_a_joined_benchmark_version() -> None:
    """A new version 2.8% above the old one (close enough to join its level), then +3% at its run 30: the two
    moves never add up to a gradual regression, whether or not the versions join."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        old_values = 100 * np.exp(rng.normal(0.0, 0.008, 40))
        new_values = 100 * np.exp(np.r_[np.full(30, 0.028), np.full(30, 0.058)] + rng.normal(0.0, 0.008, 60))
        old = Unit((1, "{}", 1), np.arange(40), old_values, np.arange(40), old_values, 0.05, UP_IS_WORSE)
        pos = np.arange(40, 100)
        new = Unit((1, "{}", 1), pos, new_values, pos, new_values, 0.05, UP_IS_WORSE, previous=old)
        old.ended_at = 40
        found = find_steps([old, new])[1]
        assert not [s for s in found.steps if s.regression], (seed, found.joined, found.steps)
