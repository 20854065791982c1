"""Time MMA decode configs one by one (cold L2, graph replay), with each config's registers, spills and
shared memory on this GPU and, compiled ahead of time, on sm_120 (whether an sm_120 keeps it).

    python -m experiments.kernel_decode_variants [--batches 64,128] [--topk 512] [--configs all]

``--configs``: ``all`` (every autotuner candidate), ``sm120`` (the candidates an sm_120 compiles), or
``BLOCK_HxBLOCK_NxWARPSxSTAGESxPREFETCH[xBLOCK_D],...`` (BLOCK_D > 0: the two-pass kernels).
``--splits 16,32`` times each fused config with these split counts instead of the tuner's.
``--simt-tiles 16x4,32x4`` times SIMT tiles (BLOCK_N x warps) instead, twice each in alternation (the A/B
behind ``mla_kernels.decode.launch.SIMT_TILES``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any


def parse_configs(text: str) -> list[Any]:
    """``all`` / ``sm120`` / ``64x64x8x2x3,64x64x8x1x0x128`` -> MMA configs (``MmaConfig.parse``)."""
    from mla_kernels.decode import CANDIDATES, MmaConfig, arch_candidates

    if text == "all":
        return list(CANDIDATES)
    if text == "sm120":
        return list(arch_candidates(120))
    return [MmaConfig.parse(item) for item in text.split(",")]


def _simt_tiles(inp: object, ref: tuple, tiles: list[tuple[int, ...]], sets: int, reps: int) -> list[dict]:
    """Each SIMT tile through the production launch builder, two rounds in alternation."""
    import torch

    from benchmarks.scripts.kernel_decode_perf import graph_ms
    from mla_kernels.decode import simt_launch
    from mla_kernels.record import compiled_stats
    from mla_kernels.testing import check_decode

    scale = 512**-0.5
    q, cache = inp.q, inp.kv_cache  # type: ignore[attr-defined]
    rows = []
    for rnd in (1, 2):
        for tile in tiles:
            out, lse = torch.empty_like(ref[0]), torch.empty_like(ref[1])
            stats = compiled_stats(simt_launch(q, cache, inp.indices, scale, out, lse, tile).run())  # type: ignore[attr-defined]
            check_decode(out, lse, *ref)
            state = {"i": 0}

            def call(tile: tuple = tile, state: dict = state, out: object = out, lse: object = lse) -> None:
                idx = inp.index_sets[state["i"] % sets]  # type: ignore[attr-defined]
                simt_launch(q, cache, idx, scale, out, lse, tile).run()
                state["i"] += 1

            us = 1e3 * graph_ms(call, reps=reps, inner=sets)
            rows.append({"batch": q.shape[0], "simt_tile": list(tile), "round": rnd, "us": us, **stats})
            print(f"B={q.shape[0]:4d} round {rnd} SIMT BLOCK_N {tile[0]} w{tile[1]}: {us:8.1f} us regs "
                  f"{stats.get('registers')} spill {stats.get('spill_bytes')} B", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m experiments.kernel_decode_variants",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    ap.add_argument("--batches", default="64,128")
    ap.add_argument("--topk", type=int, default=512)
    ap.add_argument("--heads", type=int, default=64)
    ap.add_argument("--configs", default="all",
                    help="all | sm120 | BLOCK_HxBLOCK_NxWARPSxSTAGESxPREFETCH[xBLOCK_D],... (default: all)")
    ap.add_argument("--splits", help="split counts to time each config with (default: the tuner's, "
                    "split_counts); capped at MAX_SPLITS and one tile a split")
    ap.add_argument("--reps", type=int, default=10, help="graph replays per config (median)")
    ap.add_argument("--simt-tiles", help="BLOCK_NxWARPS,... : time these SIMT tiles instead of MMA configs")
    ap.add_argument("--json", type=Path, help="write every row to this file")
    args = ap.parse_args(argv)
    try:
        tiles = [tuple(int(v) for v in t.split("x")) for t in args.simt_tiles.split(",")] if args.simt_tiles else []
        if any(len(t) != 2 for t in tiles):
            raise ValueError(f"--simt-tiles takes BLOCK_NxWARPS,..., got {args.simt_tiles!r}")
        specs = parse_configs(args.configs)
        batches = [int(b) for b in args.batches.split(",")]
        parts = args.splits.split(",") if args.splits else []
        if not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"--splits takes positive counts, comma-separated, got {args.splits!r}")
        forced = [int(p) for p in parts]
    except ValueError as exc:
        ap.error(str(exc))
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    from benchmarks.scripts.kernel_decode_perf import decode_cost, graph_ms, index_sets_for_cold_l2
    from mla_kernels import aot, make_decode_inputs, sparse_mla_decode
    from mla_kernels.arch import ARCHS
    from mla_kernels.decode import (
        MmaConfig,
        config_split_counts,
        decode_with_config,
        judged_launches,
        mma_launches,
        split_plan,
        verdict,
    )
    from mla_kernels.testing import check_decode

    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    print(f"# {props.name} sm_{props.major}{props.minor}, torch {torch.__version__}; H={args.heads} top-k {args.topk}",
          flush=True)
    rows = []
    for batch in batches:
        sets = index_sets_for_cold_l2(batch, args.topk, l2)
        inp = make_decode_inputs(batch, args.heads, args.topk, num_tokens=batch * 65536, device="cuda",
                                 seed=batch, num_index_sets=sets)
        ref = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")
        bytes_moved, flops = decode_cost(batch, args.heads, args.topk)
        if tiles:
            rows += _simt_tiles(inp, ref, tiles, sets, args.reps)
            continue
        meta = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
                for t in (inp.q, inp.kv_cache, inp.indices)]
        for candidate in specs:
            if args.heads % candidate.block_h:
                continue
            tuned = config_split_counts(candidate, batch, args.heads, args.topk, sms)
            for splits in forced if forced and not candidate.block_d else tuned:
                cfg = replace(candidate, num_splits=splits, source="fixed")
                spec = cfg.tile
                # The split count the launch makes (at least one tile a split), not the one asked for.
                head = f"B={batch:4d} {cfg.label:22s} S {split_plan(args.topk, cfg.block_n, splits)[0]:2d}"
                try:
                    # sm_120: the worst of the config's kernels (two for two-pass configs).
                    compiled = [aot.compile_launch(launch, 120)
                                for launch in judged_launches(mma_launches(*meta, 512**-0.5, cfg)[0])]
                    s120 = max(compiled, key=lambda c: (c.spill_bytes, c.registers))
                    why = next((w for c in compiled if (w := verdict(120, ARCHS[120].shared_per_block, spec,
                                                                     c.shared, c.spill_bytes))), None)
                    out, lse, record = decode_with_config(inp.q, inp.kv_cache, inp.indices, cfg)
                    check_decode(out, lse, *ref)
                    state = {"i": 0}

                    def call(cfg: MmaConfig = cfg, inp: object = inp, state: dict = state, sets: int = sets) -> None:
                        decode_with_config(inp.q, inp.kv_cache, inp.index_sets[state["i"] % sets], cfg)
                        state["i"] += 1

                    us = 1e3 * graph_ms(call, reps=args.reps, inner=sets)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"{head}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                    continue
                row = {"batch": batch, "spec": list(spec), "splits": record.config["NUM_SPLITS"], "us": us,
                       "regs": record.registers, "spill_bytes": record.spill_bytes, "shared": record.shared,
                       "sm120": {"registers": s120.registers, "spill_bytes": s120.spill_bytes,
                                 "shared": s120.shared, "kept": why is None}}
                rows.append(row)
                print(f"{head} {us:8.1f} us {bytes_moved / us / 1e3:6.0f} GB/s {flops / us / 1e6:5.1f} TFLOP/s  "
                      f"here regs {row['regs']} spill {row['spill_bytes']} B smem {row['shared']}  "
                      f"sm_120 regs {s120.registers} spill {s120.spill_bytes} B smem {s120.shared} "
                      f"{'kept' if why is None else 'dropped: ' + why}", flush=True)
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps({"device": props.name, "torch": torch.__version__, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
