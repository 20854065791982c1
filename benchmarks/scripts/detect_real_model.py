"""What the parts of the real-noise detection benchmark (benchmarks/scripts/detect_real.py) share: its
constants and goals, the options of a run, a planned injection and the methods' tallies."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from benchmarks.scripts.detect_real_data import FlatRule, SeriesKey

BUCKETS = ((0.05, 0.07), (0.07, 0.10), (0.10, 0.20), (0.20, 0.50), (0.50, 1.00))
METHODS = ("mlaperf", "asv.step_detect")
TOLERANCE = 1  # a flag this many commits from a step finds it
FA_UNIT = 90 * 76  # false alarms are given per 90 series x 76 commits
GOAL_RECALL = 0.95  # for steps >= 7%
GOAL_FA = 2.0
MW_RANGE = (0.10, 0.50)  # a machine-wide event makes series this much worse
MW_JITTER = 0.02  # per-series spread (log sigma) around the machine's factor


def bucket_label(k: int) -> str:
    lo, hi = BUCKETS[k]
    return f"{lo * 100:.0f}-{hi * 100:.0f}%"


@dataclass
class Options:
    rounds: int = 3
    seed: int = 0
    threshold: float = 0.05
    inside_fraction: float = 0.3
    newest_per_machine: int = 4
    mw_fraction: float = 0.9
    rule: FlatRule = field(default_factory=FlatRule)


@dataclass
class Injection:
    key: SeriesKey
    slowdown: float
    bucket: int
    where: str  # "inside" | "newest"
    pos: int  # first run made worse
    label: int  # first run with a value at the new level (the commit a detector should flag)


@dataclass
class StepTally:
    """Step scores of one method, summed over rounds."""

    found: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    exact: int = 0
    newest_found: int = 0
    newest_total: int = 0
    false_alarms: int = 0  # false flags still open after one more run (the goal's count)
    raised: int = 0  # every false flag the first detection listed, open or closed
    raised_after: Counter = field(default_factory=Counter)  # those by their state after one more run
    series_commits: int = 0
    groups: int = 0
    step_commits: int = 0
    confirmed: int = 0  # newest-commit steps flagged again after the next run (mlaperf: status new)
    confirmed_of: int = 0
    confirmed_statuses: Counter = field(default_factory=Counter)
    alarm_commits: Counter = field(default_factory=Counter)  # (machine, commit) -> false alarms kept
    misses: list[str] = field(default_factory=list)  # steps >= 7% not found
    alarms: list[str] = field(default_factory=list)  # false alarms

    def recall(self, lo_bucket: int = 0) -> tuple[int, int]:
        return sum(self.found[lo_bucket:]), sum(self.total[lo_bucket:])

    def fa_rate(self, raised: bool = False) -> float:
        count = self.raised if raised else self.false_alarms
        return count / self.series_commits * FA_UNIT if self.series_commits else math.nan


@dataclass
class EventResult:
    """What one method produced for one machine-wide one-run event."""

    dataset: str
    machine: str
    where: str
    commit: str
    affected: int
    factor: float
    flags: int
    open: int
    groups: int  # alert groups of the flags (asv: machine x commit)
    open_groups: int  # of them, groups with an open member
    machine_wide: bool | None  # mlaperf only
    statuses: dict[str, int]
    after_flags: int | None = None  # newest: after the next (clean) run
    after_open: int | None = None
    after_statuses: dict[str, int] | None = None


@dataclass
class MethodReport:
    steps: StepTally = field(default_factory=StepTally)
    events: list[EventResult] = field(default_factory=list)
    detect_seconds: float = 0.0
    detections: int = 0
    baseline_open: int = 0  # open flags on the unmodified histories (asv: its listing)
    baseline_flat_open: int = 0  # of them, on flat series
    baseline_states: Counter = field(default_factory=Counter)  # every flag listed, by state
