"""Where the MMA decode kernel's time goes: time it with one stage left out (cold L2, graph replay).

    python -m experiments.kernel_decode_ablate [--batches 64,128] [--configs 64x64x8x2]

Variants are built from the production kernel's own module source (``mla_kernels.decode.KERNELS``), so
they never drift from it, and run through the production launcher (``decode_with_config(kernel=...)``):
  full      the kernel as shipped (control)
  no-qk     the four QK^T dots replaced by a cheap function of the dequantized tile
  no-pv     the four PV dots replaced by the accumulator rescale alone
  no-gather every tile re-reads the split's first tile (addresses fixed: no HBM gather latency)
Results of the variants are wrong by design; only their times mean something. A stage whose removal
barely changes the time is not what bounds the kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
import tempfile
from pathlib import Path
from types import ModuleType

_QK = """    s = tl.dot(q0, tl.trans(k0))
    s = tl.dot(q1, tl.trans(k1), s)
    s = tl.dot(q2, tl.trans(k2), s)
    s = tl.dot(qr, tl.trans(kr), s)  # [BH, N] fp32"""
_PV = """    acc0 = tl.dot(p, k0, acc0 * alpha[:, None])
    acc1 = tl.dot(p, k1, acc1 * alpha[:, None])
    acc2 = tl.dot(p, k2, acc2 * alpha[:, None])
    accr = tl.dot(p, kr, accr * alpha[:, None])"""
_GATHER = """        offs_n = start + tl.arange(0, BLOCK_N)
        valid, page_base, off = _slot_tile(idx_row, offs_n, end_n,"""

VARIANTS: dict[str, tuple[str, str]] = {
    "full": ("", ""),
    "no-qk": (_QK, "    s = tl.zeros([q0.shape[0], BLOCK_N], dtype=tl.float32)"
                   " + (tl.sum(k2.to(tl.float32), axis=1) * 1e-30)[None, :]"),
    "no-pv": (_PV, "    acc0 = acc0 * alpha[:, None]\n"
                   "    acc1 = acc1 * alpha[:, None]\n"
                   "    acc2 = acc2 * alpha[:, None]\n"
                   "    accr = accr * alpha[:, None] + tl.sum(p.to(tl.float32), axis=1)[:, None]"),
    "no-gather": (_GATHER, _GATHER.replace("start + tl.arange", "start_n + tl.arange")),
}


def build_variant(name: str, workdir: Path) -> object:
    """The production MMA kernel with one stage replaced, compiled from a copy of its module written to
    workdir (Triton reads a kernel's source from its file)."""
    from mla_kernels.decode import KERNELS

    anchor, replacement = VARIANTS[name]
    kernel = KERNELS["mma"]
    src = inspect.getsource(inspect.getmodule(kernel.fn))  # type: ignore[attr-defined]
    if anchor:
        if src.count(anchor) != 1:
            raise RuntimeError(f"variant {name!r}: anchor gone from the MMA kernel; update this script")
        src = src.replace(anchor, replacement)
    path = workdir / f"ablate_{name.replace('-', '_')}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, kernel.fn.__name__)  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.kernel_decode_ablate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--configs", default="64x64x8x2,64x32x8x2", help="BLOCK_HxBLOCK_Nxwarpsxstages,... (PREFETCH 0)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args(argv)
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from benchmarks.scripts.kernel_decode_perf import graph_ms, index_sets_for_cold_l2
    from mla_kernels import make_decode_inputs
    from mla_kernels.decode import MmaConfig, decode_with_config, split_counts

    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    with tempfile.TemporaryDirectory() as tmp:
        kernels = {name: build_variant(name, Path(tmp)) for name in names}
        for batch in (int(b) for b in args.batches.split(",")):
            sets = index_sets_for_cold_l2(batch, args.topk, getattr(props, "L2_cache_size", 50 << 20))
            inp = make_decode_inputs(batch, args.heads, args.topk, num_tokens=batch * 65536, device="cuda",
                                     seed=batch, num_index_sets=sets)
            for spec in args.configs.split(","):
                bh, bn, warps, stages = (int(x) for x in spec.split("x"))
                splits = split_counts(batch, args.heads, bh, args.topk, bn, sms)[0]
                cfg = MmaConfig(bh, bn, warps, stages, splits, 0, source="fixed")
                base = None
                for name in names:
                    state = {"i": 0}

                    def call(cfg: MmaConfig = cfg, state: dict = state, inp: object = inp, sets: int = sets,
                             kernel: object = kernels[name]) -> None:
                        decode_with_config(inp.q, inp.kv_cache, inp.index_sets[state["i"] % sets], cfg, kernel=kernel)
                        state["i"] += 1

                    us = 1e3 * graph_ms(call, reps=10, inner=sets)
                    base = us if name == "full" else base
                    share = f"  removing it saves {100 * (base - us) / base:+5.1f}%" if base and name != "full" else ""
                    head = f"B={batch:4d} BH {bh} BN {bn} w {warps} st {stages} S {splits:2d}"
                    print(f"{head} {name:10s} {us:8.1f} us{share}", flush=True)
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
