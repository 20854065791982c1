"""The class skeleton every suite shares, written once: a timed class and a metrics class per suite.

A suite module declares its grid (``params``/``param_names``), its case builder and its byte/flop
model, and subclasses ``Timed`` and ``Metrics`` with explicit asv versions::

    class SparseDecode(_suite.Timed, benchmark="time_decode", version="c07a6849..."): ...
    class SparseDecodeMetrics(_suite.Metrics, versions={"track_gbps": "6bdc27e3...", ...}): ...

Versions. Without a ``version`` attribute asv hashes a benchmark's source (its function, setup and
setup_cache) into its version, and a new version starts a new series segment: moving code would cut
the history. Every benchmark therefore carries an explicit version, set to the value asv computed for
it in the bundled H200 history (``history/results/benchmarks.json``), so this refactor and any later
one keep the series (``tests/bench/test_versions.py`` proves it). Bump a benchmark's version only when
its numbers stop being comparable with its history.

The generated methods are ordinary asv benchmarks: ``Timed`` adds the ``time_`` method, ``Metrics``
the four ``track_`` methods, one ``track_launch_<key>`` per kernel-config key and a ``setup_cache`` per
subclass. asv keys a setup_cache by its module and source line, so each suite module gets its own (one
``Metrics`` subclass per module).

Kernel configuration (provenance, not performance). ``track_launch_<key>`` (unit ``config``) is one
number of the launch record (``_harness.record_view``) of the case that the ``track_`` metrics measured:
the record is the one the timed call returned in ``build_case`` (on a GPU: the call captured into the
timed graph), kept with the case (``_harness.keep_launch``) and read from the same ``setup_cache`` entry, so it
costs no launch and no measurement of its own. A suite declares ``launch_fields`` (key -> path in its
record) and the keys' versions in its class line. A key that does not apply to a case (SIMT has no
BLOCK_H; spills are unknown under the interpreter) is NaN, asv's value for a skipped case (None would
read as a failure). The detector and ``mlaperf compare`` leave these benchmarks out
(``db.provenance.is_provenance``, the one rule); the dashboard's History hover shows them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, ClassVar

from . import _harness, _tier, _timing

# Kernel-config benchmarks: <Metrics class>.track_launch_<key>, unit "config" (docs/CONTRACTS.md).
LAUNCH_PREFIX = "track_launch_"
LAUNCH_UNIT = "config"

# track_ method -> (metric key of _roofline.metrics, asv unit)
TRACKS: dict[str, tuple[str, str]] = {
    "track_tokens_per_s": ("tokens_per_s", "tokens/s"),
    "track_gbps": ("gbps", "GB/s"),
    "track_tflops": ("tflops", "TFLOP/s"),
    "track_roofline_fraction": ("roofline_fraction", "fraction"),
}


def _method(cls: type, name: str, fn: Callable[..., Any], **attrs: Any) -> None:
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    fn.__module__ = cls.__module__
    for key, value in attrs.items():
        setattr(fn, key, value)
    setattr(cls, name, fn)


def _track(metric: str) -> Callable[..., float]:
    def track(self: Metrics, cache: dict[str, Any], *params: Any) -> float:
        return _harness.metric(cache, params, metric)

    return track


def _launch_track(key: str) -> Callable[..., float]:
    def track(self: Metrics, cache: dict[str, Any], *params: Any) -> float:
        return _harness.launch_value(cache, params, key)

    return track


class Timed:
    """GPU time of one call of the case (CUDA-graph replay behind an L2 flush; ``_timing``), seconds.

    Subclasses set ``params``, ``param_names`` and ``build_case`` (a staticmethod returning a
    ``_timing.Replayer`` after the correctness gate) and name their benchmark in the class line.
    """

    params: ClassVar[list[list[Any]]]
    param_names: ClassVar[list[str]]
    build_case: ClassVar[Callable[..., _timing.Replayer]]
    timer = _timing.CLOCK
    rounds = _tier.TIMING["rounds"]
    repeat = _tier.TIMING["repeat"]
    number = _tier.TIMING["number"]
    warmup_time = _tier.TIMING["warmup_time"]
    min_run_count = _tier.TIMING["min_run_count"]
    timeout = _tier.TIMING["timeout"]

    def __init_subclass__(cls, *, benchmark: str, version: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not benchmark.startswith("time_"):
            raise TypeError(f"{cls.__name__}: benchmark {benchmark!r} must start with 'time_'")

        def timed(self: Timed, *params: Any) -> None:
            self.case.replay()

        _method(cls, benchmark, timed, version=version)

    def setup(self, *params: Any) -> None:
        # One case (inputs, gate, graphs) per process; asv calls setup before every sample.
        self.case = _harness.cached_case((type(self).__name__, *params), lambda: type(self).build_case(*params))
        self.number = self.case.number


class Metrics:
    """tokens/s, effective GB/s and TFLOP/s, and roofline fraction of every case of a suite.

    All cases are measured in one ``setup_cache`` process (median of cold replays; one CUDA init);
    a case that failed or was skipped there fails or skips every ``track_``. Subclasses set
    ``params``, ``param_names``, ``build_case``, ``model`` (bytes, flops of a case) and
    ``launch_fields`` (``track_launch_<key>`` -> path of the value in the case's launch record).
    """

    params: ClassVar[list[list[Any]]]
    param_names: ClassVar[list[str]]
    build_case: ClassVar[Callable[..., _timing.Replayer]]
    model: ClassVar[Callable[..., tuple[int, int]]]
    launch_fields: ClassVar[dict[str, tuple[str, ...]]]
    timeout = _tier.TIMING["timeout"]

    def __init_subclass__(
        cls, *, versions: dict[str, str], launch_versions: dict[str, str], **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if set(versions) != set(TRACKS):
            raise TypeError(f"{cls.__name__}: versions must name exactly {sorted(TRACKS)}, got {sorted(versions)}")
        fields = getattr(cls, "launch_fields", None)
        if not isinstance(fields, dict) or set(fields) != set(launch_versions):
            raise TypeError(
                f"{cls.__name__}: launch_versions must name exactly the keys of launch_fields, "
                f"got {sorted(launch_versions)} for {sorted(fields or {})}"
            )

        def setup_cache(self: Metrics) -> dict[str, Any]:
            own = type(self)
            return _harness.measure_all(
                list(itertools.product(*own.params)),
                own.build_case,
                own.model,
                lambda *params: params[own.param_names.index("concurrency")],
                calls=_tier.METRIC_CALLS,
                launch_fields=own.launch_fields,
            )

        _method(cls, "setup_cache", setup_cache, timeout=_tier.SETUP_CACHE_TIMEOUT)
        for name, (metric, unit) in TRACKS.items():
            _method(cls, name, _track(metric), unit=unit, version=versions[name])
        for key, version in launch_versions.items():
            _method(cls, LAUNCH_PREFIX + key, _launch_track(key), unit=LAUNCH_UNIT, version=version)

    def setup(self, cache: dict[str, Any], *params: Any) -> None:
        _harness.check_metrics_case(cache, params)
