"""The samples' tests of a comparison (:mod:`regressions.compare`): two-sided Mann-Whitney U over many series at
once, and asv's rule for sides with 99% confidence intervals only."""

from __future__ import annotations

import math

import numpy as np


def _testable(a: list[float], b: list[float], alpha: float) -> bool:
    """Whether the samples can ever reach ``alpha``: the smallest two-sided p of an exact test is
    2 / C(n1 + n2, n1)."""
    return len(a) >= 2 and len(b) >= 2 and 2.0 / math.comb(len(a) + len(b), len(a)) < alpha


def mann_whitney_many(samples: list[tuple[list[float], list[float]]], alpha: float) -> list[float | None]:
    """Two-sided Mann-Whitney U p-values (None where the samples are too few to ever reach ``alpha``),
    one scipy call per pair of sample counts (one call per series costs milliseconds of overhead).
    Small tied samples go one by one: scipy picks the exact or the asymptotic method once per call,
    and ties anywhere in a batch would change it for the whole batch."""
    from scipy import stats  # imported here: it costs most of a second at start-up

    out: list[float | None] = [None] * len(samples)
    batches: dict[tuple[int, int], list[int]] = {}
    for i, (a, b) in enumerate(samples):
        if not _testable(a, b, alpha):
            continue
        if min(len(a), len(b)) <= 8 and len(set(a) | set(b)) < len(a) + len(b):
            out[i] = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
        else:
            batches.setdefault((len(a), len(b)), []).append(i)
    for rows in batches.values():
        a = np.array([samples[i][0] for i in rows], dtype=float)
        b = np.array([samples[i][1] for i in rows], dtype=float)
        pvalues = stats.mannwhitneyu(a, b, alternative="two-sided", axis=1).pvalue
        for i, p in zip(rows, np.atleast_1d(pvalues), strict=True):
            out[i] = float(p)
    return out


def intervals_apart(base: tuple[float, float] | None, head: tuple[float, float] | None) -> bool | None:
    """asv's rule: the two 99% confidence intervals do not overlap; None where a side has none."""
    if base is None or head is None or not all(map(np.isfinite, base + head)):
        return None
    (a0, a1), (b0, b1) = base, head
    return bool(b0 > a1 or b1 < a0)
