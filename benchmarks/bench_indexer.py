"""Indexer path (lightning indexer + top-k): fp32 over max_context vs bf16 over the real length.

GPU tier: 64 indexer heads, top-k 512, max_context 131,072 (the block table's capacity), each
request ``context`` tokens long. CPU tier: max_context 1,024, top-k 32, Triton interpreter.
``time_indexer`` is the GPU time of one CUDA-graph replay with a cold L2 (see ``_timing``).
"""

from __future__ import annotations

import functools

from . import _gate, _harness, _oracle, _roofline, _suite, _tier, _timing

IMPLS = ["fp32_maxctx", "bf16"]
PARAMS = [IMPLS, _tier.CONCURRENCY, _tier.CONTEXT]
PARAM_NAMES = ["impl", "concurrency", "context"]
INDEX_HEADS = 64
# track_launch_<key> -> its value in the indexer launch record (``_harness.record_view``): the scores
# kernel's token block, warps and stages, the bf16 path's radix-select block and warps (NaN for
# fp32_maxctx, which selects with torch).
LAUNCH_FIELDS: dict[str, tuple[str, ...]] = {
    "block_t": ("BLOCK_T",),
    "num_warps": ("num_warps",),
    "num_stages": ("num_stages",),
    "select_block": ("SELECT_BLOCK",),
    "select_num_warps": ("select_num_warps",),
}


def build_case(impl: str, concurrency: int, context: int) -> _timing.Replayer:
    """Inputs (one set per rotation slot), graphs and the correctness gate for one case."""
    dev = _harness.device()
    indexer_topk = _harness.recorded("indexer_topk", "mla_kernels", "mla_kernels.indexer")
    make_inputs = _harness.require("make_indexer_inputs", "mla_kernels", "mla_kernels.indexer")
    ref_logits = _harness.require("indexer_logits_reference", "mla_kernels", "mla_kernels.indexer")
    _harness.require_impl("indexer", impl, _indexer_impls())
    topk = _tier.STEP_TOPK
    # The longest request, as a serving engine's metadata gives it (the select rule reads it, where it exists).
    api = ("mla_kernels", "mla_kernels.indexer")
    hint = {"max_seq_len": context} if _harness.accepts("indexer_topk", "max_seq_len", *api) else {}
    sets = [
        make_inputs(
            concurrency, context, max_context=_tier.MAX_CONTEXT, num_heads=INDEX_HEADS, topk=topk,
            device=dev, seed=seed,
        )
        for seed in range(_tier.REQUEST_SETS)
    ]  # fmt: skip
    fns = [
        functools.partial(
            indexer_topk, s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens, topk, impl=impl, **hint
        )
        for s in sets
    ]
    try:
        replayer = _timing.Replayer(fns, dev)
        # Gate on input set 0 as the timed graph computes it (and on the record that call returned); the
        # other sets run the same code.
        got, launch = replayer.outputs(0)
        _gate.check_launch(launch, "indexer", impl)
        s = sets[0]
        logits = ref_logits(s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens)
        oracle = _oracle.indexer_logits(s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens)
        _gate.check_indexer(got, logits, oracle, s.block_table, s.seq_lens, topk)
    except ValueError as exc:
        skip = _harness.as_skip(exc, impl)
        if skip is not None:
            raise skip from exc
        raise
    replayer.number = replayer.pick_number()
    _timing.CLOCK.events = replayer.gpu
    print(f"indexer impl={impl} B={concurrency} context={context} ran {launch}", flush=True)
    return _harness.keep_launch(replayer, launch)


def _indexer_impls() -> tuple[str, ...] | None:
    try:
        return tuple(_harness.require("INDEXER_IMPLS", "mla_kernels", "mla_kernels.indexer"))
    except NotImplementedError:
        return None


def model(impl: str, concurrency: int, context: int) -> tuple[int, int]:
    return _roofline.indexer_model(concurrency, context, _tier.STEP_TOPK)


class Indexer(
    _suite.Timed,
    benchmark="time_indexer",
    version="8c227242941233c8c61b51c48d072c69d477b8d0b1b81ed2773a6e854e2a6a4d",
):
    """GPU time of one ``indexer_topk`` call (CUDA-graph replay, cold L2), seconds."""

    params = PARAMS
    param_names = PARAM_NAMES
    build_case = staticmethod(build_case)


class IndexerMetrics(
    _suite.Metrics,
    versions={
        "track_tokens_per_s": "4cb9abff5bbcbe415817a36f7834ce12765c986b61a5cb906490c759f40e638a",
        "track_gbps": "27500c7cfce6245813f1477f5fd09dfdda072a27110c9814e4086ea3ef4a01e6",
        "track_tflops": "d19cd1e621168bae2cedc3bfd3e132c8fee76ebe89302a1e321d45c8660ae567",
        "track_roofline_fraction": "2a8f4aa9a7ee27f0dba9b5b1365c86cf784ff5ebb8a4f9c97149067084fcacaf",
    },
    launch_versions={key: "1" for key in LAUNCH_FIELDS},
):
    """tokens/s, effective GB/s and TFLOP/s, and roofline fraction of each Indexer case (byte and flop
    model ``_roofline.indexer_model``: each request's real context, not max_context), and the kernel
    config it ran with (``track_launch_<key>``, ``LAUNCH_FIELDS``)."""

    params = PARAMS
    param_names = PARAM_NAMES
    build_case = staticmethod(build_case)
    model = staticmethod(model)
    launch_fields = LAUNCH_FIELDS
