"""Plumbing shared by the suites: device choice, skips for older kernels, per-process case caching,
and the one-process measurement behind the ``*Metrics`` classes.

asv re-runs ``setup`` before every sample (and, with ``number > 1``, before every call), so a case is
built once per process and looked up afterwards. Building a case (inputs, correctness gate, graph
capture) is the expensive part; it happens in ``setup``, never inside a timed call.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import math
import sys
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from . import _roofline, _tier
from ._gate import KernelMismatch

_CASES: dict[Hashable, Any] = {}
_ERRORS: dict[Hashable, BaseException] = {}


def device() -> Any:
    """cuda:0 on the GPU tier (skip when there is none), the CPU (Triton interpreter) otherwise."""
    import torch

    if _tier.TIER == "gpu":
        if not torch.cuda.is_available():
            raise NotImplementedError("GPU tier, but torch sees no CUDA device")
        return torch.device("cuda", 0)
    return torch.device("cpu")


def kernels() -> Any:
    """The ``mla_kernels`` package of the commit under test."""
    try:
        return importlib.import_module("mla_kernels")
    except ImportError as exc:
        raise NotImplementedError(f"mla_kernels cannot be imported at this commit: {exc}") from exc


def require(name: str, *modules: str) -> Any:
    """An API object of the commit under test, from the first of ``modules`` (default: mla_kernels)
    that has it; NotImplementedError (asv: skipped) when none does, as at older commits."""
    kernels()  # a package that cannot be imported at all is a skip with its own message
    searched = modules or ("mla_kernels",)
    for module in searched:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:  # the module does not exist yet; a broken import inside it fails
                continue
            raise
        if hasattr(mod, name):
            return getattr(mod, name)
    raise NotImplementedError(f"{name} does not exist at this commit (looked in {', '.join(searched)})")


def require_impl(kind: str, impl: str, known: Iterable[str] | None) -> None:
    """Skip an implementation name the commit under test does not offer."""
    if known is not None and impl not in tuple(known):
        raise NotImplementedError(f"{kind} impl {impl!r} does not exist at this commit (has {tuple(known)})")


def as_skip(exc: ValueError, impl: str) -> NotImplementedError | None:
    """Older launchers reject unknown impl names with a ValueError naming them: that is a skip."""
    msg = str(exc)
    if "impl" in msg and repr(impl) in msg:
        return NotImplementedError(f"impl {impl!r} is not available at this commit: {msg}")
    return None


def _launcher(name: str, *modules: str) -> tuple[Callable[..., Any], bool]:
    """``(<name>_with_record, True)`` at the commit under test, or ``(name, False)`` at commits before launch
    records."""
    try:
        return require(f"{name}_with_record", *modules), True
    except NotImplementedError:
        return require(name, *modules), False


def accepts(name: str, param: str, *modules: str) -> bool:
    """Whether the launcher :func:`recorded` calls for ``name`` takes an argument ``param``: one added after
    the suite's first commits, which a case passes only where it exists."""
    return param in inspect.signature(_launcher(name, *modules)[0]).parameters


def recorded(name: str, *modules: str) -> Callable[..., tuple[Any, dict[str, Any] | None]]:
    """The launcher ``name`` of the commit under test as ``fn(*args, **kwargs) -> (outputs, record)``,
    ``record`` the :func:`record_view` of what that very call ran.

    It calls ``<name>_with_record``, which returns the launcher's outputs then its ``LaunchRecord``. At
    commits from before launch records, ``name`` itself, then a copy of the package's ``LAST_LAUNCH``
    (emptied before the call, so a launcher that records nothing leaves nothing); None when there is
    neither (the gate then fails the case).
    """
    fn, with_record = _launcher(name, *modules)
    if not with_record:

        def legacy(*args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any] | None]:
            launch = getattr(kernels(), "LAST_LAUNCH", None)
            if isinstance(launch, dict):
                launch.clear()
            result = fn(*args, **kwargs)
            return result, record_view(dict(launch)) if isinstance(launch, dict) else None

        return legacy

    def call(*args: Any, **kwargs: Any) -> tuple[Any, dict[str, Any] | None]:
        *outputs, record = fn(*args, **kwargs)
        return (outputs[0] if len(outputs) == 1 else tuple(outputs)), record_view(record)

    return call


def step_recorded(step: Any) -> Callable[[], tuple[Any, dict[str, Any] | None]]:
    """``DecodeStep.run`` as ``fn() -> ((out, lse), {op: record view})`` (``run_with_records``; at older
    commits ``run()`` and the step's ``launches`` attribute)."""
    if hasattr(step, "run_with_records"):

        def call() -> tuple[Any, dict[str, Any] | None]:
            out, lse, records = step.run_with_records()
            return (out, lse), {op: record_view(r) for op, r in records.items()}

        return call

    def legacy() -> tuple[Any, dict[str, Any] | None]:
        result = step.run()
        launches = getattr(step, "launches", None)
        return result, {op: record_view(r) for op, r in launches.items()} if isinstance(launches, dict) else None

    return legacy


# Keys of the package's launch records before they were typed (``LAST_LAUNCH``) -> their names now.
_LEGACY_KEYS = {"tuned": "source", "n_regs": "registers"}
_LEGACY_SELECT = {"BLOCK": "SELECT_BLOCK", "num_warps": "select_num_warps", "num_stages": "select_num_stages"}


