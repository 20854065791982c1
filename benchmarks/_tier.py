"""Which tier this benchmark process runs (GPU grid or CPU smoke tier), decided without CUDA.

asv imports the suite once to discover benchmarks and once in its forkserver, from which every
benchmark process is forked; all must see the same parameter grid, and deciding the tier must not
need CUDA (a CUDA context does not survive a fork). So the tier comes from ``MLAPERF_TIER``
(``mlaperf run`` always sets it) or, for a plain ``asv run``, from a probe that reads torch's
``version.py`` and looks for an NVIDIA device node.
A GPU-tier case that finds no usable CUDA device in setup is skipped, never timed on the CPU.

The CPU tier sets ``TRITON_INTERPRET=1`` here, before anything imports triton.

The environment names and their readers are defined once, in ``settings.env`` (the runner sets them;
``benchmarks/__init__.py`` pins this checkout's copy of the package).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
from collections.abc import Callable

from settings import env

TIER_ENV = env.TIER.name
CONCURRENCY_ENV = env.CONCURRENCY.name
ARCH_PROFILE_ENV = env.ARCH_PROFILE.name
arch_profile: Callable[[], str] = env.arch_profile  # the profile a launch that names none runs
TIERS = env.TIERS


def _torch_has_cuda() -> bool:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return False
    m = re.search(r"^cuda\b[^=]*=\s*(.+)$", text, re.MULTILINE)
    return bool(m) and m.group(1).strip() not in ("None", "''", '""')


def _device_visible() -> bool:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def detect_tier() -> str:
    """``MLAPERF_TIER`` when set (must be gpu or cpu), else gpu when a CUDA torch and a GPU are present."""
    chosen = env.tier()
    if chosen is not None:
        return chosen
    return "gpu" if _torch_has_cuda() and _device_visible() else "cpu"


TIER = detect_tier()
if TIER == "cpu":
    env.use_interpreter()
else:
    # asv's forkserver imports the suites once and forks every benchmark process from it: importing
    # torch and triton here (seconds) is then paid once per commit instead of once per case. Nothing
    # here touches CUDA, so forking stays safe; each child initialises CUDA itself.
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError:
        pass  # the case's setup reports the missing package as a skip


concurrency_values = env.concurrency  # the grid, or the subset MLAPERF_CONCURRENCY names


# Parameter grids (docs/CONTRACTS.md). The CPU smoke tier keeps the names with tiny values.
if TIER == "gpu":
    NUM_HEADS = 64
    CONCURRENCY = concurrency_values([1, 2, 4, 8, 16, 32, 64, 128])
    DECODE_TOPK = [128, 512, 2048]
    DECODE_TOKENS_PER_REQUEST = 65536  # the design's reference: 64K tokens of context per request
    CONTEXT = [4096, 16384, 65536]
    MAX_CONTEXT = 131072
    STEP_TOPK = 512
    INDEX_SETS = 4  # decode: index sets over one cache
    REQUEST_SETS = 2  # indexer / step: independent request batches (each its own cache)
else:
    NUM_HEADS = 16
    CONCURRENCY = concurrency_values([1, 2])
    DECODE_TOPK = [32, 64]
    DECODE_TOKENS_PER_REQUEST = 1024
    CONTEXT = [256, 512]
    MAX_CONTEXT = 1024
    STEP_TOPK = 32
    INDEX_SETS = 2
    REQUEST_SETS = 2

# asv timing attributes per tier. GPU: one process per case (rounds=1, the CUDA init dominates), the
# samples are means of `number` cold replays (setup picks `number` per case); setup already warmed
# up, so no asv warm-up. CPU: the interpreter is slow enough that two or three single calls are all a case can afford.
if TIER == "gpu":
    TIMING: dict[str, object] = {
        "rounds": 1,
        "repeat": (10, 30, 1.0),
        "number": 1,
        "warmup_time": 0.0,
        "min_run_count": 2,
        "timeout": 600,
    }
else:
    TIMING = {
        "rounds": 1,
        "repeat": (2, 2, 4.0),
        "number": 1,
        "warmup_time": 0.0,
        "min_run_count": 2,
        "timeout": 300,
    }

SETUP_CACHE_TIMEOUT = 1800 if TIER == "gpu" else 600
# Cold replays per case behind the track_ metrics (their median is the step time).
METRIC_CALLS = 21 if TIER == "gpu" else 1
