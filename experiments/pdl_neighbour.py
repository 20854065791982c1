"""Does a kernel placed early (PDL) run slower in the L1 left by the kernel it is placed beside?

Session 47 found the indexer's scores kernel about 8% slower at 128 requests of 64K when the MMA decode before it
signals its dependents at its start, so that the scores programs are placed while the decode drains; every SM alike,
whichever requests it held (``docs/kernel-record.md``, ``session47_h100_h200.log`` calls H-I). The candidate: an
SM's shared-memory / L1 split, which holds while any program is on the SM: Triton's launcher gives a kernel of more
than 48 KB of shared memory the largest carveout (``backends/nvidia/driver.c``), the scores kernel (33 KB) not. This
times the pair decode -> indexer in a CUDA graph with the decode's PDL on and off (``decode.launch.IN_ORDER_BATCH``
moved past or below the batch), for MMA decode configs, the indexer alone and each decode alone: the cost of the
early placement is the pair with PDL minus the pair without.

``--carveout DECODE:INDEXER`` asks each op's kernels for a shared-memory carveout (CUDA's preferred-carveout
attribute of the compiled function, a percent of the SM's most shared memory; ``-`` leaves Triton's choice): the
indexer at 100 (the smallest L1) should cost the pair without PDL what PDL costs it, if the L1 is the cause; the
decode at 0 (the least that fits its programs, so a larger L1 for a scores program placed beside it) is the
candidate fix. One variant a process, so that no attribute set by one variant stays for the next.

    python -m experiments.pdl_neighbour [--batch 128] [--context 65536] [--configs 64x64x8x2x3,64x128x8x1x0]
                                        [--rounds 2] [--carveout=-:-] [--json FILE]

The default configs are the ones an H100 / H200 tunes at 128 requests and the sm_120 set's there (164 and 192 KiB of
shared memory on sm_90 with triton 3.6: both over the line). Session 48 (``session48_h100.log``, calls A and F, H100):
PDL cost the pair +29 to +45 us with Triton's carveouts, -1.3 to +2.3 with the indexer's at 100, +3.9 to +8.7 with
the decode's at 0: the L1 is the cause.
Needs a CUDA GPU with PDL (sm_90 or later).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_CONFIGS = "64x64x8x2x3,64x128x8x1x0"
INNER = 4  # pairs per graph replay
CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9  # cuda.h's CUfunction_attribute
DECODE_KERNELS = frozenset({"_mma_decode_kernel", "_combine_kernel"})  # what decode_with_config launches


def parse_carveout(text: str) -> tuple[int | None, int | None]:
    """``DECODE:INDEXER`` percents (0-100) or ``-`` (Triton's choice) -> ``(decode, indexer)``."""
    parts = text.split(":")
    if len(parts) != 2:
        raise ValueError(f"{text!r} is not DECODE:INDEXER")
    out: list[int | None] = []
    for part in parts:
        if part == "-":
            out.append(None)
        elif part.isdigit() and int(part) <= 100:
            out.append(int(part))
        else:
            raise ValueError(f"{part!r} in {text!r} is neither a percent 0-100 nor '-'")
    return out[0], out[1]


@contextmanager
def carveouts(by_kernel: Callable[[str], int | None]) -> Iterator[dict[str, int]]:
    """While open, every kernel launched through ``KernelLaunch.run`` gets, once per compiled function, the
    carveout ``by_kernel(name)`` (None: left alone). Yields ``{kernel name: percent}`` of what was set."""
    import ctypes

    from mla_kernels._common import KernelLaunch
    from mla_kernels.record import kernel_name

    libcuda = ctypes.CDLL("libcuda.so.1")
    done: set[int] = set()
    applied: dict[str, int] = {}
    original = KernelLaunch.run

    def run(launch: KernelLaunch) -> object:
        compiled = original(launch)
        handle = getattr(compiled, "function", None)
        name = kernel_name(launch.kernel)
        percent = by_kernel(name)
        if percent is not None and isinstance(handle, int) and handle not in done:
            rc = libcuda.cuFuncSetAttribute(ctypes.c_void_p(handle),
                                            CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                            ctypes.c_int(percent))  # fmt: skip
            if rc != 0:
                raise RuntimeError(f"cuFuncSetAttribute(carveout {percent}) on {name} failed: CUresult {rc}")
            done.add(handle)
            applied[name] = percent
        return compiled

    KernelLaunch.run = run  # type: ignore[method-assign]
    try:
        yield applied
    finally:
        KernelLaunch.run = original  # type: ignore[method-assign]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m experiments.pdl_neighbour", description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=128, help="requests (default 128)")
    ap.add_argument("--context", type=int, default=65536, help="tokens a request (default 65536)")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS,
                    help=f"MMA decode configs, BLOCK_HxBLOCK_NxWARPSxSTAGESxPREFETCH, comma-separated (default "
                         f"{DEFAULT_CONFIGS})")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=2, help="rounds, the configs and PDL sides alternating (default 2)")
    ap.add_argument("--reps", type=int, default=15, help="graph replays a measurement (default 15)")
    ap.add_argument("--carveout", default="-:-",
                    help="DECODE:INDEXER preferred shared-memory carveouts in percent, '-' for Triton's (default -:-)")
    ap.add_argument("--json", type=Path, help="write every row here")
    args = ap.parse_args(argv)
    for name in ("batch", "context", "rounds", "reps"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1")
    from mla_kernels.decode import MmaConfig

    try:
        args.mma_configs = [MmaConfig.parse(text) for text in args.configs.split(",")]
    except ValueError as exc:
        ap.error(f"--configs: {exc}")
    try:
        args.carveouts = parse_carveout(args.carveout)
    except ValueError as exc:
        ap.error(f"--carveout: {exc}")
    return args


def placement_cost(pair_on_us: float, pair_off_us: float) -> float:
    """What the early placement costs the pair (negative: what it saves)."""
    return pair_on_us - pair_off_us


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        print("pdl_neighbour: needs a CUDA GPU with PDL (sm_90 or later)", file=sys.stderr)
        return 2
    decode_carveout, indexer_carveout = args.carveouts
    with carveouts(lambda name: decode_carveout if name in DECODE_KERNELS else indexer_carveout) as applied:
        return _measure(args, applied)


def _measure(args: argparse.Namespace, applied: dict[str, int]) -> int:
    import torch

    import mla_kernels.decode.launch as decode_launch
    from benchmarks.scripts.kernel_decode_perf import graph_ms
    from mla_kernels.decode import MmaConfig, decode_with_config
    from mla_kernels.indexer import indexer_topk, indexer_workspace
    from mla_kernels.step import make_step_inputs

    configs = args.mma_configs
    inp = make_step_inputs(args.batch, args.context, device="cuda")
    workspace = indexer_workspace(args.batch, inp.q.device)

    def indexer() -> torch.Tensor:
        return indexer_topk(*inp.args(), impl="bf16", workspace=workspace, max_seq_len=args.context)

    indices = indexer()
    indexer_us = 1e3 * graph_ms(indexer, reps=args.reps, inner=INNER)
    print(f"{torch.cuda.get_device_name()}: {args.batch} x {args.context}, the indexer alone {indexer_us:.1f} us")
    rows = []
    saved = decode_launch.IN_ORDER_BATCH
    try:
        for rnd in range(1, args.rounds + 1):
            for cfg in configs:
                pair_us = {}
                for pdl in (True, False):
                    # in stream order from IN_ORDER_BATCH requests: past the batch keeps PDL, 0 takes it away
                    decode_launch.IN_ORDER_BATCH = 1 << 31 if pdl else 0

                    def decode(cfg: MmaConfig = cfg) -> None:
                        decode_with_config(inp.q, inp.kv_cache, indices, cfg)

                    def pair(decode: Callable[[], None] = decode) -> None:
                        decode()
                        indexer()

                    record = decode_with_config(inp.q, inp.kv_cache, indices, cfg)[2]
                    decode_us = 1e3 * graph_ms(decode, reps=args.reps, inner=INNER)
                    pair_us[pdl] = 1e3 * graph_ms(pair, reps=args.reps, inner=INNER)
                    shared = record.kernels[0].shared
                    rows.append({"round": rnd, "config": cfg.label, "shared": shared, "pdl": pdl,
                                 "decode_us": decode_us, "indexer_us": indexer_us,
                                 "pair_us": pair_us[pdl]})  # fmt: skip
                    print(f"round {rnd} {cfg.label:>12} shared {(shared or 0) / 1024:6.1f} KiB decode PDL "
                          f"{'on ' if pdl else 'off'}: decode {decode_us:7.1f}  pair {pair_us[pdl]:7.1f} us")
                print(f"round {rnd} {cfg.label:>12} the early placement costs "
                      f"{placement_cost(pair_us[True], pair_us[False]):+.1f} us a pair")
    finally:
        decode_launch.IN_ORDER_BATCH = saved
    print("carveouts set: " + (", ".join(f"{name} {pct}%" for name, pct in sorted(applied.items())) or "none"))
    if args.json:
        args.json.write_text(json.dumps({"batch": args.batch, "context": args.context, "carveout": args.carveout,
                                         "carveouts_set": applied, "rows": rows}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
