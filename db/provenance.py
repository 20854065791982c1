"""Which stored benchmarks are measurements and which are records of the kernel config a case ran with.

The asv suites (``benchmarks/_suite.py``) write a case's launch config as ``track_launch_<key>`` results
(unit ``config``: the BLOCK_H, split-K, prefetch, spills ... of the case), next to the case's own
measurements. They are provenance, not performance: no series of their own, no worse direction, never
examined by detection or comparisons. :func:`is_provenance` is the one rule; the store's reads
(``db.queries``), detection and ``mlaperf compare`` (``regressions``), the measured-versions check
(``mlaperf.measured``) and the dashboard's benchmarks all ask it. Standard library only: any layer may
import it.
"""

from __future__ import annotations

# The last name part of a kernel-config record starts with this (``benchmarks._suite.LAUNCH_PREFIX``
# writes it; tests/regressions/test_provenance.py keeps the two equal).
PROVENANCE_PREFIX = "track_launch_"


def is_provenance(benchmark: str) -> bool:
    """True for a kernel-config record (``bench_decode.SparseDecodeMetrics.track_launch_block_h``),
    False for a measurement (``bench_decode.SparseDecode.time_decode``)."""
    return benchmark.rsplit(".", 1)[-1].startswith(PROVENANCE_PREFIX)


def config_key(benchmark: str) -> str | None:
    """The config key a kernel-config record holds (``block_h``), None for a measurement."""
    return benchmark.rsplit(".", 1)[-1][len(PROVENANCE_PREFIX) :] if is_provenance(benchmark) else None
