"""The FP8 paged cache: exact byte layout, UE8M0 rule, round trip, padded pages."""

from __future__ import annotations

import pytest
import torch

from mla_kernels import PAGE_BYTES, dequantize_kv_cache, quantize_kv_cache
from mla_kernels.cache import SCALE_OFFSET, ue8m0_scales
from mla_kernels.testing import random_kv


def test_page_size_is_the_model1_layout() -> None:
    assert PAGE_BYTES == 256 * 576 + 256 * 8 == 149_504


def test_byte_layout_of_one_token() -> None:
    kv = torch.zeros(300, 512)
    kv[257, :64] = torch.linspace(-3.0, 3.0, 64)  # page 1, offset 1, group 0
    kv[257, 448:] = torch.arange(64, dtype=torch.float32) / 8  # rope, exact in bf16
    cache = quantize_kv_cache(kv)
    assert cache.shape == (2, PAGE_BYTES) and cache.dtype == torch.uint8
    row = cache[1, 576:1152]  # token offset 1 of page 1
    exp = int(cache[1, SCALE_OFFSET + 8])  # first scale byte of offset 1
    # amax 3 -> scale 2**ceil(log2(3/448)) = 2**-7 -> byte 120
    assert exp == 120
    # all-zero groups use the 1e-4 floor: 2**ceil(log2(1e-4 / 448)) = 2**-22 -> byte 105
    assert torch.equal(cache[1, SCALE_OFFSET + 9 : SCALE_OFFSET + 15], torch.full((6,), 105, dtype=torch.uint8))
    assert int(cache[1, SCALE_OFFSET + 15]) == 0  # pad byte
    nope = row[:64].view(torch.float8_e4m3fn).float() * 2.0**-7
    expected = (kv[257, :64] / 2.0**-7).to(torch.float8_e4m3fn).float() * 2.0**-7
    assert torch.equal(nope, expected)
    rope = row[448:].contiguous().view(torch.bfloat16).float()
    assert torch.equal(rope, kv[257, 448:])


@pytest.mark.parametrize(
    ("amax", "byte"),
    [(448.0, 127), (448.0001, 128), (224.0, 126), (1.0, 127 - 8), (0.0, 127 + (-22)), (1e-30, 105)],
)
def test_ue8m0_rule(amax: float, byte: int) -> None:
    assert int(ue8m0_scales(torch.tensor([amax]))[0]) == byte


def test_round_trip_error_is_fp8_rounding() -> None:
    kv = random_kv(1000, device="cpu", seed=3, spread=2.0)
    back = dequantize_kv_cache(quantize_kv_cache(kv))[:1000].float()
    assert back.shape == (1000, 512)
    nope_err = (back[:, :448] - kv[:, :448]).abs().view(1000, 7, 64)
    amax = kv[:, :448].abs().view(1000, 7, 64).amax(-1, keepdim=True)
    assert (nope_err <= amax * 2**-3).all()  # e4m3: 3 mantissa bits, relative to the group scale
    assert (back[:, 448:] - kv[:, 448:].bfloat16().float()).abs().max() == 0
    again = dequantize_kv_cache(quantize_kv_cache(back))[:1000].float()
    assert torch.equal(again, back)  # quantized values are fixed points


def test_padded_page_stride_keeps_layout() -> None:
    kv = random_kv(600, device="cpu", seed=4)
    plain = quantize_kv_cache(kv)
    padded = quantize_kv_cache(kv, page_stride=149_760)
    assert padded.shape == (3, 149_760)
    assert torch.equal(padded[:, :PAGE_BYTES], plain)
    assert torch.equal(dequantize_kv_cache(padded), dequantize_kv_cache(plain))


def test_bad_inputs_name_the_argument() -> None:
    with pytest.raises(ValueError, match="kv must have shape"):
        quantize_kv_cache(torch.zeros(4, 448))
    with pytest.raises(ValueError, match="page_stride"):
        quantize_kv_cache(torch.zeros(4, 512), page_stride=1000)
    with pytest.raises(ValueError, match="finite"):
        quantize_kv_cache(torch.full((4, 512), float("nan")))
    with pytest.raises(ValueError, match="kv_cache"):
        dequantize_kv_cache(torch.zeros(2, 100, dtype=torch.uint8))
