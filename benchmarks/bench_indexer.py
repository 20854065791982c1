"""Indexer path (lightning indexer + top-k): fp32 over max_context vs bf16 over the real length.

GPU tier: 64 indexer heads, top-k 512, max_context 131,072 (the block table's capacity), each
request ``context`` tokens long. CPU tier: max_context 1,024, top-k 32, Triton interpreter.
``time_indexer`` is the GPU time of one CUDA-graph replay with a cold L2 (see ``_timing``).
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from . import _gate, _harness, _roofline, _tier, _timing

IMPLS = ["fp32_maxctx", "bf16"]
PARAMS = [IMPLS, _tier.CONCURRENCY, _tier.CONTEXT]
PARAM_NAMES = ["impl", "concurrency", "context"]
INDEX_HEADS = 64


def build_case(impl: str, concurrency: int, context: int) -> _timing.Replayer:
    """Inputs (one set per rotation slot), graphs and the correctness gate for one case."""
    dev = _harness.device()
    indexer_topk = _harness.require("indexer_topk", "mla_kernels", "mla_kernels.indexer")
    make_inputs = _harness.require("make_indexer_inputs", "mla_kernels", "mla_kernels.indexer")
    ref_logits = _harness.require("indexer_logits_reference", "mla_kernels", "mla_kernels.indexer")
    _harness.require_impl("indexer", impl, _indexer_impls())
    topk = _tier.STEP_TOPK
    sets = [
        make_inputs(
            concurrency, context, max_context=_tier.MAX_CONTEXT, num_heads=INDEX_HEADS, topk=topk,
            device=dev, seed=seed,
        )
        for seed in range(_tier.REQUEST_SETS)
    ]  # fmt: skip
    fns = [
        functools.partial(
            indexer_topk, s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens, topk, impl=impl
        )
        for s in sets
    ]
    try:
        replayer = _timing.Replayer(fns, dev)
        # Gate on input set 0 as the timed graph computes it; the other sets run the same code.
        got = replayer.outputs(0)
        launch = _harness.last_launch()
        _gate.check_kernel_ran(launch, impl)
        s = sets[0]
        logits = ref_logits(s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens)
        _gate.check_topk(got, logits, s.block_table, s.seq_lens, topk)
    except ValueError as exc:
        skip = _harness.as_skip(exc, impl)
        if skip is not None:
            raise skip from exc
        raise
    replayer.number = replayer.pick_number()
    _timing.CLOCK.events = replayer.gpu
    print(f"indexer impl={impl} B={concurrency} context={context} ran {launch}", flush=True)
    return replayer


def _indexer_impls() -> tuple[str, ...] | None:
    try:
        return tuple(_harness.require("INDEXER_IMPLS", "mla_kernels", "mla_kernels.indexer"))
    except NotImplementedError:
        return None


def model(impl: str, concurrency: int, context: int) -> tuple[int, int]:
    return _roofline.indexer_model(concurrency, context, _tier.STEP_TOPK)


class Indexer:
    """GPU time of one ``indexer_topk`` call (CUDA-graph replay, cold L2), seconds."""

    params = PARAMS
    param_names = PARAM_NAMES
    timer = _timing.CLOCK
    rounds = _tier.TIMING["rounds"]
    repeat = _tier.TIMING["repeat"]
    number = _tier.TIMING["number"]
    warmup_time = _tier.TIMING["warmup_time"]
    min_run_count = _tier.TIMING["min_run_count"]
    timeout = _tier.TIMING["timeout"]

    def setup(self, impl: str, concurrency: int, context: int) -> None:
        self.case = _harness.cached_case(
            ("indexer", impl, concurrency, context), lambda: build_case(impl, concurrency, context)
        )
        self.number = self.case.number

    def time_indexer(self, impl: str, concurrency: int, context: int) -> None:
        self.case.replay()


class IndexerMetrics:
    """tokens/s, effective GB/s and TFLOP/s, and roofline fraction of each Indexer case.

    All cases are measured in one ``setup_cache`` process; the byte and flop model
    (``_roofline.indexer_model``) counts each request's real context, not max_context.
    """

    params = PARAMS
    param_names = PARAM_NAMES
    timeout = _tier.TIMING["timeout"]

    def setup_cache(self) -> dict[str, Any]:
        return _harness.measure_all(
            list(itertools.product(*PARAMS)),
            build_case,
            model,
            lambda impl, concurrency, context: concurrency,
            calls=_tier.METRIC_CALLS,
        )

    setup_cache.timeout = _tier.SETUP_CACHE_TIMEOUT  # type: ignore[attr-defined]

    def setup(self, cache: dict[str, Any], impl: str, concurrency: int, context: int) -> None:
        _harness.check_metrics_case(cache, (impl, concurrency, context))

    def track_tokens_per_s(self, cache: dict[str, Any], impl: str, concurrency: int, context: int) -> float:
        return _harness.metric(cache, (impl, concurrency, context), "tokens_per_s")

    track_tokens_per_s.unit = "tokens/s"  # type: ignore[attr-defined]

    def track_gbps(self, cache: dict[str, Any], impl: str, concurrency: int, context: int) -> float:
        return _harness.metric(cache, (impl, concurrency, context), "gbps")

    track_gbps.unit = "GB/s"  # type: ignore[attr-defined]

    def track_tflops(self, cache: dict[str, Any], impl: str, concurrency: int, context: int) -> float:
        return _harness.metric(cache, (impl, concurrency, context), "tflops")

    track_tflops.unit = "TFLOP/s"  # type: ignore[attr-defined]

    def track_roofline_fraction(
        self, cache: dict[str, Any], impl: str, concurrency: int, context: int
    ) -> float:
        return _harness.metric(cache, (impl, concurrency, context), "roofline_fraction")

    track_roofline_fraction.unit = "fraction"  # type: ignore[attr-defined]
