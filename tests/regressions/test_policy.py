"""The detection policy alone (regressions.policy): verdicts from runs, fixing by return, retiring, person
statuses, group verdicts and group kinds; no detector, no store."""

from __future__ import annotations

import numpy as np
import pytest

from regressions import policy
from regressions.direction import DOWN_IS_WORSE


def runs_of(values: list[float | None], start: int = 0) -> list[tuple[int, list[float]]]:
    return [(start + i, [] if v is None else [v]) for i, v in enumerate(values)]


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([1.2], "suspect"),  # seen once
        ([1.2, 1.21], "new"),  # seen twice
        ([1.2, 1.0], "transient"),  # the next run is back
        ([1.16, 1.03], "suspect"),  # a slightly high run neither confirms nor refutes
        ([1.16, 1.03, 1.0], "transient"),
        ([1.16, 1.03, 1.12], "new"),
        ([1.2, None, 1.19], "new"),  # failed runs do not vote
    ],
)
def test_verdict_of_the_newest_runs(runs: list[float | None], expected: str) -> None:
    assert policy.judge(1.0, runs_of(runs), threshold=0.05).status == expected
    flipped = [None if x is None else 1.0 / x for x in runs]  # throughput: down is worse
    assert policy.judge(1.0, runs_of(flipped), threshold=0.05, direction=DOWN_IS_WORSE).status == expected


def test_a_run_just_past_the_threshold_does_not_confirm_a_far_larger_step() -> None:
    """A 2.63x one-run spike then a run 5.1% slow (Stingray's create_with_checks): the second run is past the
    threshold but nowhere near the new level, so it abstains; runs at the new level still confirm."""
    spike = [2.63, 1.051]
    assert policy.judge(1.0, runs_of(spike), threshold=0.05).status == "new"  # the old rule, without the level
    assert policy.judge(1.0, runs_of(spike), threshold=0.05, after=2.63).status == "suspect"
    assert policy.judge(1.0, runs_of([*spike, 1.0]), threshold=0.05, after=2.63).reason == "refuted"
    assert policy.judge(1.0, runs_of([1.3, 1.2]), threshold=0.05, after=1.25).status == "new"
    assert policy.judge(1.0, runs_of([1.07, 1.06]), threshold=0.05, after=1.065).status == "new"  # small step
    falling = runs_of([1 / 2.63, 1 / 1.051])
    assert policy.judge(1.0, falling, threshold=0.05, after=1 / 2.63, direction=DOWN_IS_WORSE).status == "suspect"


def test_confirming_runs_are_counted() -> None:
    v = policy.judge(1.0, [(0, [1.2]), (1, []), (2, [1.03]), (3, [1.19])], threshold=0.05)
    assert (v.status, v.confirming, v.runs) == ("new", 2, 3)
    v = policy.judge(1.0, runs_of([1 / 1.2, 1.0, 1.0]), threshold=0.05, direction=DOWN_IS_WORSE)
    assert (v.status, v.confirming, v.closed_at, v.reason) == ("transient", 1, 1, "refuted")


def test_reruns_of_one_commit_vote_together() -> None:
    assert policy.judge(1.0, [(7, [1.2, 1.21])], threshold=0.05).status == "new"
    v = policy.judge(1.0, [(7, [1.2, 1.0])], threshold=0.05)
    assert (v.status, v.closed_at) == ("transient", 7)


def test_a_confirmed_excursion_that_returns_is_fixed_after_return_runs() -> None:
    """Two runs at +20% (confirmed), then back within 1%: fixed at the first run back once RETURN_RUNS
    commits in a row are back; not before."""
    back = [1.01, 0.99, 1.0, 1.0]
    for n in range(policy.RETURN_RUNS):
        assert policy.judge(1.0, runs_of([1.2, 1.2, *back[:n]], 10), threshold=0.05).status == "new"
    v = policy.judge(1.0, runs_of([1.2, 1.2, *back], 10), threshold=0.05)
    assert (v.status, v.closed_at, v.reason) == ("fixed", 12, "returned")
    # One run back among runs at the new level does not fix it.
    assert policy.judge(1.0, runs_of([1.2, 1.2, 1.0, 1.2, 1.0, 1.0]), threshold=0.05).status == "new"


def test_the_detectors_level_back_fixes_at_its_first_run() -> None:
    v = policy.judge(1.0, runs_of([1.2, 1.2, 1.03]), threshold=0.05, level_back_at=2)
    assert (v.status, v.closed_at) == ("fixed", 2)
    # A suspect is not fixed: it was never confirmed.
    assert policy.judge(1.0, runs_of([1.2]), threshold=0.05, level_back_at=1).status == "suspect"


