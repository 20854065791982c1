"""One layer's decode step: indexer -> top-k -> sparse decode, for three pairings of implementations.

``baseline`` = SIMT decode + fp32 indexer over max_context (the production path of the story),
``mma`` = MMA decode + the same indexer, ``mma+indexer`` = MMA decode + bf16 indexer over the real
length. GPU tier: H 64, top-k 512, max_context 131,072; CPU tier: H 16, top-k 32, max_context 1,024.
``time_step`` is the GPU time of one CUDA-graph replay of the whole step with a cold L2.
"""

from __future__ import annotations

import itertools
from typing import Any

from . import _gate, _harness, _roofline, _tier, _timing

VARIANTS = {
    "baseline": ("simt", "fp32_maxctx"),
    "mma": ("mma", "fp32_maxctx"),
    "mma+indexer": ("mma", "bf16"),
}
PARAMS = [list(VARIANTS), _tier.CONCURRENCY, _tier.CONTEXT]
PARAM_NAMES = ["variant", "concurrency", "context"]


def _step_outputs(result: Any, step: Any) -> tuple[Any, Any, Any]:
    """(out, lse, indices or None) from whatever ``DecodeStep.run()`` returns."""
    if isinstance(result, tuple | list):
        out, lse = result[0], result[1]
        indices = result[2] if len(result) > 2 else None
    elif hasattr(result, "out"):
        out, lse, indices = result.out, result.lse, getattr(result, "indices", None)
    else:
        raise _gate.KernelMismatch(f"DecodeStep.run() returned {type(result).__name__}, not (out, lse, ...)")
    if indices is None:
        indices = getattr(step, "indices", None)
    return out, lse, indices


def _check_step(step_out: tuple[Any, Any, Any], inputs: Any, ref_step: Any, *, interpreter: bool) -> None:
    """The step's output against the reference. When the step exposes its top-k selection, the
    selection is checked against the reference logits (near-ties may swap) and the decode against
    the reference decode on that same selection; otherwise against the reference step's output."""
    out, lse, indices = step_out
    if indices is None:
        ref_out, ref_lse, _ = _step_outputs(ref_step.run(), ref_step)
        _gate.check_decode(out, lse, ref_out, ref_lse, interpreter=interpreter)
        return
    logits_ref = _harness.require("indexer_logits_reference", "mla_kernels", "mla_kernels.indexer")
    decode = _harness.require("sparse_mla_decode")
    logits = logits_ref(inputs.q_idx, inputs.weights, inputs.index_cache, inputs.block_table, inputs.seq_lens)
    _gate.check_topk(indices, logits, inputs.block_table, inputs.seq_lens, indices.shape[1])
    ref_out, ref_lse = decode(inputs.q, inputs.kv_cache, indices, impl="reference")
    _gate.check_decode(out, lse, ref_out, ref_lse, interpreter=interpreter)


def build_case(variant: str, concurrency: int, context: int) -> _timing.Replayer:
    """Inputs (one request batch per rotation slot), graphs and the correctness gate for one case."""
    dev = _harness.device()
    decode_step = _harness.require("DecodeStep")
    make_inputs = _harness.require("make_step_inputs")
    decode_impl, indexer_impl = VARIANTS[variant]
    mk = _harness.kernels()
    _harness.require_impl("decode", decode_impl, getattr(mk, "DECODE_IMPLS", None))
    sets = [
        make_inputs(
            concurrency, context, max_context=_tier.MAX_CONTEXT, num_heads=_tier.NUM_HEADS,
            topk=_tier.STEP_TOPK, device=dev, seed=seed,
        )
        for seed in range(_tier.REQUEST_SETS)
    ]  # fmt: skip
    try:
        steps = [decode_step(s, decode_impl=decode_impl, indexer_impl=indexer_impl) for s in sets]
        # Replayer warms each step up (autotuning resolves) before capturing run() into a graph.
        replayer = _timing.Replayer([step.run for step in steps], dev)
        # Gate on input set 0 as the timed graph computes it; the other sets run the same code.
        got = _step_outputs(replayer.outputs(0), steps[0])
        launch = _harness.last_launch()
        launches = getattr(steps[0], "launches", {})  # per-op record, where the step keeps one
        _gate.check_kernel_ran(launches.get("decode", launch), decode_impl)
        _gate.check_kernel_ran(launches.get("indexer", {}), indexer_impl)
        launch = launches or launch
        ref = decode_step(sets[0], decode_impl="reference", indexer_impl="reference")
        _check_step(got, sets[0], ref, interpreter=not replayer.gpu)
    except ValueError as exc:
        skip = _harness.as_skip(exc, decode_impl) or _harness.as_skip(exc, indexer_impl)
        if skip is not None:
            raise skip from exc
        raise
    replayer.number = replayer.pick_number()
    _timing.CLOCK.events = replayer.gpu
    print(f"step {variant} B={concurrency} context={context} last launch {launch}", flush=True)
    return replayer


