"""The correctness gate fails closed: wrong values, missing or wrong launch records fail a case (asv: null).

The adversaries compute *correct* outputs (through the package's reference) and lie only in their launch
record: a gate that trusted a missing or forged record would let a silent fallback pass for a result.
Every suite (decode, indexer, step) is tried with a kernel that records nothing and one that records
the wrong thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import torch

import mla_kernels as mk
from benchmarks import _gate, _harness, _oracle, bench_decode, bench_indexer, bench_step
from benchmarks._gate import KernelMismatch, Tol

MMA_RECORD = {"impl": "mma", "kernel": "_mma_decode_kernel", "BLOCK_H": 16, "BLOCK_N": 16, "NUM_SPLITS": 1,
              "num_warps": 4, "arch_profile": "native"}  # fmt: skip
BF16_RECORD = {"op": "indexer", "impl": "bf16", "kernel": "_bf16_scores_kernel+_radix_select_kernel",
               "BLOCK_T": 128, "SELECT_BLOCK": 1024}  # fmt: skip


# --- the closeness rule -----------------------------------------------------------------------------


def test_assert_close_rule() -> None:
    ref = torch.randn(4, 16, 512, dtype=torch.float64) * 0.1
    tol = Tol(1e-6, 2 / 128, 1e-5)
    _gate.assert_close("out", ref.clone(), ref, tol)
    _gate.assert_close("out", ref * (1 + 1.5 / 128), ref, Tol(1e-6, 2 / 128, 1e-3))  # within rtol everywhere
    with pytest.raises(KernelMismatch, match=r"out: \d+ of 32768 values off .* worst at \[\d+, \d+, \d+\]"):
        _gate.assert_close("out", ref * 1.03 + 0.01, ref, tol)
    near_zero = ref.clone()
    near_zero[0, 0, 0] = 0.0
    bumped = near_zero.clone()
    bumped[0, 0, 0] = 5e-7  # absolute error below atol passes where relative error is infinite
    _gate.assert_close("out", bumped, near_zero, tol)
    bumped[0, 0, 0] = 5e-6
    with pytest.raises(KernelMismatch, match=r"1 of 32768 values off .* worst at \[0, 0, 0\]"):
        _gate.assert_close("out", bumped, near_zero, tol)
    with pytest.raises(KernelMismatch, match="cosine distance"):  # 1% everywhere: inside rtol, not inside cos
        _gate.assert_close("out", ref * 1.01, ref, Tol(1e-6, 2 / 128, 1e-6))
    bad = ref.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(KernelMismatch, match="NaN values in the kernel output"):
        _gate.assert_close("out", bad, ref, tol)
    with pytest.raises(KernelMismatch, match="NaN values in the expected"):
        _gate.assert_close("out", ref, bad, tol)
    lse = torch.tensor([1.0, float("inf")])
    _gate.assert_close("lse", lse.clone(), lse, tol)
    for wrong in ([1.0, 2.0], [1.0, float("-inf")]):
        with pytest.raises(KernelMismatch, match="inf positions differ"):
            _gate.assert_close("lse", torch.tensor(wrong), lse, tol)
    with pytest.raises(KernelMismatch, match="shape"):
        _gate.assert_close("lse", lse[:1], lse, tol)


def test_decode_gate_checks_the_reference_and_the_kernel_against_the_oracle() -> None:
    inp = mk.make_decode_inputs(2, 16, 32, num_tokens=2048, device="cpu", seed=0)
    ref = mk.sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    exact = _oracle.decode(inp.q, inp.kv_cache, inp.indices)
    out, lse = mk.sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="mma")
    _gate.check_decode(out, lse, ref, exact, interpreter=True)
    with pytest.raises(KernelMismatch, match="^out: "):
        _gate.check_decode((out.double() * 1.02).bfloat16(), lse, ref, exact, interpreter=True)
    with pytest.raises(KernelMismatch, match="^lse: "):
        _gate.check_decode(out, lse + 1e-4, ref, exact, interpreter=True)
    # A reference changed together with the kernel (same wrong values in both) is caught by the oracle.
    wrong = (out.double() * 1.02).bfloat16()
    with pytest.raises(KernelMismatch, match="^reference out vs oracle"):
        _gate.check_decode(wrong, lse, (wrong, ref[1]), exact, interpreter=True)


def test_topk_gate_on_real_indexer() -> None:
    from mla_kernels import indexer as ix

    s = ix.make_indexer_inputs(3, [300, 512, 20], max_context=1024, topk=32, device="cpu", seed=1)
    logits = ix.indexer_logits_reference(s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens)
    sel = ix.indexer_topk(*s.args(), impl="reference")
    _gate.check_topk(sel, logits, s.block_table, s.seq_lens, 32)
    swapped = sel.clone()  # replace request 0's best token by its worst: not a near-tie
    pos = torch.argsort(logits[0, :300], descending=True)

    def slot(p: int) -> int:
        return int(s.block_table[0, p // 256]) * 256 + p % 256

    best, worst = slot(int(pos[0])), slot(int(pos[-1]))
    swapped[0][swapped[0] == best] = worst
    with pytest.raises(KernelMismatch, match="request 0 .*not the top-k"):
        _gate.check_topk(swapped, logits, s.block_table, s.seq_lens, 32)
    dup = sel.clone()
    dup[1, 1] = dup[1, 0]
    with pytest.raises(KernelMismatch, match="request 1 .*twice"):
        _gate.check_topk(dup, logits, s.block_table, s.seq_lens, 32)
    short = sel.clone()
    short[2, 0] = int(s.block_table[0, 0]) * 256  # a slot of request 0, not request 2
    with pytest.raises(KernelMismatch, match="request 2 .*outside"):
        _gate.check_topk(short, logits, s.block_table, s.seq_lens, 32)
    few = sel.clone()
    few[2, :] = -1
    with pytest.raises(KernelMismatch, match="request 2 .*valid slots"):
        _gate.check_topk(few, logits, s.block_table, s.seq_lens, 32)


# --- launch records -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "match"),
    [
        (None, "no launch record"),
        ({}, "no launch record"),
        ({"kernel": "_mma_decode_kernel"}, "launch record says None"),
        ({**MMA_RECORD, "arch_profile": "sm_120", "kernels": []}, "lists no kernel runs"),
        ({**MMA_RECORD, "arch_profile": "sm_120", "kernels": [{"name": "_simt_decode_kernel"}]}, "lists the runs"),
        ({**MMA_RECORD, "impl": "simt"}, "asked for impl 'mma' but the launch record says 'simt'"),
        ({**MMA_RECORD, "kernel": "_simt_decode_kernel"}, "expected kernel _mma_decode_kernel"),
        ({**MMA_RECORD, "kernel": "torch-fp32"}, "expected kernel _mma_decode_kernel"),
        ({k: v for k, v in MMA_RECORD.items() if k != "NUM_SPLITS"}, "incomplete launch record, no NUM_SPLITS"),
        ({**MMA_RECORD, "arch_profile": "native"}, "asked for arch profile 'sm_120'"),
    ],
)
def test_launch_record_rules(record: Any, match: str) -> None:
    with pytest.raises(KernelMismatch, match=match):
        _gate.check_launch(record, "decode", "mma", arch_profile="sm_120")


def test_complete_records_pass() -> None:
    _gate.check_launch({**MMA_RECORD, "arch_profile": "sm_120"}, "decode", "mma", arch_profile="sm_120")
    _gate.check_launch(MMA_RECORD, "decode", "mma")  # a commit before arch profiles: none asked, none checked
    two_pass = {**MMA_RECORD, "kernel": "_scores_pass_kernel+_output_pass_kernel", "BLOCK_D": 128}
    _gate.check_launch(two_pass, "decode", "mma")  # the MMA decode in two passes is the MMA decode too
    _gate.check_launch(BF16_RECORD, "indexer", "bf16")


# --- real launchers: their own records pass, forged ones fail ------------------------------------------


def _decode_case(impl: str = "mma") -> tuple[Any, dict[str, Any]]:
    inp = mk.make_decode_inputs(1, 32, 40, num_tokens=256, device="cpu", seed=2)
    out, lse, record = mk.sparse_mla_decode_with_record(inp.q, inp.kv_cache, inp.indices, impl=impl)
    return record, _harness.record_view(record)  # type: ignore[return-value]


def test_real_launchers_records_pass_the_gate() -> None:
    for impl in ("mma", "simt"):
        _, view = _decode_case(impl)
        _gate.check_launch(view, "decode", impl, arch_profile="native")
    s = mk.make_indexer_inputs(1, [200], max_context=256, num_heads=16, topk=8, device="cpu", seed=1)
    for impl in ("bf16", "fp32_maxctx"):
        _, record = mk.indexer_topk_with_record(*s.args(), impl=impl)
        _gate.check_launch(_harness.record_view(record), "indexer", impl)


@pytest.mark.parametrize(
    ("forge", "match"),
    [
        (lambda r: replace(r, config={**r.config, "BLOCK_H": 32}), "says BLOCK_H=32 but _mma_decode_kernel ran with"),
        (lambda r: replace(r, config={**r.config, "NUM_SPLITS": r.config["NUM_SPLITS"] + 1}),
         "ran a grid of \\d+ splits"),
        (lambda r: replace(r, kernels=(replace(r.kernels[0], name="_simt_decode_kernel"),)),
         "expected kernel _mma_decode_kernel"),
        (lambda r: replace(r, kernels=()), "expected kernel"),
        (lambda r: replace(r, impl="simt"), "asked for impl 'mma'"),
    ],
    ids=["another-head-block", "another-split-count", "another-kernel", "no-kernels", "another-impl"],
)
def test_a_record_that_contradicts_its_launch_fails(forge: Callable[[Any], Any], match: str) -> None:
    """A real MMA launch's record, altered after the fact: the gate checks the stated config against the
    kernel runs the record lists (the record of a launch of 16 heads per block cannot say 32)."""
    record, _ = _decode_case()
    with pytest.raises(KernelMismatch, match=match):
        _gate.check_launch(_harness.record_view(forge(record)), "decode", "mma")


def test_the_record_is_what_the_kernel_was_launched_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Triton launch of a real decode and indexer call is intercepted: the record lists exactly those
    launches, with their kernels, grids and constexprs."""
    from mla_kernels._common import KernelLaunch

    launched: list[KernelLaunch] = []
    real_run = KernelLaunch.run

    def spy(self: KernelLaunch) -> object:
        launched.append(self)
        return real_run(self)

    monkeypatch.setattr(KernelLaunch, "run", spy)
    record, _ = _decode_case()
    s = mk.make_indexer_inputs(1, [200], max_context=256, num_heads=16, topk=8, device="cpu", seed=1)
    _, indexer = mk.indexer_topk_with_record(*s.args(), impl="bf16")
    runs = [*record.kernels, *indexer.kernels]
    assert len(runs) == len(launched) >= 3
    for run, launch in zip(runs, launched, strict=True):
        assert run.name == launch.kernel.fn.__name__ and run.grid == launch.grid
        assert {k: run.config[k] for k in launch.constexprs} == launch.constexprs
        assert (run.config["num_warps"], run.config["num_stages"]) == (launch.num_warps, launch.num_stages)


