"""Correctness gate: each case checks, once in setup, that the kernel it times is the one asked for
and that its output is right. Any failure raises ``KernelMismatch`` (an AssertionError), so asv
records the case as failed (null), never a time.

Why the gate lives here. asv imports the suites from the benchmark directory of the checkout that
runs it (``mlaperf run`` benchmarks every commit with the current checkout's ``benchmarks/``), while
``mla_kernels`` comes from the commit under test. So the tolerance table, the closeness rule, the
launch-record rules and the float64 oracle (``_oracle.py``) below cannot be loosened by the commit
being measured. ``mla_kernels/testing.py`` carries a copy of the table and rule for the package's
own tests; ``tests/oracle/test_tolerances.py`` fails when the two differ. How each number was
measured: ``docs/tolerances.md``.

Decode gate: the package's reference against the oracle (``reference`` row), then the kernel
against both the reference and the oracle (its tier's row). Indexer gate: the package's reference
logits against the indexer oracle (``INDEXER_LOGITS``), then the kernel's selection against the
oracle's logits (``check_topk``). Fail closed on launch records (the
``LaunchRecord`` the timed call returned, as ``_harness.record_view``): a case whose record is
missing, lacks the config keys of its kernel, names another implementation, kernel or architecture
profile, or states a config its own kernel runs contradict, fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tol:
    """FlashMLA's closeness rule: an element passes when ``|diff| <= atol`` or ``|diff| <= rtol *
    |expected|``; on top, the cosine distance of the whole tensor must be ``<= cos``."""

    atol: float
    rtol: float
    cos: float


# One table, measured (docs/tolerances.md): tier -> tensor -> Tol. "reference" is the package's fp32
# reference against the oracle; "interpreter" and "gpu" are the Triton kernels against both.
TOLERANCES: dict[str, dict[str, Tol]] = {
    "reference": {"out": Tol(4e-8, 1 / 128, 3e-6), "lse": Tol(8e-7, 8e-7, 3e-14)},
    "interpreter": {"out": Tol(4e-8, 2 / 128, 3e-5), "lse": Tol(1e-6, 1e-6, 4e-14)},
    "gpu": {"out": Tol(5e-4, 2 / 128, 6e-6), "lse": Tol(1e-6, 1e-6, 7e-14)},
}


# The package's indexer reference against the indexer oracle: both sum in float64, the reference then
# rounds to float32 (half an ulp, 2**-24 relative); this allows one ulp (docs/tolerances.md).
INDEXER_LOGITS = Tol(1e-30, 2**-23, 1e-14)


class KernelMismatch(AssertionError):
    """The kernel's output disagrees with the reference or the oracle, or the wrong kernel ran."""


