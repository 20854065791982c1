"""The float64 indexer oracle (``benchmarks/_oracle.indexer_logits``): a case worked by hand from the
index-cache bytes, agreement with the package's reference, and the gates it makes independent: a kernel
and reference whose math changed together (the ReLU dropped from both) fail the indexer and step gates."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import mla_kernels as mk
from benchmarks import _gate, _oracle, bench_indexer, bench_step
from benchmarks._gate import KernelMismatch

ROOT = Path(__file__).resolve().parents[2]
SCALES_AT = 256 * 128  # an index page's fp32 scales start after its 256 x 128 key bytes


def _hand_cache(stride: int = 33_792) -> torch.Tensor:
    """Two pages. Page 1, token 0: key[0] = e4m3 0x38 (1.0), key[1] = 0xC0 (-2.0), scale fp32 0x3F000000
    (0.5, bytes 00 00 00 3F little endian) -> key (0.5, -1.0, 0, ...). Page 0, token 3: key[0] = 0x01
    (subnormal 2**-9), scale 0x44000000 (512.0) -> key (1.0, 0, ...). Everything else is zero."""
    cache = torch.zeros(2, stride, dtype=torch.uint8)
    cache[1, 0], cache[1, 1] = 0x38, 0xC0
    cache[1, SCALES_AT + 3] = 0x3F
    cache[0, 3 * 128] = 0x01
    cache[0, SCALES_AT + 3 * 4 + 3] = 0x44
    return cache


def test_indexer_oracle_by_hand() -> None:
    # Request 0 reads page 1 then page 0: position 0 = key (0.5, -1.0), position 256 + 3 = key (1.0).
    # Head 0 q = (1, 1): dots -0.5 (relu 0) and 1.0; head 1 q = (2, 0): dots 1.0 and 2.0; weights (3, 0.5).
    # logit(0) = 3 * 0 + 0.5 * 1.0 = 0.5; logit(259) = 3 * 1.0 + 0.5 * 2.0 = 4.0; the zero keys give 0.
    q = torch.zeros(1, 2, 128)
    q[0, 0, :2] = 1.0
    q[0, 1, 0] = 2.0
    weights = torch.tensor([[3.0, 0.5]])
    for stride in (33_792, 40_000):
        got = _oracle.indexer_logits(q, weights, _hand_cache(stride), torch.tensor([[1, 0]]), torch.tensor([300]))
        assert got.dtype == torch.float64 and tuple(got.shape) == (1, 512)
        assert (got[0, 0].item(), got[0, 259].item()) == (0.5, 4.0)
        assert torch.all(got[0, 1:259] == 0) and torch.all(got[0, 260:300] == 0)
        assert torch.all(torch.isneginf(got[0, 300:]))


def test_fp32_scales_decoded_from_their_bits() -> None:
    values = torch.tensor([1.0, -2.5, 0.0, -0.0, 1e-40, 3.4e38, math.inf, 2.0**-126], dtype=torch.float32)
    bits = values.view(torch.int32).long() & 0xFFFFFFFF
    assert torch.equal(_oracle.fp32_values(bits), values.double())
    assert math.isnan(_oracle.fp32_values(torch.tensor([0x7FC00000])).item())


@pytest.mark.parametrize(("lens", "heads", "stride"), [([300, 512, 20], 16, None), ([1000, 0, 37], 64, 34_000)])
def test_reference_logits_match_the_oracle(lens: list[int], heads: int, stride: int | None) -> None:
    s = mk.make_indexer_inputs(len(lens), lens, max_context=1024, num_heads=heads, topk=32, seed=len(lens),
                               page_stride=stride)  # fmt: skip
    args = (s.q_idx, s.weights, s.index_cache, s.block_table, s.seq_lens)
    _gate.assert_close("reference logits", mk.indexer_logits_reference(*args), _oracle.indexer_logits(*args),
                       _gate.INDEXER_LOGITS)  # fmt: skip
    keys = _oracle.index_keys(s.index_cache, torch.arange(s.index_cache.shape[0])).reshape(-1, 128)
    # The package multiplies in float32: the exact float64 product rounded once is its value.
    assert torch.equal(keys.float(), mk.dequantize_index_cache(s.index_cache))


def test_oracle_rejects_what_it_cannot_read() -> None:
    s = mk.make_indexer_inputs(1, [100], max_context=256, num_heads=16, topk=8)
    with pytest.raises(ValueError, match="index_cache must be uint8"):
        _oracle.indexer_logits(s.q_idx, s.weights, s.index_cache[:, :100], s.block_table, s.seq_lens)
    with pytest.raises(ValueError, match=r"seq_lens\[0\] = 300 is outside \[0, 256\]"):
        _oracle.indexer_logits(s.q_idx, s.weights, s.index_cache, s.block_table, torch.tensor([300]))


# --- a mutated kernel and reference together --------------------------------------------------------------

RELU = {  # kernel module -> {source line -> the same line without the ReLU}
    "kernels": {"acc += wh * tl.maximum(s, 0.0)": "acc += wh * s"},
    "token_scores": {"tl.sum(tl.maximum(s, 0.0) * w[None, :], axis=1)": "tl.sum(s * w[None, :], axis=1)"},
}


def _kernels_without_relu(tmp_path: Path, name: str) -> Any:
    """``mla_kernels/indexer/<name>.py`` with the ReLU removed from its scores kernels, as a module."""
    source = (ROOT / "mla_kernels" / "indexer" / f"{name}.py").read_text()
    for line, mutated in RELU[name].items():
        assert line in source, f"the kernel no longer has {line!r}: update RELU"
        source = source.replace(line, mutated)
    path = tmp_path / f"indexer_{name}_no_relu.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"indexer_{name}_no_relu", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference_without_relu(q_idx: Any, weights: Any, index_cache: Any, block_table: Any, seq_lens: Any) -> Any:
    """The package's reference with the same mutation: the weighted sum of the raw dot products (on the
    CPU; returned on the inputs' device, as the reference's are)."""
    dev = q_idx.device
    q_idx, weights, index_cache, block_table = (t.cpu() for t in (q_idx, weights, index_cache, block_table))
    keys = mk.dequantize_index_cache(index_cache).double()
    out = torch.full((q_idx.shape[0], block_table.shape[1] * 256), -math.inf)
    for b, n in enumerate(seq_lens.tolist()):
        pos = torch.arange(n)
        slots = block_table[b, pos // 256].long() * 256 + pos % 256
        out[b, :n] = (weights[b].double() @ (q_idx[b].double() @ keys[slots].T)).float()
    return out.to(dev)


@pytest.fixture
def no_relu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[], None]:
    """Drop the ReLU from the indexer kernels and the package's reference, consistently."""
    from mla_kernels.indexer import launch

    mutated = _kernels_without_relu(tmp_path, "kernels")
    token_major = _kernels_without_relu(tmp_path, "token_scores")
    monkeypatch.setattr(launch, "_fp32_maxctx_scores_kernel", mutated._fp32_maxctx_scores_kernel)
    monkeypatch.setattr(launch, "_bf16_scores_kernel_t", token_major._bf16_scores_kernel_t)
    monkeypatch.setattr(launch, "_coop_topk_kernel", token_major._coop_topk_kernel)
    monkeypatch.setattr(mk, "indexer_logits_reference", _reference_without_relu)

    def consistent() -> None:
        """The mutation is consistent: the mutated kernel's selection passes against the mutated
        reference (what the gates compared before the oracle)."""
        dev = "cuda" if torch.cuda.is_available() else "cpu"  # CPU tensors need the interpreter
        s = mk.make_indexer_inputs(1, [256], max_context=1024, num_heads=64, topk=32, seed=0, device=dev)
        got = mk.indexer_topk(*s.args(), impl="bf16")
        _gate.check_topk(got, _reference_without_relu(*s.args()[:5]), s.block_table, s.seq_lens, 32)

    return consistent


def test_dropping_the_relu_fails_the_indexer_gate(no_relu: Callable[[], None]) -> None:
    no_relu()
    with pytest.raises(KernelMismatch, match="reference logits vs oracle"):
        bench_indexer.build_case("bf16", 1, 256)


def test_dropping_the_relu_fails_the_step_gate(no_relu: Callable[[], None]) -> None:
    with pytest.raises(KernelMismatch, match="reference logits vs oracle"):
        bench_step.build_case("mma+indexer", 1, 256)


def test_the_unmutated_suites_pass() -> None:
    bench_indexer.build_case("bf16", 1, 256)
    bench_step.build_case("mma+indexer", 1, 256)
