"""One layer's decode step: indexer -> top-k -> sparse decode, for three pairings of implementations.

``baseline`` = SIMT decode + fp32 indexer over max_context (the production path of the story),
``mma`` = MMA decode + the same indexer, ``mma+indexer`` = MMA decode + bf16 indexer over the real
length. GPU tier: H 64, top-k 512, max_context 131,072; CPU tier: H 16, top-k 32, max_context 1,024.
``time_step`` is the GPU time of one CUDA-graph replay of the whole step with a cold L2.
"""

from __future__ import annotations

from typing import Any

from . import _gate, _harness, _oracle, _roofline, _suite, _tier, _timing
from .bench_decode import LAUNCH_FIELDS as DECODE_FIELDS

VARIANTS = {
    "baseline": ("simt", "fp32_maxctx"),
    "mma": ("mma", "fp32_maxctx"),
    "mma+indexer": ("mma", "bf16"),
}
PARAMS = [list(VARIANTS), _tier.CONCURRENCY, _tier.CONTEXT]
PARAM_NAMES = ["variant", "concurrency", "context"]
# track_launch_<key> -> its value in the step's per-op launch records: the decode's keys as in bench_decode,
# the indexer's scores block and select block prefixed ``indexer_``.
LAUNCH_FIELDS: dict[str, tuple[str, ...]] = {
    **{key: ("decode", *path) for key, path in DECODE_FIELDS.items()},
    "indexer_block_t": ("indexer", "BLOCK_T"),
    "indexer_select_block": ("indexer", "SELECT_BLOCK"),
}


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
    """The step's output against the reference and the oracles. When the step exposes its top-k
    selection, the selection is checked against the indexer oracle's logits (near-ties may swap; the
    package's reference logits against the oracle's first) and the
    decode against the reference decode and the oracle on that same selection; otherwise against
    the reference step's output and the oracle on the reference step's selection."""
    out, lse, indices = step_out
    if indices is None:
        ref_out, ref_lse, ref_indices = _step_outputs(ref_step.run(), ref_step)
        if ref_indices is None:
            raise _gate.KernelMismatch("neither DecodeStep exposes its top-k selection: nothing to check against")
        oracle = _oracle.decode(inputs.q, inputs.kv_cache, ref_indices)
        _gate.check_decode(out, lse, (ref_out, ref_lse), oracle, interpreter=interpreter)
        return
    logits_ref = _harness.require("indexer_logits_reference", "mla_kernels", "mla_kernels.indexer")
    decode = _harness.require("sparse_mla_decode")
    args = (inputs.q_idx, inputs.weights, inputs.index_cache, inputs.block_table, inputs.seq_lens)
    _gate.check_indexer(indices, logits_ref(*args), _oracle.indexer_logits(*args), inputs.block_table,
                        inputs.seq_lens, indices.shape[1])  # fmt: skip
    reference = decode(inputs.q, inputs.kv_cache, indices, impl="reference")
    oracle = _oracle.decode(inputs.q, inputs.kv_cache, indices)
    _gate.check_decode(out, lse, reference, oracle, interpreter=interpreter)


def _check_step_launches(
    launch: dict[str, Any] | None, decode_impl: str, indexer_impl: str, profile: str | None
) -> None:
    """Each op's own record must pass the launch gate; a failure names the op whose record is wrong."""
    if not isinstance(launch, dict):
        raise _gate.KernelMismatch(f"step: DecodeStep returned no per-op launch records ({launch!r})")
    for op, impl, op_profile in (("decode", decode_impl, profile), ("indexer", indexer_impl, None)):
        try:
            _gate.check_launch(launch.get(op), op, impl, arch_profile=op_profile)
        except _gate.KernelMismatch as exc:
            raise _gate.KernelMismatch(f"step op {op!r}: {exc}") from exc


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
        replayer = _timing.Replayer([_harness.step_recorded(step) for step in steps], dev)
        # Gate on input set 0 as the timed graph computes it, and on each op's record of that call.
        result, launch = replayer.outputs(0)
        got = _step_outputs(result, steps[0])
        # The step names no profile: its decode runs the runner's (MLAPERF_ARCH_PROFILE, else native).
        profile = _tier.arch_profile() if hasattr(mk, "ARCH_PROFILES") else None
        _check_step_launches(launch, decode_impl, indexer_impl, profile)
        ref = decode_step(sets[0], decode_impl="reference", indexer_impl="reference")
        _check_step(got, sets[0], ref, interpreter=not replayer.gpu)
    except ValueError as exc:
        skip = _harness.as_skip(exc, decode_impl) or _harness.as_skip(exc, indexer_impl)
        if skip is not None:
            raise skip from exc
        raise
    replayer.number = replayer.pick_number()
    _timing.CLOCK.events = replayer.gpu
    print(f"step {variant} B={concurrency} context={context} ran {launch}", flush=True)
    return _harness.keep_launch(replayer, launch)


def model(variant: str, concurrency: int, context: int) -> tuple[int, int]:
    return _roofline.step_model(concurrency, _tier.NUM_HEADS, context, _tier.STEP_TOPK)


class DecodeStep(
    _suite.Timed,
    benchmark="time_step",
    version="123328df9b89bbf1f305b079a439aaf31363b5f25c3c06a8cce661b47fd25b46",
):
    """GPU time of one decode step (CUDA-graph replay of indexer + top-k + decode, cold L2), seconds."""

    params = PARAMS
    param_names = PARAM_NAMES
    build_case = staticmethod(build_case)


class DecodeStepMetrics(
    _suite.Metrics,
    versions={
        "track_tokens_per_s": "1d99b789e58956edaca0c516b76e1c799d30ac7be1335b798628abeebbe79873",
        "track_gbps": "9e0dfdab7811b5b4cbfa407e8234a3d54ca3332a12b4f6b5991803a00b509c6b",
        "track_tflops": "e277745b30c82ed960167dc18258056c1bb8ea8fc2665b0e32cf8763cc3d4811",
        "track_roofline_fraction": "ebe9a2e5c4b18851a5b0006b475eace366993f56eca4f25ca1180d1854ea102d",
    },
    launch_versions={key: "1" for key in LAUNCH_FIELDS},
):
    """tokens/s, effective GB/s and TFLOP/s, and roofline fraction of each DecodeStep case (model
    ``_roofline.step_model``: the indexer over the real context plus the sparse decode), and the kernel
    configs it ran with (``track_launch_<key>``, ``LAUNCH_FIELDS``)."""

    params = PARAMS
    param_names = PARAM_NAMES
    build_case = staticmethod(build_case)
    model = staticmethod(model)
    launch_fields = LAUNCH_FIELDS
