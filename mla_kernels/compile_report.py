"""Compile matrix: every kernel x candidate config compiled ahead of time for each architecture (no GPU).

    python -m mla_kernels.compile_report [--arch 120,90] [--json] [--markdown] [--kernels decode,indexer]

Each row: ``kernel``, ``arch``, ``config``, ``kept`` (whether the launcher may use it on that
architecture), ``registers`` and ``spill_bytes`` per thread, ``shared`` bytes per block, the
tensor-core instructions in the PTX (``mma``) and, for a config not kept, ``reason``. The MMA decode
configs are kept by their compiled metadata (``mla_kernels.decode.verdict``, the autotuner's own rule);
the other kernels by their launchers' rules. Exit status: 0 when every kept config compiles within its
architecture's shared memory without spilling (sm_90 may spill only where ``SPILL_ALLOWED`` names the
measurement), 1 when one does not (or a kernel fails to compile, or an architecture keeps no MMA
config), 2 for bad arguments, 3 for an internal error. Results are cached (``mla_kernels.aot``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from settings.env import interpreting

if TYPE_CHECKING:
    from .aot import CompileStats

GROUPS = ("decode", "indexer")


@dataclass
class Entry:
    kernel: str  # decode.mma | decode.gluon | decode.simt | decode.combine | indexer.* (the indexer's rows)
    config: str
    launch: object  # KernelLaunch
    kept: bool | None  # None: decided by the compiled metadata (the MMA tuner's rule)
    spec: tuple[int, ...] | None = None


def matrix(capability: int, groups: tuple[str, ...] = GROUPS) -> list[Entry]:
    """The launches to compile for one architecture, at production shapes on meta tensors (B 64, H 64,
    top-k 512; indexer max_context 131,072)."""
    import torch

    from . import decode, indexer

    entries: list[Entry] = []
    if "decode" in groups:
        meta = torch.device("meta")
        q = torch.empty(64, 64, 512, dtype=torch.bfloat16, device=meta)
        cache = torch.empty(4096, 149504, dtype=torch.uint8, device=meta)
        idx = torch.empty(64, 512, dtype=torch.int32, device=meta)
        # The Gluon kernel where this Triton has it (``decode.gluon_kernels.AVAILABLE``).
        gluon = decode.arch_candidates(capability, "gluon") if decode.gluon_kernels.AVAILABLE else ()
        for candidate in (*decode.arch_candidates(capability), *gluon):
            # A fused split kernel compiles once without and once with split-K; a two-pass config has a
            # row per kernel (both must be kept).
            for splits in (1,) if candidate.block_d else (1, 2):
                cfg = replace(candidate, num_splits=splits)
                launches = decode.judged_launches(decode.mma_launches(q, cache, idx, 512**-0.5, cfg)[0])
                for launch in launches:
                    label = cfg.label + (" split-K" if splits > 1 else "")
                    label += f" {launch.name}" if len(launches) > 1 else ""
                    kind = "decode.gluon" if cfg.gluon else "decode.mma"
                    entries.append(Entry(kind, label, launch, None, cfg.tile))
        out = torch.empty(64, 64, 512, dtype=torch.bfloat16, device=meta)
        lse = torch.empty(64, 64, dtype=torch.float32, device=meta)
        used = decode.simt_tile(capability)
        for tile in dict.fromkeys((used, decode.launch.SIMT_SPILL_FREE_TILE, *decode.launch.SIMT_TILES.values())):
            simt = decode.simt_launch(q, cache, idx, 512**-0.5, out, lse, tile)
            entries.append(Entry("decode.simt", f"BLOCK_N {tile[0]} w{tile[1]}", simt, tile == used, ("simt", *tile)))
        for splits in (2 << i for i in range(decode.MAX_SPLITS.bit_length() - 1)):  # every BLOCK_S: 2 .. MAX_SPLITS
            opart = torch.empty(64, splits, 64, 512, dtype=torch.float32, device=meta)
            lpart = torch.empty(64, splits, 64, dtype=torch.float32, device=meta)
            launch = decode.combine_launch(opart, lpart, out, lse, splits)
            entries.append(Entry("decode.combine", f"BLOCK_S {launch.constexprs['BLOCK_S']}", launch, True))
    if "indexer" in groups:
        for label, launch, spec in indexer.compile_matrix():
            entries.append(Entry(launch.name, label, launch, None if spec else True, spec))
    return entries


def judge(entry: Entry, capability: int, stats: CompileStats) -> tuple[bool, str | None, str | None]:
    """(kept, why not kept, failure) of a compiled entry: the keep rule (``verdict``) decides tuned
    entries; a kept entry that breaks it fails (on sm_120 no spill allowance counts)."""
    from .arch import ARCHS, verdict

    spill = stats.spill_bytes
    why = verdict(capability, ARCHS[capability].shared_per_block, entry.spec or (), stats.shared, spill,
                  stats.registers)  # fmt: skip
    if entry.kept is None:
        kept, reason = why is None, why
    else:
        kept, reason = entry.kept, None if entry.kept else "not this architecture's config"
    if kept and spill and capability == 120:
        why = why or f"spills {spill} B/thread"
    return kept, reason, f"kept but {why} on sm_{capability}" if kept and why else None


def _compile_task(task: tuple[int, tuple[str, ...], int], entries: list[Entry] | None = None) -> tuple[int, dict | str]:
    """Compile one entry. In a worker process the matrix is rebuilt (cheap): launches do not pickle."""
    capability, groups, index = task
    from . import aot

    entry = (entries or matrix(capability, groups))[index]
    try:
        return index, aot.compile_uncached(entry.launch, capability).__dict__  # type: ignore[arg-type]
    except aot.CompileError as exc:
        return index, str(exc)


def run(archs: list[int], groups: tuple[str, ...], jobs: int, progress: bool = True) -> list[dict]:
    rows: list[dict] = []
    for capability in archs:
        rows += _run_arch(capability, groups, jobs, progress)
    return rows


def _compile_all(capability: int, groups: tuple[str, ...], entries: list[Entry], jobs: int, progress: bool) -> list:
    """Stats (or the compile error) of every entry: cached ones read back, the rest compiled."""
    from . import aot

    results: list[aot.CompileStats | str | None] = [aot.lookup(e.launch, capability) for e in entries]  # type: ignore[arg-type]
    todo = [i for i, r in enumerate(results) if r is None]
    if progress:
        print(f"sm_{capability}: {len(entries)} launches, {len(entries) - len(todo)} cached, "
              f"compiling {len(todo)} with {min(jobs, max(1, len(todo)))} process(es)", file=sys.stderr, flush=True)
    start = time.perf_counter()
    if jobs > 1 and len(todo) > 1:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # torch/triton state does not survive a fork
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx) as pool:
            done = pool.map(_compile_task, [(capability, groups, i) for i in todo])
            values = list(_progress(done, entries, len(todo), start, progress))
    else:
        values = list(_progress((_compile_task((capability, groups, i), entries) for i in todo), entries,
                                len(todo), start, progress))
    for i, value in values:
        if isinstance(value, dict):
            stats = aot.CompileStats(**{**value, "mma": tuple(value["mma"])})
            aot.store(entries[i].launch, capability, stats)  # type: ignore[arg-type]
            results[i] = stats
        else:
            results[i] = value
    return results


def _progress(done, entries: list[Entry], total: int, start: float, progress: bool):  # noqa: ANN001, ANN202
    for n, (i, value) in enumerate(done, 1):
        if progress:
            print(f"  [{n}/{total}] {entries[i].kernel} {entries[i].config} ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
        yield i, value


def _run_arch(capability: int, groups: tuple[str, ...], jobs: int, progress: bool) -> list[dict]:
    entries = matrix(capability, groups)
    results = _compile_all(capability, groups, entries, jobs, progress)
    rows: list[dict] = []
    for e, stats in zip(entries, results, strict=True):
        row: dict = {"kernel": e.kernel, "arch": f"sm_{capability}", "config": e.config}
        if isinstance(stats, str):
            row.update(kept=False, registers=None, spill_bytes=None, shared=None, mma=[], reason=stats,
                       failure=f"does not compile: {stats}")
        else:
            kept, reason, failure = judge(e, capability, stats)
            row.update(kept=kept, registers=stats.registers, spill_bytes=stats.spill_bytes, shared=stats.shared,
                       mma=list(stats.mma), reason=reason, failure=failure)
        rows.append(row)
    if "decode" in groups and not any(r["kept"] for r in rows if r["kernel"] == "decode.mma"):
        rows.append({"kernel": "decode.mma", "arch": f"sm_{capability}", "config": "(any)", "kept": False,
                     "registers": None, "spill_bytes": None, "shared": None, "mma": [], "reason": None,
                     "failure": f"no MMA decode config is kept for sm_{capability}"})
    return rows


def _mma_short(names: list[str]) -> str:
    if not names:
        return "-"
    if any(n.startswith("wgmma") for n in names):
        return "wgmma"
    return "mma.sync" + (" (block-scaled)" if any("block_scale" in n for n in names) else "")


def markdown(rows: list[dict]) -> str:
    lines = ["| kernel | arch | config | kept | registers | spill B/thread | shared B | tensor cores | note |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        def num(v: object) -> str:
            return "-" if v is None else f"{v:,}"

        note = r.get("failure") or r.get("reason") or ""
        if r["kept"] and r["spill_bytes"] and not note:
            note = "spills; allowed: measured faster than every spill-free choice (SPILL_ALLOWED)"
        lines.append(f"| {r['kernel']} | {r['arch']} | {r['config']} | {'yes' if r['kept'] else 'no'} | "
                     f"{num(r['registers'])} | {num(r['spill_bytes'])} | {num(r['shared'])} | "
                     f"{_mma_short(r['mma'])} | {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m mla_kernels.compile_report", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    ap.add_argument("--arch", default="120,90", help="architectures, comma-separated (120, 90, sm_120, 12.0)")
    ap.add_argument("--kernels", default=",".join(GROUPS), help=f"kernel groups: {', '.join(GROUPS)}")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    ap.add_argument("--markdown", action="store_true", help="print the rows as a markdown table")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="compile processes")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args(argv)
    from .arch import parse_arch

    try:
        archs = [parse_arch(a) for a in args.arch.split(",") if a.strip()]
    except ValueError as exc:
        ap.error(f"--arch: {exc}")
    groups = tuple(g for g in args.kernels.split(",") if g)
    bad = [g for g in groups if g not in GROUPS]
    if bad or not groups:
        ap.error(f"--kernels: unknown {', '.join(bad) or '(none)'} (known: {', '.join(GROUPS)})")
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    if interpreting():
        print("compile_report: unset TRITON_INTERPRET (interpreted kernels are not compiled)", file=sys.stderr)
        return 2
    try:
        rows = run(archs, groups, args.jobs, progress=not args.quiet)
    except Exception as exc:  # noqa: BLE001 - internal error: say what, exit 3
        print(f"compile_report: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(rows, indent=1))
    elif args.markdown:
        print(markdown(rows))
    else:
        for r in rows:
            status = "kept" if r["kept"] else "-"
            regs = "?" if r["registers"] is None else r["registers"]
            spill = "?" if r["spill_bytes"] is None else r["spill_bytes"]
            shared = "?" if r["shared"] is None else f"{r['shared']:,}"
            note = r.get("failure") or r.get("reason") or ""
            print(f"{r['arch']:7s} {r['kernel']:20s} {r['config']:30s} {status:5s} regs {regs!s:>4} "
                  f"spill {spill!s:>5} B shared {shared:>8} B  {_mma_short(r['mma']):10s} {note}")
    failures = [r for r in rows if r.get("failure")]
    for r in failures:
        print(f"FAIL {r['arch']} {r['kernel']} {r['config']}: {r['failure']}", file=sys.stderr)
    if not args.quiet:
        kept = sum(1 for r in rows if r["kept"])
        print(f"{len(rows)} rows, {kept} kept, {len(failures)} failure(s)", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
