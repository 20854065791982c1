"""The whole decode step: indexer -> top-k -> sparse decode, every pairing, eager and CUDA graph."""

from __future__ import annotations

import pytest
import torch

from mla_kernels import DecodeStep, make_step_inputs, sparse_mla_decode
from mla_kernels.indexer.select_rule import select_path
from mla_kernels.testing import check_decode


def _recall(got: torch.Tensor, ref: torch.Tensor) -> float:
    hits, total = 0, 0
    for g, r in zip(got.tolist(), ref.tolist(), strict=True):
        rs = {x for x in r if x >= 0}
        hits += len(rs & {x for x in g if x >= 0})
        total += len(rs)
    return hits / max(total, 1)


def _assert_same_step(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...], exact: bool) -> None:
    # Two runs' (out, lse, indices). ``exact``: bitwise. Else the same slots in any order (the one-launch select
    # writes a row in the order its programs' atomics land; order is free in the contract), and the decodes
    # over them equal within the decode's tolerance (a sum in another order).
    if exact:
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    else:
        assert torch.equal(a[2].sort(dim=1).values, b[2].sort(dim=1).values)
        check_decode(b[0], b[1], a[0], a[1])


@pytest.mark.parametrize("decode_impl", ["simt", "mma"])
@pytest.mark.parametrize("indexer_impl", ["fp32_maxctx", "bf16"])
def test_step_matches_reference_step(device, decode_impl, indexer_impl):
    inputs = make_step_inputs(2, [700, 40], max_context=1024, num_heads=16, topk=64, device=device, seed=3)
    step = DecodeStep(inputs, decode_impl=decode_impl, indexer_impl=indexer_impl)
    out, lse, records = step.run_with_records()
    ref_out, ref_lse, ref_idx = step.reference()
    assert step.indices is not None
    assert _recall(step.indices, ref_idx) >= 0.97  # selections differ only at near-ties
    assert (step.indices[1, 40:] == -1).all()  # 40 tokens < top-k 64: the rest is padding
    # The decode half must be exact for whatever the indexer selected.
    sel_out, sel_lse = sparse_mla_decode(inputs.q, inputs.kv_cache, step.indices, impl="reference")
    check_decode(out, lse, sel_out, sel_lse)
    assert (records["decode"].impl, records["indexer"].impl) == (decode_impl, indexer_impl)
    assert [t.shape for t in step.run()] == [out.shape, lse.shape]  # run() keeps returning (out, lse)
    if _recall(step.indices, ref_idx) == 1.0:
        check_decode(out, lse, ref_out, ref_lse)


def test_step_gives_the_indexer_its_longest_request(device, monkeypatch):
    # DecodeStep reads the longest request once and hands it to the indexer's select rule.
    from mla_kernels.indexer import select_rule

    monkeypatch.setattr(select_rule, "SELECT", ((1 << 30, "split"),))
    monkeypatch.setattr(select_rule, "LONG_SELECT", ("radix", ((1, 512),)))
    for lens, path in (([700, 40], "radix"), ([500, 40], "split")):
        inputs = make_step_inputs(2, lens, max_context=1024, num_heads=16, topk=16, device=device, seed=1)
        step = DecodeStep(inputs, decode_impl="simt")
        assert step.max_seq_len == max(lens)
        assert step.run_with_records()[2]["indexer"].config["select"] == path
        # A step given a select path runs it whatever the rule says (a measurement's --select).
        forced = DecodeStep(inputs, decode_impl="simt", select="split")
        assert forced.run_with_records()[2]["indexer"].config["select"] == "split"
    with pytest.raises(ValueError, match="select must be one of"):
        DecodeStep(inputs, select="fast")


def test_bad_implementation_names():
    inputs = make_step_inputs(1, 256, max_context=512, num_heads=16, topk=16, device="cpu")
    with pytest.raises(ValueError, match="decode_impl"):
        DecodeStep(inputs, decode_impl="flash")
    with pytest.raises(ValueError, match="indexer_impl"):
        DecodeStep(inputs, indexer_impl="fp8")


def test_replay_needs_capture():
    inputs = make_step_inputs(1, 256, max_context=512, num_heads=16, topk=16, device="cpu")
    with pytest.raises(RuntimeError, match="capture"):
        DecodeStep(inputs).replay()


@pytest.mark.gpu
# 64 requests at 4K run the split select, 8 at 4K the split too (select_rule.SHORT_SPLIT), 8 at 8K the one-launch
# select (select_rule.SHORT_SELECT), whose workspace the replayed graph reuses: the rule says which, once.
@pytest.mark.parametrize(("decode_impl", "indexer_impl", "batch", "context"), [
    ("simt", "fp32_maxctx", 64, 4096), ("mma", "fp32_maxctx", 64, 4096), ("mma", "bf16", 64, 4096),
    ("mma", "bf16", 8, 4096), ("mma", "bf16", 8, 8192)])  # fmt: skip
def test_gpu_graph_replay_equals_eager(decode_impl, indexer_impl, batch, context):
    inputs = make_step_inputs(batch, context, device="cuda", seed=1)
    step = DecodeStep(inputs, decode_impl=decode_impl, indexer_impl=indexer_impl)
    step.capture()
    out, lse = step.replay()
    torch.cuda.synchronize()
    replayed = (out.clone(), lse.clone(), step.indices.clone())
    eager = DecodeStep(inputs, decode_impl=decode_impl, indexer_impl=indexer_impl)
    e_out, e_lse, records = eager.run_with_records()
    torch.cuda.synchronize()
    if indexer_impl == "bf16":
        assert records["indexer"].config["select"] == select_path(batch, max_seq_len=context)
    exact = records["indexer"].config.get("select") != "coop"
    _assert_same_step((e_out, e_lse, eager.indices), replayed, exact)
    ref_out, ref_lse, ref_idx = step.reference()
    assert _recall(replayed[2], ref_idx) >= 0.99
    sel_out, sel_lse = sparse_mla_decode(inputs.q, inputs.kv_cache, replayed[2], impl="reference")
    check_decode(replayed[0], replayed[1], sel_out, sel_lse)
    inputs.q.mul_(0.5)  # new contents through the same graph
    step.replay()
    fresh = DecodeStep(inputs, decode_impl=decode_impl, indexer_impl=indexer_impl)
    f_out, f_lse = fresh.run()
    torch.cuda.synchronize()
    _assert_same_step((step.out, step.lse, step.indices), (f_out, f_lse, fresh.indices), exact)
