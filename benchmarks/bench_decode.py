"""Sparse MLA decode kernels: per-head SIMT vs head-batched MMA over the FP8 paged KV cache.

GPU tier: H 64, each request owns 64K tokens of context (the design's reference setting), top-k
slots per request; ``time_decode`` is the GPU time of one CUDA-graph replay with a cold L2 (see
``_timing``). CPU tier: H 16, 1K tokens per request, top-k 32/64, under the Triton interpreter.

``impl`` values: ``simt``, ``mma`` (the MMA kernel with the configs of the GPU it runs on),
``mma_sm120`` (the MMA kernel restricted to the configs an sm_120 GPU keeps: the users' runner's
code path, measured on whatever GPU runs the suite; skipped at commits without arch profiles), and
``gluon`` / ``gluon_sm120`` (the Gluon kernel, likewise; skipped where it cannot run: commits without
it, a Triton without Gluon, the interpreter).
"""

from __future__ import annotations

import functools

from . import _gate, _harness, _oracle, _roofline, _suite, _tier, _timing

# impl parameter -> (sparse_mla_decode impl, architecture profile asked for)
IMPLS: dict[str, tuple[str, str | None]] = {
    "simt": ("simt", None),
    "mma": ("mma", "native"),
    "mma_sm120": ("mma", "sm_120"),
    "gluon": ("gluon", "native"),
    "gluon_sm120": ("gluon", "sm_120"),
}
PARAMS = [list(IMPLS), _tier.CONCURRENCY, _tier.DECODE_TOPK]
PARAM_NAMES = ["impl", "concurrency", "topk"]
# track_launch_<key> -> its value in the decode launch record (``_harness.record_view``). SIMT records its
# tile (BLOCK_N x num_warps) only: head block, split-K, prefetch and stages are NaN there; spill bytes
# exist only for compiled kernels (NaN under the interpreter).
LAUNCH_FIELDS: dict[str, tuple[str, ...]] = {
    "block_h": ("BLOCK_H",),
    "block_n": ("BLOCK_N",),
    "block_d": ("BLOCK_D",),
    "num_splits": ("NUM_SPLITS",),
    "prefetch": ("PREFETCH",),
    "num_warps": ("num_warps",),
    "num_stages": ("num_stages",),
    "spill_bytes": ("spill_bytes",),
}


def _profile_kwargs(impl: str) -> tuple[dict[str, str], str | None]:
    """(extra sparse_mla_decode arguments, profile the launch record must name) for ``impl``."""
    kernel_impl, profile = IMPLS[impl]
    if profile is None:
        return {}, None
    profiles = getattr(_harness.kernels(), "ARCH_PROFILES", None)
    if profiles is None:  # a commit before arch profiles: its MMA kernel is the native path
        if profile != "native":
            raise NotImplementedError(f"impl {impl!r}: architecture profiles do not exist at this commit")
        return {}, None
    if profile not in profiles:
        raise NotImplementedError(f"impl {impl!r}: profile {profile!r} not offered here (has {tuple(profiles)})")
    return {"arch_profile": profile}, profile


def build_case(impl: str, concurrency: int, topk: int) -> _timing.Replayer:
    """Inputs, graphs (one per index set) and the correctness gate for one case."""
    kernel_impl = IMPLS[impl][0]
    dev = _harness.device()
    mk = _harness.kernels()
    make_inputs = _harness.require("make_decode_inputs")
    decode = _harness.require("sparse_mla_decode")
    recorded = _harness.recorded("sparse_mla_decode")
    _harness.require_impl("decode", kernel_impl, getattr(mk, "DECODE_IMPLS", None))
    if kernel_impl == "gluon":  # its fallback runs the MMA kernel, which is that impl's series, not this one's
        why = mk.decode.gluon_unavailable(_tier.NUM_HEADS)
        if why:
            raise NotImplementedError(f"impl {impl!r}: {why}")
    extra, profile = _profile_kwargs(impl)
    inputs = make_inputs(
        concurrency,
        _tier.NUM_HEADS,
        topk,
        num_tokens=concurrency * _tier.DECODE_TOKENS_PER_REQUEST,
        device=dev,
        seed=0,
        num_index_sets=_tier.INDEX_SETS,
    )
    sets = list(getattr(inputs, "index_sets", None) or [inputs.indices])
    fns = [functools.partial(recorded, inputs.q, inputs.kv_cache, idx, impl=kernel_impl, **extra) for idx in sets]
    try:
        replayer = _timing.Replayer(fns, dev)
        # Gate on input set 0 as the timed graph computes it (and on the record that call returned); the
        # other sets run the same code.
        (out, lse), launch = replayer.outputs(0)
        _gate.check_launch(launch, "decode", kernel_impl, arch_profile=profile)
        reference = decode(inputs.q, inputs.kv_cache, sets[0], impl="reference")
        oracle = _oracle.decode(inputs.q, inputs.kv_cache, sets[0])
        _gate.check_decode(out, lse, reference, oracle, interpreter=not replayer.gpu)
    except ValueError as exc:
        skip = _harness.as_skip(exc, kernel_impl)
        if skip is not None:
            raise skip from exc
        raise
    replayer.number = replayer.pick_number()
    _timing.CLOCK.events = replayer.gpu
    print(f"decode impl={impl} B={concurrency} topk={topk} ran {launch}", flush=True)
    return _harness.keep_launch(replayer, launch)


def model(impl: str, concurrency: int, topk: int) -> tuple[int, int]:
    return _roofline.decode_model(concurrency, _tier.NUM_HEADS, topk)


class SparseDecode(
    _suite.Timed,
    benchmark="time_decode",
    version="c07a68490648e51be992c2aabc8387d1a338ec7531b13ea12a55d12a4cabd3a2",
):
    """GPU time of one ``sparse_mla_decode`` call (CUDA-graph replay, cold L2), seconds."""

    params = PARAMS
    param_names = PARAM_NAMES
    build_case = staticmethod(build_case)


class SparseDecodeMetrics(
    _suite.Metrics,
    versions={
        "track_tokens_per_s": "1ac33bc33b81676818e0193f9acbbe1116a1115127880dc82383d30f59488a98",
        "track_gbps": "6bdc27e33b1ac271b68d36cd6dc045ab0059b3b0e1b518f271d2b970f271670f",
        "track_tflops": "7c665619924b7682fcc6ae990c3189a836bb6470663cf7319a5cab3c1727ac8d",
        "track_roofline_fraction": "14ea1fea59a4adc2f17398665bd3bedb5ceb51e2e5293b03e4dfa4d01cd99c08",
    },
    launch_versions={key: "1" for key in LAUNCH_FIELDS},
):
    """tokens/s, effective GB/s and TFLOP/s, and roofline fraction of each SparseDecode case
    (byte and flop model: ``_roofline.decode_model``), and the kernel config it ran with
    (``track_launch_<key>``, ``LAUNCH_FIELDS``)."""

    params = PARAMS
    param_names = PARAM_NAMES
    build_case = staticmethod(build_case)
    model = staticmethod(model)
    launch_fields = LAUNCH_FIELDS
