"""The synthetic histories are reproducible: the same seed and parameters give the same series, pinned
by a fingerprint, so a refactor of ``make_series`` cannot change the labelled data the detection-quality
tests and benchmarks score against."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from regressions.synthetic import make_history, make_series

CASES: list[dict[str, object]] = [
    {},
    {"n_commits": 30, "throughput": True},
    {"kinds": ["step", "speedup"], "n_samples": 5},
    {"kinds": ["newest"]},
    {"kinds": ["reverted", "subthreshold"], "throughput": False},
]


def _fingerprint() -> str:
    """Values and samples to 9 significant digits (the last ulp of ``exp`` may differ between CPUs), labels
    and cases exactly."""

    def num(x: float | None) -> str | None:
        return None if x is None else f"{x:.8e}"

    out = []
    for seed in range(12):
        rng = np.random.default_rng(seed)
        for kw in CASES:
            s = make_series(rng, **kw)  # type: ignore[arg-type]
            out.append(
                [
                    s.name,
                    s.direction,
                    [num(v) for v in s.values],
                    [None if x is None else [num(v) for v in x] for x in s.samples],
                    s.regressions,
                    s.cases,
                ]
            )
    for seed in (0, 7):
        out.append([[[num(v) for v in x.values], x.regressions, x.cases] for x in make_history(seed, n_series=20)])
    return hashlib.sha256(json.dumps(out).encode()).hexdigest()


def test_same_seed_same_series() -> None:
    assert _fingerprint() == _fingerprint()
    assert _fingerprint() == "246524017be2fa258ffb603c741756e533200ff3308bf0f816133530a7318f8b"


def test_unknown_kind_is_named() -> None:
    with pytest.raises(ValueError, match="unknown event kind 'bogus'"):
        make_series(np.random.default_rng(0), kinds=["bogus"])