def assert_close(name: str, actual: Any, expected: Any, tol: Tol) -> None:
    """``actual`` against ``expected`` by the rule of :class:`Tol`, in float64. NaN never passes; inf
    positions and signs must agree."""
    import torch

    if tuple(actual.shape) != tuple(expected.shape):
        raise KernelMismatch(f"{name}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    a, e = actual.double(), expected.to(actual.device).double()
    for label, t in (("kernel output", a), ("expected values", e)):
        if bool(torch.isnan(t).any()):
            raise KernelMismatch(f"{name}: {int(torch.isnan(t).sum())} NaN values in the {label}")
    a_inf, e_inf = torch.isinf(a), torch.isinf(e)
    if not torch.equal(a_inf, e_inf) or not torch.equal(a[a_inf], e[e_inf]):
        raise KernelMismatch(f"{name}: inf positions differ ({int(a_inf.sum())} vs {int(e_inf.sum())} expected)")
    fin = ~e_inf
    af, ef = a[fin], e[fin]
    diff = (af - ef).abs()
    bad = (diff > tol.atol) & (diff > tol.rtol * ef.abs())
    if bool(bad.any()):
        worst = int(torch.argmax(torch.where(bad, diff, torch.zeros_like(diff))))
        where = [int(i) for i in fin.nonzero()[worst]]
        raise KernelMismatch(
            f"{name}: {int(bad.sum())} of {diff.numel()} values off by more than abs {tol.atol:.1e} and "
            f"rel {tol.rtol:.2e}; worst at {where}: {af[worst].item():.6g} vs {ef[worst].item():.6g} "
            f"(|diff| {diff[worst].item():.2e})"
        )
    denom = float((af * af + ef * ef).sum())
    cos = 0.0 if denom == 0 else 1 - 2 * float((af * ef).sum()) / denom
    if cos > tol.cos:
        raise KernelMismatch(f"{name}: cosine distance {cos:.2e} > {tol.cos:.0e} (a small error everywhere)")


def check_decode(out: Any, lse: Any, reference: tuple[Any, Any], oracle: tuple[Any, Any], *, interpreter: bool) -> None:
    """The package reference against the oracle, then the kernel's (out, lse) against both."""
    ref_tol, tol = TOLERANCES["reference"], TOLERANCES["interpreter" if interpreter else "gpu"]
    assert_close("reference out vs oracle", reference[0], oracle[0], ref_tol["out"])
    assert_close("reference lse vs oracle", reference[1], oracle[1], ref_tol["lse"])
    for suffix, (e_out, e_lse) in (("", reference), (" vs oracle", oracle)):  # "out": against the reference
        assert_close(f"out{suffix}", out, e_out, tol["out"])
        assert_close(f"lse{suffix}", lse, e_lse, tol["lse"])


# What a launch of each benchmarked implementation must record: its kernel (the start of the recorded
# name, or one of several) and the resolved config keys (``_harness.record_view`` names). The MMA
# decode runs fused or as two passes (``BLOCK_D`` > 0).
EXPECTED_LAUNCH: dict[tuple[str, str], tuple[str | tuple[str, ...], tuple[str, ...]]] = {
    ("decode", "simt"): ("_simt_decode_kernel", ("BLOCK_N", "num_warps")),
    ("decode", "mma"): (("_mma_decode_kernel", "_scores_pass_kernel+_output_pass_kernel"),
                        ("BLOCK_H", "BLOCK_N", "NUM_SPLITS", "num_warps")),
    ("decode", "gluon"): (("_gluon_decode_kernel", "_wgmma_decode_kernel", "_wgmma_ws_decode_kernel"),
                          ("BLOCK_H", "BLOCK_N", "NUM_SPLITS", "num_warps")),
    ("indexer", "fp32_maxctx"): ("_fp32_maxctx_scores_kernel", ("BLOCK_T",)),
    ("indexer", "bf16"): (("_bf16_scores_kernel", "_coop_topk_kernel"), ("BLOCK_T", "SELECT_BLOCK")),
}


def check_launch(launch: Any, op: str, impl: str, *, arch_profile: str | None = None) -> None:
    """Fail closed unless ``launch`` is a complete record of ``impl``'s kernel for ``op`` (and of
    ``arch_profile`` when one was asked for): no silent fallback can pass for a result."""
    kernel, keys = EXPECTED_LAUNCH[(op, impl)]
    if not isinstance(launch, Mapping) or not launch:
        raise KernelMismatch(f"{op} impl {impl!r}: no launch record ({launch!r}); cannot tell which kernel ran")
    if launch.get("impl") != impl:
        raise KernelMismatch(f"{op}: asked for impl {impl!r} but the launch record says {launch.get('impl')!r}: "
                             f"{_brief(launch)}")  # fmt: skip
    ran = launch.get("kernel")
    if not isinstance(ran, str) or not ran.startswith(kernel):
        want = kernel if isinstance(kernel, str) else " or ".join(kernel)
        raise KernelMismatch(f"{op} impl {impl!r}: expected kernel {want}, the record names {ran!r}: {_brief(launch)}")
    missing = [k for k in keys if k not in launch]
    if missing:
        raise KernelMismatch(f"{op} impl {impl!r}: incomplete launch record, no {', '.join(missing)}: "
                             f"{_brief(launch)}")  # fmt: skip
    if arch_profile is not None and launch.get("arch_profile") != arch_profile:
        raise KernelMismatch(f"{op} impl {impl!r}: asked for arch profile {arch_profile!r}, the record says "
                             f"{launch.get('arch_profile')!r}: {_brief(launch)}")  # fmt: skip
    _check_consistent(launch, op, impl)


def _check_consistent(launch: Mapping[str, Any], op: str, impl: str) -> None:
    """A record that lists its kernel runs must agree with them: the config keys it states equal the
    launch config of its first kernel (which owns the tile), and the kernels' names make up ``kernel``.
    Records of older commits list no runs and are taken as they are."""
    runs = launch.get("kernels")
    if runs is None:
        return
    if not isinstance(runs, list) or not runs or not all(isinstance(r, Mapping) for r in runs):
        raise KernelMismatch(f"{op} impl {impl!r}: the record lists no kernel runs: {_brief(launch)}")
    if "+".join(str(r.get("name")) for r in runs) != launch.get("kernel"):
        raise KernelMismatch(f"{op} impl {impl!r}: the record names {launch.get('kernel')!r} but lists the runs "
                             f"{[r.get('name') for r in runs]}")  # fmt: skip
    first = runs[0].get("config") or {}
    for key, value in first.items():
        if key in launch and launch[key] != value:
            raise KernelMismatch(f"{op} impl {impl!r}: the record says {key}={launch[key]!r} but "
                                 f"{runs[0].get('name')} ran with {key}={value!r}")  # fmt: skip
    grid = runs[0].get("grid") or []
    if "NUM_SPLITS" in launch and not launch.get("BLOCK_D") and len(grid) == 3 and grid[2] != launch["NUM_SPLITS"]:
        raise KernelMismatch(f"{op} impl {impl!r}: the record says NUM_SPLITS={launch['NUM_SPLITS']!r} but "
                             f"{runs[0].get('name')} ran a grid of {grid[2]} splits")  # fmt: skip


def _brief(launch: Mapping[str, Any]) -> dict[str, Any]:
    """A record without its kernel runs, for messages."""
    return {k: v for k, v in launch.items() if k != "kernels"}


def check_indexer(selected: Any, reference: Any, oracle: Any, block_table: Any, seq_lens: Any, topk: int) -> None:
    """The package's reference logits against the oracle's, then the kernel's selection against the
    oracle's logits (:func:`check_topk`): a reference changed together with the kernels cannot pass."""
    assert_close("reference logits vs oracle", reference, oracle, INDEXER_LOGITS)
    check_topk(selected, oracle, block_table, seq_lens, topk)


def check_topk(
    selected: Any,
    ref_logits: Any,
    block_table: Any,
    seq_lens: Any,
    topk: int,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Indexer selection check against reference logits by token position (``-inf`` past each length).

    Every row must hold ``min(seq_len, topk)`` distinct slots of the request's own tokens (``-1``
    elsewhere), and the sorted reference logits of the selection must equal the true top-k logits
    up to ``atol + rtol * max|logit|`` of the row: order is free and near-ties may swap.
    """
    import torch

    batch, ctx = ref_logits.shape
    if tuple(selected.shape) != (batch, topk):
        raise KernelMismatch(f"indices: shape {tuple(selected.shape)}, expected {(batch, topk)}")
    dev = ref_logits.device
    sel = selected.to(dev, torch.int64)
    bt = block_table.to(dev, torch.int64)
    lens = seq_lens.to(dev, torch.int64).clamp(0, ctx)
    n_valid = lens.clamp_max(topk)

    def fail(rows: Any, what: str) -> None:
        if bool(rows.any()):
            b = int(rows.nonzero()[0, 0])
            raise KernelMismatch(f"indices: request {b} (length {int(lens[b])}): {what}")

    valid = sel >= 0
    fail((sel < -1).any(1), "slot below -1")
    fail(valid.sum(1) != n_valid, f"expected min(length, {topk}) valid slots")
    # Inverse block table: (request, physical page) -> logical page, for the pages each request uses.
    pages_used = torch.arange(bt.shape[1], device=dev)[None, :] * 256 < lens[:, None]
    num_pages = int(max(bt.max().item(), sel.max().item() // 256, 0)) + 2
    dump = num_pages - 1  # scatter target for unused entries
    inv = torch.full((batch, num_pages), -1, dtype=torch.int64, device=dev)
    cols = torch.where(pages_used & (bt >= 0), bt, torch.full_like(bt, dump))
    inv.scatter_(1, cols, torch.arange(bt.shape[1], device=dev).expand(batch, -1).contiguous())
    inv[:, dump] = -1
    logical = torch.gather(inv, 1, torch.where(valid, sel // 256, torch.full_like(sel, dump)))
    pos = logical * 256 + sel % 256
    fail((valid & ((logical < 0) | (pos >= lens[:, None]))).any(1), "slot outside the request's tokens")
    srt = torch.sort(torch.where(valid, sel, torch.full_like(sel, -1)), dim=1).values
    fail(((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)).any(1), "a slot is selected twice")
    got = torch.gather(ref_logits.float(), 1, torch.where(valid, pos, torch.zeros_like(pos)))
    got = torch.where(valid, got, torch.full_like(got, float("-inf")))
    got = torch.sort(got, dim=1, descending=True).values
    k = min(topk, ctx)
    want = torch.topk(ref_logits.float(), k, dim=1).values
    if k < topk:
        want = torch.cat([want, want.new_full((batch, topk - k), float("-inf"))], dim=1)
    finite = torch.where(torch.isfinite(ref_logits), ref_logits.abs(), torch.zeros_like(ref_logits))
    tol = atol + rtol * finite.amax(1)
    in_top = torch.arange(topk, device=dev)[None, :] < n_valid[:, None]
    diff = torch.where(in_top, (got - want).abs(), torch.zeros_like(got))
    fail((diff > tol[:, None]).any(1), "the selection is not the top-k (beyond near-ties)")
