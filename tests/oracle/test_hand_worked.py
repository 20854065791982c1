"""Decode cases worked by hand, from the cache bytes to ``out`` and ``lse``.

Each byte below is written out with the value the contract (docs/design.md) gives it; the expected
outputs are the softmax formulas over those values. The oracle must reproduce them to float64 rounding,
the package's reference within the reference row of the gate's table, and every kernel within its
tier's row.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import mla_kernels as mk
from benchmarks import _gate, _oracle

ROOT = Path(__file__).resolve().parents[2]
PAGE = 149_504  # 256 tokens x 584 bytes
SCALES_AT = 256 * 576  # a page's scale rows start after its 256 data rows


def put_token(cache: torch.Tensor, slot: int, data: dict[int, int], scales: dict[int, int]) -> None:
    """Write one token: ``data`` maps data-byte offsets (0..575) to bytes, ``scales`` group -> UE8M0 byte
    (unset groups keep byte 0, i.e. scale 2**-127, on zero values)."""
    page, off = divmod(slot, 256)
    for i, b in data.items():
        cache[page, off * 576 + i] = b
    for g, b in scales.items():
        cache[page, SCALES_AT + off * 8 + g] = b


def hand_cache(num_pages: int = 1, stride: int = PAGE, token0_slot: int = 0) -> torch.Tensor:
    cache = torch.zeros(num_pages, stride, dtype=torch.uint8)
    # Token A: nope[0] = e4m3 0x38 (exponent 7 - bias 7 = 0, mantissa 0: 1.0) x group-0 scale byte 128
    # (2**(128-127) = 2) = 2.0; rope[0] = bf16 0x3F80 = 1.0, stored little-endian at bytes 448, 449.
    put_token(cache, token0_slot, {0: 0x38, 448: 0x80, 449: 0x3F}, {0: 128})
    # Token B: nope[0] = 0x30 (2**-1 = 0.5) x byte 127 (1) = 0.5; nope[64] = 0xC0 (sign 1, exponent 8:
    # -2.0) x group-1 byte 125 (2**-2) = -0.5; nope[447] = 0x01 (subnormal: 1/8 * 2**-6 = 2**-9) x group-6
    # byte 130 (8) = 2**-6; rope[63] = bf16 0xC040 (-3.0) at bytes 574, 575.
    put_token(cache, 1, {0: 0x30, 64: 0xC0, 447: 0x01, 574: 0x40, 575: 0xC0}, {0: 127, 1: 125, 6: 130})
    return cache


KEY_A = {0: 2.0, 448: 1.0}
KEY_B = {0: 0.5, 64: -0.5, 447: 2.0**-6, 511: -3.0}


def hand_query(heads: int = 16) -> torch.Tensor:
    """q[h, 0] = 1 and q[h, 511] = 0.25 for every head; q[h, 448] = 1 for the first half of the heads."""
    q = torch.zeros(1, heads, 512)
    q[0, :, 0] = 1.0
    q[0, :, 511] = 0.25
    q[0, : heads // 2, 448] = 1.0
    return q.bfloat16()


def softmax_row(slots: list[dict[int, float] | None], scores: list[float]) -> tuple[dict[int, float], float]:
    """out (as {column: value}) and lse of one head over the listed keys (None = invalid slot)."""
    live = [(k, s) for k, s in zip(slots, scores, strict=True) if k is not None]
    if not live:
        return {}, math.inf
    m = max(s for _, s in live)
    z = sum(math.exp(s - m) for _, s in live)
    out: dict[int, float] = {}
    for k, s in live:
        for col, v in k.items():
            out[col] = out.get(col, 0.0) + math.exp(s - m) / z * v
    return out, m + math.log(z)


def expected(rows: list[list[dict[int, float] | None]], heads: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Hand-derived out [B, H, 512] and lse [B, H]: scores q . k with sm_scale 1.

    For a head with q[448] = 1: s(A) = 1 * 2 + 1 * 1 = 3, s(B) = 1 * 0.5 + 0.25 * -3 = -0.25;
    without it: s(A) = 2, s(B) = -0.25.
    """
    out = torch.zeros(len(rows), heads, 512, dtype=torch.float64)
    lse = torch.zeros(len(rows), heads, dtype=torch.float64)
    for b, slots in enumerate(rows):
        for h in range(heads):
            s_a = 3.0 if h < heads // 2 else 2.0
            scores = [s_a if k is KEY_A else -0.25 for k in slots]
            cols, lse[b, h] = softmax_row(slots, scores)
            for col, v in cols.items():
                out[b, h, col] = v
    return out, lse


# Row 0: A and B, then two invalid slots. Row 1: B twice (a duplicate counts twice: out = B exactly,
# lse = -0.25 + ln 2) plus -1 and a slot past the cache (invalid). Row 2: no valid slot: out 0, lse +inf.
INDICES = [[0, 1, -1, -1], [1, -1, 1, 256 * 7], [-1, -1, -1, -1]]
ROWS = [[KEY_A, KEY_B, None, None], [KEY_B, None, KEY_B, None], [None, None, None, None]]


def test_the_hand_formulas() -> None:
    out, lse = expected(ROWS)
    p_a = math.exp(3) / (math.exp(3) + math.exp(-0.25))
    assert out[0, 0, 0].item() == pytest.approx(2 * p_a + 0.5 * (1 - p_a), rel=1e-15)
    assert out[0, 0, 511].item() == pytest.approx(-3 * (1 - p_a), rel=1e-15)
    assert lse[0, 0].item() == pytest.approx(math.log(math.exp(3) + math.exp(-0.25)), rel=1e-15)
    assert lse[1, 0].item() == pytest.approx(-0.25 + math.log(2), rel=1e-15)
    assert out[1, 3, 64].item() == pytest.approx(-0.5, rel=1e-15)
    assert math.isinf(lse[2, 5].item()) and not out[2].any()


