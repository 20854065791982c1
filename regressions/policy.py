"""Detection policy: what the change points of a series mean for alerts (statuses, confirmation, fixing,
grouping, retiring), in one place and without the database.

The detector (:mod:`regressions.detect`) finds change points in one segment of a series (one asv version
of a benchmark on one machine); this module turns a change point into an alert's status, and
:mod:`regressions.store` runs these rules over the store as a pipeline of named steps.

One verdict, whatever the mode: every rule reads only runs of the alert's own segment (and of later
versions joined to its level, ``segments.continuation``), and each transition only the runs up to the
commit it is stated at, in commit order. A status is therefore a
function of the data, not of the nights it arrived on: a night-by-night replay and ``detect --full`` end
in the same statuses (tests/regressions/test_replay.py). Two rules read more: ``gone_at`` the machine's
full runs (still a function of the history), and ``below_threshold`` the threshold of the run that applies
it (never met by two modes at the same settings). docs/detection.md has the rules as users see them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from regressions.detect import SeriesDetection
from regressions.direction import UP_IS_WORSE

# Statuses (db.models.REGRESSION_STATUSES).
SUSPECT, NEW, ACKNOWLEDGED, FIXED, IGNORED, TRANSIENT, RETIRED = (
    "suspect",
    "new",
    "acknowledged",
    "fixed",
    "ignored",
    "transient",
    "retired",
)
# Listed by default; an alert in one of these can still be acted on.
OPEN_STATUSES = (SUSPECT, NEW, ACKNOWLEDGED)
# Confirmed and still open: a return of the level marks these fixed.
FIXABLE_STATUSES = (NEW, ACKNOWLEDGED)
# Set by people; detection never changes ``ignored``, and moves ``acknowledged`` only to fixed or retired.
PERSON_STATUSES = (ACKNOWLEDGED, IGNORED)

# Why detection closed an alert (``regression.close_reason``).
REFUTED = "refuted"  # transient: runs of the new level came back
NOT_SEEN = "not_seen"  # transient: the detector no longer sees the step, with the runs since
ONE_RUN_EVENT = "one_run_event"  # transient: most series of its machine (or benchmark) moved for that one run
RETURNED = "returned"  # fixed: the level came back within the threshold
SEGMENT_ENDED = "segment_ended"  # retired: the benchmark's asv version changed after it
BENCHMARK_GONE = "benchmark_gone"  # retired: the benchmark no longer runs on its machine
SERIES_GONE = "series_gone"  # retired: its benchmark runs without its parameter combination (dropped from the grid)
BELOW_THRESHOLD = "below_threshold"  # transient: its step is within the threshold now in force (a higher one)
CLOSE_REASONS = (REFUTED, NOT_SEEN, ONE_RUN_EVENT, RETURNED, SEGMENT_ENDED, BENCHMARK_GONE, SERIES_GONE,
                 BELOW_THRESHOLD)

# Commits in a row whose level is back within half the threshold that make a confirmed alert fixed
# (at the first of them), besides a later level the detector sees back within the threshold.
RETURN_RUNS = 3
# A step found again within this many runs of a stored one is the same step seen with more data.
SAME_STEP_RUNS = 3
# A group is machine-wide when it holds more than this share of the series measured on its machine at its
# commit, and at least MACHINE_WIDE_MIN of them (two series moving together say little).
MACHINE_WIDE_SHARE = 0.5
MACHINE_WIDE_MIN = 3
# Runs at the new level, each worse by the threshold, that confirm an alert at a one-run machine event on
# its own (or reopen a transient alert the detector still sees).
MACHINE_WIDE_CONFIRM = 3
# A group is an event across benchmarks when it holds at least this many series of at least this many
# benchmarks (and is not machine-wide): one cause, shown as one group.
EVENT_MIN_SERIES = 8
EVENT_MIN_BENCHMARKS = 2
# A machine's commit is a full run (the suite, not an ``asv run --bench`` subset) when it measured more than
# this share of the benchmarks the machine measured over its FULL_RUN_WINDOW commits before it.
FULL_RUN_SHARE = 0.5
FULL_RUN_WINDOW = 30


@dataclass(frozen=True)
class Verdict:
    """An alert's status from its runs: ``closed_at``/``reason`` when closed (a position in history),
    ``confirming`` runs worse than ``before`` by the threshold, ``runs`` measured from its commit on."""

    status: str
    closed_at: int | None = None
    reason: str | None = None
    confirming: int = 0
    runs: int = 0


def _worse(value: float, before: float, direction: str) -> float:
    """Direction-adjusted log change of one run against ``before`` (> 0 worse)."""
    change = math.log(value) - math.log(before)
    return change if direction == UP_IS_WORSE else -change


def judge(
    before: float,
    runs: Sequence[tuple[int, Sequence[float]]],
    *,
    threshold: float,
    direction: str = UP_IS_WORSE,
    still_seen: bool = True,
    level_back_at: int | None = None,
    after: float | None = None,
) -> Verdict:
    """The status of a step from ``before``, given every run of its segment from its commit on, as
    (position, values of the runs at that commit) in commit order (re-runs of a commit together; failed
    runs left out).

    Runs vote in order: worse than ``before`` by more than the threshold, and by at least half the step's
    own shift to ``after`` where given (a run at the new level, not one just past the threshold after a far
    larger one-run spike), confirms; within half the threshold refutes; in between abstains. Two confirming
    runs and more of them than refuting ones: ``new``. A refuting run with as many confirming ones or fewer:
    ``transient`` (a transient one that the detector still sees is reopened by MACHINE_WIDE_CONFIRM confirming
    runs, more than refute). Once ``new``, the
    alert is ``fixed`` at the first of RETURN_RUNS commits in a row whose median is back within half the
    threshold, or at ``level_back_at`` (where the detector sees a later level back within the threshold),
    whichever comes first. Not seen any more (the detector, with the runs since, finds no step there) and
    measured twice: a suspect is ``transient`` (refuted), a confirmed one too (``not_seen``): the history as
    it stands holds no such step, which is what ``--full`` says of it.
    """
    delta = math.log1p(threshold)
    half = 0.5 * delta
    sign, base = (1.0 if direction == UP_IS_WORSE else -1.0), math.log(before)
    need = delta  # a confirming run sits at the new level: past the threshold and half the step's shift
    if after is not None and after > 0 and math.isfinite(after):
        need = max(delta, 0.5 * sign * (math.log(after) - base))
    confirm = refute = total = back = 0
    status, closed_at, reason = SUSPECT, None, None
    back_from: int | None = None
    for pos, values in runs:
        if len(values) == 1:  # one run at the commit (the usual case): no sorting, it is its own median
            v = values[0]
            if not (v > 0 and math.isfinite(v)):
                continue
            middle = sign * (math.log(v) - base)
            total += 1
            confirm += middle > need
            refute += middle < half
        else:
            worse = sorted(sign * (math.log(v) - base) for v in values if v > 0 and math.isfinite(v))
            if not worse:
                continue
            total += len(worse)
            confirm += sum(w > need for w in worse)
            refute += sum(w < half for w in worse)
            middle = worse[len(worse) // 2]
        if status == NEW:
            back = back + 1 if middle < half else 0
            back_from = pos if back == 1 else back_from
            if back >= RETURN_RUNS:
                status, closed_at, reason = FIXED, back_from, RETURNED
                break
        elif status == SUSPECT and confirm >= 2 and confirm > refute:
            status = NEW
        elif status == SUSPECT and refute >= 1 and refute >= confirm:
            status, closed_at, reason = TRANSIENT, pos, REFUTED
        elif status == TRANSIENT and still_seen and confirm >= MACHINE_WIDE_CONFIRM and confirm > refute:
            status, closed_at, reason = NEW, None, None
    if level_back_at is not None and status in (NEW, FIXED) and (closed_at is None or level_back_at < closed_at):
        status, closed_at, reason = FIXED, level_back_at, RETURNED
    if status in (SUSPECT, NEW) and not still_seen and total >= 2:
        status, closed_at, reason = TRANSIENT, runs[-1][0], REFUTED if status == SUSPECT else NOT_SEEN
    return Verdict(status, closed_at, reason, confirm, total)


def level_back(
    levels: Sequence[tuple[int, int, float]], index: int, before: float, *, threshold: float, direction: str
) -> int | None:
    """The first level (first index, last index, level) starting after ``index`` that is back within the
    threshold of ``before``: where the detector sees the step undone (its first index; None: none)."""
    for first, _last, level in levels:
        if first > index and _worse(level, before, direction) < math.log1p(threshold):
            return first
    return None


def series_verdicts(
    values: Sequence[float | None], detection: SeriesDetection, *, threshold: float, direction: str = UP_IS_WORSE
) -> list[Verdict]:
    """:func:`judge` of each regression of one plain series (one run per commit, positions are indices):
    what the store decides for a segment, without a store."""
    runs = [(i, [float(v)] if v is not None and math.isfinite(float(v)) else []) for i, v in enumerate(values)]
    return [
        judge(
            s.before,
            runs[s.index :],
            threshold=threshold,
            direction=direction,
            after=s.after,
            level_back_at=level_back(detection.levels, s.index, s.before, threshold=threshold, direction=direction),
        )
        for s in detection.regressions
    ]


def after_person(current: str, verdict: Verdict) -> Verdict:
    """What detection may do to an alert given its stored status: ``ignored`` stays; ``acknowledged``
    moves only to fixed or retired (a person has seen it; the detector does not refute it again)."""
    if current == IGNORED:
        return Verdict(IGNORED, confirming=verdict.confirming, runs=verdict.runs)
    if current == ACKNOWLEDGED and verdict.status not in (FIXED, RETIRED):
        return Verdict(ACKNOWLEDGED, confirming=verdict.confirming, runs=verdict.runs)
    return verdict


def within_threshold(ratio: float | None, *, threshold: float, direction: str = UP_IS_WORSE) -> bool:
    """Whether a step of this ``ratio`` (after / before) is worse, but not beyond ``threshold``: the
    detector at that threshold would not flag it, whatever its runs. A stored step was beyond the threshold
    it was last seen at, so this holds only under a higher threshold than that (a rounding margin keeps a
    step just beyond it from reading as within). A step the better way (a direction rule that changed) is
    no regression at any threshold: judged by its runs as before."""
    if ratio is None or not (ratio > 0 and math.isfinite(ratio)):
        return False
    return 0.0 < _worse(ratio, 1.0, direction) < math.log1p(threshold) - 1e-9


def below_threshold(verdict: Verdict, at: int) -> Verdict:
    """An alert whose step is within the threshold now in force (``within_threshold``) and that the detector
    no longer flags closes as ``transient`` (BELOW_THRESHOLD) at ``at``, the newest commit judged: not
    refuted (its runs still sit at the step) nor unseen by the data, only below the bar. An open verdict and
    one that would claim the data refuted the step take it; fixed, retired, ignored and one-run events keep
    theirs. A later run at a threshold it passes judges it from its runs again (reopened)."""
    if verdict.status in OPEN_STATUSES or (verdict.status == TRANSIENT and verdict.reason in (REFUTED, NOT_SEEN)):
        return Verdict(TRANSIENT, at, BELOW_THRESHOLD, verdict.confirming, verdict.runs)
    return verdict


def holds_its_step(status: str, reason: str | None) -> bool:
    """Open, or closed only because a higher threshold was in force: the alert still stands for its step,
    so a step found near it is the same one (matched within SAME_STEP_RUNS, followed when it moves)."""
    return status in OPEN_STATUSES or (status == TRANSIENT and reason == BELOW_THRESHOLD)


def retire(verdict: Verdict, reason: str, at: int | None) -> Verdict:
    """An alert that can no longer be acted on (its segment ended, its benchmark stopped) closes as
    ``retired``; closed and ignored ones keep their status."""
    if verdict.status not in OPEN_STATUSES:
        return verdict
    return Verdict(RETIRED, at, reason, verdict.confirming, verdict.runs)


def one_run_events(
    values: np.ndarray, *, threshold: float, direction: str = UP_IS_WORSE, before: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """Of one series' per-commit values (a segment, commit order): which commits can show a one-run
    event (they have a commit after them), and which did: worse than the median of the ``before`` commits
    before (the segment's first standing in for those before it) by more than the threshold, and the next
    commit back within half of it."""
    z, ref = _against_before(values, before)
    n = z.size
    decidable = np.zeros(n, dtype=bool)
    decidable[1:-1] = True
    if n < 3:
        return decidable, np.zeros(n, dtype=bool)
    sign = 1.0 if direction == UP_IS_WORSE else -1.0
    delta = math.log1p(threshold)
    hit = np.zeros(n, dtype=bool)
    hit[1:-1] = (sign * (z[1:-1] - ref[1:-1]) > delta) & (sign * (z[2:] - ref[1:-1]) < 0.5 * delta)
    return decidable, hit


def newest_worse(values: np.ndarray, *, threshold: float, direction: str = UP_IS_WORSE, before: int = 5) -> bool:
    """Whether a series' newest commit (the last of ``values``, which no commit follows yet) is worse than the
    median of the ``before`` commits before it by more than the threshold: the first half of a one-run event,
    all that can be known of it until the next commit is measured."""
    z, ref = _against_before(values, before)
    sign = 1.0 if direction == UP_IS_WORSE else -1.0
    return z.size >= 2 and bool(sign * (z[-1] - ref[-1]) > math.log1p(threshold))


def _against_before(values: np.ndarray, before: int) -> tuple[np.ndarray, np.ndarray]:
    """Log values (NaN for values of 0 or below: no log, never a hit, as the detector skips failed runs) and, for
    each commit, the median of the ``before`` commits before it (the first commit standing in for those before
    it; NaN for the first)."""
    v = np.asarray(values, dtype=float)
    z = np.full(v.shape, np.nan)
    np.log(v, out=z, where=np.isfinite(v) & (v > 0))
    if z.size < 2:
        return z, np.full(z.shape, np.nan)
    padded = np.r_[np.full(before - 1, z[0]), z[:-1]]
    return z, np.r_[np.nan, np.median(np.lib.stride_tricks.sliding_window_view(padded, before), axis=1)]


def is_one_run_event(decidable: int, hit: int) -> bool:
    """A commit where most of a set of series (a machine's, or one benchmark's on a machine: more than
    MACHINE_WIDE_SHARE of those measured there and at the next commit, and at least MACHINE_WIDE_MIN) got
    worse for that one run: the machine, or what the benchmark's cases share, moved. The same share as a
    machine-wide group (``is_machine_wide``)."""
    return is_machine_wide(hit, decidable)


def after_one_run_event(verdict: Verdict, next_pos: int | None, *, machine_wide: bool) -> Verdict:
    """An alert at a one-run event (``is_one_run_event``): of its machine, one confirmed by fewer than
    MACHINE_WIDE_CONFIRM runs is transient (the machine moved, noisy series with it); of its benchmark
    only, one still undecided after two runs is (a real step there is confirmed by its own runs)."""
    weak = verdict.status in (SUSPECT, NEW) and verdict.confirming < MACHINE_WIDE_CONFIRM
    undecided = verdict.status == SUSPECT and verdict.runs >= 2
    if weak if machine_wide else undecided:
        return Verdict(TRANSIENT, next_pos, ONE_RUN_EVENT, verdict.confirming, verdict.runs)
    return verdict


def before_machine_event(verdict: Verdict) -> Verdict:
    """An alert at its machine's newest commit where most of the machine's series got worse
    (``is_machine_wide`` of :func:`newest_worse`): until the next commit says whether the machine moved for one
    run (:func:`after_one_run_event`), it stays a suspect short of MACHINE_WIDE_CONFIRM confirming runs; the
    same commit measured again minutes later, the machine as it was, confirms nothing of that."""
    if verdict.status == NEW and verdict.confirming < MACHINE_WIDE_CONFIRM:
        return Verdict(SUSPECT, None, None, verdict.confirming, verdict.runs)
    return verdict


def module_ran(benchmarks: Iterable[str], ran: Iterable[str]) -> set[str]:
    """Those of ``benchmarks`` whose asv module (the file: ``bench_decode`` of ``bench_decode.Class.time_x``)
    has a benchmark in ``ran``, the names a run measured. One that did not run there while its module did no
    longer runs; a module missing altogether is a partial run (``asv run --bench``), which says nothing.
    ``mlaperf compare``'s rule for one head run; detection retires by full runs over time (``gone_at``)."""
    modules = {name.split(".", 1)[0] for name in ran}
    return {b for b in benchmarks if b.split(".", 1)[0] in modules}


def full_runs(measured: Sequence[Iterable[int]], window: int = FULL_RUN_WINDOW) -> list[bool]:
    """Of one machine's commits in history order (the benchmarks measured at each), which are full runs:
    more than FULL_RUN_SHARE of the benchmarks measured over the ``window`` commits before it (the first
    commit is one). A partial run (``asv run --bench``) measures a few; a deleted benchmark or module takes
    a few away. A suite that loses more than half at once is full again ``window`` commits later."""
    sets = [set(m) for m in measured]
    seen: Counter[int] = Counter()
    out: list[bool] = []
    for i, now in enumerate(sets):
        if i > window:  # the commit that left the window
            seen.subtract(sets[i - window - 1])
            seen = +seen
        out.append(not seen or sum(b in seen for b in now) > FULL_RUN_SHARE * len(seen))
        seen.update(now)
    return out


def gone_at(last: int, full: Sequence[bool], listed: Sequence[bool] = ()) -> int | None:
    """Where a benchmark last measured at index ``last`` of a machine's commits is gone from it: the first
    full run after ``last`` (``full_runs``) whose suite does not list it (``listed[i]``: a benchmarks.json of a
    run at commit ``i`` names it; missing entries are False), whatever its module; None while no such run has
    followed (a partial run never retires, nor a run that listed it and did not select it). A function of the
    history, so every mode stamps the same commit."""
    return next((i for i in range(last + 1, len(full)) if full[i] and not (i < len(listed) and listed[i])), None)


def is_machine_wide(members: int, measured: int) -> bool:
    """A group of ``members`` series, ``measured`` series on its machine at its commit."""
    return members >= MACHINE_WIDE_MIN and members > MACHINE_WIDE_SHARE * max(measured, 1)


def counts_in_kind(status: str) -> bool:
    """Whether a group member counts toward the group's kind (machine-wide, event): every member but the
    transient ones, which the data says were no step (refuted, not seen, a one-run event). The nightly keeps
    such members of a spike it saw as its newest run; ``--full`` never flags them: counting them would make
    the same group machine-wide in one mode only."""
    return status != TRANSIENT


_KIND_SUFFIX = {"machine-wide": ", machine-wide", "event": ", event across benchmarks"}


def kind_suffix(kind: str | None) -> str:
    """What a group's kind (``group_kind``) adds to its status where people read it (", machine-wide"): the CLI's
    listing, the dashboard's and the static site's group tables alike."""
    return _KIND_SUFFIX.get(kind or "", "")


def group_kind(machine_wide: bool, benchmarks: Iterable[str], statuses: Iterable[str] | None = None) -> str:
    """``machine-wide`` (most series of the machine moved: look at the machine), ``event`` (many series of
    several benchmarks at one commit range: one cause to look for), else ``series``. ``statuses`` (the
    members', in the order of ``benchmarks``): only members that ``counts_in_kind`` are counted."""
    if machine_wide:
        return "machine-wide"
    names = list(benchmarks)
    if statuses is not None:
        names = [b for b, s in zip(names, statuses, strict=True) if counts_in_kind(s)]
    if len(names) >= EVENT_MIN_SERIES and len(set(names)) >= EVENT_MIN_BENCHMARKS:
        return "event"
    return "series"


def overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Commits shared by two culprit ranges ``(parent, commit]`` given as positions in history."""
    return min(a[1], b[1]) - max(a[0], b[0])


def best_group(span: tuple[int, int], groups: Sequence[tuple[int, int]]) -> int | None:
    """Index of the group whose range a regression's range overlaps most (ties: the one ending at the same
    commit), or None: it starts a group of its own. A group holds regressions whose ranges overlap."""
    best, best_overlap = None, 0
    for i, g in enumerate(groups):
        shared = overlap(span, g)
        if shared > best_overlap or (shared == best_overlap and shared > 0 and g[1] == span[1]):
            best, best_overlap = i, shared
    return best