# --- every suite, with adversarial kernels ------------------------------------------------------------


def _reference_decode(record: dict[str, Any] | None) -> Callable[..., Any]:
    """sparse_mla_decode_with_record computing the right values through the reference, then returning
    ``record`` (a LaunchRecord-like object, or None) as its record."""
    real = mk.sparse_mla_decode_with_record

    def decode(q: Any, kv_cache: Any, indices: Any, sm_scale: Any = None, impl: str = "mma", **kw: Any) -> Any:
        out, lse, own = real(q, kv_cache, indices, sm_scale, impl="reference")
        return out, lse, (own if impl == "reference" else _Forged(record))

    return decode


class _Record:
    """A stand-in record whose ``as_dict()`` gives ``values``."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)


def _Forged(values: dict[str, Any] | None) -> _Record | None:  # noqa: N802 - reads as the record it stands for
    """The record a forging launcher returns: ``values`` as a record, or none at all."""
    return None if values is None else _Record(values)


def _reference_indexer(record: dict[str, Any] | None) -> Callable[..., Any]:
    real = mk.indexer_topk_with_record

    def indexer_topk(*args: Any, impl: str = "bf16") -> Any:
        slots, own = real(*args, impl="reference")
        return slots, (own if impl == "reference" else _Forged(record))

    return indexer_topk


def _fails(build: Callable[[], Any], match: str) -> None:
    with pytest.raises(KernelMismatch, match=match):
        build()


@pytest.mark.parametrize(
    ("impl", "record", "match"),
    [
        ("mma", None, "no launch record"),
        ("mma", {**MMA_RECORD, "kernel": "torch-fp32"}, "expected kernel _mma_decode_kernel"),
        ("mma_sm120", MMA_RECORD, "asked for arch profile 'sm_120'"),
        ("simt", {**MMA_RECORD, "impl": "simt"}, "expected kernel _simt_decode_kernel"),
    ],
    ids=["records-nothing", "records-a-fallback", "records-another-profile", "records-another-kernel"],
)
def test_decode_suite_fails_closed(monkeypatch: pytest.MonkeyPatch, impl: str, record: Any, match: str) -> None:
    monkeypatch.setattr(mk, "sparse_mla_decode_with_record", _reference_decode(record))
    _fails(lambda: bench_decode.build_case(impl, 1, 32), match)


@pytest.mark.parametrize(
    ("record", "match"),
    [(None, "no launch record"), ({**BF16_RECORD, "impl": "fp32_maxctx"}, "asked for impl 'bf16'")],
    ids=["records-nothing", "records-another-impl"],
)
def test_indexer_suite_fails_closed(monkeypatch: pytest.MonkeyPatch, record: Any, match: str) -> None:
    monkeypatch.setattr(mk, "indexer_topk_with_record", _reference_indexer(record))
    _fails(lambda: bench_indexer.build_case("bf16", 1, 256), match)


def test_indexer_suite_gives_the_longest_request_where_the_launcher_takes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Today's launcher gets each case's context as ``max_seq_len``; one without that argument (older commits,
    ``_reference_indexer`` above) gets none and still runs (``test_indexer_suite_fails_closed``)."""
    real = mk.indexer_topk_with_record
    seen: list[int | None] = []

    def spy(*args: Any, max_seq_len: int | None = None, **kwargs: Any) -> Any:
        seen.append(max_seq_len)
        return real(*args, max_seq_len=max_seq_len, **kwargs)

    monkeypatch.setattr(mk, "indexer_topk_with_record", spy)
    bench_indexer.build_case("bf16", 1, 256)
    assert seen and set(seen) == {256}


