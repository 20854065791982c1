"""Real asv histories for the detection benchmark (benchmarks/scripts/detect_real.py): read them, pick the
flat series, and write copies in which only injected measurements differ.

A history is one asv results directory: ``benchmarks.json`` and a folder per machine with ``machine.json``
and one results file per run. Files are read with mlaperf's own asv parser (``db.asvformat``), so series
identity is the store's: (machine, benchmark, params_key). A machine's runs are ordered by commit date, the
order the store gives commits that have no git metadata (``db.models.commit_order``).
"""

from __future__ import annotations

import copy
import json
import math
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Project and third-party imports live in the functions: asv imports every module under benchmarks/ at
# discovery, where this module must cost nothing and need nothing beyond the standard library.
if TYPE_CHECKING:
    import numpy as np

SeriesKey = tuple[str, str, str]  # (machine, benchmark, params_key)
# Columns of an asv results row that scale with the measured time (a slower run is slower in every sample).
_SCALED_COLUMNS = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75")


@dataclass
class Run:
    """One results file of one machine."""

    machine: str
    path: Path
    commit: str
    date: float  # asv's commit date (ms since the epoch)
    raw: dict[str, Any]


@dataclass
class Series:
    """One benchmark x parameter combination on one machine, over that machine's runs (positions)."""

    machine: str
    benchmark: str
    params_key: str
    indices: np.ndarray  # [runs] flat index of the parameter combination in that run's result lists, -1: none
    unit: str | None
    direction: str
    values: np.ndarray  # [runs] NaN: failed, skipped or not run
    ran: np.ndarray  # [runs] bool: the run has a result for it (a value or a failure)
    current: np.ndarray  # [runs] bool: the result's benchmark version is benchmarks.json's
    weights: np.ndarray  # [runs] asv's data-point weight 2 / |ci_99_b - ci_99_a|, NaN when unknown
    versions: set[str | None] = field(default_factory=set)

    @property
    def key(self) -> SeriesKey:
        return (self.machine, self.benchmark, self.params_key)

    @property
    def valid(self) -> np.ndarray:
        import numpy as np

        return np.flatnonzero(np.isfinite(self.values) & (self.values > 0))


@dataclass
class History:
    name: str
    root: Path  # the asv results directory
    benchmarks: dict[str, dict[str, Any]]
    runs: dict[str, list[Run]]  # machine -> runs, oldest first
    series: dict[SeriesKey, Series]

    def position(self, machine: str) -> dict[str, int]:
        """Commit sha -> position in the machine's history."""
        return {r.commit: i for i, r in enumerate(self.runs[machine])}

    def worse(self, key: SeriesKey, slowdown: float) -> float:
        """The factor that makes series ``key`` worse by ``slowdown`` (0.1: 10% worse)."""
        from regressions.direction import UP_IS_WORSE

        up = self.series[key].direction == UP_IS_WORSE
        return 1.0 + slowdown if up else 1.0 / (1.0 + slowdown)


def _weight(a: Any, b: Any) -> float:
    # asv._stats.get_weight: 2 / |b - a| of the 99% interval; missing or infinite -> no weight.
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return math.nan
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return math.nan
    return 2.0 / abs(b - a)


def load_history(root: str | Path, *, machines: Iterable[str] | None = None, name: str | None = None) -> History:
    """Read an asv results directory. ``machines`` keeps only those machines (by asv machine name)."""
    from db.asvformat import BENCHMARKS_JSON, parse_benchmarks_json

    root = Path(root)
    bench_path = root / BENCHMARKS_JSON
    if not bench_path.is_file():
        raise FileNotFoundError(f"{root}: no {BENCHMARKS_JSON} (not an asv results directory)")
    benchmarks = parse_benchmarks_json(bench_path.read_bytes())
    runs, parsed = _read_runs(root, benchmarks, None if machines is None else set(machines))
    series: dict[SeriesKey, Series] = {}
    for machine, machine_runs in runs.items():
        order = sorted(range(len(machine_runs)), key=lambda i: (machine_runs[i].date, machine_runs[i].commit))
        machine_runs[:] = [machine_runs[i] for i in order]
        _add_machine_series(series, machine, machine_runs, [parsed[machine][i] for i in order], benchmarks)
    return History(name or root.parent.name, root, benchmarks, runs, series)


def _read_runs(
    root: Path, benchmarks: dict[str, Any], wanted: set[str] | None
) -> tuple[dict[str, list[Run]], dict[str, list[Any]]]:
    """Every results file under ``root`` of the ``wanted`` machines (all when None), per machine: the raw
    run and its parsed form, in file order."""
    from db.asvformat import find_result_files, parse_machine_json, parse_results

    runs: dict[str, list[Run]] = {}
    parsed: dict[str, list[Any]] = {}
    for file in find_result_files([root]):
        data = file.path.read_bytes()
        info = parse_machine_json(file.machine_json.read_bytes()) if file.machine_json.is_file() else {}
        run = parse_results(data, machine_info=info, machine_dir_name=file.path.parent.name, benchmarks=benchmarks)
        if wanted is not None and run.machine not in wanted:
            continue
        raw = json.loads(data)
        runs.setdefault(run.machine, []).append(
            Run(run.machine, file.path, run.commit_hash, float(raw.get("date") or 0), raw)
        )
        parsed.setdefault(run.machine, []).append(run)
    if wanted is not None and wanted - set(runs):
        raise ValueError(f"--machines: no results for {', '.join(sorted(wanted - set(runs)))} under {root}")
    if not runs:
        raise ValueError(f"{root}: no asv results files")
    return runs, parsed