def model(variant: str, concurrency: int, context: int) -> tuple[int, int]:
    return _roofline.step_model(concurrency, _tier.NUM_HEADS, context, _tier.STEP_TOPK)


class DecodeStep:
    """GPU time of one decode step (CUDA-graph replay of indexer + top-k + decode, cold L2), seconds."""

    params = PARAMS
    param_names = PARAM_NAMES
    timer = _timing.CLOCK
    rounds = _tier.TIMING["rounds"]
    repeat = _tier.TIMING["repeat"]
    number = _tier.TIMING["number"]
    warmup_time = _tier.TIMING["warmup_time"]
    min_run_count = _tier.TIMING["min_run_count"]
    timeout = _tier.TIMING["timeout"]

    def setup(self, variant: str, concurrency: int, context: int) -> None:
        self.case = _harness.cached_case(
            ("step", variant, concurrency, context), lambda: build_case(variant, concurrency, context)
        )
        self.number = self.case.number

    def time_step(self, variant: str, concurrency: int, context: int) -> None:
        self.case.replay()


class DecodeStepMetrics:
    """tokens/s, effective GB/s and TFLOP/s, and roofline fraction of each DecodeStep case.

    All cases are measured in one ``setup_cache`` process; the model (``_roofline.step_model``) is
    the indexer over the real context plus the sparse decode.
    """

    params = PARAMS
    param_names = PARAM_NAMES
    timeout = _tier.TIMING["timeout"]

    def setup_cache(self) -> dict[str, Any]:
        return _harness.measure_all(
            list(itertools.product(*PARAMS)),
            build_case,
            model,
            lambda variant, concurrency, context: concurrency,
            calls=_tier.METRIC_CALLS,
        )

    setup_cache.timeout = _tier.SETUP_CACHE_TIMEOUT  # type: ignore[attr-defined]

    def setup(self, cache: dict[str, Any], variant: str, concurrency: int, context: int) -> None:
        _harness.check_metrics_case(cache, (variant, concurrency, context))

    def track_tokens_per_s(
        self, cache: dict[str, Any], variant: str, concurrency: int, context: int
    ) -> float:
        return _harness.metric(cache, (variant, concurrency, context), "tokens_per_s")

    track_tokens_per_s.unit = "tokens/s"  # type: ignore[attr-defined]

    def track_gbps(self, cache: dict[str, Any], variant: str, concurrency: int, context: int) -> float:
        return _harness.metric(cache, (variant, concurrency, context), "gbps")

    track_gbps.unit = "GB/s"  # type: ignore[attr-defined]

    def track_tflops(self, cache: dict[str, Any], variant: str, concurrency: int, context: int) -> float:
        return _harness.metric(cache, (variant, concurrency, context), "tflops")

    track_tflops.unit = "TFLOP/s"  # type: ignore[attr-defined]

    def track_roofline_fraction(
        self, cache: dict[str, Any], variant: str, concurrency: int, context: int
    ) -> float:
        return _harness.metric(cache, (variant, concurrency, context), "roofline_fraction")

    track_roofline_fraction.unit = "fraction"  # type: ignore[attr-defined]
