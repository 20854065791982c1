"""The two detectors of the real-noise benchmark, each run the way its users run it.

- mlaperf: asv results files ingested into a SQLite store with ``db.ingest`` and ``mlaperf detect --json
  --all`` run in-process through ``mlaperf.cli.main``; the flags are the stored regressions it lists.
- asv: ``asv.step_detect.detect_steps`` on each series (values and weights as ``asv publish`` builds its
  graphs: only results of the benchmark's current version, weight ``2 / |ci_99_b - ci_99_a|``) and
  ``detect_regressions`` with the threshold, as asv's regression listing does. asv has no notion of
  direction (up is worse); down-is-worse series are given to it inverted.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.scripts.detect_real_data import SeriesKey

# Project and third-party imports live in the functions: asv imports every module under benchmarks/ at
# discovery, where this module must cost nothing and need nothing beyond the standard library.
if TYPE_CHECKING:
    from benchmarks.scripts.detect_real_data import History

OPEN_STATUSES = frozenset({"suspect", "new", "acknowledged"})


@dataclass(frozen=True)
class Flag:
    """One flagged regression: the series, the first bad commit, and (mlaperf) its alert state."""

    machine: str
    benchmark: str
    params_key: str
    commit: str
    status: str | None = None
    group: Any = None
    machine_wide: bool | None = None
    parent: str | None = None  # mlaperf: the last commit at the old level (the culprit range starts after it)
    group_kind: str | None = None  # mlaperf: machine-wide, event or series

    @property
    def key(self) -> SeriesKey:
        return (self.machine, self.benchmark, self.params_key)

    @property
    def open(self) -> bool:
        return self.status is None or self.status in OPEN_STATUSES


@dataclass
class Detection:
    flags: list[Flag]
    seconds: float  # detection only (not ingest)


class MlaperfStore:
    """A temporary SQLite store fed and read as a user does (ingest, then `mlaperf detect`)."""

    def __init__(self, path: Path, threshold: float) -> None:
        self.url = f"sqlite:///{path}"
        self.threshold = threshold
        self.ingest_seconds = 0.0

    def ingest(self, results_dir: Path) -> None:
        from db.engine import make_engine
        from db.ingest import ingest_paths

        engine = make_engine(self.url)
        try:
            summary = ingest_paths(engine, [results_dir], progress=False)
        finally:
            engine.dispose()
        if summary.failed:
            raise RuntimeError(f"ingest of {results_dir} failed: {summary.failed[:3]}")
        self.ingest_seconds += summary.seconds

    def detect(self) -> Detection:
        from db.models import params_key
        from mlaperf.cli import main as mlaperf_main

        out, err = io.StringIO(), io.StringIO()
        argv = ["detect", "--db", self.url, "--json", "--all", "--threshold", f"{self.threshold:g}"]
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = mlaperf_main(argv)
        seconds = time.perf_counter() - start
        if rc not in (0, 1):
            raise RuntimeError(f"mlaperf {' '.join(argv)} exited {rc}: {err.getvalue().strip()[-2000:]}")
        doc = json.loads(out.getvalue() or "{}")
        records = doc.get("regressions", []) if isinstance(doc, dict) else doc  # a list before version 2
        flags = [
            Flag(
                machine=r["machine"],
                benchmark=r["benchmark"],
                params_key=params_key(r.get("params") or {}),
                commit=r["commit"],
                status=r["status"],
                group=r["group"],
                machine_wide=r["machine_wide"],
                parent=r.get("parent"),
                group_kind=r.get("group_kind"),
            )
            for r in records
        ]
        return Detection(flags, seconds)


def asv_detect(history: History, threshold: float) -> Detection:
    """asv's step detection and regression listing over every series asv would graph."""
    import numpy as np
    from asv import step_detect

    from regressions.direction import UP_IS_WORSE

    flags: list[Flag] = []
    start = time.perf_counter()
    for s in history.series.values():
        if s.benchmark not in history.benchmarks:
            continue  # asv publishes only the benchmarks of benchmarks.json
        ok = s.current & np.isfinite(s.values) & (s.values > 0)
        if not ok.any():
            continue
        up = s.direction == UP_IS_WORSE
        y: list[float | None] = [None] * s.values.size
        w: list[float | None] = [None] * s.values.size
        for i in np.flatnonzero(ok):
            y[i] = float(s.values[i]) if up else 1.0 / float(s.values[i])
            wi = float(s.weights[i])
            # The weight of 1/v: the interval's width scales by 1/v^2 to first order.
            w[i] = None if not math.isfinite(wi) else (wi if up else wi * float(s.values[i]) ** 2)
        steps = step_detect.detect_steps(y, w)
        _, _, jumps = step_detect.detect_regressions(steps, threshold=threshold)
        runs = history.runs[s.machine]
        for _before, after, _v1, _v2 in jumps or []:
            flags.append(Flag(s.machine, s.benchmark, s.params_key, runs[int(after)].commit))
    return Detection(flags, time.perf_counter() - start)