def test_a_commit_before_records_is_gated_on_its_global_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit without ``*_with_record`` (the history the suites also run) is read through its
    ``LAST_LAUNCH``, emptied before each call: recording nothing there fails too."""
    plain = mk.sparse_mla_decode
    monkeypatch.delattr(mk, "sparse_mla_decode_with_record")
    legacy: dict[str, Any] = {}
    monkeypatch.setattr(mk, "LAST_LAUNCH", legacy, raising=False)

    def old_decode(*args: Any, **kwargs: Any) -> Any:
        result = plain(*args, **kwargs)
        if kwargs.get("impl") == "mma":
            legacy.update(MMA_RECORD)
        return result

    monkeypatch.setattr(mk, "sparse_mla_decode", old_decode)
    bench_decode.build_case("mma", 1, 32)  # the old record passes
    monkeypatch.setattr(mk, "sparse_mla_decode", plain)  # a commit whose launcher records nothing
    _fails(lambda: bench_decode.build_case("mma", 1, 32), "no launch record")


def _tampered_step(tamper: Callable[[dict[str, Any]], None]) -> type:
    """DecodeStep computing through the references (right values) whose per-op records are tampered."""
    real = mk.DecodeStep

    class TamperedStep(real):  # type: ignore[misc, valid-type]
        def __init__(self, inputs: Any, decode_impl: str = "mma", indexer_impl: str = "bf16") -> None:
            super().__init__(inputs, "reference", "reference")
            self.asked = (decode_impl, indexer_impl)

        def run_with_records(self) -> Any:
            out, lse, records = super().run_with_records()
            if self.asked != ("reference", "reference"):
                views = {op: r.as_dict() for op, r in records.items()}
                tamper(views)
                records = {op: _Forged(v) for op, v in views.items()}
            return out, lse, records

    return TamperedStep


def _drop_indexer(launches: dict[str, Any]) -> None:
    launches["decode"] = dict(MMA_RECORD)  # a complete, honest-looking decode record ...
    launches.pop("indexer", None)  # ... and none for the indexer (the old .get("indexer", {}) passed this)


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (lambda launches: launches.clear(), "step op 'decode': decode impl 'mma': no launch record"),
        (_drop_indexer, "step op 'indexer': indexer impl 'bf16': no launch record"),
        (lambda launches: None, "step op 'decode': decode: asked for impl 'mma' but the launch record says 're"),
    ],
    ids=["records-nothing", "no-indexer-record", "records-the-reference"],
)
def test_step_suite_fails_closed(monkeypatch: pytest.MonkeyPatch, tamper: Any, match: str) -> None:
    monkeypatch.setattr(mk, "DecodeStep", _tampered_step(tamper))
    _fails(lambda: bench_step.build_case("mma+indexer", 1, 256), match)


def test_step_gate_names_the_op_of_a_wrong_real_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real step's records, one of them altered: the failure names that op."""
    real = mk.DecodeStep

    class OneWrong(real):  # type: ignore[misc, valid-type]
        def run_with_records(self) -> Any:
            out, lse, records = super().run_with_records()
            wrong = replace(records["indexer"], config={**records["indexer"].config, "BLOCK_T": 7})
            return out, lse, {**records, "indexer": wrong}

    monkeypatch.setattr(mk, "DecodeStep", OneWrong)
    _fails(lambda: bench_step.build_case("mma+indexer", 1, 256), "step op 'indexer': .*says BLOCK_T=7 but")