def test_not_seen_any_more_and_measured_twice_is_transient() -> None:
    assert policy.judge(1.0, runs_of([1.2, 1.04]), threshold=0.05).status == "suspect"
    v = policy.judge(1.0, runs_of([1.2, 1.04]), threshold=0.05, still_seen=False)
    assert (v.status, v.reason, v.closed_at) == ("transient", "refuted", 1)
    # Confirmed once, but the history as it stands holds no step there: closed, as --full has no alert.
    v = policy.judge(1.0, runs_of([1.2, 1.2, 1.04]), threshold=0.05, still_seen=False)
    assert (v.status, v.reason) == ("transient", "not_seen")
    assert policy.judge(1.0, runs_of([1.2, 1.2, 1.0, 1.0, 1.0]), threshold=0.05, still_seen=False).status == "fixed"


def test_a_transient_one_still_seen_reopens_on_three_confirming_runs() -> None:
    values = [1.2, 1.0, 1.2, 1.2]
    assert policy.judge(1.0, runs_of(values[:3]), threshold=0.05).status == "transient"
    assert policy.judge(1.0, runs_of(values), threshold=0.05).status == "new"
    assert policy.judge(1.0, runs_of(values), threshold=0.05, still_seen=False).status == "transient"


def test_verdicts_are_time_consistent() -> None:
    """A verdict stated at a commit never depends on later runs: the prefix up to that commit gives it."""
    values = [1.2, 1.17, 1.22, 1.0, 1.01, 0.99, 1.2, 1.0]
    full = policy.judge(1.0, runs_of(values), threshold=0.05)
    assert full.closed_at is not None
    assert policy.judge(1.0, runs_of(values[: full.closed_at + policy.RETURN_RUNS]), threshold=0.05) == full


def test_retire_and_person_statuses() -> None:
    open_ = policy.Verdict("new", confirming=2, runs=2)
    assert policy.retire(open_, policy.SEGMENT_ENDED, 40) == policy.Verdict("retired", 40, "segment_ended", 2, 2)
    fixed = policy.Verdict("fixed", 30, "returned")
    assert policy.retire(fixed, policy.SEGMENT_ENDED, 40) == fixed  # closed ones keep their reason
    assert policy.after_person("ignored", open_).status == "ignored"
    assert policy.after_person("acknowledged", policy.Verdict("transient", 3, "refuted")).status == "acknowledged"
    assert policy.after_person("acknowledged", fixed) == fixed
    assert policy.after_person("suspect", fixed) == fixed


def test_one_run_machine_events_from_the_data() -> None:
    values = np.array([1.0, 1.01, 0.99, 1.0, 1.3, 1.0, 1.01, 1.2, 1.21, 1.2])
    decidable, hit = policy.one_run_events(values, threshold=0.05)
    assert decidable.tolist() == [False] + [True] * 8 + [False]  # the newest waits for the next commit
    assert np.flatnonzero(hit).tolist() == [4]  # a lasting step (7) is no one-run event
    _, hit = policy.one_run_events(1 / values, threshold=0.05, direction=DOWN_IS_WORSE)
    assert np.flatnonzero(hit).tolist() == [4]
    assert policy.is_one_run_event(10, 6) and not policy.is_one_run_event(10, 5) and not policy.is_one_run_event(4, 2)


def test_an_alert_at_a_machine_event_needs_three_runs_on_its_own() -> None:
    two = policy.Verdict("new", confirming=2, runs=2)
    wide = {"machine_wide": True}
    assert policy.after_one_run_event(two, 31, **wide) == policy.Verdict("transient", 31, "one_run_event", 2, 2)
    three = policy.Verdict("new", confirming=3, runs=3)
    assert policy.after_one_run_event(three, 31, **wide) == three
    assert policy.after_one_run_event(policy.Verdict("fixed", 30, "returned"), 31, **wide).status == "fixed"
    # An event of the benchmark only: a confirmed alert keeps its verdict; one still undecided follows.
    assert policy.after_one_run_event(two, 31, machine_wide=False) == two
    undecided = policy.Verdict("suspect", confirming=1, runs=2)
    assert policy.after_one_run_event(undecided, 31, machine_wide=False).status == "transient"
    once = policy.Verdict("suspect", confirming=1, runs=1)
    assert policy.after_one_run_event(once, None, machine_wide=False) == once


def test_group_kind_and_ranges() -> None:
    assert policy.group_kind(True, ["a.x"] * 2) == "machine-wide"
    assert policy.group_kind(False, ["a.x"] * 20) == "series"  # one benchmark's parameters
    many = ["a.x"] * 5 + ["b.y"] * 5
    assert policy.group_kind(False, many) == "event"
    assert policy.group_kind(False, many[: policy.EVENT_MIN_SERIES - 1]) == "series"
    assert policy.best_group((4, 6), [(0, 3), (5, 9), (3, 6)]) == 2  # overlaps (4, 6] most
    assert policy.best_group((10, 11), [(0, 3), (5, 9)]) is None
    assert policy.is_machine_wide(3, 4) and not policy.is_machine_wide(2, 2) and not policy.is_machine_wide(5, 12)


