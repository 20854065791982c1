"""The rounds of the real-noise detection benchmark (benchmarks/scripts/detect_real.py): planning the
injected steps and machine-wide events, writing each history, running both detectors on it and scoring
their flags into the methods' tallies."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.scripts.detect_real_cases import CaseTally, plan_cases, run_cases
from benchmarks.scripts.detect_real_data import (
    History,
    SeriesKey,
    flat_series,
    load_history,
    write_errors,
    write_history,
)
from benchmarks.scripts.detect_real_methods import Detection, Flag, MlaperfStore, asv_detect
from benchmarks.scripts.detect_real_model import (
    BUCKETS,
    METHODS,
    MW_JITTER,
    MW_RANGE,
    TOLERANCE,
    EventResult,
    Injection,
    MethodReport,
    Options,
    StepTally,
)

# numpy is imported in the functions: asv imports every module under benchmarks/ at discovery, where this
# script must cost nothing and need nothing beyond the standard library.
if TYPE_CHECKING:
    import numpy as np


# ---------------------------------------------------------------------------------------------------
# Planning injections


def _by_machine(keys: Iterable[SeriesKey]) -> dict[str, list[SeriesKey]]:
    out: dict[str, list[SeriesKey]] = defaultdict(list)
    for k in keys:
        out[k[0]].append(k)
    return dict(out)


def plan_steps(history: History, flat: list[SeriesKey], rng: np.random.Generator, opts: Options) -> list[Injection]:
    """One step per chosen flat series: ``inside_fraction`` of each machine's flat series inside the
    history (>= 5 values before, >= 3 after, in the history without its held-back newest run) and
    ``newest_per_machine`` at the machine's newest commit of that history."""
    import numpy as np

    injections: list[Injection] = []
    for machine, keys in sorted(_by_machine(flat).items()):
        n = len(history.runs[machine])
        newest = n - 2  # the held-back run n - 1 comes later
        order = [keys[i] for i in rng.permutation(len(keys))]
        newest_keys: list[SeriesKey] = []
        inside_keys: list[SeriesKey] = []
        n_inside = round(opts.inside_fraction * len(keys))
        for key in order:
            v = history.series[key].values
            at_end = np.isfinite(v[newest]) and np.isfinite(v[n - 1])
            if len(newest_keys) < opts.newest_per_machine and at_end:
                newest_keys.append(key)
            elif len(inside_keys) < n_inside:
                inside_keys.append(key)
        for key in newest_keys:
            injections.append(Injection(key, 0.0, 0, "newest", newest, newest))
        for key in inside_keys:
            s = history.series[key]
            valid = s.valid[s.valid < n - 1]
            if valid.size < 8:
                continue
            lo, hi = int(valid[4]) + 1, int(valid[-3])
            if lo > hi:
                continue
            pos = int(rng.integers(lo, hi + 1))
            label = int(valid[np.searchsorted(valid, pos)])
            injections.append(Injection(key, 0.0, 0, "inside", pos, label))
    # Sizes balanced over the buckets, uniform within each.
    for i, k in enumerate(rng.permutation(len(injections))):
        inj = injections[int(k)]
        inj.bucket = i % len(BUCKETS)
        lo, hi = BUCKETS[inj.bucket]
        inj.slowdown = float(rng.uniform(lo, hi))
    return injections


FactorMap = dict[str, dict[int, dict[tuple[str, int], float]]]  # machine -> position -> measurement -> factor


def step_factors(history: History, injections: Sequence[Injection]) -> FactorMap:
    factors: FactorMap = defaultdict(lambda: defaultdict(dict))
    for inj in injections:
        machine, bench, _ = inj.key
        f = history.worse(inj.key, inj.slowdown)
        indices = history.series[inj.key].indices
        for pos in range(inj.pos, len(history.runs[machine])):
            if indices[pos] >= 0:
                factors[machine][pos][(bench, int(indices[pos]))] = f
    return factors


