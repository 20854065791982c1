"""Correctness gate: each case checks its output against the reference once, in setup.

A mismatch raises ``KernelMismatch`` (an AssertionError), so asv records a failure (null), never a
time. The tolerances live here, not in the package under test, so a commit cannot loosen its own
gate. Out/lse tolerances are FlashMLA's (abs + rel * |ref|); the interpreter tier is looser
because it truncates fp32 -> bf16 on store.
"""

from __future__ import annotations

from typing import Any

TOLERANCES: dict[str, dict[str, tuple[float, float]]] = {
    "gpu": {"out": (8e-4, 2 / 128), "lse": (1e-6, 8 / 65536)},
    "interpreter": {"out": (2e-3, 4 / 128), "lse": (1e-5, 64 / 65536)},
}


class KernelMismatch(AssertionError):
    """The kernel's output disagrees with the reference (or the wrong kernel ran)."""


def assert_close(name: str, actual: Any, expected: Any, atol: float, rtol: float) -> None:
    """|actual - expected| <= atol + rtol * |expected| elementwise; inf must match, NaN never passes."""
    import torch

    if tuple(actual.shape) != tuple(expected.shape):
        raise KernelMismatch(f"{name}: shape {tuple(actual.shape)}, reference {tuple(expected.shape)}")
    a, e = actual.float(), expected.float()
    nan = torch.isnan(a)
    if nan.any():
        raise KernelMismatch(f"{name}: {int(nan.sum())} NaN values in the kernel output")
    a_inf, e_inf = torch.isinf(a), torch.isinf(e)
    if not torch.equal(a_inf, e_inf) or not torch.equal(a[a_inf], e[e_inf]):
        raise KernelMismatch(f"{name}: inf positions differ ({int(a_inf.sum())} vs {int(e_inf.sum())})")
    fin = ~e_inf
    diff = (a[fin] - e[fin]).abs()
    bound = atol + rtol * e[fin].abs()
    bad = diff > bound
    if bad.any():
        worst = int(torch.argmax(diff - bound))
        raise KernelMismatch(
            f"{name}: {int(bad.sum())}/{diff.numel()} values outside abs {atol:g} + rel {rtol:g}; "
            f"max|diff| {diff.max().item():.3e}, worst {a[fin][worst].item():.6g} vs "
            f"{e[fin][worst].item():.6g}"
        )


def check_decode(out: Any, lse: Any, ref_out: Any, ref_lse: Any, *, interpreter: bool) -> None:
    tol = TOLERANCES["interpreter" if interpreter else "gpu"]
    assert_close("out", out, ref_out, *tol["out"])
    assert_close("lse", lse, ref_lse, *tol["lse"])


def check_kernel_ran(launch: dict[str, Any], impl: str) -> None:
    """The launcher's LAST_LAUNCH must name the implementation asked for: no silent fallback."""
    ran = launch.get("impl")
    if ran is not None and ran != impl:
        raise KernelMismatch(f"asked for impl {impl!r} but the last launch was {ran!r}: {launch}")


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
