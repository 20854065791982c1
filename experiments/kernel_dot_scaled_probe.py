"""Would block-scaled FP8 MMA (``tl.dot_scaled``, e4m3 x e4m3 with UE8M0 scales per 32 values) serve the
sparse decode on sm_120? Two questions, answered without a GPU:

1. compile evidence: a QK^T probe kernel compiled for sm_120 and sm_90; the PTX must hold the
   block-scaled MMA (``mma.sync ... kind::mxf8f6f4.block_scale ... ue8m0``) on sm_120;
2. precision: the operand each product would have to quantize (q for QK^T, the probabilities P for PV)
   quantized to e4m3 with UE8M0 block scales, exactly as the instruction sees them, and the decode's
   out / lse checked with the kernels' tolerances (``mla_kernels.testing``).
On a GPU it also runs the probe kernel and compares its scores with the torch emulation.

    python -m experiments.kernel_dot_scaled_probe [--batch 4] [--topk 512]
"""

from __future__ import annotations

import argparse
import json
import re

from settings import env

BLOCK = 32  # values per UE8M0 scale in tl.dot_scaled's e4m3 operands


def _probe_kernel() -> object:
    import triton
    import triton.language as tl

    @triton.jit
    def _qk_scaled_kernel(q_ptr, qs_ptr, k_ptr, ks_ptr, s_ptr, BH: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
        h = tl.arange(0, BH)
        n = tl.arange(0, BN)
        d = tl.arange(0, D)
        g = tl.arange(0, D // 32)
        q = tl.load(q_ptr + h[:, None] * D + d[None, :])  # [BH, D] e4m3
        qs = tl.load(qs_ptr + h[:, None] * (D // 32) + g[None, :])  # [BH, D/32] ue8m0
        k = tl.load(k_ptr + d[:, None] * BN + n[None, :])  # [D, BN] e4m3 (K^T)
        ks = tl.load(ks_ptr + n[:, None] * (D // 32) + g[None, :])  # [BN, D/32] ue8m0
        s = tl.dot_scaled(q, qs, "e4m3", k, ks, "e4m3")
        tl.store(s_ptr + h[:, None] * BN + n[None, :], s)

    return _qk_scaled_kernel


def compile_evidence(kernel: object) -> dict[str, object]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {"q_ptr": "*fp8e4nv", "qs_ptr": "*u8", "k_ptr": "*fp8e4nv", "ks_ptr": "*u8", "s_ptr": "*fp32",
           "BH": "constexpr", "BN": "constexpr", "D": "constexpr"}  # fmt: skip
    out: dict[str, object] = {}
    for cap in (120, 90):
        src = ASTSource(kernel, sig, {"BH": 16, "BN": 32, "D": 512})
        compiled = triton.compile(src, target=GPUTarget("cuda", cap, 32), options={"num_warps": 4})
        mma = sorted(set(re.findall(r"\b(mma\.sync\.aligned[\w.:]*|wgmma[\w.:]*)", compiled.asm["ptx"])))
        out[f"sm_{cap}"] = {"mma": mma, "block_scaled": any("block_scale" in m for m in mma),
                            "shared": compiled.metadata.shared}  # fmt: skip
    return out


def mx_e4m3(x: object, block: int = BLOCK) -> tuple[object, object]:
    """(e4m3 values, UE8M0 exponent bytes) of x along its last dim, one power-of-two scale per block."""
    import torch

    shp = x.shape  # type: ignore[attr-defined]
    xb = x.float().reshape(*shp[:-1], shp[-1] // block, block)  # type: ignore[attr-defined]
    exp = torch.ceil(torch.log2(xb.abs().amax(-1, keepdim=True).clamp_min(2.0**-126) / 448))
    vals = (xb / torch.exp2(exp)).to(torch.float8_e4m3fn)
    return vals.reshape(shp), (exp.squeeze(-1) + 127).clamp(0, 254).to(torch.uint8)


def dequant_mx(vals: object, exps: object, block: int = BLOCK) -> object:
    import torch

    shp = vals.shape  # type: ignore[attr-defined]
    scale = torch.exp2(exps.float() - 127)[..., None]  # type: ignore[attr-defined]
    return (vals.float().reshape(*shp[:-1], shp[-1] // block, block) * scale).reshape(shp)  # type: ignore[attr-defined]


def precision(batch: int, topk: int, device: str) -> list[dict[str, object]]:
    import torch

    from mla_kernels import make_decode_inputs, sparse_mla_decode
    from mla_kernels.cache import gather_tokens
    from mla_kernels.testing import TOLERANCES, assert_close

    inp = make_decode_inputs(batch, 64, topk, num_tokens=batch * 4096, device=device, seed=3)
    ref_out, ref_lse = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
    k = gather_tokens(inp.kv_cache, inp.indices.clamp_min(0))  # [B, topk, 512] fp32, exact cache values
    rows = []
    for qk_fp8, pv_fp8 in ((True, False), (False, True)):
        q = dequant_mx(*mx_e4m3(inp.q)) if qk_fp8 else inp.q.float()
        s = torch.einsum("bhd,bkd->bhk", q, k) * 512**-0.5
        lse = torch.logsumexp(s, -1)
        p = torch.exp(s - lse[..., None])
        p = dequant_mx(*mx_e4m3(p)) if pv_fp8 else p.to(torch.bfloat16).float()
        out = torch.einsum("bhk,bkd->bhd", p, k).to(torch.bfloat16)
        tier = "gpu"  # the production tolerances, whatever runs this emulation
        for name, got, want in (("out", out, ref_out), ("lse", lse, ref_lse)):
            try:
                assert_close(name, got, want, *TOLERANCES[tier][name])
                verdict = "within tolerance"
            except AssertionError as exc:
                verdict = " ".join(str(exc).split())
            rows.append({"fp8_operand": "q (QK^T)" if qk_fp8 else "P (PV)", "output": name, "verdict": verdict})
    return rows


def gpu_scores(kernel: object) -> dict[str, float] | None:
    """Run the probe on a GPU and compare with the emulation (validates the emulation's rounding)."""
    import torch

    if not torch.cuda.is_available():
        return None
    g = torch.Generator().manual_seed(0)
    q = torch.randn(16, 512, generator=g)
    k = torch.randn(32, 512, generator=g) * 0.1
    qv, qe = mx_e4m3(q)
    kv, ke = mx_e4m3(k)
    s = torch.empty(16, 32, device="cuda")
    args = [t.cuda() for t in (qv, qe, kv.t().contiguous(), ke)]
    kernel[(1,)](*args, s, BH=16, BN=32, D=512)  # type: ignore[index]
    want = dequant_mx(qv, qe) @ dequant_mx(kv, ke).t()
    return {"max_abs_diff": float((s.cpu() - want).abs().max()), "max_abs": float(want.abs().max())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.kernel_dot_scaled_probe", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--topk", type=int, default=512)
    args = ap.parse_args(argv)
    if env.interpreting():
        ap.error("unset TRITON_INTERPRET: the probe is compiled, not interpreted")
    kernel = _probe_kernel()
    result = {"compile": compile_evidence(kernel), "precision": precision(args.batch, args.topk, "cpu"),
              "gpu": gpu_scores(kernel)}  # fmt: skip
    for arch, info in result["compile"].items():  # type: ignore[union-attr]
        print(f"{arch}: block-scaled MMA {'yes' if info['block_scaled'] else 'no'}: {', '.join(info['mma'])}")
    for row in result["precision"]:  # type: ignore[union-attr]
        print(f"e4m3 {row['fp8_operand']:9s} {row['output']}: {row['verdict'][:160]}")
    if result["gpu"]:
        print(f"GPU probe vs emulation: max |diff| {result['gpu']['max_abs_diff']:.2e} "  # type: ignore[index]
              f"(scores up to {result['gpu']['max_abs']:.1f})")  # type: ignore[index]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
