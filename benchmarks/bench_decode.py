"""Sparse MLA decode kernels: per-head SIMT vs head-batched MMA over the FP8 paged KV cache.

GPU tier: H 64, each request owns 64K tokens of context (the design's reference setting), top-k
slots per request; ``time_decode`` is the GPU time of one CUDA-graph replay with a cold L2 (see
``_timing``). CPU tier: H 16, 1K tokens per request, top-k 32/64, under the Triton interpreter.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from . import _gate, _harness, _roofline, _tier, _timing

IMPLS = ["simt", "mma"]
PARAMS = [IMPLS, _tier.CONCURRENCY, _tier.DECODE_TOPK]
PARAM_NAMES = ["impl", "concurrency", "topk"]


def build_case(impl: str, concurrency: int, topk: int) -> _timing.Replayer:
    """Inputs, graphs (one per index set) and the correctness gate for one case."""
    dev = _harness.device()
    mk = _harness.kernels()
    make_inputs = _harness.require("make_decode_inputs")
    decode = _harness.require("sparse_mla_decode")
    _harness.require_impl("decode", impl, getattr(mk, "DECODE_IMPLS", None))
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
    fns = [functools.partial(decode, inputs.q, inputs.kv_cache, idx, impl=impl) for idx in sets]
    try:
        replayer = _timing.Replayer(fns, dev)
        gpu = replayer.gpu
        # Gate on input set 0 as the timed graph computes it; the other sets run the same code.
        out, lse = replayer.outputs(0)
        launch = _harness.last_launch()
        _gate.check_kernel_ran(launch, impl)
        ref_out, ref_lse = decode(inputs.q, inputs.kv_cache, sets[0], impl="reference")
        _gate.check_decode(out, lse, ref_out, ref_lse, interpreter=not gpu)
    except ValueError as exc:
        skip = _harness.as_skip(exc, impl)
        if skip is not None:
            raise skip from exc
        raise
    replayer.number = replayer.pick_number()
    _timing.CLOCK.events = gpu
    print(f"decode impl={impl} B={concurrency} topk={topk} ran {launch}", flush=True)
    return replayer


def model(impl: str, concurrency: int, topk: int) -> tuple[int, int]:
    return _roofline.decode_model(concurrency, _tier.NUM_HEADS, topk)


class SparseDecode:
    """GPU time of one ``sparse_mla_decode`` call (CUDA-graph replay, cold L2), seconds."""

    params = PARAMS
    param_names = PARAM_NAMES
    timer = _timing.CLOCK
    rounds = _tier.TIMING["rounds"]
    repeat = _tier.TIMING["repeat"]
    number = _tier.TIMING["number"]
    warmup_time = _tier.TIMING["warmup_time"]
    min_run_count = _tier.TIMING["min_run_count"]
    timeout = _tier.TIMING["timeout"]

    def setup(self, impl: str, concurrency: int, topk: int) -> None:
        self.case = _harness.cached_case(
            ("decode", impl, concurrency, topk), lambda: build_case(impl, concurrency, topk)
        )
        self.number = self.case.number

    def time_decode(self, impl: str, concurrency: int, topk: int) -> None:
        self.case.replay()


class SparseDecodeMetrics:
    """tokens/s, effective GB/s and TFLOP/s, and roofline fraction of each SparseDecode case.

    All cases are measured in one ``setup_cache`` process (median of cold replays); the byte and
    flop model is ``_roofline.decode_model``.
    """

    params = PARAMS
    param_names = PARAM_NAMES
    timeout = _tier.TIMING["timeout"]

    def setup_cache(self) -> dict[str, Any]:
        return _harness.measure_all(
            list(itertools.product(*PARAMS)),
            build_case,
            model,
            lambda impl, concurrency, topk: concurrency,
            calls=_tier.METRIC_CALLS,
        )

    setup_cache.timeout = _tier.SETUP_CACHE_TIMEOUT  # type: ignore[attr-defined]

    def setup(self, cache: dict[str, Any], impl: str, concurrency: int, topk: int) -> None:
        _harness.check_metrics_case(cache, (impl, concurrency, topk))

    def track_tokens_per_s(self, cache: dict[str, Any], impl: str, concurrency: int, topk: int) -> float:
        return _harness.metric(cache, (impl, concurrency, topk), "tokens_per_s")

    track_tokens_per_s.unit = "tokens/s"  # type: ignore[attr-defined]

    def track_gbps(self, cache: dict[str, Any], impl: str, concurrency: int, topk: int) -> float:
        return _harness.metric(cache, (impl, concurrency, topk), "gbps")

    track_gbps.unit = "GB/s"  # type: ignore[attr-defined]

    def track_tflops(self, cache: dict[str, Any], impl: str, concurrency: int, topk: int) -> float:
        return _harness.metric(cache, (impl, concurrency, topk), "tflops")

    track_tflops.unit = "TFLOP/s"  # type: ignore[attr-defined]

    def track_roofline_fraction(self, cache: dict[str, Any], impl: str, concurrency: int, topk: int) -> float:
        return _harness.metric(cache, (impl, concurrency, topk), "roofline_fraction")

    track_roofline_fraction.unit = "fraction"  # type: ignore[attr-defined]
