"""Is a refactor of the kernels a no-op for the code they generate? Compiles, ahead of time and without a
GPU, every launch of the compile matrix (``mla_kernels.compile_report``: each decode and indexer kernel x
config at production shapes, for each architecture) plus one MMA launch per PREFETCH level, and writes each
one's PTX without debug lines and debug labels, plus a JSON of their hashes. Run it at two commits and
compare:

    python -m experiments.kernel_ptx_identity --out /tmp/ptx-before     # at the old commit
    python -m experiments.kernel_ptx_identity --out /tmp/ptx-after      # at the new one
    python -m experiments.kernel_ptx_identity --compare /tmp/ptx-before /tmp/ptx-after

``--kernels indexer`` (or ``decode``) and ``--arch 90`` narrow it; the whole matrix for both architectures
is about 150 compiles. Exit status of ``--compare``: 0 when every launch's PTX is identical, 1 otherwise
(a launch on one side only counts as a difference).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

# name -> (BLOCK_H, BLOCK_N, warps, stages, splits, PREFETCH, BLOCK_D), architecture: PREFETCH levels and
# a two-pass config that the compile matrix need not hold (it holds the candidates of today's tables).
CONFIGS = {
    "pf0_sm90": ((64, 64, 8, 2, 1, 0, 0), 90),
    "pf3_sm90": ((64, 64, 8, 2, 2, 3, 0), 90),
    "pf1_sm120": ((16, 32, 4, 1, 1, 1, 0), 120),
    "pf2_sm120": ((16, 32, 4, 1, 1, 2, 0), 120),
    "pf3_sm120": ((16, 32, 8, 2, 1, 3, 0), 120),
    "two_pass_sm120": ((64, 64, 4, 1, 1, 0, 64), 120),
}
GROUPS = ("decode", "indexer")
_DEBUG_LABEL = re.compile(r"^\$L__tmp\d+:$")


def normalized_ptx(ptx: str) -> str:
    """The instructions alone: no ``.loc`` / ``.file`` lines, comments, debug sections or debug labels (their
    numbering follows the source's inlining scopes, not the code)."""
    text = ptx.split(".section\t.debug")[0].split(".section .debug")[0]
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(s for s in lines if s and not s.startswith((".loc", ".file", "//")) and not _DEBUG_LABEL.match(s))


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")


@functools.cache
def launches(capability: int, groups: tuple[str, ...]) -> list[tuple[str, object]]:
    """(unique name, KernelLaunch) of every launch to compile for one architecture, in a fixed order."""
    import torch

    from mla_kernels import compile_report, decode

    named: list[tuple[str, object]] = []
    for e in compile_report.matrix(capability, groups):
        named.append((f"sm{capability} {e.kernel} {e.config}", e.launch))
    if "decode" in groups:
        meta = torch.device("meta")
        q = torch.empty(64, 64, 512, dtype=torch.bfloat16, device=meta)
        cache = torch.empty(4096, 149504, dtype=torch.uint8, device=meta)
        idx = torch.empty(64, 512, dtype=torch.int32, device=meta)
        for label, (fields, arch) in CONFIGS.items():
            if arch == capability:
                for launch in decode.mma_launches(q, cache, idx, 512**-0.5, decode.MmaConfig(*fields))[0]:
                    named.append((f"sm{capability} extra {label} {launch.name}", launch))
    seen: dict[str, int] = {}
    unique = []
    for name, launch in named:  # two rows may share a label (a config compiled twice): number the repeats
        seen[name] = seen.get(name, 0) + 1
        unique.append((name if seen[name] == 1 else f"{name} #{seen[name]}", launch))
    return unique


def _compile_one(task: tuple[int, tuple[str, ...], int]) -> tuple[str, str]:
    """(name, normalized PTX or 'ERROR: ...') of one launch; rebuilt by index in a worker (launches do not
    pickle)."""
    from mla_kernels import aot

    capability, groups, index = task
    name, launch = launches(capability, groups)[index]
    try:
        asm, _ = aot.compile_asm(launch, capability)  # type: ignore[arg-type]
    except aot.CompileError as exc:
        return name, f"ERROR: {exc}"
    return name, normalized_ptx(str(asm["ptx"]))


def dump(out: Path, archs: tuple[int, ...] = (90, 120), groups: tuple[str, ...] = GROUPS, jobs: int = 1) -> dict:
    import triton

    tasks = [(cap, groups, i) for cap in archs for i in range(len(launches(cap, groups)))]
    print(f"triton {triton.__version__}: {len(tasks)} launches for {', '.join(f'sm_{a}' for a in archs)}, "
          f"{jobs} process(es)", flush=True)  # fmt: skip
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        results = pool.map(_compile_one, tasks)
    else:
        pool, results = None, map(_compile_one, tasks)
    out.mkdir(parents=True, exist_ok=True)
    hashes: dict[str, str] = {}
    start = time.perf_counter()
    for n, (name, text) in enumerate(results, 1):
        (out / f"{_file_name(name)}.ptx").write_text(text)
        hashes[name] = "error" if text.startswith("ERROR") else hashlib.sha256(text.encode()).hexdigest()[:16]
        print(f"[{n}/{len(tasks)}] {name:60s} {hashes[name]} ({time.perf_counter() - start:.0f} s)", flush=True)
    if pool is not None:
        pool.shutdown()
    (out / "hashes.json").write_text(json.dumps(hashes, indent=1))
    scope = {"triton": triton.__version__, "archs": list(archs), "kernels": list(groups)}
    (out / "scope.json").write_text(json.dumps(scope))
    return hashes


def _scope_of(name: str) -> tuple[int, str]:
    # "sm90 indexer.select BLOCK 1024 w8" -> (90, "indexer"); the PREFETCH extras are decode launches.
    arch, kernel = name.split()[:2]
    return int(arch[2:]), "decode" if kernel == "extra" else kernel.split(".")[0]


def _read(folder: Path) -> tuple[dict[str, str], dict]:
    hashes = json.loads((folder / "hashes.json").read_text())
    scope_file = folder / "scope.json"
    scope = json.loads(scope_file.read_text()) if scope_file.is_file() else {}
    return hashes, scope


def compare(before: Path, after: Path) -> int:
    (a, scope_a), (b, scope_b) = _read(before), _read(after)
    versions = [scope.get("triton", "?") for scope in (scope_a, scope_b)]
    if versions[0] != versions[1]:
        print(f"note: compiled with triton {versions[0]} and {versions[1]}: PTX may differ for that alone")
    if scope_a and scope_b:  # only the architectures and kernel groups both runs compiled
        both = {(arch, group) for arch in set(scope_a["archs"]) & set(scope_b["archs"])
                for group in set(scope_a["kernels"]) & set(scope_b["kernels"])}  # fmt: skip
        a = {n: h for n, h in a.items() if _scope_of(n) in both}
        b = {n: h for n, h in b.items() if _scope_of(n) in both}
    differ = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n) or a.get(n) == "error")
    for name in sorted(set(a) | set(b)):
        state = "identical" if name not in differ else "only before" if name not in b else \
            "only after" if name not in a else "DOES NOT COMPILE" if "error" in (a[name], b[name]) else "DIFFERS"
        print(f"{name:60s} {state}")
    print(f"{len(set(a) | set(b)) - len(differ)} identical, {len(differ)} not")
    return 1 if differ else 0


def _csv(kind: type, choices: tuple = ()):  # noqa: ANN202
    def parse(text: str) -> tuple:
        try:
            values = tuple(kind(v) for v in text.split(",") if v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a comma-separated list of {kind.__name__}: {text!r}") from None
        bad = [v for v in values if choices and v not in choices]
        if bad or not values:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(map(str, choices))}")
        return values

    return parse


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.kernel_ptx_identity", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="folder for the normalized PTX files and hashes.json")
    group.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"), help="two --out folders")
    ap.add_argument("--arch", type=_csv(int, (90, 120)), default=(90, 120), help="architectures (default 90,120)")
    ap.add_argument("--kernels", type=_csv(str, GROUPS), default=GROUPS, help="decode, indexer (default both)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes (default: CPUs)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.compare:
        for folder in args.compare:
            if not (folder / "hashes.json").is_file():
                ap.error(f"--compare: {folder} holds no hashes.json (write it with --out)")
        return compare(*args.compare)
    dump(args.out, args.arch, args.kernels, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