def plan_event(
    history: History, machine: str, where: str, rng: np.random.Generator, opts: Options
) -> tuple[int, float, dict[tuple[str, int], float]]:
    """A one-run machine-wide event: position, the machine's factor, and the changed measurements."""
    import numpy as np

    n = len(history.runs[machine])
    pos = int(rng.integers(max(8, n // 4), n - 5)) if where == "inside" else n - 2
    factor = float(rng.uniform(*MW_RANGE))
    changes: dict[tuple[str, int], float] = {}
    for key in sorted(k for k in history.series if k[0] == machine):
        s = history.series[key]
        hit = rng.random() < opts.mw_fraction
        jitter = float(rng.normal(0.0, MW_JITTER))
        if hit and np.isfinite(s.values[pos]):
            slowdown = (1.0 + factor) * math.exp(jitter) - 1.0
            changes[(s.benchmark, int(s.indices[pos]))] = history.worse(key, slowdown)
    return pos, factor, changes


# ---------------------------------------------------------------------------------------------------
# Running both methods on a written history


class Bench:
    """One dataset: its history, flat series, work folder and the methods' reports."""

    def __init__(
        self, history: History, opts: Options, workdir: Path, reports: dict[str, MethodReport], cases: CaseTally
    ) -> None:
        self.cases = cases
        self.history = history
        self.opts = opts
        self.workdir = workdir
        self.reports = reports
        self.flat, self.excluded = flat_series(history, opts.rule)
        self.flat_set = set(self.flat)
        self.pos = {m: history.position(m) for m in history.runs}
        self.held_back = {m: len(r) - 1 for m, r in history.runs.items()}
        self._n = 0

    def _fresh(self, label: str) -> tuple[Path, MlaperfStore]:
        self._n += 1
        folder = self.workdir / f"{self._n:03d}-{label}"
        folder.mkdir(parents=True)
        return folder, MlaperfStore(folder / "store.sqlite", self.opts.threshold)

    def _detect(self, store: MlaperfStore, results: Path, factors: FactorMap) -> dict[str, Detection]:
        written = load_history(results, name=self.history.name)
        errors = write_errors(self.history, written, factors)
        if errors:
            raise RuntimeError(f"{results}: written values differ from the plan: {errors[:3]}")
        store.ingest(results)
        mine = store.detect()
        theirs = asv_detect(written, self.opts.threshold)
        out = {"mlaperf": mine, "asv.step_detect": theirs}
        for m, d in out.items():
            self.reports[m].detect_seconds += d.seconds
            self.reports[m].detections += 1
        return out

    def baseline(self) -> None:
        """The unmodified history, whole and without its newest runs: flags already there."""
        folder, store = self._fresh("baseline")
        results = write_history(self.history, folder, {}, self.held_back)
        self.base_trunc = self._detect(store, results, {})
        results = write_history(self.history, folder, {})
        self.base_full = self._detect(store, results, {})
        for m, d in self.base_full.items():
            self.reports[m].baseline_open += sum(f.open for f in d.flags)
            self.reports[m].baseline_flat_open += sum(f.open and f.key in self.flat_set for f in d.flags)
            self.reports[m].baseline_states.update(_state([f]) for f in d.flags)

    def steps_round(self, rng: np.random.Generator, r: int) -> None:
        injections = plan_steps(self.history, self.flat, rng, self.opts)
        factors = step_factors(self.history, injections)
        folder, store = self._fresh(f"steps-r{r}")
        first = self._detect(store, write_history(self.history, folder, factors, self.held_back), factors)
        then = self._detect(store, write_history(self.history, folder, factors), factors)
        series_commits = sum(int(self.history.series[k].ran[: self.held_back[k[0]]].sum()) for k in self.flat)
        step_commits = len({(i.key[0], i.label) for i in injections})
        for m in METHODS:
            self._score_steps(self.reports[m].steps, injections, first[m], then[m], m == "mlaperf")
            self.reports[m].steps.series_commits += series_commits
            self.reports[m].steps.step_commits += step_commits

    def _positions(self, flags: Iterable[Flag]) -> dict[SeriesKey, list[tuple[int, Flag]]]:
        out: dict[SeriesKey, list[tuple[int, Flag]]] = defaultdict(list)
        for f in flags:
            if f.key in self.flat_set and f.commit in self.pos[f.machine]:
                out[f.key].append((self.pos[f.machine][f.commit], f))
        return out

    def _score_steps(
        self, t: StepTally, injections: list[Injection], first: Detection, then: Detection, is_mlaperf: bool
    ) -> None:
        flagged = self._positions(first.flags)
        later = self._positions(then.flags)
        by_key = {i.key: i for i in injections}
        groups: set[Any] = set()
        for key in self.flat:
            marks = sorted(flagged.get(key, []), key=lambda pf: pf[0])
            groups.update(f.group if is_mlaperf else (f.machine, f.commit) for _p, f in marks)
            inj = by_key.get(key)
            if inj is not None:
                t.total[inj.bucket] += 1
                near = [pf for pf in marks if abs(pf[0] - inj.label) <= TOLERANCE]
                if near:
                    best = min(near, key=lambda pf: abs(pf[0] - inj.label))
                    marks.remove(best)
                    t.found[inj.bucket] += 1
                    t.exact += best[0] == inj.label
                elif inj.bucket >= 1:
                    t.misses.append(
                        f"{self._where(key, inj.label)}: {inj.where} step {inj.slowdown:+.1%} missed"
                        f" (flags at {[p for p, _ in marks] or 'none'})"
                    )
                if inj.where == "newest" and inj.bucket >= 1:
                    t.newest_total += 1
                    t.newest_found += bool(near)
                    t.confirmed_of += 1
                    again = [f for p, f in later.get(key, []) if abs(p - inj.label) <= TOLERANCE]
                    if is_mlaperf:
                        # Confirmed: listed again with status "new".
                        status = again[0].status if again else "not listed"
                        t.confirmed_statuses[str(status)] += 1
                        t.confirmed += status == "new"
                    else:
                        t.confirmed += bool(again)
            for p, f in marks:
                # A false alarm is still open after one more run: mlaperf lists it as suspect, new or
                # acknowledged (not closed as transient, fixed or retired); asv still lists it.
                again = [g for q, g in later.get(key, []) if q == p]
                still_open = any(g.open for g in again)
                after = _state(again)
                t.raised += 1
                t.raised_after[after] += 1
                t.false_alarms += still_open
                if still_open:
                    t.alarm_commits[(f"{self.history.name} {f.machine}", f.commit[:8])] += 1
                t.alarms.append(f"{self._where(key, p)}: false flag ({_state([f])}; after one more run: {after})")
        t.groups += len(groups)

    def _where(self, key: SeriesKey, pos: int) -> str:
        machine, bench, pkey = key
        return (
            f"{self.history.name} {machine} {bench} {pkey} at run {pos} ({self.history.runs[machine][pos].commit[:8]})"
        )

    def event_round(self, rng: np.random.Generator, r: int, where: str) -> None:
        factors: FactorMap = {}
        events: dict[str, tuple[int, float, int]] = {}
        for machine in sorted(self.history.runs):
            pos, factor, changes = plan_event(self.history, machine, where, rng, self.opts)
            factors[machine] = {pos: changes}
            events[machine] = (pos, factor, len(changes))
        folder, store = self._fresh(f"event-{where}-r{r}")
        upto = self.held_back if where == "newest" else None
        first = self._detect(store, write_history(self.history, folder, factors, upto), factors)
        then = self._detect(store, write_history(self.history, folder, factors), factors) if where == "newest" else None
        base = self.base_trunc if where == "newest" else self.base_full
        for m in METHODS:
            for machine, (pos, factor, affected) in events.items():
                commit = self.history.runs[machine][pos].commit
                known = {f.key for f in base[m].flags if f.machine == machine and f.commit == commit}
                at = [f for f in first[m].flags if f.machine == machine and f.commit == commit and f.key not in known]
                res = EventResult(
                    dataset=self.history.name,
                    machine=machine,
                    where=where,
                    commit=commit,
                    affected=affected,
                    factor=factor,
                    flags=len(at),
                    open=sum(f.open for f in at),
                    groups=self._groups(at, m),
                    open_groups=self._groups([f for f in at if f.open], m),
                    machine_wide=any(bool(f.machine_wide) for f in at) if m == "mlaperf" else None,
                    statuses=dict(Counter(str(f.status) for f in at)) if m == "mlaperf" else {},
                )
                if then is not None:
                    after = [
                        f for f in then[m].flags if f.machine == machine and f.commit == commit and f.key not in known
                    ]
                    res.after_flags = len(after)
                    res.after_open = sum(f.open for f in after)
                    res.after_statuses = dict(Counter(str(f.status) for f in after)) if m == "mlaperf" else {}
                self.reports[m].events.append(res)

    def cases_round(self, rng: np.random.Generator, r: int) -> None:
        """The cases of issue 27 (benchmarks/scripts/detect_real_cases.py), --full and night by night."""
        self._n += 1
        folder = self.workdir / f"{self._n:03d}-cases-r{r}"
        folder.mkdir(parents=True)
        run_cases(self.history, plan_cases(self.history, self.flat, rng), folder, self.opts.threshold, self.cases)

    @staticmethod
    def _groups(flags: list[Flag], method: str) -> int:
        if method != "mlaperf":
            return len({(f.machine, f.commit) for f in flags})
        return len({f.group for f in flags})


def _state(flags: list[Flag]) -> str:
    """What a detector says of a flag: mlaperf its status(es), asv 'listed'; 'not listed' when absent."""
    if not flags:
        return "not listed"
    return ",".join(sorted({f.status or "listed" for f in flags}))
