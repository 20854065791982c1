"""The machinery of the real-noise detection benchmark (benchmarks/scripts/detect_real.py and its
detect_real_* modules) on a slice of the vendored OpenBLAS history: the flat-series rule, injections landing
where planned (and nothing else changing), and one small end-to-end round whose table and JSON render. The
benchmark's goals are targets for the detector, not assertions here."""

from __future__ import annotations

import filecmp
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from benchmarks.scripts import detect_real, detect_real_bench, detect_real_methods, detect_real_model
from benchmarks.scripts.detect_real_data import (
    FlatRule,
    History,
    flat_reason,
    flat_series,
    load_history,
    write_errors,
    write_history,
)
from regressions.store import OPEN_STATUSES

ROOT = Path(__file__).resolve().parents[2]
OPENBLAS = ROOT / "tests" / "fixtures" / "asv-openblas" / "results"
MACHINE = "gha-ubuntu-noble"


@pytest.fixture(scope="module")
def history() -> History:
    return load_history(OPENBLAS, machines=[MACHINE])


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The newest 22 runs of one machine, files copied unchanged (a short real history for a quick round)."""
    full = load_history(OPENBLAS, machines=[MACHINE])
    dest = tmp_path_factory.mktemp("small") / "results"
    (dest / MACHINE).mkdir(parents=True)
    shutil.copyfile(OPENBLAS / "benchmarks.json", dest / "benchmarks.json")
    shutil.copyfile(OPENBLAS / MACHINE / "machine.json", dest / MACHINE / "machine.json")
    for run in full.runs[MACHINE][-22:]:
        shutil.copyfile(run.path, dest / MACHINE / run.path.name)
    return dest


def test_history_is_read_in_commit_order_with_failed_runs_kept(history: History) -> None:
    runs = history.runs[MACHINE]
    assert len(runs) == 85
    assert [r.date for r in runs] == sorted(r.date for r in runs)
    s = next(iter(history.series.values()))
    assert s.values.shape == s.ran.shape == (85,)
    # Benchmarks that asv no longer lists (renamed) and versions that changed are known per series.
    _, reasons = flat_series(history, FlatRule())
    assert reasons["benchmark not in benchmarks.json"] > 0


def test_flat_rule_keeps_noise_and_drops_levels(history: History) -> None:
    rule = FlatRule()
    flat, _ = flat_series(history, rule)
    s = history.series[flat[0]]
    assert flat_reason(history, s, rule) is None
    valid = s.valid
    original = s.values.copy()
    try:
        s.values[valid[len(valid) // 2]] *= 1.4  # one-off outlier: still flat
        assert flat_reason(history, s, rule) is None
        s.values[valid[3]] = np.nan  # a failed run: still flat
        assert flat_reason(history, s, rule) is None
        s.values[:] = original
        s.values[valid[len(valid) // 2] :] *= 1.08  # a real 8% step: not flat
        assert "off the median" in (flat_reason(history, s, rule) or "")
        s.values[:] = original
        s.values[valid[-2:]] *= 1.08  # a two-run level at the end: not flat
        assert "last 3 values" in (flat_reason(history, s, rule) or "")
    finally:
        s.values[:] = original


def test_injections_land_where_planned(history: History, tmp_path: Path) -> None:
    flat, _ = flat_series(history, FlatRule())
    opts = detect_real.Options(inside_fraction=0.3, newest_per_machine=3)
    injections = detect_real_bench.plan_steps(history, flat, np.random.default_rng(7), opts)
    n = len(history.runs[MACHINE])
    assert sum(i.where == "newest" for i in injections) == 3
    assert sum(i.where == "inside" for i in injections) > 0.25 * len(flat)
    factors = detect_real_bench.step_factors(history, injections)
    results = write_history(history, tmp_path, factors, {MACHINE: n - 1})
    written = load_history(results)
    assert len(written.runs[MACHINE]) == n - 1  # the newest run is held back
    assert write_errors(history, written, factors) == []
    for inj in injections:
        s, w = history.series[inj.key], written.series[inj.key]
        lo, hi = detect_real_model.BUCKETS[inj.bucket]
        assert lo <= inj.slowdown <= hi
        valid = s.valid[s.valid < n - 1]
        assert inj.label == valid[np.searchsorted(valid, inj.pos)]  # first value at the new level
        if inj.where == "inside":
            assert np.sum(valid < inj.pos) >= 5 and np.sum(valid >= inj.pos) >= 3
        else:
            assert inj.pos == inj.label == n - 2
        ratio = w.values[valid] / s.values[valid]
        after = valid >= inj.pos
        assert np.allclose(ratio[after], history.worse(inj.key, inj.slowdown)) and np.allclose(ratio[~after], 1.0)
    # Runs without an injection are byte-for-byte the vendored files.
    touched = {pos for pos in factors[MACHINE]}
    untouched = [r for pos, r in enumerate(history.runs[MACHINE][: n - 1]) if pos not in touched]
    assert untouched and all(filecmp.cmp(r.path, results / MACHINE / r.path.name, shallow=False) for r in untouched)
    # The check catches a value that was not planned.
    first = history.series[flat[0]]
    pos = int(first.valid[0])
    assert write_errors(history, written, {MACHINE: {pos: {(first.benchmark, int(first.indices[pos])): 1.5}}})


def test_machine_wide_event_moves_most_series_of_one_run(history: History) -> None:
    opts = detect_real.Options()
    pos, factor, changes = detect_real_bench.plan_event(history, MACHINE, "inside", np.random.default_rng(3), opts)
    n = len(history.runs[MACHINE])
    assert max(8, n // 4) <= pos <= n - 6
    assert detect_real_model.MW_RANGE[0] <= factor <= detect_real_model.MW_RANGE[1]
    at_pos = [s for s in history.series.values() if np.isfinite(s.values[pos])]
    assert 0.8 * len(at_pos) <= len(changes) <= len(at_pos)
    assert all(f > 1.0 for f in changes.values())  # time_ benchmarks: worse is slower
    pos, _, _ = detect_real_bench.plan_event(history, MACHINE, "newest", np.random.default_rng(3), opts)
    assert pos == n - 2


def test_one_round_renders_table_and_json(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = detect_real.build_parser().parse_args(["--data", str(small), "--rounds", "1", "--flat-min-runs", "12"])
    summary, reports, opts, cases = detect_real.run(args)
    table = detect_real.render(summary, reports, opts, cases)
    for line in ("| recall, steps 7-10% |", "| false alarms per 90 series x 76 commits |", "Goals (mlaperf"):
        assert line in table
    assert "| mlaperf | asv.step_detect |" in table
    assert "| version change, step at its 2nd run: recall (exact) |" in table  # no cases on 22 runs: n/a
    data = json.loads(json.dumps(detect_real.to_json(summary, reports, opts, cases), default=str))
    assert data["cases"]["total"] == {}
    mine = data["methods"]["mlaperf"]
    totals = [b["total"] for b in mine["recall_by_bucket"].values()]
    assert sum(totals) > 0 and max(totals) - min(totals) <= 1  # sizes balanced over the buckets
    assert mine["series_commits"] > 0 and math.isfinite(mine["false_alarms_per_90x76"])
    assert [e["where"] for e in mine["events"]] == ["inside", "newest"]
    assert len(mine["goals"]) == 3 and all(isinstance(g["pass"], bool) for g in mine["goals"])
    assert data["methods"]["asv.step_detect"]["detections"] == mine["detections"] == 7
    # False alarms are the false flags still open after one more run, the same rule for both detectors.
    assert "still open after one more run" in table
    for m in detect_real.METHODS:
        d = data["methods"][m]
        assert sum(d["false_alarms_raised_after_one_more_run"].values()) == d["false_alarms_raised"]
        assert d["false_alarms"] <= d["false_alarms_raised"]
        assert sum(d["baseline_flags_by_state"].values()) >= d["baseline_open_flags"] >= d["baseline_open_flat_flags"]
    asv_states = set(data["methods"]["asv.step_detect"]["false_alarms_raised_after_one_more_run"])
    assert asv_states <= {"listed", "not listed"}


def test_cases_land_where_planned(history: History, tmp_path: Path) -> None:
    """Issue 27's cases: a new asv version (listed in benchmarks.json) with a step at its second run and one
    before it, a lasting event over three benchmarks, a two-run excursion, and a lone outlier, four failed
    runs and a step, a drift of 24 small steps; written exactly as planned."""
    from benchmarks.scripts.detect_real_cases import plan_cases
    from benchmarks.scripts.detect_real_data import BUMPED_VERSION

    flat, _ = flat_series(history, FlatRule())
    plan = plan_cases(history, flat, np.random.default_rng(0))
    kinds = {c.kind for c in plan.cases}
    assert kinds == {"version", "old_version", "event", "excursion", "gap", "drift"}
    n = len(history.runs[MACHINE])
    v, bumped = plan.bumps[MACHINE]
    assert v == n - 24 and len(bumped) == 2
    assert {c.pos for c in plan.cases if c.kind == "version"} == {v + 1}
    assert len({c.key[1] for c in plan.cases if c.kind == "event"}) >= 2
    results = write_history(history, tmp_path, plan.factors, bumps=plan.bumps)
    written = load_history(results)
    assert write_errors(history, written, plan.factors) == []
    assert all(written.benchmarks[b]["version"] == BUMPED_VERSION for b in bumped)
    gap = next(c for c in plan.cases if c.kind == "gap")
    s = written.series[gap.key]
    assert np.isnan(s.values[gap.pos - 4 : gap.pos]).all() and s.ran[gap.pos - 4 : gap.pos].all()
    version = next(c for c in plan.cases if c.kind == "version")
    w = written.series[version.key]
    assert not w.current[v - 1] and w.current[v]  # the new version is benchmarks.json's
    drift = next(c for c in plan.cases if c.kind == "drift")
    assert drift.end is not None and drift.end - drift.pos + 1 == 24
    d = written.series[drift.key].values / history.series[drift.key].values  # the injected factors
    steps = np.diff(np.log(np.abs(d[drift.pos - 1 : drift.end + 1])))
    assert steps.size == 24 and ((np.abs(steps) > 0.0029) & (np.abs(steps) < 0.0051)).all(), steps
    early = d[: drift.pos][np.isfinite(d[: drift.pos])]  # runs before the series began, or failed, are NaN
    assert np.allclose(d[drift.end :], d[drift.end]) and early.size and np.allclose(early, 1.0)


def test_false_alarm_scoring_counts_what_is_still_open() -> None:
    """A false flag counts when it is still open after one more run: closed as transient, fixed or retired
    (mlaperf) or no longer listed (asv) is raised but not a false alarm; asv's listing is open by nature."""
    flag = lambda status: detect_real_methods.Flag("m", "b", "{}", "c", status=status)  # noqa: E731
    assert detect_real_bench._state([]) == "not listed"
    assert detect_real_bench._state([flag(None)]) == "listed" and flag(None).open
    for status in ("suspect", "new", "acknowledged"):
        assert flag(status).open
    for status in ("transient", "fixed", "retired", "ignored"):
        assert not flag(status).open and detect_real_bench._state([flag(status)]) == status
    assert detect_real_methods.OPEN_STATUSES == frozenset(OPEN_STATUSES)  # the detector's own rule


def test_bad_usage_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert detect_real.main(["--data", str(tmp_path / "nothing")]) == 2
    assert "no benchmarks.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        detect_real.main(["--rounds", "0"])
    assert exc.value.code == 2
    for flag, bad, why in (("--threshold", "150%", "must be in (0, 1)"), ("--threshold", "1.5", "did you mean 1.5%?"),
                           ("--mw-fraction", "x", "not a number")):
        with pytest.raises(SystemExit) as exc:
            detect_real.main([flag, bad])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and flag in err and why in err, err
