"""What a launch ran: the typed record every launcher returns with its outputs.

A ``LaunchRecord`` is built by the launcher from the ``KernelLaunch`` objects it ran (their kernel,
grid, constexprs, warps and stages) and from the kernels Triton compiled for them, so it cannot name a
config other than the one that ran. One shape for every op: ``op``, ``impl``, ``kernels`` (one
``KernelRun`` per launch, in order), ``config`` (the op's resolved config, read off those runs), the
architecture profile, and the compiled registers / spills / shared memory (``None`` where unknown,
e.g. under the Triton interpreter, which compiles nothing).

The public entries keep their return values (``sparse_mla_decode`` -> ``(out, lse)``); their
``*_with_record`` variants return the record as well.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._common import KernelLaunch

ConfigValue = int | bool | str


def _frozen(values: Mapping[str, ConfigValue]) -> Mapping[str, ConfigValue]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class KernelRun:
    """One kernel launch (or a torch step, ``grid`` empty): its name, grid, launch config (constexprs,
    ``num_warps``, ``num_stages``) and, when Triton compiled it, its per-thread registers and spill bytes
    and its shared memory per block."""

    name: str
    grid: tuple[int, ...] = ()
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    registers: int | None = None
    spill_bytes: int | None = None
    shared: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", _frozen(self.config))

    @classmethod
    def of(cls, launch: KernelLaunch, compiled: object) -> KernelRun:
        """The run of ``launch``; ``compiled`` is what ``launch.run()`` returned (None-like under the
        interpreter)."""
        config = {k: v for k, v in launch.constexprs.items() if isinstance(v, int | bool | str)}
        config.update(num_warps=launch.num_warps, num_stages=launch.num_stages)
        return cls(kernel_name(launch.kernel), tuple(launch.grid), config, **compiled_stats(compiled))

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "grid": list(self.grid), "config": dict(self.config),
                "registers": self.registers, "spill_bytes": self.spill_bytes, "shared": self.shared}  # fmt: skip


@dataclass(frozen=True)
class LaunchRecord:
    """What one call of a launcher ran (see the module docstring)."""

    op: str  # "decode" | "indexer"
    impl: str
    kernels: tuple[KernelRun, ...]
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    arch_profile: str = "native"
    source: str = "fixed"  # how the config was chosen: fixed | default | cache | tuned | autotuner
    interpreted: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kernels", tuple(self.kernels))
        object.__setattr__(self, "config", _frozen(self.config))

    @property
    def kernel(self) -> str:
        """The kernels in launch order, ``+``-joined (``_mma_decode_kernel+_combine_kernel``)."""
        return "+".join(k.name for k in self.kernels) or "none"

    def _most(self, key: str) -> int | None:
        known = [v for v in (getattr(k, key) for k in self.kernels) if v is not None]
        return max(known) if known else None

    @property
    def registers(self) -> int | None:
        """The most registers per thread of any of its compiled kernels."""
        return self._most("registers")

    @property
    def spill_bytes(self) -> int | None:
        return self._most("spill_bytes")

    @property
    def shared(self) -> int | None:
        return self._most("shared")

    def as_dict(self) -> dict[str, object]:
        """Flat view for JSON and the tracker's gate: the fields, then the config keys, then the kernels.
        Resources appear only where known."""
        out: dict[str, object] = {"op": self.op, "impl": self.impl, "kernel": self.kernel,
                                  "arch_profile": self.arch_profile, "source": self.source,
                                  "interpreted": self.interpreted, **self.config}  # fmt: skip
        for key in ("registers", "spill_bytes", "shared"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["kernels"] = [k.as_dict() for k in self.kernels]
        return out

    def as_json(self) -> dict[str, object]:
        """``as_dict()`` as a measurement script's JSON holds it: a value JSON has no type for becomes its str."""
        return json.loads(json.dumps(self.as_dict(), default=str))


def kernel_name(kernel: object) -> str:
    """The Python name of a JIT function (or of the function an autotuner wraps)."""
    fn = getattr(kernel, "fn", kernel)
    fn = getattr(fn, "fn", fn)  # Autotuner -> JITFunction -> function
    return str(getattr(fn, "__name__", type(kernel).__name__))


def compiled_stats(compiled: object) -> dict[str, int]:
    """Registers, spill bytes and shared memory of a launched kernel (empty under the interpreter)."""
    stats: dict[str, int] = {}
    regs = getattr(compiled, "n_regs", None)
    if isinstance(regs, int):
        stats["registers"] = regs
    spills = getattr(compiled, "n_spills", None)
    if isinstance(spills, int):  # Triton reports the local-memory frame in 4-byte words
        stats["spill_bytes"] = 4 * spills
    shared = getattr(getattr(compiled, "metadata", None), "shared", None)
    if isinstance(shared, int):
        stats["shared"] = shared
    return stats
