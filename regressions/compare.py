"""Head against base: the compare statistics of one series (:func:`compare_pair`, pure) and of two stored
commits (:func:`compare_commits`, what `mlaperf compare` and the dashboard's Compare page both call).

A change is significant when the samples say so (two-sided Mann-Whitney U, ``p < alpha``) and, where
the series has a history on that machine (at least ``MIN_HISTORY_RUNS`` commits up to the base), when it
also stands out of the run-to-run noise seen there around the series' own levels (``|log ratio| >=
z_crit * sigma * sqrt(2)``; its past steps are changes, not noise: ``detect.step_free``): on GPUs
the offset between two runs is often larger than the spread inside one, so samples alone call every
offset significant. A shorter history is not trusted for noise: a young project's commits are mostly
real changes, which would pass for noise and hide the change under test. Without samples the history
decides; without either, asv's rule: the 99% confidence intervals do not overlap. With nothing at all (one
value a side, as asv keeps for ``track_``/``peakmem_``/``mem_`` results, and no history: a pull request's store):
a memory benchmark (``peakmem_``, ``mem_``: bytes allocated, not a timing's run-to-run noise) is judged by the
threshold alone (``method`` ``threshold``, asv's fallback), so a 10x growth fails the check; any other change
beyond the threshold is ``untested``: listed apart, never failing, since one GPU figure a side cannot tell a
5% change from the runner's noise (:data:`UNTESTED`); within the threshold it is unchanged.
Like with like: of several asv versions or environments at a side, only the runs of those both sides measured count.
A benchmark whose asv version at head shares none with base's (its code changed: a new segment, as
:mod:`regressions.detect` starts one) is ``changed``: its ratio is shown for reference, never judged.
A regression is a slowdown beyond the threshold that is significant; an improvement the mirror image.
Values of 0 or below have no ratio (:func:`change_ratio` is None): there the change is the value's own
relative change ``(head - base) / |base|`` (:func:`regressions.units.relative_change`; from 0, any other
value is beyond every threshold), judged by the samples or the 99% intervals as above (the history's noise
is relative, so it cannot judge them); where neither can, a value that leaves or reaches 0 is a change
(``method`` ``zero``: noise relative to a value cannot move it off 0), other values as above (memory by the
threshold alone, others untested beyond it).
Kernel-config records (``track_launch_*``, :func:`db.provenance.is_provenance`) are provenance, not
performance: :func:`compare_commits` leaves them out (they are neither compared nor counted).

Two ratios exist in mlaperf and they are different quantities:
- ``Comparison.ratio`` (here: `mlaperf compare`, the dashboard's Compare page) is :func:`change_ratio`,
  head / base of two commits' results (each the median over that commit's runs), in the benchmark's
  unit; ``Comparison.slowdown`` is the same change oriented so that > 1 is worse.
- ``Step.ratio`` of :mod:`regressions.detect`, stored as ``Regression.ratio`` (`mlaperf detect`, the
  Regressions page) is a step's level after over its level before, each level a median over several
  commits of the series' history.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, NamedTuple

from sqlalchemy.orm import Session

from db.asvformat import benchmark_type
from db.models import Commit
from db.provenance import is_provenance
from regressions.compare_sides import ENV_PARAM, case_params, read_sides
from regressions.config import Settings
from regressions.direction import UP_IS_WORSE, direction_for, slowdown
from regressions.labels import ordered_params, series_rank
from regressions.policy import module_ran
from regressions.results import (
    history_noise,
    machines_with,
    param_names,
)
from regressions.significance import intervals_apart, mann_whitney_many
from regressions.units import fmt_value_change, relative_change

DEFAULT_ALPHA = 0.01
DEFAULT_Z = 3.0
MIN_HISTORY_RUNS = 10

# Comparison.status: what happened to a series between base and head.
IMPROVED = "improved"
REGRESSED = "regressed"
UNCHANGED = "unchanged"
FAILED = "failed"  # no value where the series ran (asv null), and none at head (failed on base, gone at head: REMOVED)
# Failed at base, measured at head: the pull request makes a broken case run again. Not a failure of the head.
REPAIRED = "repaired"
NOT_RUN = "not_run"  # not selected on a side (asv NaN), or the machine has no run at that commit
NEW = "new"  # only at head: the base's run on that machine has no such series
REMOVED = "removed"  # only at base, and the pull request declares the removal (see MISSING), or it failed there
# Measured at base, absent or skipped at head where the suite ran (other benchmarks of its asv module did),
# and the removal not declared (a new asv version of the benchmark at head, or the configuration's
# removed-benchmarks list): a pull request cannot hide a case by dropping it or making it skip.
MISSING = "missing"
# Measured on both sides, but the benchmark changed between them (its asv versions at base and head share none):
# the values measure different code, so the pair is shown and not judged, as asv's compare marks it ("x").
CHANGED = "changed"
# Beyond the threshold, but nothing to tell the change from noise (one value a side, no history, not a memory
# benchmark): listed apart and never failing (asv's compare would flag it on the ratio alone).
UNTESTED = "untested"
STATUSES = (IMPROVED, REGRESSED, UNCHANGED, FAILED, MISSING, CHANGED, UNTESTED, NOT_RUN, NEW, REMOVED, REPAIRED)
# What judged a change (``Comparison.method``): the samples, the history's noise, both, the 99% intervals, the
# threshold alone (memory), a value leaving or reaching 0, a new asv version (not judged), or nothing.
METHODS = ("mann-whitney+history", "mann-whitney", "history", "ci99", "threshold", "zero", "version", "none")
# Statuses that fail a pull request's check (`mlaperf compare` exits 1: ``fails_check``).
FAILING = (REGRESSED, FAILED, MISSING)

# What one side (base or head) has for a series.
SIDE_OK = "ok"
SIDE_FAILED = "failed"
SIDE_NOT_RUN = "not_run"
SIDE_ABSENT = "absent"
SIDE_MISSING = "missing"  # head only: absent or skipped where the suite ran, removal not declared
# Every side a comparison can state (what report.json may carry).
SIDES = (SIDE_OK, SIDE_FAILED, SIDE_NOT_RUN, SIDE_ABSENT, SIDE_MISSING)
_SIDE_OF_STORE_STATUS = {"ok": SIDE_OK, "failed": SIDE_FAILED, "skipped": SIDE_NOT_RUN}
# What a side without a value reads as, in the text table, the PR report (failed and missing in bold) and Compare.
SIDE_WORDS = {SIDE_FAILED: "failed", SIDE_NOT_RUN: "not run", SIDE_ABSENT: "absent", SIDE_MISSING: "missing"}


@dataclass
class Series:
    """One series as a comparison judges it: which one (benchmark x params x machine), its unit, which way
    is worse and its threshold. What goes in (:class:`SeriesPair`) and what comes out (:class:`Comparison`)
    both start with it."""

    benchmark: str
    params: dict[str, Any]
    machine: str
    unit: str | None
    direction: str
    threshold: float

    def series(self) -> dict[str, Any]:
        """These fields alone, to build the other kind of record of the same series."""
        return {f.name: getattr(self, f.name) for f in fields(Series)}


@dataclass
class SeriesPair(Series):
    """What the comparison of one series needs. ``base_status``/``head_status`` say what a side has
    (``ok`` | ``failed`` | ``not_run`` | ``absent``, and at head ``missing``); None: ``ok`` for a finite
    value, else ``failed``."""

    base: float | None
    head: float | None
    base_samples: list[float] = field(default_factory=list)
    head_samples: list[float] = field(default_factory=list)
    base_ci: tuple[float, float] | None = None
    head_ci: tuple[float, float] | None = None
    history_sigma: float | None = None  # run-to-run noise (log units) on this machine
    history_runs: int = 0
    base_offset: float = 0.0  # log(base's level / base), ``results.Noise.offset``: a base run off its own level
    base_status: str | None = None
    head_status: str | None = None
    changed: bool = False  # the benchmark's asv versions at base and head share none (:data:`CHANGED`)


@dataclass
class Comparison(Series):
    """One series, head against base. ``status`` is one of :data:`STATUSES`; ``ratio`` is
    :func:`change_ratio` (head / base, not the detector's step ratio); ``slowdown`` > 1 is worse."""

    status: str
    base_status: str
    head_status: str
    base: float | None
    head: float | None
    ratio: float | None
    slowdown: float | None
    significant: bool
    regression: bool  # status == "regressed" (kept as its own JSON field for CI scripts)
    method: str  # how significance was judged
    p_value: float | None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("ratio", "slowdown", "p_value", "base", "head"):
            v = d[k]
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        return d


def change_ratio(base: float | None, head: float | None) -> float | None:
    """Compare's ratio: ``head / base`` of two commits' results, None unless both are finite and > 0 (values of
    0 or below are compared by their relative change instead: :func:`_compare_signed`)."""
    if base is None or head is None or not (math.isfinite(base) and math.isfinite(head)):
        return None
    if base <= 0 or head <= 0:
        return None
    return head / base


def change_text(status: str, base: float | None, head: float | None, direction: str | None) -> str:
    """A row's change cell, the same in the text table and the dashboard: the value's own change, worse or
    better (``-`` where a side is missing); a changed benchmark's (new asv version) is not judged."""
    return "not compared" if status == CHANGED else fmt_value_change(base, head, direction)


def fails_check(c: Comparison) -> bool:
    """Whether a row fails a pull request's check: regressed, failed or missing. A failure on both sides fails it
    too: a pull request's run measures base and head with the head's suite (scripts/pr.sh), so a benchmark the pull
    request changed can fail on base as well; one broken before it fails every pull request until it is fixed or
    declared removed (the report says "on both" and why)."""
    return c.status in FAILING


def exit_status(comparisons: list[Comparison]) -> int:
    """A check's exit status: 1 when any row fails it (:func:`fails_check`), else 0."""
    return 1 if any(fails_check(c) for c in comparisons) else 0


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _side(value: float | None, declared: str | None) -> str:
    if declared not in (None, *SIDES):
        raise ValueError(f"side status must be one of {', '.join(SIDES)}; got {declared!r}")
    if declared not in (None, SIDE_OK):
        return declared
    return SIDE_OK if _finite(value) else SIDE_FAILED


def status_without_values(base_side: str, head_side: str) -> str | None:
    """The status of a series that cannot be compared, or None when both sides have a value."""
    if base_side == SIDE_FAILED and head_side == SIDE_OK:
        return REPAIRED
    if base_side == SIDE_FAILED and head_side == SIDE_ABSENT:
        return REMOVED  # broken on base and gone from head: nothing measured is lost (skipped at head: FAILED)
    if SIDE_FAILED in (base_side, head_side):
        return FAILED
    if head_side == SIDE_MISSING:
        return MISSING if base_side == SIDE_OK else NOT_RUN
    if base_side == SIDE_ABSENT:
        return NEW if head_side == SIDE_OK else NOT_RUN
    if head_side == SIDE_ABSENT:
        return REMOVED if base_side == SIDE_OK else NOT_RUN
    if SIDE_NOT_RUN in (base_side, head_side):
        return NOT_RUN
    return None


def compare_pair(pair: SeriesPair, *, alpha: float = DEFAULT_ALPHA, z_crit: float = DEFAULT_Z) -> Comparison:
    """Head against base for one series: its status, ratio and significance."""
    return compare_many([pair], alpha=alpha, z_crit=z_crit)[0]


def compare_many(
    pairs: list[SeriesPair], *, alpha: float = DEFAULT_ALPHA, z_crit: float = DEFAULT_Z
) -> list[Comparison]:
    """:func:`compare_pair` of each pair, with the samples' tests run together (fast on many series)."""
    prepared = [_prepare(p) for p in pairs]
    tested = mann_whitney_many(
        [
            (p.base_samples, p.head_samples) if prep.status is None and not p.changed else ([], [])
            for p, prep in zip(pairs, prepared, strict=True)
        ],
        alpha,
    )
    return [_compare(p, prep, alpha, z_crit, pv) for p, prep, pv in zip(pairs, prepared, tested, strict=True)]


class _Prepared(NamedTuple):
    base_side: str
    head_side: str
    status: str | None  # the status of a series that cannot be compared (``status_without_values``)
    ratio: float | None  # head / base when comparable, else None


def _prepare(pair: SeriesPair) -> _Prepared:
    base_side, head_side = _side(pair.base, pair.base_status), _side(pair.head, pair.head_status)
    status = status_without_values(base_side, head_side)
    return _Prepared(base_side, head_side, status, change_ratio(pair.base, pair.head) if status is None else None)


def _compare(pair: SeriesPair, prep: _Prepared, alpha: float, z_crit: float, p: float | None) -> Comparison:
    """One series given its sides, status and ratio, and the p-value of its samples' test (None: too few
    samples)."""
    base_side, head_side, status, ratio = prep
    common = dict(
        pair.series(),
        base_status=base_side,
        head_status=head_side,
        base=pair.base if base_side == SIDE_OK else None,
        head=pair.head if head_side == SIDE_OK else None,
    )
    if status is not None:  # a side without a value
        return Comparison(**common, status=status, ratio=None, slowdown=None, significant=False, regression=False,
                          method="none", p_value=None)  # fmt: skip
    if pair.changed:  # different code on each side: shown for reference, never judged
        return Comparison(**common, status=CHANGED, ratio=ratio,
                          slowdown=None if ratio is None else slowdown(ratio, pair.direction), significant=False,
                          regression=False, method="version", p_value=None)  # fmt: skip
    if ratio is None:
        return _compare_signed(pair, common, alpha, p)
    worse = slowdown(ratio, pair.direction)
    history = pair.history_sigma is not None and pair.history_runs >= MIN_HISTORY_RUNS
    z_hist = None
    sides = ratio_sides(worse, pair.threshold)
    if history:
        sigma = max(float(pair.history_sigma), 1e-9)
        # Against the base run and against the base's level alike: a base run that stood out of its own level
        # (OpenBLAS syrk: 35.5-36.2 us for 16 commits either side, 28.2 at the base) made the head's return to
        # that level a "regression" at p 1e-156 (a review); over OpenBLAS's 266 consecutive pairs 555 regressions
        # with the base run alone, 303 with the level too (benchmarks.scripts.compare_quiet).
        to_level = math.log(ratio) - pair.base_offset
        z_hist = min(abs(math.log(ratio)), abs(to_level)) / (sigma * math.sqrt(2.0))
        level_sides = ratio_sides(slowdown(math.exp(to_level), pair.direction), pair.threshold)
        sides = (sides[0] and level_sides[0], sides[1] and level_sides[1])
    if p is not None and z_hist is not None:
        significant, method = p < alpha and z_hist >= z_crit, "mann-whitney+history"
    elif p is not None:
        significant, method = p < alpha, "mann-whitney"
    elif z_hist is not None:
        significant, method = z_hist >= z_crit, "history"
        p = float(math.erfc(z_hist / math.sqrt(2.0)))
    elif (ci := intervals_apart(pair.base_ci, pair.head_ci)) is not None:
        significant, method = ci, "ci99"
    else:
        significant, method = None, _without_evidence(pair)
    return _verdict(common, significant, *sides, method, p, ratio, worse)


def ratio_sides(worse: float, threshold: float) -> tuple[bool, bool]:
    """(worse, better) of a change by its slowdown factor (``direction.slowdown``): past the threshold either way."""
    return worse > 1.0 + threshold, worse < 1.0 / (1.0 + threshold)


def _without_evidence(pair: SeriesPair) -> str:
    """The method of a change with no samples, intervals or history: ``threshold`` for a memory benchmark (judged
    by the threshold alone, asv's fallback: bytes allocated have no timing noise), else ``none`` (untested beyond
    the threshold). :func:`_verdict` reads the significance from it."""
    return "threshold" if benchmark_type(pair.benchmark) in ("memory", "peakmemory") else "none"


def _verdict(common: dict[str, Any], significant: bool | None, worse: bool, better: bool, method: str, p: float | None,
             ratio: float | None = None, slowdown: float | None = None) -> Comparison:  # fmt: skip
    """The row: a regression is a significant change past the threshold the worse way, an improvement the
    other way, a change past it that nothing could test (``significant`` None) untested, anything else
    unchanged."""
    status, significant = status_of(significant, worse, better, method)
    return Comparison(**common, status=status, ratio=ratio, slowdown=slowdown, significant=significant,
                      regression=status == REGRESSED, method=method, p_value=p)  # fmt: skip


def status_of(significant: bool | None, worse: bool, better: bool, method: str) -> tuple[str, bool]:
    """The status of a change past the threshold the worse way (``worse``) or the better way, and whether it is
    significant: :func:`_verdict`'s rule, which :func:`regressions.pr_schema.recheck` applies to a row read back."""
    if method == "threshold":  # judged by the threshold alone: significant exactly where the change passes it
        significant = worse or better
    if significant:
        return REGRESSED if worse else IMPROVED if better else UNCHANGED, True
    return UNTESTED if significant is None and (worse or better) else UNCHANGED, False


def _compare_signed(pair: SeriesPair, common: dict[str, Any], alpha: float, p: float | None) -> Comparison:
    """Both sides measured, one of them 0 or below: no ratio, so the value's own relative change decides
    (the module docstring's rule); ``ratio`` and ``slowdown`` stay None."""
    change = relative_change(pair.base, pair.head) or 0.0
    if p is not None:
        significant, method = p < alpha, "mann-whitney"
    elif (ci := intervals_apart(pair.base_ci, pair.head_ci)) is not None:
        significant, method = ci, "ci99"
    elif change and 0.0 in (pair.base, pair.head):
        significant, method = True, "zero"
    else:
        significant, method = None, _without_evidence(pair)
    return _verdict(common, significant, *signed_sides(change, pair.threshold, pair.direction), method, p)


def signed_sides(change: float, threshold: float, direction: str) -> tuple[bool, bool]:
    """(worse, better) of a value's own relative change: the ratio rule on 1 + change, a rise past +t, a fall past
    -t / (1 + t) (a ratio below 1 / (1 + t)); which of the two is worse follows the direction."""
    rise, fall = change > threshold, change < -threshold / (1.0 + threshold)
    return (rise, fall) if direction == UP_IS_WORSE else (fall, rise)


def compare_commits(
    session: Session,
    base: Commit,
    head: Commit,
    *,
    machines: list[str] | None = None,
    settings: Settings | None = None,
    alpha: float = DEFAULT_ALPHA,
    whole_suite: bool = False,
    base_level: bool = True,
) -> list[Comparison]:
    """Every series of ``machines`` (default: the machines with runs at both commits) at ``head`` against
    ``base``, ordered by machine (as given), benchmark and parameter values.

    A commit's result is ``results_at`` (the median over its runs); thresholds and directions come from
    ``settings`` (default: built-in, no configuration file); the noise of a series is its history on that
    machine up to the base (the change under test must not widen it). Each series' params are in asv's
    ``param_names`` order, and series sort by their values, numbers numerically (``regressions.labels``).
    ``whole_suite``: head ran every benchmark (a pull request's run), so one absent there whose whole asv module is
    absent too is missing (not a partial run) unless its removal is declared. ``base_level`` False judges the
    history against the base run alone (``benchmarks.scripts.compare_quiet`` measures the two rules side by side).
    """
    settings = settings or Settings()
    measured_base = set(machines_with(session, [base.id]))
    measured_head = set(machines_with(session, [head.id]))
    if machines is None:
        machines = sorted(measured_base & measured_head)  # those with runs at both
    pairs: list[SeriesPair] = []
    names = param_names(session)
    for machine in machines:
        sides = read_sides(session, base.id, head.id, machine)
        versions = sides.versions
        merged = sides.base.merge(sides.head, on=["benchmark", "params_key", "env"], how="outer", suffixes=("_b", "_h"),
                                  sort=True)  # fmt: skip
        merged = merged[~merged["benchmark"].map(lambda name: is_provenance(str(name)))]
        if merged.empty:
            continue
        both_ok = merged[(merged["status_b"] == "ok") & (merged["status_h"] == "ok")]
        noise = history_noise(
            session, machine, zip(both_ok["benchmark"], both_ok["params_key"], strict=True), upto=[base.id]
        )
        absent_base = SIDE_ABSENT if machine in measured_base else SIDE_NOT_RUN
        absent_head = SIDE_ABSENT if machine in measured_head else SIDE_NOT_RUN
        for row in merged.to_dict("records"):
            name = str(row["benchmark"])
            side = "_h" if isinstance(row["status_h"], str) else "_b"  # the newer description when both
            unit = _text(row[f"unit{side}"])
            sigma, runs, offset = noise.get((name, row["params_key"]), (None, 0, 0.0))
            params = ordered_params(row[f"params{side}"], names.get(name))
            pair = SeriesPair(
                benchmark=name,
                params={**params, ENV_PARAM: row["env"]} if row["env"] else params,
                machine=machine,
                unit=unit,
                direction=direction_for(name, unit, settings),
                threshold=settings.threshold_for(name),
                base=_number(row["value_b"]),
                head=_number(row["value_h"]),
                base_samples=_list(row["samples_b"]),
                head_samples=_list(row["samples_h"]),
                base_ci=_ci(row["ci_99_a_b"], row["ci_99_b_b"]),
                head_ci=_ci(row["ci_99_a_h"], row["ci_99_b_h"]),
                history_sigma=sigma,
                history_runs=runs,
                base_offset=offset if base_level else 0.0,
                base_status=_SIDE_OF_STORE_STATUS.get(row["status_b"], absent_base),
                head_status=_SIDE_OF_STORE_STATUS.get(row["status_h"], absent_head),
            )
            if _undeclared_removal(pair, versions, settings, whole_suite):
                pair.head_status = SIDE_MISSING
            pair.changed = _version_changed(name, versions)
            pairs.append(pair)
    order = {m: i for i, m in enumerate(machines)}
    pairs.sort(key=lambda q: (order[q.machine], series_rank(q.benchmark, q.params)))
    return compare_many(pairs, alpha=alpha)


def _undeclared_removal(pair: SeriesPair, versions: tuple[dict[str, set[str | None]], dict[str, set[str | None]]],
                        settings: Settings, whole_suite: bool) -> bool:  # fmt: skip
    """Measured at base, absent or skipped at head while its asv module ran there (``policy.module_ran``; any
    module with ``whole_suite``), and the removal not declared: no new asv version of the benchmark at head, not in
    the configuration's ``removed`` list."""
    if pair.base_status != SIDE_OK or pair.head_status not in (SIDE_ABSENT, SIDE_NOT_RUN):
        return False
    at_base, at_head = versions
    if not whole_suite and not module_ran([pair.benchmark], at_head):
        return False
    bumped = pair.benchmark in at_head and not (at_head[pair.benchmark] & at_base.get(pair.benchmark, set()))
    return not bumped and not settings.is_removed(pair.benchmark, case_params(pair.params))


def _version_changed(name: str, versions: tuple[dict[str, set[str | None]], dict[str, set[str | None]]]) -> bool:
    """The benchmark ran on both sides and its asv versions there share none (a result without a version, from
    a file without the column, matches any: detection continues its segment too)."""
    at_base, at_head = versions
    if name not in at_base or name not in at_head or None in at_base[name] | at_head[name]:
        return False
    return not (at_base[name] & at_head[name])


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _list(value: Any) -> list[float]:
    return list(value) if isinstance(value, list) else []


def _ci(a: Any, b: Any) -> tuple[float, float] | None:
    a, b = _number(a), _number(b)
    return None if a is None or b is None else (a, b)
