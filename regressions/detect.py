"""Change-point detection over one benchmark series (values in commit order), independent of the store.

The method, in log space (relative changes are additive there):

1. Failed runs (None/NaN/non-positive) are dropped; indices still refer to the input.
2. Noise scale from the spread of run-to-run differences (upper quartile of ``|diff|``): robust to
   steps and one-off outliers, and, unlike the MAD, not fooled by a minority clock mode.
3. Candidate change points: multi-scale comparison of the medians just before and just after each
   point (windows of 2..16 runs), kept when shifted by a fair part of the threshold.
4. Optimal segmentation over the candidates: minimum of the L1 deviation from each segment's median
   (in noise units) plus a penalty per segment; interior segments need >= 2 runs, so one-off outliers
   can't form a level of their own. The newest one to three runs are tested on their own, so a step on
   the newest commit is flagged at once (when the split pays for itself: a spike next to the new level
   is not a level).
5. Change points whose shift is small or not significant are pruned, weakest first; short levels that
   do not stand apart from both neighbours are merged away, and a short newest level whose runs do not
   all sit at it is tested again against the level before (so a level after a gap of failed runs is
   compared with the level before the gap, and a spike cannot hide a step right after it).
6. A step is a regression when the direction-adjusted shift exceeds the threshold and is significant
   (z >= ``z_flag``); a short interior level must also be internally consistent (two unrelated
   outliers next to each other are not a level). A later level back within the threshold of the level
   before may fix it. Labels (``returns_to_earlier_level``, ``partly_recovered``) come from the series'
   levels (``regressions.level_rules``); every step records ``now``, the newest level over its level before.
7. Change points not flagged on their own whose shifts add up past the threshold are one gradual
   regression, flagged at the last of them (``level_rules.chains``, when the two levels differ significantly).

What a step means for an alert (suspect, confirmed, transient, fixed, retired) is decided by
:mod:`regressions.policy`, not here. docs/detection.md has the rules as users see them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from regressions import level_rules
from regressions.direction import UP_IS_WORSE
from regressions.units import P_FLOOR

_Q75_ABS_DIFF = 1.6268  # upper quartile of |a - b| for a, b ~ N(0, 1): sigma = q75 / this


@dataclass(frozen=True)
class DetectorParams:
    """Tuning of the detector; defaults were set on labelled synthetic GPU histories
    (benchmarks/scripts/detect_quality.py) and checked on seeds not used for tuning."""

    penalty: float = 2.0  # per segment, in noise units (plus log(n) below)
    z_candidate: float = 2.0
    z_keep: float = 2.5
    z_flag: float = 3.0
    scales: tuple[int, ...] = (2, 4, 8, 16)
    level_window: int = 30  # runs each side used to estimate the levels around a step
    noise_floor: float = 0.002  # relative; deterministic series would otherwise have zero noise
    max_candidates: int = 32
    short_level: int = 4  # interior levels this short must be consistent to count


DEFAULT_PARAMS = DetectorParams()

@dataclass(frozen=True)
class Step:
    """One change point. ``index`` is the first run of the new level (input index, so a commit)."""

    index: int
    before: float
    after: float
    ratio: float  # after / before
    slowdown: float  # > 1 worse, < 1 better (direction-adjusted ratio)
    z: float
    p_value: float
    regression: bool
    parent_index: int | None = None  # last run of the level before (input index): the culprit range starts after it
    labels: tuple[str, ...] = ()  # regressions.level_rules: RETURNS_TO_EARLIER_LEVEL, PARTLY_RECOVERED, GRADUAL
    now: float | None = None  # the series' newest level / before (as ratio): where it stands since the step


@dataclass(frozen=True)
class SeriesDetection:
    steps: list[Step] = field(default_factory=list)
    noise: float = math.nan  # relative run-to-run noise (sigma of log values)
    levels: list[tuple[int, int, float]] = field(default_factory=list)  # (first, last index, level)

    @property
    def regressions(self) -> list[Step]:
        return [s for s in self.steps if s.regression]


def _med(x: np.ndarray) -> float:
    # np.median costs ~20 us of overhead per call; the detector makes many calls on short slices.
    s = np.sort(x)
    m = s.size // 2
    return float(s[m]) if s.size % 2 else 0.5 * float(s[m - 1] + s[m])


def _abs_deviation(seg: np.ndarray) -> float:
    """The L1 cost of a segment: its absolute deviation from its median."""
    return float(np.abs(seg - _med(seg)).sum())


def median_se(sigma: float, n_left: int, n_right: int) -> float:
    """Standard error of the difference of the medians of ``n_left`` and ``n_right`` runs of noise ``sigma``
    (a median's variance over the mean's: 1 for one or two runs, ~pi/2 for more)."""
    left, right = (1.0 if n <= 2 else math.pi / 2 for n in (n_left, n_right))
    return sigma * math.sqrt(left / n_left + right / n_right)


_MED_ABS_DIFF = 0.6744897501960817 * math.sqrt(2.0)  # median |x_i+1 - x_i| of unit-sigma normal runs
# Below this many runs the median of the differences: a regression, its revert and a later rework or gain
# are already a third of the differences of 12 runs, and would set their upper quartile.
_SHORT_SERIES = 24
_STEP_SIGMAS = 4.0  # a run-to-run difference this many noise sigmas off is a step, not noise


def noise_scale(z: np.ndarray, floor: float = DEFAULT_PARAMS.noise_floor) -> float:
    """Per-run noise sigma (log units) from run-to-run differences: their upper quartile, or on short
    series their median, which stays robust when a step and its revert are up to half the differences."""
    return float(noise_scales(z, np.zeros(1, dtype=np.int64), floor)[0])


def noise_scales(z: np.ndarray, starts: np.ndarray, floor: float = DEFAULT_PARAMS.noise_floor) -> np.ndarray:
    """:func:`noise_scale` of each series in ``z`` (series i is ``z[starts[i]:starts[i + 1]]``, the last one
    to the end), the series of one length in one numpy pass (one call per series costs far more on the
    hundreds of series of a machine)."""
    starts = np.asarray(starts, dtype=np.int64)
    sizes = np.diff(np.r_[starts, z.size])
    out = np.full(starts.size, float(floor))
    for n in np.unique(sizes[sizes >= 3]):
        rows = np.flatnonzero(sizes == n)
        diffs = np.abs(np.diff(z[starts[rows, None] + np.arange(n)], axis=1))
        if n < _SHORT_SERIES:
            spread = np.median(diffs, axis=1) / _MED_ABS_DIFF
        else:
            spread = np.quantile(diffs, 0.75, axis=1) / _Q75_ABS_DIFF
        out[rows] = np.maximum(spread, floor)
    return out


def step_free(z: np.ndarray, starts: np.ndarray, threshold: float = 0.05) -> np.ndarray:
    """Each series of ``z`` (log values, laid out as for :func:`noise_scales`) less the median of the level
    the detector puts each run in: what is left is run-to-run noise, without the series' own steps (a
    history of real changes would otherwise pass for noise and hide a change as large as them)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.r_[starts[1:], z.size]
    # Only a series with a difference far beyond its noise can hold a step that inflates it: the rest skip.
    sigma = noise_scales(z, starts, floor=0.0)
    jump = np.abs(np.diff(z, prepend=z[:1])) > _STEP_SIGMAS * np.repeat(sigma, ends - starts)
    jump[starts] = False
    stepped = np.flatnonzero(np.add.reduceat(jump, starts) > 0) if z.size else np.zeros(0, dtype=np.int64)
    found = detect_many([np.exp(z[starts[i] : ends[i]]) for i in stepped], [threshold] * stepped.size,
                        [UP_IS_WORSE] * stepped.size)  # fmt: skip
    out = z.copy()
    for i, series in zip(stepped, found, strict=True):
        for first, last, level in series.levels:
            out[starts[i] + first : starts[i] + last + 1] -= math.log(level)
    return out


