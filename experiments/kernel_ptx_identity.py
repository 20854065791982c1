"""Is a refactor of the decode kernels a no-op for the code they generate? Compiles, ahead of time and
without a GPU, one launch per MMA PREFETCH level (sm_90 and sm_120 configs), a two-pass config, the
SIMT kernel and the LSE combine, and writes each one's PTX without debug lines and debug labels, plus
a JSON of their hashes. Run it at two commits and compare:

    python -m experiments.kernel_ptx_identity --out /tmp/ptx-before     # at the old commit
    python -m experiments.kernel_ptx_identity --out /tmp/ptx-after      # at the new one
    python -m experiments.kernel_ptx_identity --compare /tmp/ptx-before /tmp/ptx-after

Exit status of ``--compare``: 0 when every launch's PTX is identical, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

# name -> (BLOCK_H, BLOCK_N, warps, stages, splits, PREFETCH, BLOCK_D), architecture
CONFIGS = {
    "pf0_sm90": ((64, 64, 8, 2, 1, 0, 0), 90),
    "pf3_sm90": ((64, 64, 8, 2, 2, 3, 0), 90),
    "pf1_sm120": ((16, 32, 4, 1, 1, 1, 0), 120),
    "pf2_sm120": ((16, 32, 4, 1, 1, 2, 0), 120),
    "pf3_sm120": ((16, 32, 8, 2, 1, 3, 0), 120),
    "two_pass_sm120": ((64, 64, 4, 1, 1, 0, 64), 120),
}
_DEBUG_LABEL = re.compile(r"^\$L__tmp\d+:$")


def normalized_ptx(ptx: str) -> str:
    """The instructions alone: no ``.loc`` / ``.file`` lines, comments, debug sections or debug labels (their
    numbering follows the source's inlining scopes, not the code)."""
    text = ptx.split(".section\t.debug")[0].split(".section .debug")[0]
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(s for s in lines if s and not s.startswith((".loc", ".file", "//")) and not _DEBUG_LABEL.match(s))


def dump(out: Path) -> dict[str, str]:
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mla_kernels import aot, decode

    meta = torch.device("meta")
    q = torch.empty(64, 64, 512, dtype=torch.bfloat16, device=meta)
    cache = torch.empty(4096, 149504, dtype=torch.uint8, device=meta)
    idx = torch.empty(64, 512, dtype=torch.int32, device=meta)
    o, lse = torch.empty_like(q), torch.empty(64, 64, dtype=torch.float32, device=meta)
    launches = []
    for name, (fields, capability) in CONFIGS.items():
        for launch in decode.mma_launches(q, cache, idx, 512**-0.5, decode.MmaConfig(*fields))[0]:
            launches.append((f"{name}_{launch.name}", launch, capability))
    launches.append(("simt_sm90", decode.simt_launch(q, cache, idx, 512**-0.5, o, lse, (32, 4)), 90))
    out.mkdir(parents=True, exist_ok=True)
    hashes = {}
    for name, launch, capability in launches:
        sig, constexprs, attrs = aot.signature(launch)
        options = {"num_warps": launch.num_warps, "num_stages": launch.num_stages, "enable_fp_fusion": True}
        compiled = triton.compile(ASTSource(launch.kernel, sig, constexprs, attrs),
                                  target=GPUTarget("cuda", capability, 32), options=options)  # fmt: skip
        text = normalized_ptx(compiled.asm["ptx"])
        (out / f"{name}.ptx").write_text(text)
        hashes[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
        print(f"{name:28s} {hashes[name]}", flush=True)
    (out / "hashes.json").write_text(json.dumps(hashes, indent=1))
    return hashes


def compare(before: Path, after: Path) -> int:
    a = json.loads((before / "hashes.json").read_text())
    b = json.loads((after / "hashes.json").read_text())
    differ = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
    for name in sorted(set(a) | set(b)):
        print(f"{name:28s} {'identical' if name not in differ else 'DIFFERS'}")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.kernel_ptx_identity", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="folder for the normalized PTX files and hashes.json")
    group.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="two --out folders")
    args = ap.parse_args(argv)
    if args.compare:
        for folder in args.compare:
            if not (folder / "hashes.json").is_file():
                ap.error(f"--compare: {folder} holds no hashes.json (write it with --out)")
        return compare(*args.compare)
    dump(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