def record_view(record: Any) -> dict[str, Any] | None:
    """One flat dict of a launch record, whatever the commit: ``LaunchRecord.as_dict()`` (op, impl,
    kernel, arch_profile, source, the config keys, registers / spill_bytes / shared where known, kernels),
    or an older commit's ``LAST_LAUNCH`` dict brought to those names (its indexer's nested ``scores`` keys
    lifted, its ``select`` keys prefixed). None for no record."""
    if record is None:
        return None
    if hasattr(record, "as_dict"):
        return dict(record.as_dict())
    if not isinstance(record, dict) or not record:
        return None
    view: dict[str, Any] = {}
    for key, value in record.items():
        if key == "scores" and isinstance(value, dict):
            view.update(value)
        elif key == "select" and isinstance(value, dict):
            view.update({_LEGACY_SELECT.get(k, f"select_{k}"): v for k, v in value.items()})
        else:
            view[_LEGACY_KEYS.get(key, key)] = value
    return view


def keep_launch(replayer: Any, record: dict[str, Any] | None) -> Any:
    """Keep a case's launch record with the case (the record of the timed call, returned by the call
    that the timed graph captured); returns the replayer."""
    replayer.launch = record
    return replayer


def launch_numbers(record: Any, fields: dict[str, tuple[str, ...]]) -> dict[str, float | None]:
    """{key: number} of a launch record, each ``fields[key]`` a path of dict keys into it (``("BLOCK_H",)``,
    ``("decode", "NUM_SPLITS")``); None where the path is missing or not a number (bools and text are not)."""
    out: dict[str, float | None] = {}
    for key, path in fields.items():
        value: Any = record
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        out[key] = float(value) if ok else None
    return out


def cached_case(key: Hashable, build: Callable[[], Any]) -> Any:
    """Build the case for ``key`` once per process; a build error is re-raised on every later call."""
    if key in _ERRORS:
        raise _ERRORS[key]
    if key not in _CASES:
        try:
            _CASES[key] = build()
        except BaseException as exc:
            _ERRORS[key] = exc
            raise
    return _CASES[key]


def free_memory() -> None:
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def measure_all(
    keys: list[tuple[Any, ...]],
    build: Callable[..., Any],
    model: Callable[..., tuple[int, int]],
    concurrency_of: Callable[..., int],
    *,
    calls: int,
    launch_fields: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """Measure every case in this one process (one CUDA init) for the ``track_`` metrics.

    ``build(*key)`` returns a Replayer (after the correctness gate) carrying its launch record
    (:func:`keep_launch`); the median of ``calls`` cold replays is the step time, and ``launch_fields``
    picks the numbers of that record (``launch``). Returns plain data for asv's setup_cache pickle:
    ``{"ceilings": {...}, "cases": {key: {"status": "ok"|"skip"|"fail", ...}}}``.
    """
    dev = device()
    ceil = _roofline.ceilings(dev)
    cases: dict[tuple[Any, ...], dict[str, Any]] = {}
    t0 = time.perf_counter()
    for i, key in enumerate(keys, 1):
        try:
            replayer = build(*key)
            seconds = sorted(replayer.measure(calls))[calls // 2]
            nbytes, flops = model(*key)
            entry: dict[str, Any] = {"status": "ok", "seconds": seconds, "bytes": nbytes, "flops": flops}
            entry.update(_roofline.metrics(concurrency_of(*key), seconds, nbytes, flops, ceil))
            entry["launch"] = launch_numbers(getattr(replayer, "launch", None), launch_fields or {})
        except NotImplementedError as exc:
            entry = {"status": "skip", "reason": str(exc)}
        except Exception as exc:  # noqa: BLE001 - one broken case must not hide the others
            entry = {"status": "fail", "reason": f"{type(exc).__name__}: {exc}"}
        cases[key] = entry
        replayer = None
        free_memory()
        print(
            f"[{i}/{len(keys)}] {key}: {entry['status']} "
            f"{entry.get('seconds', entry.get('reason', ''))} ({time.perf_counter() - t0:.1f}s)",
            file=sys.stderr,
            flush=True,
        )
    return {"ceilings": ceil, "cases": cases}


def metric(cache: dict[str, Any], key: tuple[Any, ...], name: str) -> float:
    """Look up one metric of one case; skip/fail reproduce the case's setup outcome."""
    entry = cache["cases"].get(key)
    if entry is None:
        raise NotImplementedError(f"case {key} was not measured")
    if entry["status"] == "skip":
        raise NotImplementedError(entry["reason"])
    if entry["status"] == "fail":
        raise KernelMismatch(entry["reason"])
    return float(entry[name])


def launch_value(cache: dict[str, Any], key: tuple[Any, ...], name: str) -> float:
    """One kernel-config number of one case (``track_launch_<name>``): NaN, asv's skipped value, where the
    key does not apply to the case's kernel; a skipped or failed case skips or fails as every ``track_``."""
    metric(cache, key, "seconds")
    value = cache["cases"][key].get("launch", {}).get(name)
    return math.nan if value is None else float(value)


def check_metrics_case(cache: dict[str, Any], key: tuple[Any, ...]) -> None:
    """setup of a Metrics class: skipped / failed cases are skipped / failed for every track_."""
    metric(cache, key, "seconds")
