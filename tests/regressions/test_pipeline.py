"""The steps of detection's pipeline (regressions.store.detect_store), each alone: the scope, units per asv
version, change points with a new version joined to the old level, one-run events, judging a unit's
alerts, applying verdicts, groups, retiring gone benchmarks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from db.models import AlertGroup, Regression
from db.synthetic import write_synthetic_results
from regressions import policy
from regressions.config import Settings
from regressions.detect import DEFAULT_PARAMS
from regressions.results import commit_positions
from regressions.segments import (
    Unit,
    continuation,
    find_steps,
    load_benchmarks,
    load_units,
    scope,
    settings_fingerprint,
)
from regressions.store import DetectSummary, Judged, apply, detect_store, judge_unit, one_run_events

Ingest = Callable[[Engine, list[Path]], None]
RNG = np.random.default_rng(5)


def unit(values: list[float], *, start: int = 0, key: tuple[int, str, int] = (1, "{}", 1), **kw: Any) -> Unit:
    positions = np.arange(start, start + len(values))
    v = np.asarray(values, dtype=float)
    return Unit(key, positions, v, positions, v, 0.05, "up_is_worse", **kw)


def noisy(n: int, level: float = 1e-4) -> list[float]:
    return list(level * np.exp(RNG.normal(0.0, 0.005, n)))


def test_find_steps_joins_a_new_version_at_the_old_level() -> None:
    """The new version's first run sits at the old level and the step comes at its second run: found at
    index 1 of the new unit, measured against the old level; alone, the unit has no level before it."""
    old = unit(noisy(20))
    new = unit([noisy(1)[0], *[v * 1.2 for v in noisy(9)]], start=20, previous=old)
    old.ended_at = 20
    alone, joined = find_steps([unit(list(new.values), start=20)]), find_steps([old, new])
    assert not alone[0].steps
    (step,) = [s for s in joined[1].steps if s.regression]
    assert step.index == 1 and step.ratio == pytest.approx(1.2, rel=0.03)
    assert joined[1].parent_positions == [20]  # the culprit lies after the new version's first run


def test_find_steps_never_flags_the_version_boundary() -> None:
    old = unit(noisy(20))
    new = unit([v * 1.5 for v in noisy(10)], start=20, previous=old)
    assert not [s for s in find_steps([old, new])[1].steps if s.regression]


def test_an_alert_is_carried_into_a_joined_version_and_judged_there() -> None:
    """+25% at 10; a new version from 20 at that level (joined), back at 26: the old segment's alert is
    judged on the new version's runs too (fixed at 26, not retired at 20). A third version from 30 at
    another level ends the chain."""
    v = noisy(36)
    old = unit([x * (1.25 if i >= 10 else 1) for i, x in enumerate(v[:20])])
    new = unit([x * (1.25 if i < 26 else 1) for i, x in enumerate(v[20:30], start=20)], start=20, previous=old)
    third = unit([x * 2 for x in v[30:]], start=30, previous=new)
    old.ended_at, old.following, new.ended_at, new.following = 20, new, 30, third
    found = find_steps([old, new, third])
    assert [f.joined for f in found] == [False, True, False]
    carry = continuation(old, {id(u): f for u, f in zip([old, new, third], found, strict=True)})
    assert [u for u, _f in carry[0]] == [new] and carry[1] == 30
    (j,) = judge_unit(old, found[0], [], {}, carry=carry)
    assert (j.verdict.status, j.verdict.reason, j.verdict.closed_at) == ("fixed", "returned", 26)
    (j,) = judge_unit(old, found[0], [], {})  # alone: its segment ended at 20
    assert (j.verdict.status, j.verdict.reason, j.verdict.closed_at) == ("retired", "segment_ended", 20)


def test_one_run_events_per_machine_and_benchmark() -> None:
    """Machine 1: four of six series (one benchmark each) spike at 7, an event of the machine. Machine 2: the
    three series of benchmark 9 spike at 5, less than half of the machine's ten: an event of benchmark 9."""
    units = []
    for b in range(6):
        values = noisy(12)
        if b < 4:
            values[7] *= 1.3
        units.append(unit(values, key=(b, "{}", 1)))
    for k in range(10):
        values = noisy(12)
        if k < 3:
            values[5] *= 1.3
        units.append(unit(values, key=(9 if k < 3 else 20 + k, f'{{"k": {k}}}', 2)))
    assert one_run_events(units) == {1: {(-1, 7)}, 2: {(9, 5)}}