def _new_series(machine: str, benchmark: str, pkey: str, n: int, entry: dict[str, Any] | None) -> Series:
    """An empty series of ``n`` runs: nothing ran, no value, no weight."""
    import numpy as np

    from db.asvformat import default_unit
    from regressions.direction import direction_for

    unit = (entry or {}).get("unit") or default_unit(benchmark)
    return Series(
        machine=machine,
        benchmark=benchmark,
        params_key=pkey,
        indices=np.full(n, -1, dtype=np.int64),
        unit=unit,
        direction=direction_for(benchmark, unit),
        values=np.full(n, np.nan),
        ran=np.zeros(n, dtype=bool),
        current=np.zeros(n, dtype=bool),
        weights=np.full(n, np.nan),
    )


def _add_machine_series(
    series: dict[SeriesKey, Series],
    machine: str,
    machine_runs: list[Run],
    machine_parsed: list[Any],
    benchmarks: dict[str, Any],
) -> None:
    """Fill ``series`` with one machine's runs (sorted oldest first), one position per run."""
    n = len(machine_runs)
    for pos, (run, pr) in enumerate(zip(machine_runs, machine_parsed, strict=True)):
        columns = run.raw["result_columns"]
        for group in pr.groups:
            entry = benchmarks.get(group.benchmark)
            cols = dict(zip(columns, run.raw["results"][group.benchmark], strict=False))
            ci_a = cols.get("stats_ci_99_a") or []
            ci_b = cols.get("stats_ci_99_b") or []
            for j, r in enumerate(group.rows):
                version, _params, pkey, status, value = r[:5]
                key = (machine, group.benchmark, pkey)
                s = series.get(key)
                if s is None:
                    s = series[key] = _new_series(machine, group.benchmark, pkey, n, entry)
                s.versions.add(version)
                s.indices[pos] = j  # params can change between runs of one version: index per run
                s.current[pos] = entry is not None and version == entry.get("version")
                if status == "skipped":
                    continue
                s.ran[pos] = True
                if status == "ok":
                    s.values[pos] = value
                    if j < len(ci_a) and j < len(ci_b):
                        s.weights[pos] = _weight(ci_a[j], ci_b[j])


@dataclass(frozen=True)
class FlatRule:
    """A series is flat when it has no real step of its own: it is one version of a benchmark asv still
    lists, has at least ``min_runs`` values, the median of every ``window`` consecutive values stays within
    ``tolerance`` of the median of the whole series (a step of about twice the tolerance moves some window
    that far), and so do the medians of its first and of its last ``ends`` values within ``ends_tolerance``
    (a level of two runs at either end, which the long windows cannot see). One-off outliers and failed
    runs move no median that far: they stay, as the real noise the detectors must live with."""

    min_runs: int = 20
    window: int = 9
    tolerance: float = 0.025
    ends: int = 3
    ends_tolerance: float = 0.05


def flat_reason(history: History, s: Series, rule: FlatRule) -> str | None:
    """Why ``s`` is not flat under ``rule`` (None when it is)."""
    import numpy as np

    entry = history.benchmarks.get(s.benchmark)
    if entry is None:
        return "benchmark not in benchmarks.json"
    if s.versions != {entry.get("version")}:
        return "more than one benchmark version"
    v = s.values[s.valid]
    if v.size < max(rule.min_runs, rule.window):
        return f"fewer than {rule.min_runs} values"
    z = np.log(v)
    med = float(np.median(z))
    windows = np.lib.stride_tricks.sliding_window_view(z, rule.window)
    dev = float(np.max(np.abs(np.median(windows, axis=1) - med)))
    if dev > math.log1p(rule.tolerance):
        return f"a level {math.expm1(dev):.1%} off the median"
    for end, part in (("first", z[: rule.ends]), ("last", z[-rule.ends :])):
        dev = abs(float(np.median(part)) - med)
        if dev > math.log1p(rule.ends_tolerance):
            return f"the {end} {rule.ends} values {math.expm1(dev):.1%} off the median"
    return None


def flat_series(history: History, rule: FlatRule) -> tuple[list[SeriesKey], dict[str, int]]:
    """Keys of the flat series (sorted, so a seed always draws the same ones) and why the others were left."""
    keep: list[SeriesKey] = []
    reasons: dict[str, int] = {}
    for key in sorted(history.series):
        why = flat_reason(history, history.series[key], rule)
        if why is None:
            keep.append(key)
        else:
            label = re.sub(r" -?[0-9.]+%", "", why)  # the reason without this series' figure
            reasons[label] = reasons.get(label, 0) + 1
    return keep, reasons