def _to_log(values: Sequence[float | None] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Valid input indices and their log values (failed runs and non-positive values dropped)."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        y = values
    else:  # lists with None (failed runs) or strings
        y = np.asarray(pd.to_numeric(pd.Series(values, dtype="object"), errors="coerce"), dtype=float)
    idx = np.flatnonzero(np.isfinite(y) & (y > 0))
    return idx, np.log(y[idx])


def _trailing_median(mat: np.ndarray, k: int) -> np.ndarray:
    """Per column, the median of the last ``k`` rows up to each row, ignoring NaN (NaN when none)."""
    n, m = mat.shape
    padded = np.vstack([np.full((k - 1, m), np.nan), mat])
    windows = sliding_window_view(padded, k, axis=0)  # (n, m, k)
    ordered = np.sort(windows, axis=-1)  # NaN sorts last
    count = np.sum(~np.isnan(windows), axis=-1)
    lo = np.take_along_axis(ordered, np.maximum((count - 1) // 2, 0)[..., None], -1)[..., 0]
    hi = np.take_along_axis(ordered, np.minimum(count // 2, k - 1)[..., None], -1)[..., 0]
    return np.where(count > 0, 0.5 * (lo + hi), np.nan)


def _candidates_batch(
    zs: list[np.ndarray], sigmas: list[float], deltas: list[float], p: DetectorParams
) -> list[list[int]]:
    """Per series, positions (into its z) that may start a new level, at most ``max_candidates``.

    Peaks are taken per window size: a short window locates a step exactly (and sees both ends of a
    short level), a long one is sensitive to small steps. All series are windowed in one pass (columns
    of one frame, padded with NaN at the end), which is what makes a full detection fast."""
    lengths = np.array([z.size for z in zs])
    n = int(lengths.max())
    mat = np.full((n, len(zs)), np.nan)
    for j, z in enumerate(zs):
        mat[: z.size, j] = z
    rev_mat = mat[::-1]
    rows = np.arange(n)[:, None]
    valid = rows < lengths[None, :]
    sig = np.asarray(sigmas)[None, :]
    half_delta = 0.5 * np.asarray(deltas)[None, :]
    strength: list[dict[int, float]] = [{} for _ in zs]
    for k in p.scales:
        if k > n:
            break
        before = _trailing_median(mat, k)  # median of z[i-k+1 .. i]
        after = _trailing_median(rev_mat, k)[::-1]  # median of z[i .. i+k-1]
        nb = np.minimum(rows, k).astype(float)  # runs before i (i >= 1)
        na = np.clip(lengths[None, :] - rows, 0, k).astype(float)  # runs from i on
        with np.errstate(invalid="ignore", divide="ignore"):
            f = np.where(nb <= 2, 1.0, math.pi / 2) / nb + np.where(na <= 2, 1.0, math.pi / 2) / na
            d = np.full((n, len(zs)), 0.0)
            d[1:] = np.abs(after[1:] - before[:-1])
            score = d / (sig * np.sqrt(f))
        score[~valid | ~np.isfinite(score) | (d < half_delta)] = 0.0
        score[:2] = 0.0  # the first level needs two runs
        left = np.vstack([np.zeros((1, len(zs))), score[:-1]])
        right = np.vstack([score[1:], np.zeros((1, len(zs)))])
        for i, j in zip(*np.nonzero((score >= p.z_candidate) & (score >= left) & (score > right)), strict=True):
            s = strength[j]
            s[int(i)] = max(s.get(int(i), 0.0), float(score[i, j]))
    return [sorted(sorted(s, key=lambda c: -s[c])[: p.max_candidates]) for s in strength]


def _segment(z: np.ndarray, sigma: float, cands: list[int], penalty: float) -> list[int]:
    """Optimal partition with boundaries among ``cands`` (L1 cost in noise units + penalty)."""
    n = z.size
    bounds = [0, *cands, n]
    m = len(bounds)
    cost_cache: dict[tuple[int, int], float] = {}

    def cost(a: int, b: int) -> float:
        if (a, b) not in cost_cache:
            cost_cache[a, b] = _abs_deviation(z[a:b]) / sigma
        return cost_cache[a, b]

    best = [math.inf] * m
    prev = [-1] * m
    best[0] = 0.0
    for j in range(1, m):
        last = j == m - 1
        for i in range(j):
            length = bounds[j] - bounds[i]
            if length < (1 if last and i > 0 else 2) or best[i] == math.inf:
                continue
            total = best[i] + cost(bounds[i], bounds[j]) + penalty
            if total < best[j]:
                best[j], prev[j] = total, i
    change_points: list[int] = []
    j = prev[m - 1]
    while j > 0:
        change_points.append(bounds[j])
        j = prev[j]
    return sorted(change_points)


def _refine(z: np.ndarray, change_points: list[int], radius: int = 8) -> list[int]:
    """Move each change point to the best split between its neighbours: wide windows locate a step
    only to within a few runs."""
    change_points = list(change_points)
    n = z.size
    for k, c in enumerate(change_points):
        a = change_points[k - 1] if k > 0 else 0
        b = change_points[k + 1] if k + 1 < len(change_points) else n
        lo, hi = max(a + 2, c - radius), min(b - (1 if b == n else 2), c + radius)
        best_c, best_cost = c, math.inf
        for c2 in range(lo, hi + 1):
            total = _abs_deviation(z[a:c2]) + _abs_deviation(z[c2:b])
            if total < best_cost - 1e-12:
                best_c, best_cost = c2, total
        change_points[k] = best_c
    return change_points


def _shift(z: np.ndarray, change_points: list[int], k: int, window: int) -> tuple[float, float, int, int]:
    """Levels just left and right of change point ``change_points[k]`` (within the neighbouring segments)."""
    start = change_points[k - 1] if k > 0 else 0
    end = change_points[k + 1] if k + 1 < len(change_points) else z.size
    c = change_points[k]
    left = z[max(start, c - window) : c]
    right = z[c : min(end, c + window)]
    return float(_med(left)), float(_med(right)), left.size, right.size


def _prune(z: np.ndarray, sigma: float, change_points: list[int], delta: float, p: DetectorParams) -> list[int]:
    change_points = list(change_points)
    while change_points:
        weakest, weakest_z = -1, math.inf
        for k in range(len(change_points)):
            lo, hi, nl, nr = _shift(z, change_points, k, p.level_window)
            zs = abs(hi - lo) / median_se(sigma, nl, nr)
            if (abs(hi - lo) < 0.5 * delta or zs < p.z_keep) and zs < weakest_z:
                weakest, weakest_z = k, zs
        if weakest < 0:
            break
        del change_points[weakest]
    return change_points


def _newest_level(z: np.ndarray, sigma: float, change_points: list[int], delta: float, p: DetectorParams) -> list[int]:
    """Test the newest 1-3 runs as a new level when segmentation has not split them off.

    The split must also pay for itself (L1 cost, noise units): a one-run spike followed by the new
    level (say before and after a gap of failed runs) is an outlier of that level, not a level of its
    own that the newest runs step away from."""
    n = z.size
    start = change_points[-1] if change_points else 0
    best_k, best_z = 0, 0.0
    for k in (1, 2, 3):
        first = max(start, n - k - p.level_window)
        ref = z[first : n - k]
        if ref.size < 2 or n - k - start < 2:
            continue
        tail = z[n - k :]
        d = float(_med(tail) - _med(ref))
        zs = abs(d) / median_se(sigma, ref.size, k)
        # Every run of the tail must sit at the new level, or it is an outlier plus noise.
        consistent = consistent_level(tail, float(_med(ref)), float(_med(ref)) + d, sigma, delta)
        gain = (_abs_deviation(z[first:]) - _abs_deviation(ref) - _abs_deviation(tail)) / sigma
        if abs(d) >= delta and zs >= p.z_flag and consistent and gain >= p.penalty and zs > best_z:
            best_k, best_z = k, zs
    return sorted({*change_points, n - best_k}) if best_k else change_points


def _short_level_holds(z: np.ndarray, bounds: list[int], k: int, p: DetectorParams, sigma: float, delta: float) -> bool:
    """Interior level ``k`` (``bounds[k]:bounds[k + 1]``), if short, must be a level of its own: its runs
    agree and each stands apart from the level before and from the level after (one run at the next
    level makes it a spike next to that level, as before a gap of failed runs)."""
    a, b = bounds[k], bounds[k + 1]
    if b - a > p.short_level:
        return True
    seg, level = z[a:b], _med(z[a:b])
    before = _med(z[max(bounds[k - 1], a - p.level_window) : a])
    after = _med(z[b : min(bounds[k + 2], b + p.level_window)])
    return consistent_level(seg, before, level, sigma, delta) and consistent_level(seg, after, level, sigma, delta)


def _merge_inconsistent(
    z: np.ndarray, sigma: float, change_points: list[int], delta: float, p: DetectorParams
) -> list[int]:
    """Drop short interior levels that are no level (``_short_level_holds``): the boundary whose removal
    costs less goes and the others are placed again, so what remains is measured against the level
    before."""
    for _ in range(len(change_points)):
        bounds = [0, *change_points, z.size]
        # Interior levels only: the first has no level before it, the newest none after it.
        bad = next(
            (k for k in range(1, len(bounds) - 2) if not _short_level_holds(z, bounds, k, p, sigma, delta)), None
        )
        if bad is None:
            return change_points
        options = [[c for c in change_points if c != drop] for drop in (bounds[bad], bounds[bad + 1])]
        cost = [sum(_abs_deviation(z[a:b]) for a, b in zip([0, *o], [*o, z.size], strict=True)) for o in options]
        change_points = _refine(z, options[int(np.argmin(cost))])
    return change_points


def _settle_tail(z: np.ndarray, sigma: float, change_points: list[int], delta: float, p: DetectorParams) -> list[int]:
    """A short newest level whose runs do not all sit at it (a one-run spike, then runs back at or near
    the old level) is no level: its boundary goes and the newest runs are tested again against the
    level before, spike included as an outlier of it (so a later real step is not hidden by the spike)."""
    for _ in range(3):
        if not change_points or z.size - change_points[-1] > p.short_level:
            return change_points
        start = change_points[-2] if len(change_points) > 1 else 0
        c = change_points[-1]
        before = _med(z[max(start, c - p.level_window) : c])
        if consistent_level(z[c:], before, _med(z[c:]), sigma, delta):
            return change_points
        change_points = _newest_level(z, sigma, change_points[:-1], delta, p)
    return change_points


def consistent_level(seg: np.ndarray, lo: float, hi: float, sigma: float, delta: float) -> bool:
    """A short level is real when each run moved the same way by a fair part of the threshold and the
    runs agree with each other (one of three or more may be an outlier on top of the level)."""
    d = hi - lo
    if not bool((np.sign(d) * (seg - lo) >= 0.5 * delta).all()):
        return False
    if seg.size == 1:
        return True
    if seg.size == 2:
        return float(abs(seg[1] - seg[0])) <= max(4.0 * sigma, abs(d))
    dev = np.sort(np.abs(seg - _med(seg)))[:-1]
    return float(dev.max()) <= max(2.0 * sigma, 0.25 * abs(d))


def _last_at_old_level(z: np.ndarray, start: int, c: int, lo: float, sigma: float, delta: float, most: int = 2) -> int:
    """Index of the last run before ``c`` that sits at the old level: up to ``most`` runs just before the
    step that are off the old level, beyond noise and half the threshold, either way (a one-run first
    stage of two close steps, the culprit measured noisily, a lone outlier before a gap of failed runs),
    widen the commit range the culprit lies in rather than end it: an outlier is not a level."""
    j = c - 1
    while j > start and c - j <= most and abs(z[j] - lo) >= max(0.5 * delta, 3.0 * sigma):
        j -= 1
    return j


def _step(index: int, lo: float, hi: float, zs: float, sign: float, regression: bool, parent: int,
          labels: tuple[str, ...], newest: float) -> Step:
    """A step from log level ``lo`` to ``hi`` at run ``index``; ``newest``: the series' newest log level."""
    return Step(index=index, before=float(np.exp(lo)), after=float(np.exp(hi)), ratio=float(np.exp(hi - lo)),
                slowdown=float(np.exp(sign * (hi - lo))), z=float(zs),
                p_value=max(float(math.erfc(zs / math.sqrt(2))), P_FLOOR), regression=bool(regression),
                parent_index=parent, labels=labels, now=float(np.exp(newest - lo)))  # fmt: skip


def _finish(
    idx: np.ndarray,
    z: np.ndarray,
    sigma: float,
    cands: list[int],
    threshold: float,
    direction: str,
    params: DetectorParams,
    boundary: int = 0,
) -> SeriesDetection:
    n = z.size
    delta = math.log1p(threshold)
    change_points = _segment(z, sigma, cands, params.penalty + math.log(n)) if cands else []
    change_points = _refine(z, change_points)
    change_points = _newest_level(z, sigma, change_points, delta, params)
    change_points = _prune(z, sigma, change_points, delta, params)
    change_points = _merge_inconsistent(z, sigma, change_points, delta, params)
    change_points = _settle_tail(z, sigma, change_points, delta, params)
    bounds = [0, *change_points, n]
    medians = [_med(z[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    levels = [
        (int(idx[a]), int(idx[b - 1]), float(np.exp(m))) for a, b, m in zip(bounds, bounds[1:], medians, strict=False)
    ]
    sign = 1.0 if direction == UP_IS_WORSE else -1.0
    steps: list[Step] = []
    for k, c in enumerate(change_points):
        lo, hi, nl, nr = _shift(z, change_points, k, params.level_window)
        zs = abs(hi - lo) / median_se(sigma, nl, nr)
        regression = sign * (hi - lo) > delta and zs >= params.z_flag
        seg_end = bounds[k + 2]
        if regression and seg_end < n and seg_end - c <= params.short_level:
            regression = consistent_level(z[c:seg_end], lo, hi, sigma, delta)
        parent = int(idx[_last_at_old_level(z, bounds[k], c, lo, sigma, delta)])
        labels = level_rules.labels(lo, hi, medians, k, k, sign, delta) if regression else ()
        steps.append(_step(int(idx[c]), lo, hi, zs, sign, regression, parent, labels, medians[-1]))
    # Steps each under the threshold that add up past it: the chain's last one stands for it (level_rules.chains),
    # never across the first run that counts (``boundary``: a joined benchmark version's).
    shifts = [sign * (b - a) for a, b in zip(medians, medians[1:], strict=False)]
    breaks = [int(idx[bounds[k]]) < boundary for k in range(len(steps))]
    for first, last in level_rules.chains(shifts, [s.regression for s in steps], delta, breaks):
        lo, hi = medians[first], medians[last + 1]
        runs = (min(bounds[k + 1] - bounds[k], params.level_window) for k in (first, last + 1))
        zs = abs(hi - lo) / median_se(sigma, *runs)
        c, seg_end = bounds[last + 1], bounds[last + 2]
        short = seg_end < n and seg_end - c <= params.short_level
        # A short new level must be a level beside the one just before it, as a single step's must.
        if zs >= params.z_flag and (not short or consistent_level(z[c:seg_end], medians[last], hi, sigma, delta)):
            labels = (level_rules.GRADUAL, *level_rules.labels(lo, hi, medians, first, last, sign, delta))
            steps[last] = _step(steps[last].index, lo, hi, zs, sign, True, steps[first].parent_index, labels,
                                medians[-1])  # fmt: skip
    return SeriesDetection(steps=steps, noise=sigma, levels=levels)


def detect_many(
    series: Sequence[Sequence[float | None] | np.ndarray],
    thresholds: Sequence[float],
    directions: Sequence[str],
    params: DetectorParams = DEFAULT_PARAMS,
    boundaries: Sequence[int] | None = None,
) -> list[SeriesDetection]:
    """:func:`detect_steps` over many series at once (same results, much faster than one by one).
    ``boundaries``: per series, the first run of its own (runs before it are another version's, put before
    it for the level: no gradual chain holds or crosses them)."""
    prepared = [(idx, z, noise_scale(z, params.noise_floor)) for idx, z in map(_to_log, series)]
    out: list[SeriesDetection | None] = [None] * len(prepared)
    live = [j for j, (_idx, z, _s) in enumerate(prepared) if z.size >= 3]
    for j, (_idx, z, _s) in enumerate(prepared):
        if z.size < 3:
            out[j] = SeriesDetection(noise=math.nan)
    if live:
        cands = _candidates_batch(
            [prepared[j][1] for j in live],
            [prepared[j][2] for j in live],
            [math.log1p(thresholds[j]) for j in live],
            params,
        )
        for j, c in zip(live, cands, strict=True):
            idx, z, sigma = prepared[j]
            out[j] = _finish(idx, z, sigma, c, thresholds[j], directions[j], params, boundaries[j] if boundaries else 0)
    return [d if d is not None else SeriesDetection() for d in out]


def detect_steps(
    values: Sequence[float | None] | np.ndarray,
    *,
    threshold: float = 0.05,
    direction: str = UP_IS_WORSE,
    params: DetectorParams = DEFAULT_PARAMS,
) -> SeriesDetection:
    """Change points of one series in commit order; ``regressions`` are those worse than ``threshold``."""
    return detect_many([values], [threshold], [direction], params)[0]