def test_judge_unit_flags_retires_and_closes() -> None:
    """A step in a segment that ended is retired (segment_ended); a stored alert the detector no longer sees,
    measured since, is closed; a new step refuted before it was ever listed is not flagged."""
    values = noisy(30)
    values[15:] = [v * 1.25 for v in values[15:]]
    u = unit(values, ended_at=30)
    (found,) = find_steps([u])
    (j,) = judge_unit(u, found, [], {})
    assert j.reg is None and j.verdict == policy.Verdict("retired", 30, "segment_ended", j.verdict.confirming, 15)

    flat = unit(noisy(30))
    stale = Regression(commit_id=100, before=1e-4, status="suspect", direction="up_is_worse")
    (j,) = judge_unit(flat, find_steps([flat])[0], [stale], {100: 20})
    assert j.step is None and j.verdict.status == "transient" and j.verdict.reason == "refuted"


def test_apply_keeps_person_statuses_and_counts_once() -> None:
    u = unit(noisy(5))
    regs = [Regression(id=i, commit_id=1, status=s) for i, s in enumerate(("suspect", "ignored", "acknowledged"))]
    judged = [Judged(u, r, None, None, policy.Verdict("transient", 3, "refuted", 1, 2)) for r in regs]
    summary = DetectSummary()
    apply(judged, np.arange(10), summary)
    assert [r.status for r in regs] == ["transient", "ignored", "acknowledged"]
    assert regs[0].close_reason == "refuted" and regs[0].closed_commit_id == 3
    assert summary.transient == [0] and summary.events() == {0: "transient"}


def test_scope_load_units_and_groups_on_a_store(engine: Engine, tmp_path: Path, ingest: Ingest) -> None:
    # The new version (from 25) starts at another level: not joined, so the old segment's alerts end with it.
    h = write_synthetic_results(tmp_path / "r", commits=30, series=12, steps={20: 1.2, 25: 1.5}, seed=4)
    for f in (tmp_path / "r" / h.machine).glob("*.json"):
        if f.name != "machine.json" and h.shas.index(json.loads(f.read_text())["commit_hash"]) >= 25:
            data = json.loads(f.read_text())
            at = data["result_columns"].index("version")
            for row in data["results"].values():
                row[at] = "c" * 64
            f.write_text(json.dumps(data))
    ingest(engine, [h.root])
    with Session(engine) as s:
        sc = scope(s, settings_fingerprint(Settings(), DEFAULT_PARAMS, 100), machine=None, full=False, lookback=100)
        assert not sc.incremental and sc.series is None  # no watermark yet: everything
        pos = commit_positions(s)
        units = load_units(s, sc, pos, load_benchmarks(s), Settings())
    assert len(units) == 24  # 12 series x 2 versions
    old, new = units[0], units[1]
    assert old.key == new.key and new.previous is old and old.ended_at == int(new.positions[0])
    assert old.positions.size == 25 and new.positions.size == 5
    with Session(engine) as s, s.begin():
        summary = detect_store(s, Settings())
    with Session(engine) as s:
        groups = list(s.execute(select(AlertGroup)).scalars())
        regs = list(s.execute(select(Regression)).scalars())
    assert len(groups) == len(summary.groups) == 1 and {r.group_id for r in regs} == {groups[0].id}
    # The step at 20 sits in the first version's segment, which ended at 25 at another level: retired.
    assert {(r.status, r.close_reason) for r in regs} == {("retired", "segment_ended")}
