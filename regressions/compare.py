"""Head against base for one series (pure statistics; the store is read by regressions.store).

A change is significant when the samples say so (two-sided Mann-Whitney U, ``p < alpha``) and, where
the series has a history on that machine (at least ``MIN_HISTORY_RUNS`` runs up to the base), when it
also stands out of the run-to-run noise seen there (``|log ratio| >= z_crit * sigma * sqrt(2)``): on GPUs
the offset between two runs is often larger than the spread inside one, so samples alone call every
offset significant. A shorter history is not trusted for noise: a young project's commits are mostly
real changes, which would pass for noise and hide the change under test. Without samples the history
decides; without either, asv's rule: the 99% confidence intervals do not overlap. With nothing at all
the change is reported as untested and never as significant.
A regression is a slowdown beyond the threshold that is significant; an improvement the mirror image.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from regressions.direction import slowdown

DEFAULT_ALPHA = 0.01
DEFAULT_Z = 3.0
MIN_HISTORY_RUNS = 10


@dataclass
class SeriesPair:
    """What the comparison of one series needs."""

    benchmark: str
    params: dict[str, Any]
    machine: str
    unit: str | None
    direction: str
    threshold: float
    base: float | None
    head: float | None
    base_samples: list[float] = field(default_factory=list)
    head_samples: list[float] = field(default_factory=list)
    base_ci: tuple[float, float] | None = None
    head_ci: tuple[float, float] | None = None
    history_sigma: float | None = None  # run-to-run noise (log units) on this machine
    history_runs: int = 0


@dataclass
class Comparison:
    benchmark: str
    params: dict[str, Any]
    machine: str
    unit: str | None
    direction: str
    threshold: float
    base: float | None
    head: float | None
    ratio: float | None  # head / base
    slowdown: float | None  # > 1 worse (direction-adjusted ratio)
    significant: bool
    regression: bool
    change: str  # regression | improvement | unchanged | failed | fixed (no base result, runs on head)
    method: str  # how significance was judged
    p_value: float | None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("ratio", "slowdown", "p_value", "base", "head"):
            v = d[k]
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        return d


def _mann_whitney(a: list[float], b: list[float], alpha: float) -> float | None:
    """Two-sided p-value, or None when the samples are too few to ever reach ``alpha``."""
    if len(a) < 2 or len(b) < 2:
        return None
    n1, n2 = len(a), len(b)
    # Smallest two-sided p of an exact test: 2 / C(n1 + n2, n1).
    if 2.0 / math.comb(n1 + n2, n1) >= alpha:
        return None
    from scipy import stats  # imported here: it costs most of a second at start-up

    return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def compare_pair(pair: SeriesPair, *, alpha: float = DEFAULT_ALPHA, z_crit: float = DEFAULT_Z) -> Comparison:
    base, head = pair.base, pair.head
    ok_base = base is not None and math.isfinite(base) and base > 0
    ok_head = head is not None and math.isfinite(head) and head > 0
    common = dict(
        benchmark=pair.benchmark,
        params=pair.params,
        machine=pair.machine,
        unit=pair.unit,
        direction=pair.direction,
        threshold=pair.threshold,
        base=base if ok_base else None,
        head=head if ok_head else None,
    )
    if not (ok_base and ok_head):
        change = "failed" if ok_base else ("fixed" if ok_head else "failed")
        return Comparison(
            **common,
            ratio=None,
            slowdown=None,
            significant=False,
            regression=False,
            change=change,
            method="none",
            p_value=None,
        )
    ratio = head / base
    worse = slowdown(ratio, pair.direction)
    p = _mann_whitney(pair.base_samples, pair.head_samples, alpha)
    history = pair.history_sigma is not None and pair.history_runs >= MIN_HISTORY_RUNS
    z_hist = None
    if history:
        sigma = max(float(pair.history_sigma), 1e-9)
        z_hist = abs(math.log(ratio)) / (sigma * math.sqrt(2.0))
    if p is not None and z_hist is not None:
        significant, method = p < alpha and z_hist >= z_crit, "mann-whitney+history"
    elif p is not None:
        significant, method = p < alpha, "mann-whitney"
    elif z_hist is not None:
        significant, method = z_hist >= z_crit, "history"
        p = float(math.erfc(z_hist / math.sqrt(2.0)))
    elif (
        pair.base_ci is not None
        and pair.head_ci is not None
        and all(map(np.isfinite, pair.base_ci + pair.head_ci))
    ):
        (a0, a1), (b0, b1) = pair.base_ci, pair.head_ci
        significant, method = b0 > a1 or b1 < a0, "ci99"
    else:
        significant, method = False, "none"
    limit = 1.0 + pair.threshold
    regression = significant and worse > limit
    improvement = significant and worse < 1.0 / limit
    change = "regression" if regression else "improvement" if improvement else "unchanged"
    return Comparison(
        **common,
        ratio=ratio,
        slowdown=worse,
        significant=bool(significant),
        regression=bool(regression),
        change=change,
        method=method,
        p_value=p,
    )
