"""The change-point detector on synthetic series: every GPU noise case, steps at the right commit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from regressions.detect import (
    detect_many,
    detect_steps,
    noise_scale,
    noise_scales,
    step_free,
)
from regressions.direction import DOWN_IS_WORSE, UP_IS_WORSE
from regressions.level_rules import RETURNS_TO_EARLIER_LEVEL
from regressions.policy import series_verdicts
from regressions.synthetic import make_history, make_series


def gpu_noise(rng: np.random.Generator, n: int, between: float = 0.012) -> np.ndarray:
    """Run-to-run offsets (larger than any within-run spread) around 100 us."""
    return 1e-4 * np.exp(rng.normal(0.0, between, n))


def flagged(values: object, **kw: object) -> list[int]:
    return [s.index for s in detect_steps(values, **kw).regressions]  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(20))
def test_noise_alone_raises_nothing(seed: int) -> None:
    rng = np.random.default_rng(seed)
    assert flagged(gpu_noise(rng, 120, between=0.018)) == []


@pytest.mark.parametrize("seed", range(10))
def test_bimodal_clock_modes_raise_nothing(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    v = gpu_noise(rng, 80, between=0.006) * np.where(rng.random(80) < 0.4, 1.03, 1.0)
    assert flagged(v) == []


def test_one_off_outliers_raise_nothing() -> None:
    rng = np.random.default_rng(7)
    v = gpu_noise(rng, 60)
    v[[10, 25, 40]] *= [1.5, 1.3, 2.0]
    assert flagged(v) == []


@pytest.mark.parametrize("size", [0.07, 0.15, 0.5, 1.0])
def test_step_found_at_its_commit(size: float) -> None:
    rng = np.random.default_rng(int(size * 100))
    v = gpu_noise(rng, 60)
    v[33:] *= 1 + size
    (step,) = detect_steps(v).regressions
    assert step.index == 33
    assert step.ratio == pytest.approx(1 + size, rel=0.03)
    assert step.before == pytest.approx(1e-4, rel=0.03)
    assert [(x.status, x.closed_at) for x in series_verdicts(v, detect_steps(v), threshold=0.05)] == [("new", None)]


def test_failed_runs_are_skipped_and_the_step_lands_on_the_first_measured_commit() -> None:
    rng = np.random.default_rng(3)
    v: list[float | None] = list(gpu_noise(rng, 50))
    for i in (5, 17, 29):
        v[i] = None
    v[30] = math.nan
    for i in range(29, 50):
        if v[i] is not None and not math.isnan(v[i]):  # type: ignore[arg-type]
            v[i] = v[i] * 1.2  # type: ignore[operator]
    # The step began at commit 29, whose run failed, as did 30: the first measured bad commit is 31.
    assert flagged(v) == [31]


def test_step_on_the_newest_commit_is_flagged_at_once() -> None:
    rng = np.random.default_rng(11)
    v = gpu_noise(rng, 60)
    v[-1] *= 1.12
    assert flagged(v) == [59]


def test_reverted_step_is_flagged_once_and_marked_fixed() -> None:
    rng = np.random.default_rng(12)
    v = gpu_noise(rng, 60)
    v[30:33] *= 1.25
    (step,) = detect_steps(v).regressions
    assert step.index == 30
    (verdict,) = series_verdicts(v, detect_steps(v), threshold=0.05)
    assert (verdict.status, verdict.closed_at, verdict.reason) == ("fixed", 33, "returned")


def test_speedup_is_not_a_regression_but_its_undo_is() -> None:
    rng = np.random.default_rng(13)
    v = gpu_noise(rng, 60)
    v[20:] /= 1.5
    v[45:] *= 1.5
    assert flagged(v) == [45]


def test_sub_threshold_step_is_not_flagged_and_threshold_is_honoured() -> None:
    rng = np.random.default_rng(14)
    v = gpu_noise(rng, 60, between=0.004)
    v[30:] *= 1.03
    assert flagged(v) == []
    w = gpu_noise(rng, 60, between=0.004)
    w[30:] *= 1.08
    assert flagged(w) == [30]
    assert flagged(w, threshold=0.10) == []


def test_direction_throughput_down_is_worse() -> None:
    rng = np.random.default_rng(15)
    tput = 1.0 / gpu_noise(rng, 60)
    drop = tput.copy()
    drop[40:] /= 1.2
    rise = tput.copy()
    rise[40:] *= 1.2
    assert flagged(drop, direction=DOWN_IS_WORSE) == [40]
    assert flagged(rise, direction=DOWN_IS_WORSE) == []
    assert flagged(rise, direction=UP_IS_WORSE) == [40]


def test_deterministic_series_with_zero_noise() -> None:
    v = [2.0] * 30 + [2.3] * 10
    (step,) = detect_steps(v).regressions
    assert step.index == 30 and step.ratio == pytest.approx(1.15)
    assert flagged([2.0] * 40) == []


@pytest.mark.parametrize("values", [[], [None], [1.0, 2.0], [None, None, None, None], [0.0, -1.0, 1.0]])
def test_too_short_or_empty_series(values: list[float | None]) -> None:
    assert detect_steps(values).steps == []


def test_noise_scale_ignores_steps_and_outliers() -> None:
    rng = np.random.default_rng(16)
    z = rng.normal(0.0, 0.01, 400)
    z[200:] += 0.3
    z[[50, 300]] += 1.0
    assert noise_scale(z) == pytest.approx(0.01, rel=0.2)


def test_a_step_every_few_runs_is_not_noise() -> None:
    """The bundled H200 history's MMA decode at concurrency 64: a regression and its revert, a rework, a
    later gain. Its twelfth run (the gain) made the steps a third of the differences; their upper
    quartile was taken as the noise, and the regression at run 3 went unflagged."""
    values = [84.3, 65.0, 63.8, 99.1, 99.0, 64.0, 42.9, 43.0, 41.6, 41.4, 41.4, 37.0]
    for n in (11, 12):
        found = detect_steps(values[:n])
        assert [s.index for s in found.regressions] == [3], n
        assert found.noise < 0.05  # the upper quartile of its differences would say 0.20


def test_step_free_leaves_the_noise_around_each_level() -> None:
    """The bundled H200 MMA decode at concurrency 64 (five steps in eleven differences: even their median
    is a step's), then a series without steps."""
    rng = np.random.default_rng(7)
    h200 = np.log([84.3, 65.0, 63.8, 99.1, 99.0, 64.0, 42.9, 43.0, 41.6, 41.4, 41.4, 37.0])
    z = np.concatenate([h200, rng.normal(0.0, 0.01, 30)])
    starts = np.array([0, h200.size])
    raw, flat = noise_scales(z, starts), noise_scales(step_free(z, starts), starts)
    assert raw[0] > 0.03 and flat[0] < 0.6 * raw[0]  # the steps no longer pass for noise
    assert flat[1] == pytest.approx(raw[1], rel=0.3)  # a series without steps keeps its noise


def test_noise_scales_equal_the_rule_per_series() -> None:
    """The batch (Compare's noise of every series at once) is the rule of one series, bit for bit: the
    median below 12 runs, the upper quartile from there, the floor below 3 runs or as a minimum."""
    rng = np.random.default_rng(5)
    zs = [rng.normal(0.0, rng.choice([1e-4, 0.01, 0.3]), n) for n in (0, 1, 2, 3, 5, 11, 12, 23, 24, 100, 7, 3)]
    starts = np.cumsum([0] + [z.size for z in zs[:-1]])
    for floor in (0.0, 0.002):
        batch = noise_scales(np.concatenate(zs), starts, floor)
        one = []
        for z in zs:
            diffs = np.abs(np.diff(z))
            if z.size < 3:
                one.append(floor)
            elif z.size < 24:
                one.append(max(float(np.median(diffs)) / (0.6744897501960817 * math.sqrt(2.0)), floor))
            else:
                one.append(max(float(np.quantile(diffs, 0.75)) / 1.6268, floor))
        assert batch.tolist() == one
        assert [noise_scale(z, floor) for z in zs] == one


def test_batch_equals_one_by_one() -> None:
    history = make_history(21, n_commits=50, n_series=20)
    batch = detect_many([s.values for s in history], [0.05] * 20, [s.direction for s in history])
    for s, b in zip(history, batch, strict=True):
        one = detect_steps(s.values, direction=s.direction)
        assert [(x.index, x.regression) for x in one.steps] == [(x.index, x.regression) for x in b.steps]


def test_labelled_history_recall_and_false_alarms() -> None:
    """One 60-commit x 60-series history of the quality benchmark: near-complete recall, no crying wolf."""
    history = make_history(4242)
    found = labels = false_alarms = 0
    for s in history:
        flags = flagged(s.values, direction=s.direction)
        labels += len(s.regressions)
        hit = {lab for lab in s.regressions if any(abs(f - lab) <= 1 for f in flags)}
        found += len(hit)
        false_alarms += sum(1 for f in flags if all(abs(f - lab) > 1 for lab in s.regressions))
    assert labels >= 20
    assert found / labels >= 0.93
    assert false_alarms <= 1


def test_generator_cases_are_present() -> None:
    rng = np.random.default_rng(5)
    s = make_series(rng, 60, kinds=["reverted", "speedup"], throughput=True)
    assert s.direction == DOWN_IS_WORSE and len(s.regressions) == 1
    with pytest.raises(ValueError, match="kinds"):
        make_series(rng, 60, kinds=["bogus"])


def test_short_history_step_and_revert_is_flagged_at_its_commit() -> None:
    # The bundled H200 history's shape: 3 runs, a 2-run regression, then the revert.
    values = [18.3e-6, 19.7e-6, 19.5e-6, 90.1e-6, 90.1e-6, 19.2e-6]
    det = detect_steps(values)
    regs = det.regressions
    assert [s.index for s in regs] == [3]
    assert [(x.status, x.closed_at) for x in series_verdicts(values, det, threshold=0.05)] == [("fixed", 5)]


def test_short_noisy_history_raises_nothing() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        values = 50e-6 * np.exp(rng.normal(0.0, 0.01, size=int(rng.integers(4, 12))))
        assert not detect_steps(values).regressions


def test_step_on_the_newest_run_is_unconfirmed_until_seen_twice() -> None:
    rng = np.random.default_rng(31)
    v = gpu_noise(rng, 40)
    v[-1] *= 1.2
    (step,) = detect_steps(v).regressions
    assert step.index == 39 and step.parent_index == 38
    assert [x.status for x in series_verdicts(v, detect_steps(v), threshold=0.05)] == ["suspect"]
    w = np.append(v, gpu_noise(rng, 1) * 1.2)
    (step,) = detect_steps(w).regressions
    assert step.index == 39 and [x.status for x in series_verdicts(w, detect_steps(w), threshold=0.05)] == ["new"]


def test_one_high_then_slightly_high_tail_is_not_a_confirmed_level() -> None:
    """The real pattern of issue 15: one high run at the end and one slightly high run."""
    rng = np.random.default_rng(32)
    v = gpu_noise(rng, 60, between=0.005)
    v[-2:] *= [1.164, 1.029]
    assert "new" not in {x.status for x in series_verdicts(v, detect_steps(v), threshold=0.05)}


@pytest.mark.parametrize("tail", [1, 3, 30])
def test_level_after_a_gap_of_failed_runs_is_measured_against_the_level_before(tail: int) -> None:
    """A one-run spike, failed runs, then the new level: one regression at the spike with the net change
    (not a step up and a step down, nor nothing)."""
    rng = np.random.default_rng(33 + tail)
    before = list(gpu_noise(rng, 40, between=0.01))
    after = list(gpu_noise(rng, tail, between=0.01) * 1.15)
    v: list[float | None] = [*before, 1.5e-4, None, None, None, None, *after]
    steps = detect_steps(v).steps
    (step,) = steps
    assert step.regression and step.index == 40
    assert step.ratio == pytest.approx(1.15 if tail > 1 else 1.32, rel=0.04)


@pytest.mark.parametrize("apart", [2, 3])
def test_close_steps_are_two_steps(apart: int) -> None:
    rng = np.random.default_rng(40 + apart)
    v = gpu_noise(rng, 60, between=0.01)
    v[30:] *= 1.2
    v[30 + apart :] *= 1.25
    regs = detect_steps(v).regressions
    assert [s.index for s in regs] == [30, 30 + apart]
    assert [round(s.ratio, 1) for s in regs] == [1.2, 1.2]


def test_close_steps_one_run_apart_are_one_step_with_the_range_widened() -> None:
    """A one-run first stage cannot be told from an outlier: one step, its culprit range covering both."""
    rng = np.random.default_rng(44)
    v = gpu_noise(rng, 60, between=0.01)
    v[30] *= 1.2
    v[31:] *= 1.5
    (step,) = detect_steps(v).regressions
    assert step.index in (30, 31) and step.parent_index == 29


def test_return_to_an_earlier_level_is_labelled() -> None:
    rng = np.random.default_rng(45)
    v = gpu_noise(rng, 60)
    v[30:36] /= 1.25  # a short-lived improvement
    (step,) = detect_steps(v).regressions
    assert step.index == 36 and step.labels == (RETURNS_TO_EARLIER_LEVEL,)
    w = gpu_noise(rng, 60)
    w[36:] *= 1.25  # a plain regression
    (step,) = detect_steps(w).regressions
    assert step.labels == ()