def test_oracle_reproduces_the_hand_worked_cases() -> None:
    cache, q = hand_cache(), hand_query()
    out, lse = _oracle.decode(q.expand(3, -1, -1), cache, torch.tensor(INDICES, dtype=torch.int32), sm_scale=1.0)
    want_out, want_lse = expected(ROWS)
    torch.testing.assert_close(out, want_out, rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(lse, want_lse, rtol=1e-15, atol=0)


def test_oracle_byte_decoding_matches_the_contract() -> None:
    assert _oracle.e4m3_value(0x7E) == 448.0  # largest finite e4m3
    assert _oracle.e4m3_value(0x01) == 2.0**-9 and _oracle.e4m3_value(0x08) == 2.0**-6  # subnormal, min normal
    assert _oracle.e4m3_value(0x80) == 0.0 and math.copysign(1, _oracle.e4m3_value(0x80)) == -1
    assert math.isnan(_oracle.e4m3_value(0x7F)) and math.isnan(_oracle.e4m3_value(0xFF))
    assert _oracle.bf16_value(0x3F80) == 1.0 and _oracle.bf16_value(0xC040) == -3.0
    assert _oracle.bf16_value(0x7F80) == math.inf and math.isnan(_oracle.bf16_value(0x7FC0))
    assert _oracle.bf16_value(0x0001) == 2.0**-133  # smallest subnormal
    assert _oracle.ue8m0_value(127) == 1.0 and _oracle.ue8m0_value(0) == 2.0**-127
    keys = _oracle.token_values(hand_cache(), torch.tensor([0, 1]))
    for row, key in ((0, KEY_A), (1, KEY_B)):
        assert {c: keys[row, c].item() for c in keys[row].nonzero().flatten().tolist()} == key


def test_page_addressing_with_a_padded_stride(device: torch.device) -> None:
    """Token A stored at slot 261 (page 1, offset 5) of a cache with 149,760-byte pages."""
    cache = hand_cache(num_pages=2, stride=149_760, token0_slot=261)
    q = hand_query()
    idx = torch.tensor([[261, -1]], dtype=torch.int32)
    out, lse = _oracle.decode(q, cache, idx, sm_scale=1.0)
    want_out, want_lse = expected([[KEY_A, None]])
    torch.testing.assert_close(out, want_out, rtol=0, atol=0)  # one valid slot: out is the key itself
    torch.testing.assert_close(lse, want_lse, rtol=0, atol=0)  # and lse its score (3 or 2)
    for impl in ("reference", "mma"):
        got = mk.sparse_mla_decode(q.to(device), cache.to(device), idx.to(device), 1.0, impl=impl)
        tier = "reference" if impl == "reference" else "gpu" if device.type == "cuda" else "interpreter"
        _gate.assert_close(f"{impl} out", got[0].cpu(), want_out, _gate.TOLERANCES[tier]["out"])
        _gate.assert_close(f"{impl} lse", got[1].cpu(), want_lse, _gate.TOLERANCES[tier]["lse"])


@pytest.mark.parametrize("impl", ["reference", "simt", "mma"])
def test_package_reproduces_the_hand_worked_cases(device: torch.device, impl: str) -> None:
    cache, q = hand_cache().to(device), hand_query().expand(3, -1, -1).contiguous().to(device)
    out, lse = mk.sparse_mla_decode(q, cache, torch.tensor(INDICES, dtype=torch.int32, device=device), 1.0, impl=impl)
    want_out, want_lse = expected(ROWS)
    tier = "reference" if impl == "reference" else "gpu" if device.type == "cuda" else "interpreter"
    tol = _gate.TOLERANCES[tier]
    _gate.assert_close("out", out.cpu(), want_out, tol["out"])
    _gate.assert_close("lse", lse.cpu(), want_lse, tol["lse"])


def test_oracle_shares_no_code_with_mla_kernels() -> None:
    """At run time, not by reading imports: a fresh interpreter runs both oracles on inputs built from
    bytes by hand, and no ``mla_kernels`` module is loaded afterwards."""
    code = """
import sys, torch
from benchmarks import _oracle
cache = torch.zeros(1, 149504, dtype=torch.uint8)
cache[0, 0], cache[0, 256 * 576] = 0x38, 127  # token 0: nope[0] = 1.0 x 2**0
out, lse = _oracle.decode(torch.ones(1, 16, 512), cache, torch.tensor([[0, -1]]))
assert abs(float(out[0, 0, 0]) - 1.0) < 1e-12 and abs(float(lse[0, 0]) - 512 ** -0.5) < 1e-12
index = torch.zeros(1, 33792, dtype=torch.uint8)
index[0, 0] = 0x38  # token 0: key[0] = 1.0 x scale 2.0 (fp32 0x40000000, little endian)
index[0, 256 * 128 + 3] = 0x40
logits = _oracle.indexer_logits(torch.ones(1, 16, 128), torch.ones(1, 16), index, torch.tensor([[0]]),
                                torch.tensor([1]))
assert float(logits[0, 0]) == 32.0 and float(logits[0, 1]) == float("-inf")
loaded = sorted(m for m in sys.modules if m == "mla_kernels" or m.startswith("mla_kernels."))
assert not loaded, loaded
"""
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
