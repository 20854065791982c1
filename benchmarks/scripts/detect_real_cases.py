"""The cases of issue 27 for the real-noise benchmark (benchmarks/scripts/detect_real.py), on the same real
histories, injected into the last ``REPLAY`` runs of every machine:

- version change: two benchmarks get a new asv version (benchmarks.json lists it) and, on their flat
  series, a step 8 runs before it (an alert of the old version, which must close when the version ends: the
  new version measures other work, at a level ``NEW_VERSION_SHIFT`` better) and another at the new version's
  second run (must be found at that exact commit);
- multi-benchmark event: every flat series of three other benchmarks (up to 35) gets 5-31% worse at one
  commit and stays there (found, and shown as one group);
- excursion that returns: six flat series are 20-40% worse for two runs, then back (no alert left open);
- failure gap: four flat series have a lone outlier 12% on the better side, four failed runs, then a
  15-30% step (found, with a culprit range that spans the gap: its parent is before the outlier);
- drift: four flat series get 0.3-0.5% worse at each of ``DRIFT_RUNS`` runs in a row (7.5-12.7% in all, and
  no stretch of a few runs near the 5% threshold) and stay there (found: a flag inside the drift).

mlaperf runs twice on the written history: ``detect --full`` once, and night by night (the history without
its last REPLAY runs, then one run per machine a night, incremental detect after each); the two must end in
the same statuses (an alert only the nightly raised must be closed). asv.step_detect runs on the whole
history as `asv publish` would. Numpy and the project are imported in the functions (asv imports every
module under benchmarks/ at discovery).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.scripts.detect_real_data import History, SeriesKey, write_history
from benchmarks.scripts.detect_real_methods import Detection, Flag, MlaperfStore, asv_detect

if TYPE_CHECKING:
    import numpy as np

REPLAY = 30  # runs per machine replayed night by night
MIN_RUNS = 40  # a machine with fewer runs gets no cases
OPEN = frozenset({"suspect", "new", "acknowledged"})
NEW_VERSION_SHIFT = 0.5  # the new version of a bumped benchmark: a level 1.5x better (other work measured)
DRIFT_RUNS = 24  # runs of a drift, each a little worse than the one before


@dataclass
class Case:
    kind: str  # version | old_version | event | excursion | gap | drift
    key: SeriesKey
    pos: int  # the run a detector should flag (drift: its first run)
    before_gap: int | None = None  # gap: the last run at the old level, before the outlier
    end: int | None = None  # drift: its last run (a flag from pos to one run after it finds it)


@dataclass
class CasePlan:
    cases: list[Case] = field(default_factory=list)
    factors: dict[str, dict[int, dict[tuple[str, int], float]]] = field(default_factory=dict)
    bumps: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)
    version_at: dict[str, int] = field(default_factory=dict)  # machine -> first run of the new version


@dataclass
class CaseTally:
    """Scores of the cases, summed over rounds (per method where both apply)."""

    found: Counter = field(default_factory=Counter)  # (method, kind) -> found
    total: Counter = field(default_factory=Counter)  # kind -> injected
    open_end: Counter = field(default_factory=Counter)  # (method, kind) -> still open/listed at the end
    event_groups: Counter = field(default_factory=Counter)  # method -> groups of the event's flags
    event_kinds: Counter = field(default_factory=Counter)  # group kinds of the event's flags (mlaperf)
    events: int = 0
    gap_spans: int = 0  # gap steps found whose culprit range spans the gap (mlaperf)
    ended_open: int = 0  # open mlaperf alerts in ended version segments
    ended_alerts: int = 0  # mlaperf alerts in ended version segments
    disagreements: list[str] = field(default_factory=list)  # --full vs nightly
    alerts_compared: int = 0
    nightly_only_closed: int = 0


def _free(history: History, key: SeriesKey, positions: range) -> bool:
    import numpy as np

    v = history.series[key].values
    return bool(all(0 <= p < v.size and np.isfinite(v[p]) for p in positions))


def _scale(
    history: History, factors: dict[int, dict[tuple[str, int], float]], key: SeriesKey, runs: range, f: float
) -> None:
    """Multiply the measurements of ``key`` at ``runs`` by ``f`` (NaN: the runs failed)."""
    s = history.series[key]
    for p in runs:
        if s.indices[p] >= 0:
            cell = (key[1], int(s.indices[p]))
            factors[p][cell] = factors[p].get(cell, 1.0) * f


def plan_cases(history: History, flat: list[SeriesKey], rng: np.random.Generator) -> CasePlan:
    """The cases of every machine (module docstring); the same two benchmarks get the new version on
    every machine that has flat series of them."""
    plan = CasePlan()
    by_machine: dict[str, list[SeriesKey]] = defaultdict(list)
    for k in flat:
        by_machine[k[0]].append(k)
    benches = sorted({k[1] for k in flat})
    counts = Counter(k[1] for k in flat)
    bumped = frozenset(sorted(benches, key=lambda b: (-counts[b], b))[:2])
    for machine, keys in sorted(by_machine.items()):
        n = len(history.runs[machine])
        if n < MIN_RUNS:
            continue
        v, e, x, g = n - 24, n - 16, n - 10, n - 22
        factors: dict[int, dict[tuple[str, int], float]] = defaultdict(dict)
        used: set[SeriesKey] = set()

        plan.bumps[machine] = (v, bumped)
        plan.version_at[machine] = v
        for key in (k for k in keys if k[1] in bumped and _free(history, k, range(v - 10, n))):
            # The new version measures other work: its level is a third off the old one, so it does not join the
            # regressed level and the old version's alert retires (a version that joins it carries the alert on).
            _scale(history, factors, key, range(v - 8, n), history.worse(key, float(rng.uniform(0.10, 0.30))))
            _scale(history, factors, key, range(v, n), 1.0 / history.worse(key, NEW_VERSION_SHIFT))
            _scale(history, factors, key, range(v + 1, n), history.worse(key, float(rng.uniform(0.07, 0.30))))
            plan.cases += [Case("old_version", key, v - 8), Case("version", key, v + 1)]
            used.add(key)
        others = [b for b in benches if b not in bumped]
        order = [others[i] for i in rng.permutation(len(others))]
        event = [k for b in order[:3] for k in keys if k[1] == b and _free(history, k, range(e - 6, n))][:35]
        for key in event:
            _scale(history, factors, key, range(e, n), history.worse(key, float(rng.uniform(0.05, 0.31))))
            plan.cases.append(Case("event", key, e))
        used.update(event)
        rest = [k for k in keys if k not in used and k[1] not in bumped]
        rest = [rest[i] for i in rng.permutation(len(rest))]
        for key in [k for k in rest if _free(history, k, range(x - 6, x + 5))][:6]:
            _scale(history, factors, key, range(x, x + 2), history.worse(key, float(rng.uniform(0.20, 0.40))))
            plan.cases.append(Case("excursion", key, x))
            used.add(key)
        for key in [k for k in rest if k not in used and _free(history, k, range(g - 6, g + 10))][:4]:
            # A lone run 12% on the better side, four failed runs, then the step.
            _scale(history, factors, key, range(g, g + 1), 1.0 / history.worse(key, 0.12))
            _scale(history, factors, key, range(g + 1, g + 5), math.nan)
            _scale(history, factors, key, range(g + 5, n), history.worse(key, float(rng.uniform(0.15, 0.30))))
            plan.cases.append(Case("gap", key, g + 5, before_gap=g - 1))
            used.add(key)
        d = n - 29
        for key in [k for k in rest if k not in used and _free(history, k, range(d - 6, n))][:4]:
            for run in range(d, d + DRIFT_RUNS):
                _scale(history, factors, key, range(run, n), history.worse(key, float(rng.uniform(0.003, 0.005))))
            plan.cases.append(Case("drift", key, d, end=d + DRIFT_RUNS - 1))
        plan.factors[machine] = dict(factors)
    return plan


def _flags_at(detection: Detection) -> dict[SeriesKey, list[Flag]]:
    out: dict[SeriesKey, list[Flag]] = defaultdict(list)
    for f in detection.flags:
        out[f.key].append(f)
    return out


def run_cases(history: History, plan: CasePlan, folder: Path, threshold: float, tally: CaseTally) -> None:
    """Write the history with the plan, run --full, the nightly replay and asv, and score the cases (a
    plan without cases, as on a short history, does nothing)."""
    if not plan.cases:
        return
    full_store = MlaperfStore(folder / "full.sqlite", threshold)
    results = write_history(history, folder / "full", plan.factors, bumps=plan.bumps)
    full_store.ingest(results)
    full = full_store.detect()
    nightly_store = MlaperfStore(folder / "nightly.sqlite", threshold)
    lengths = {m: len(r) for m, r in history.runs.items() if m in plan.factors}
    nightly = None
    for night in range(REPLAY + 1):
        upto = {m: n - REPLAY + night for m, n in lengths.items()}
        nightly_store.ingest(write_history(history, folder / "nightly", plan.factors, upto, plan.bumps))
        nightly = nightly_store.detect()
    assert nightly is not None
    from benchmarks.scripts.detect_real_data import load_history

    theirs = asv_detect(load_history(results, name=history.name), threshold)
    _score(history, plan, {"mlaperf": full, "asv.step_detect": theirs}, tally)
    _agreement(full, nightly, tally)


def _score(history: History, plan: CasePlan, detections: dict[str, Detection], tally: CaseTally) -> None:
    pos = {m: history.position(m) for m in history.runs}
    for c in plan.cases:
        if c.kind != "old_version":
            tally.total[c.kind] += 1
    for method, detection in detections.items():
        flags = _flags_at(detection)
        event_groups: set[Any] = set()
        for c in plan.cases:
            marks = [(pos[c.key[0]].get(f.commit, -99), f) for f in flags.get(c.key, [])]
            exact = c.kind in ("version", "old_version")  # a flag at the version boundary is no find
            near = [(p, f) for p, f in marks if (p == c.pos if exact else abs(p - c.pos) <= 1)]
            if c.end is not None:  # a drift: anywhere in it
                near = [(p, f) for p, f in marks if c.pos <= p <= c.end + 1]
            if c.kind == "old_version":
                if method == "mlaperf":
                    tally.ended_alerts += len(near)
                    tally.ended_open += sum(f.open for _p, f in near)
                continue
            tally.found[(method, c.kind)] += bool(near)
            tally.open_end[(method, c.kind)] += any(f.open for _p, f in near)
            if c.kind == "event":
                event_groups.update(f.group if method == "mlaperf" else (f.machine, f.commit) for _p, f in near)
                if method == "mlaperf":
                    tally.event_kinds.update(f.group_kind or "none" for _p, f in near)
            if c.kind == "gap" and method == "mlaperf" and near:
                parent = near[0][1].parent
                tally.gap_spans += parent is not None and pos[c.key[0]].get(parent, 10**9) <= (c.before_gap or 0)
        tally.event_groups[method] += len(event_groups)
    tally.events += len(plan.factors)


def _agreement(full: Detection, nightly: Detection, tally: CaseTally) -> None:
    a = {(f.key, f.commit): f.status for f in full.flags}
    b = {(f.key, f.commit): f.status for f in nightly.flags}
    for key in sorted(set(a) | set(b), key=str):
        tally.alerts_compared += 1
        if a.get(key) == b.get(key):
            continue
        if key not in a and b[key] not in OPEN:
            tally.nightly_only_closed += 1
            continue
        tally.disagreements.append(f"{key[0]} at {key[1][:8]}: --full {a.get(key)}, nightly {b.get(key)}")


def rows(t: CaseTally, methods: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """The table rows of the cases, one cell per method."""

    def pct(method: str, kind: str, what: Counter) -> str:
        n = t.total[kind]
        k = what[(method, kind)]
        return f"{k / n:.0%} ({k}/{n})" if n else "n/a"

    mine = methods[0]
    disagree = f"{len(t.disagreements)} of {t.alerts_compared} ({t.nightly_only_closed} closed, only nightly)"
    return [
        ("version change, step at its 2nd run: recall (exact)", [pct(m, "version", t.found) for m in methods]),
        ("  open alerts left in ended version segments", [f"{t.ended_open} of {t.ended_alerts}", "n/a"]),
        ("multi-benchmark event: recall", [pct(m, "event", t.found) for m in methods]),
        ("  groups showing the events", [f"{t.event_groups[m]} for {t.events} events" for m in methods]),
        ("excursion that returns: flagged", [pct(m, "excursion", t.found) for m in methods]),
        ("  open at the end", [str(t.open_end[(m, "excursion")]) for m in methods]),
        ("failure gap after an outlier: recall", [pct(m, "gap", t.found) for m in methods]),
        ("  culprit range spans the gap", [f"{t.gap_spans} of {t.found[(mine, 'gap')]}", "n/a"]),
        ("drift of 7.5-12.7% over 24 runs: recall", [pct(m, "drift", t.found) for m in methods]),
        ("--full vs night by night: alerts that differ", [disagree, "n/a"]),
    ]


def goals(t: CaseTally) -> list[dict[str, Any]]:
    n = t.total["version"]
    k = t.found[("mlaperf", "version")]
    drifts, found = t.total["drift"], t.found[("mlaperf", "drift")]
    return [
        {
            "goal": "drifts of 7.5-12.7% over 24 runs: recall >= 90%",
            "value": f"{found}/{drifts}",
            "pass": bool(drifts) and found >= 0.9 * drifts,
        },
        {
            "goal": "steps right after a version change: recall >= 95%",
            "value": f"{k}/{n}",
            "pass": bool(n) and k >= 0.95 * n,
        },
        {
            "goal": "full-vs-nightly statuses identical",
            "value": f"{len(t.disagreements)} alerts differ of {t.alerts_compared}",
            "pass": not t.disagreements,
        },
        {
            "goal": "open alerts in ended segments: 0",
            "value": f"{t.ended_open} open of {t.ended_alerts}",
            "pass": t.ended_open == 0 and t.ended_alerts > 0,
        },
    ]


def to_json(t: CaseTally) -> dict[str, Any]:
    return {
        "total": dict(t.total),
        "found": {f"{m}:{k}": v for (m, k), v in t.found.items()},
        "open_at_end": {f"{m}:{k}": v for (m, k), v in t.open_end.items()},
        "event_groups": dict(t.event_groups),
        "event_group_kinds": dict(t.event_kinds),
        "events": t.events,
        "gap_ranges_spanning": t.gap_spans,
        "ended_segment_alerts": t.ended_alerts,
        "ended_segment_open": t.ended_open,
        "full_vs_nightly_disagreements": t.disagreements,
        "alerts_compared": t.alerts_compared,
        "nightly_only_closed": t.nightly_only_closed,
    }