def test_a_benchmark_no_longer_runs_only_where_its_module_ran() -> None:
    """`mlaperf compare`'s rule for undeclared removals at one head run (detection retires by full runs)."""
    ran = ["bench_decode.SparseDecode.time_decode", "bench_step.Step.time_step"]
    names = ["bench_decode.SparseDecode.time_old", "bench_indexer.Indexer.time_indexer", "bench_step.Step.time_step"]
    assert policy.module_ran(names, ran) == {"bench_decode.SparseDecode.time_old", "bench_step.Step.time_step"}
    assert policy.module_ran(names, []) == set(), "a module missing altogether is a partial run"
    assert policy.module_ran(["bench_decodex.A.time_a"], ran) == set(), "modules are whole names, not prefixes"


def test_full_runs_and_where_a_benchmark_is_gone() -> None:
    """A run of more than half of the benchmarks of the machine's window before it is full; a benchmark is
    gone at the first full run after its last measurement, whatever its module; a partial run says nothing."""
    suite = {1, 2, 3, 4, 5, 6}
    runs = [suite, suite, {1, 2, 3, 4}, {5}, {1, 2, 3}, suite - {6}]
    assert policy.full_runs(runs) == [True, True, True, False, False, True]
    assert policy.gone_at(1, policy.full_runs(runs)) == 2  # 5 and 6, last measured at 1: gone at 2
    assert policy.gone_at(3, policy.full_runs(runs)) == 5  # 5, measured by the partial run 3: gone at 5
    assert policy.gone_at(4, [True] * 5) is None  # measured at the newest run
    assert policy.gone_at(0, [True, False, False]) is None  # only partial runs since: not gone
    # Full runs whose suite lists it (left out by asv run --bench) are not where it is gone; a short list is False.
    assert policy.gone_at(0, [True] * 4, [True, True, True, False]) == 3
    assert policy.gone_at(0, [True] * 4, [True, True]) == 2
    assert policy.gone_at(0, [True] * 3, [False, True, True]) is None
    # A suite halved at once is full again a window later (the window before holds only the new suite).
    halved = [suite] * 3 + [{1, 2}] * 4
    assert policy.full_runs(halved, window=2) == [True] * 3 + [False, False, True, True]


def test_an_alert_within_a_higher_threshold_is_below_threshold_not_refuted() -> None:
    """A 12% step judged at 30%: within the threshold, closed as below_threshold at the commit given; a
    fixed one keeps its status; at 5% it is beyond and not touched; a rate falling 12% the same way, a
    rate rising 12% (a gain) is not within any threshold."""
    assert policy.within_threshold(1.12, threshold=0.3) and not policy.within_threshold(1.12, threshold=0.05)
    assert policy.within_threshold(1 / 1.12, threshold=0.3, direction=DOWN_IS_WORSE)
    assert not policy.within_threshold(1.3 * (1 + 1e-12), threshold=0.3), "a step just beyond stays beyond"
    assert not policy.within_threshold(None, threshold=0.3)
    assert not policy.within_threshold(1.12, threshold=0.3, direction=DOWN_IS_WORSE), "a gain is no regression"
    refuted = policy.judge(1.0, runs_of([1.12] * 15, start=30), threshold=0.3, still_seen=False)
    assert (refuted.status, refuted.reason, refuted.closed_at) == ("transient", "refuted", 30)
    v = policy.below_threshold(refuted, 44)
    assert (v.status, v.reason, v.closed_at) == ("transient", "below_threshold", 44)
    fixed = policy.Verdict("fixed", 40, policy.RETURNED)
    assert policy.below_threshold(fixed, 44) == fixed
    assert policy.holds_its_step("transient", "below_threshold") and not policy.holds_its_step("transient", "refuted")


def test_group_kind_counts_no_transient_member() -> None:
    """A nightly group of 8 series of 8 benchmarks, 5 of them a refuted spike: 3 real steps, no event."""
    names = [f"b{i}.x" for i in range(8)]
    statuses = ["new"] * 3 + ["transient"] * 5
    assert policy.group_kind(False, names) == "event"
    assert policy.group_kind(False, names, statuses) == "series"
    assert policy.group_kind(False, names, ["new"] * 4 + ["fixed", "retired", "ignored", "acknowledged"]) == "event"
    assert not policy.counts_in_kind("transient") and policy.counts_in_kind("suspect")
