"""Labelled synthetic benchmark histories with GPU-like noise, for tests and detection-quality benchmarks.

Noise model per series (all multiplicative, on a time in seconds):
- between-run offset: every run (commit) gets its own offset, sigma 0.4-1.8%, larger than the
  within-run spread of its samples (0.1-0.5%), as on GPUs where clocks and placement change per run;
- bimodal clocks (a third of the series): each run lands in a slow clock mode (+2-3%) with
  probability 0.2-0.5;
- one-off outliers: a run 10-60% slow with probability 1.5%, never two in a row (that is a level that
  came back) and never the newest run (one run alone cannot tell an outlier from a new level);
- failed runs: value missing (None) with probability 2%.
Events (at most one labelled regression per series plus unlabelled changes):
- regression steps of 7-100%, some on the newest commit, some reverted 2-5 commits later;
- speed-ups (improvements, not regressions) and sub-threshold steps (1-3%).
Throughput series (``track_tokens_per_s``, down is worse) carry the reciprocal of the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE


@dataclass
class SyntheticSeries:
    name: str
    direction: str
    values: list[float | None]
    samples: list[list[float] | None]
    regressions: list[int] = field(default_factory=list)  # labelled first-bad commit indices
    cases: list[str] = field(default_factory=list)  # noise and event kinds, for reporting


def _event_kinds(rng: np.random.Generator) -> list[str]:
    u = rng.random()
    if u < 0.45:
        kinds = [str(rng.choice(["step", "step", "step", "newest", "reverted"]))]
    elif u < 0.55:
        kinds = ["speedup"]
    elif u < 0.65:
        kinds = ["subthreshold"]
    else:
        kinds = []
    if kinds and kinds[0] in ("step", "reverted") and rng.random() < 0.2:
        kinds.append("speedup")
    return kinds


def _free_pos(rng: np.random.Generator, used: set[int], lo: int, hi: int) -> int:
    """A commit index in [lo, hi) more than 6 commits from every event already placed (recorded in ``used``)."""
    for _ in range(100):
        c = int(rng.integers(lo, hi))
        if all(abs(c - u) > 6 for u in used):
            used.add(c)
            return c
    raise RuntimeError("no room for another event")


def _place_events(rng: np.random.Generator, n: int, kinds: list[str]) -> tuple[np.ndarray, list[int]]:
    """The level multiplier per commit for the events ``kinds``, and the labelled regression commits."""
    level = np.ones(n)
    labels: list[int] = []
    used: set[int] = set()
    for kind in kinds:
        if kind == "newest":
            c = n - 1
            used.add(c)
            level[c:] *= 1 + rng.uniform(0.07, 1.0)
            labels.append(c)
        elif kind == "step":
            c = _free_pos(rng, used, 6, n - 1)
            level[c:] *= 1 + rng.uniform(0.07, 1.0)
            labels.append(c)
        elif kind == "reverted":
            c = _free_pos(rng, used, 6, n - 7)
            length = int(rng.integers(2, 6))
            level[c : c + length] *= 1 + rng.uniform(0.07, 1.0)
            used.update(range(c, c + length + 1))
            labels.append(c)
        elif kind == "speedup":
            c = _free_pos(rng, used, 6, n - 1)
            level[c:] /= 1 + rng.uniform(0.07, 1.0)
        elif kind == "subthreshold":
            c = _free_pos(rng, used, 6, n - 1)
            level[c:] *= 1 + rng.choice([-1, 1]) * rng.uniform(0.01, 0.03)
        else:
            raise ValueError(f"kinds: unknown event kind {kind!r}")
    return level, labels


def _run_noise(rng: np.random.Generator, n: int, cases: list[str]) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-run log offsets (between-run noise, bimodal clocks, outliers), the failed runs, and the
    within-run sigma; appends the noise kinds drawn to ``cases``."""
    between = rng.uniform(0.004, 0.018)
    within = rng.uniform(0.001, 0.005)
    offsets = rng.normal(0.0, between, n)
    if rng.random() < 1 / 3:
        cases.append("bimodal")
        gap, p_slow = rng.uniform(0.02, 0.03), rng.uniform(0.2, 0.5)
        offsets += np.where(rng.random(n) < p_slow, gap, 0.0)
    failed = rng.random(n) < 0.02
    failed[[0, 1]] = False
    outlier = rng.random(n) < 0.015
    outlier[1:] &= ~outlier[:-1]  # one-off: two equal runs in a row are a level, not an outlier
    outlier[np.flatnonzero(~failed)[-1]] = False
    if outlier.any():
        cases.append("outlier")
    offsets += np.where(outlier, rng.uniform(0.1, 0.6, n), 0.0)
    if failed.any():
        cases.append("failed")
    return offsets, failed, within


def _draw_samples(
    rng: np.random.Generator,
    base: float,
    level: np.ndarray,
    offsets: np.ndarray,
    failed: np.ndarray,
    within: float,
    n_samples: int,
    throughput: bool,
) -> tuple[list[float | None], list[list[float] | None]]:
    """The median and the samples of every run (None for a failed one): ``base`` times the run's level and
    offset, with the within-run noise."""
    values: list[float | None] = []
    samples: list[list[float] | None] = []
    for i in range(len(level)):
        if failed[i]:
            values.append(None)
            samples.append(None)
            continue
        t = base * level[i] * np.exp(offsets[i] + rng.normal(0.0, within, n_samples))
        s = 1.0 / t if throughput else t
        samples.append([float(x) for x in s])
        values.append(float(np.median(s)))
    return values, samples


def make_series(
    rng: np.random.Generator,
    n_commits: int = 60,
    *,
    name: str = "bench.Suite.time_case",
    kinds: list[str] | None = None,
    throughput: bool | None = None,
    n_samples: int = 10,
) -> SyntheticSeries:
    """One labelled series; ``kinds`` forces events (``step``, ``newest``, ``reverted``, ``speedup``,
    ``subthreshold``), otherwise they are drawn at random."""
    n = n_commits
    kinds = _event_kinds(rng) if kinds is None else list(kinds)
    throughput = bool(rng.random() < 1 / 3) if throughput is None else throughput
    base = float(10 ** rng.uniform(-5, -2))  # 10 us .. 10 ms
    level, labels = _place_events(rng, n, kinds)
    cases = list(kinds)
    offsets, failed, within = _run_noise(rng, n, cases)
    values, samples = _draw_samples(rng, base, level, offsets, failed, within, n_samples, throughput)
    # A failed run at a step moves the first measurable bad commit to the next valid run.
    first_valid = [next((j for j in range(c, n) if not failed[j]), None) for c in labels]
    return SyntheticSeries(
        name=name,
        direction=DOWN_IS_WORSE if throughput else UP_IS_WORSE,
        values=values,
        samples=samples,
        regressions=sorted(c for c in first_valid if c is not None),
        cases=cases,
    )


def make_history(seed: int, n_commits: int = 60, n_series: int = 60) -> list[SyntheticSeries]:
    """A labelled history of ``n_series`` series over ``n_commits`` commits."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_series):
        throughput = k % 3 == 2
        name = f"bench_synth.Case{k:03d}." + ("track_tokens_per_s" if throughput else "time_case")
        out.append(make_series(rng, n_commits, name=name, throughput=throughput))
    return out
