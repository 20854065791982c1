"""What a series' levels say about a step beyond its own shift: its labels and gradual regressions.

All in log space (relative changes add up there), ``sign`` +1 where up is worse, ``delta`` the threshold.

Labels of a regression (``Step.labels``):

- ``returns_to_earlier_level``: its new level is (within the threshold) one the series held before the
  previous one, typically the end of a short-lived improvement.
- ``partly_recovered``: the series has since come part of the way back: its newest level is better than the
  step's new level by the threshold, yet still a threshold worse than before (within it,
  ``policy.level_back`` calls the step undone and the alert fixed).
- ``gradual``: the regression is a chain of steps each too small to flag (:func:`chains`).

Gradual regressions: the detector flags a step when its own shift passes the threshold, so 3% a week for a
month is four steps under a 5% threshold and a 12% regression nobody is told of (a change split in small
pull requests does it too). The change points that are not flagged are summed, in the worse direction,
from the level before the first of them; at the first worse change point where the sum passes the
threshold, that change point stands for the chain: one regression from the level before the chain to the
new level, its culprit range from the last commit of the old level to that change point. A flagged step
that such steps lead up to stands for them too (a drift with one steeper stretch is one regression from
its start), where the drift is a fair part of it (``DRIFT_SHARE`` of its own shift: a 2.7% drift is not the
culprit range of a 26x jump after it, which stays a step of its own). The sum starts again after a chain
or a flagged step, where a level is back at or better than the chain's start (a gain in between is netted),
and at a benchmark version's boundary. Whether the chain's two levels differ significantly, and a short new
level is a level, is the detector's test, as for any step (``detect._finish``).
"""

from __future__ import annotations

from collections.abc import Sequence

RETURNS_TO_EARLIER_LEVEL = "returns_to_earlier_level"
PARTLY_RECOVERED = "partly_recovered"
GRADUAL = "gradual"
# A flagged step joins the unflagged drift before it when that drift adds up to at least this share of the
# step's own shift (both in log space): +2%, +2% then +6% is one drift; +2.7% then 26x is a jump.
DRIFT_SHARE = 0.25


def partly_recovered(lo: float, hi: float, later: Sequence[float], sign: float, delta: float) -> bool:
    """A step from level ``lo`` to ``hi`` whose ``later`` levels (newest last) all stay a threshold or more worse
    than ``lo`` (one back within it fixed the step; a later step is its own), the newest better than ``hi`` by
    more than the threshold."""
    return bool(later) and all(sign * (m - lo) >= delta for m in later) and sign * (hi - later[-1]) > delta


def labels(lo: float, hi: float, medians: Sequence[float], first: int, last: int, sign: float,
           delta: float) -> tuple[str, ...]:  # fmt: skip
    """The labels of a regression from level ``first`` (at ``lo``) to level ``last + 1`` (at ``hi``) of a series
    whose levels are ``medians``: back to a level held before, or partly recovered since (the levels after it)."""
    earlier = any(abs(hi - m) < delta for m in medians[:first])
    partly = partly_recovered(lo, hi, medians[last + 2 :], sign, delta)
    return tuple(label for label, on in ((RETURNS_TO_EARLIER_LEVEL, earlier), (PARTLY_RECOVERED, partly)) if on)


def chains(
    shifts: Sequence[float], flagged: Sequence[bool], delta: float, breaks: Sequence[bool] | None = None
) -> list[tuple[int, int]]:
    """(first, last) change point of each gradual regression, in order.

    ``shifts``: each change point's shift between the segment medians either side, positive when worse;
    ``flagged``: whether the change point is a regression on its own; ``breaks``: change points no chain may
    hold or cross (their level before began in another benchmark version). A chain ends at a worse change
    point: the first where the sum passes the threshold, or a flagged one that the unflagged steps before it
    lead up to (a drift with one steeper stretch stays one regression from the drift's start; a drift under
    ``DRIFT_SHARE`` of the flagged step's shift does not lead up to it: the step stands alone). A chain has
    at least two change points (one that passes alone is the detector's call)."""
    if len(shifts) != len(flagged) or (breaks is not None and len(breaks) != len(shifts)):
        raise ValueError(f"shifts has {len(shifts)} change points but flagged has {len(flagged)}"
                         + ("" if breaks is None else f" and breaks {len(breaks)}"))  # fmt: skip
    out: list[tuple[int, int]] = []
    start, total = 0, 0.0
    for k, (shift, flag) in enumerate(zip(shifts, flagged, strict=True)):
        if breaks is not None and breaks[k]:
            start, total = k + 1, 0.0
            continue
        if flag:
            if total >= DRIFT_SHARE * shift and total > 0.0 and k > start and shift > 0.0:
                out.append((start, k))
            start, total = k + 1, 0.0
            continue
        total += shift
        if total <= 0.0:  # back at or better than the chain's start: a new start from here
            start, total = k + 1, 0.0
        elif total > delta and k > start and shift > 0.0:
            out.append((start, k))
            start, total = k + 1, 0.0
    return out