def _records(profile: str) -> Callable[[dict[str, Any]], None]:
    def tamper(launches: dict[str, Any]) -> None:
        launches.update(decode={**MMA_RECORD, "arch_profile": profile}, indexer=dict(BF16_RECORD))

    return tamper


@pytest.mark.parametrize(("env", "recorded"), [(None, "sm_120"), ("sm_120", "native"), ("sm_90", "sm_120")])
def test_step_gate_expects_the_runners_profile(monkeypatch: pytest.MonkeyPatch, env: str | None, recorded: str) -> None:
    # The step names no profile, so its decode follows MLAPERF_ARCH_PROFILE; a record of another fails.
    if env is None:
        monkeypatch.delenv("MLAPERF_ARCH_PROFILE", raising=False)
    else:
        monkeypatch.setenv("MLAPERF_ARCH_PROFILE", env)
    monkeypatch.setattr(mk, "DecodeStep", _tampered_step(_records(recorded)))
    _fails(lambda: bench_step.build_case("mma+indexer", 1, 256), f"asked for arch profile '{env or 'native'}'")
    monkeypatch.setattr(mk, "DecodeStep", _tampered_step(_records(env or "native")))
    bench_step.build_case("mma+indexer", 1, 256)  # the runner's profile passes (was: always 'native')


def test_a_failed_gate_is_a_null_for_every_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure_all (the Metrics classes' setup_cache) records the failure; each track_ then raises."""
    monkeypatch.setattr(mk, "sparse_mla_decode_with_record", _reference_decode(None))
    key = ("mma", 1, 32)
    cache = _harness.measure_all([key], bench_decode.build_case, bench_decode.model, lambda *k: k[1], calls=1)
    entry = cache["cases"][key]
    assert entry["status"] == "fail" and "no launch record" in entry["reason"]
    metrics = bench_decode.SparseDecodeMetrics()
    with pytest.raises(KernelMismatch, match="no launch record"):
        metrics.setup(cache, "mma", 1, 32)
    with pytest.raises(KernelMismatch, match="no launch record"):
        metrics.track_gbps(cache, "mma", 1, 32)