# Factors: machine -> run position -> (benchmark, parameter index) -> multiplier of that measurement.
Factors = Mapping[str, Mapping[int, Mapping[tuple[str, int], float]]]


def _scaled(raw: dict[str, Any], changes: Mapping[tuple[str, int], float]) -> dict[str, Any]:
    out = dict(raw)
    out["results"] = dict(raw["results"])
    columns = raw["result_columns"]
    for bench in {b for b, _ in changes}:
        row = copy.deepcopy(raw["results"][bench])
        for name in (*_SCALED_COLUMNS, "samples"):
            if name not in columns or columns.index(name) >= len(row) or row[columns.index(name)] is None:
                continue
            col = row[columns.index(name)]
            for (b, j), f in changes.items():
                if b != bench or j >= len(col) or col[j] is None:
                    continue
                if math.isnan(f):  # a failed run: asv writes null
                    col[j] = None
                elif name == "samples":
                    col[j] = [x * f if isinstance(x, int | float) else x for x in col[j]]
                elif isinstance(col[j], int | float) and math.isfinite(col[j]):
                    col[j] = col[j] * f
        out["results"][bench] = row
    return out


# Version bumps: machine -> (first run position of the new version, benchmarks whose version changes there).
Bumps = Mapping[str, tuple[int, frozenset[str]]]
BUMPED_VERSION = "b" * 64  # the new asv version of a bumped benchmark (benchmarks.json lists it)


def _bumped(raw: dict[str, Any], benchmarks: frozenset[str]) -> dict[str, Any]:
    out = dict(raw)
    out["results"] = dict(raw["results"])
    at = raw["result_columns"].index("version")
    for bench in benchmarks & set(raw["results"]):
        row = list(raw["results"][bench])
        row[at] = BUMPED_VERSION
        out["results"][bench] = row
    return out


def write_history(
    history: History, dest: Path, factors: Factors, upto: Mapping[str, int] | None = None, bumps: Bumps | None = None
) -> Path:
    """Write the history as an asv results directory under ``dest`` and return it. Runs at positions
    ``>= upto[machine]`` are left out; a run with ``factors`` gets its measurements (value, 99% interval,
    quartiles, samples) multiplied (a NaN factor: the run failed, null); ``bumps`` give benchmarks a new asv
    version from a position on (benchmarks.json lists it); every other file is copied byte for byte.
    Existing files are kept, so a later call with a larger ``upto`` adds only the newer runs (as a nightly
    would)."""
    from db.asvformat import BENCHMARKS_JSON, MACHINE_JSON

    results = dest / "results"
    results.mkdir(parents=True, exist_ok=True)
    bumped = frozenset().union(*(b for _p, b in (bumps or {}).values()))
    if bumped:
        listing = json.loads((history.root / BENCHMARKS_JSON).read_text())
        for name in bumped:
            listing[name] = {**listing[name], "version": BUMPED_VERSION}
        (results / BENCHMARKS_JSON).write_text(json.dumps(listing), encoding="utf-8")
    else:
        shutil.copyfile(history.root / BENCHMARKS_JSON, results / BENCHMARKS_JSON)
    for machine, runs in history.runs.items():
        last = len(runs) if upto is None else upto.get(machine, len(runs))
        for pos, run in enumerate(runs[:last]):
            folder = results / run.path.parent.name
            if not folder.is_dir():
                folder.mkdir()
                machine_json = run.path.parent / MACHINE_JSON
                if machine_json.is_file():
                    shutil.copyfile(machine_json, folder / MACHINE_JSON)
            target = folder / run.path.name
            if target.exists():
                continue
            changes = factors.get(machine, {}).get(pos)
            bump_at, bump = (bumps or {}).get(machine, (len(runs), frozenset()))
            raw = _bumped(run.raw, bump) if pos >= bump_at and bump else run.raw
            if changes:
                raw = _scaled(raw, changes)
            if raw is run.raw:
                shutil.copyfile(run.path, target)
            else:
                target.write_text(json.dumps(raw), encoding="utf-8")
    return results


def write_errors(original: History, written: History, factors: Factors) -> list[str]:
    """Where a written history differs from ``original`` with ``factors`` applied (empty: exactly as
    planned, every other value unchanged)."""
    import numpy as np

    errors: list[str] = []
    for key, w in written.series.items():
        o = original.series.get(key)
        if o is None:
            errors.append(f"{key}: not in the original history")
            continue
        n = w.values.size
        expected = o.values[:n].copy()
        for pos in np.flatnonzero(o.indices[:n] >= 0):
            f = factors.get(key[0], {}).get(int(pos), {}).get((key[1], int(o.indices[pos])))
            if f is not None:
                expected[pos] = math.nan if math.isnan(f) else expected[pos] * f
        bad = ~np.isclose(w.values, expected, rtol=1e-12, atol=0.0, equal_nan=True)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            errors.append(f"{key} run {pos}: wrote {w.values[pos]!r}, expected {expected[pos]!r}")
    return errors
