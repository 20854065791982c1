"""``mlaperf doctor``: is this machine ready to benchmark the kernels?

Checks, in order: a CUDA GPU and its compute capability; the versions (driver, CUDA build of torch
and whether it carries code for this GPU, Triton); one small case of every kernel against its torch
reference (SIMT and MMA decode, the MMA decode with the sm_120 profile, both Triton indexers); the
architecture profile in the environment; the device's measured ceilings (copy bandwidth, bf16
matmul) against its public specification. Each check prints as it is done (with --json on stderr, the
document on stdout at the end); the kernel checks compile and autotune, about 150 s on a cold H100. Exit
status 0 only when every check passes, 1 when one fails (no GPU included), 2 for bad usage, 3 for an
internal error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from settings import env, exits

OK, FAIL, WARN, SKIP = "ok", "FAIL", "warn", "skip"
MIN_TRITON = (3, 6)
MIN_DRIVER_SM120 = 570  # the first driver branch with Blackwell (sm_120) support
MIN_CEILING_FRACTION = 0.5  # measured below half the datasheet: throttled, misconfigured or shared GPU


@dataclass
class Check:
    name: str
    status: str
    detail: str


def _version_tuple(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def _gpu_checks() -> tuple[list[Check], object | None]:
    import torch

    cuda_build = torch.version.cuda or "none (CPU-only build)"
    if not torch.cuda.is_available():
        why = "no CUDA GPU is visible to torch"
        if torch.version.cuda is None:
            why += f" (torch {torch.__version__} is a CPU-only build: install a CUDA build)"
        elif os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
            why += " (CUDA_VISIBLE_DEVICES is empty)"
        else:
            why += f" (torch {torch.__version__}, CUDA {cuda_build}: is the NVIDIA driver loaded?)"
        return [Check("gpu", FAIL, why)], None
    device = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(device)
    cc = f"{props.major}.{props.minor}"
    checks = [Check("gpu", OK, f"{props.name}, compute capability {cc}, {props.multi_processor_count} SMs, "
                               f"{props.total_memory / 2**30:.1f} GiB"),
              _driver_check(props.major * 10 + props.minor)]
    arch = f"sm_{props.major}{props.minor}"
    archs = torch.cuda.get_arch_list()
    if arch in archs or f"compute_{props.major}{props.minor}" in archs:
        checks.append(Check("torch", OK, f"torch {torch.__version__}, CUDA {cuda_build}, has {arch} code"))
    else:
        checks.append(Check("torch", FAIL, f"torch {torch.__version__} (CUDA {cuda_build}) has no {arch} code "
                                           f"(built for {', '.join(archs) or 'nothing'}): install a build for {arch} "
                                           "(CUDA 12.8 or newer for sm_120)"))
    return checks, device


def _driver_check(capability: int) -> Check:
    from settings.gpu import driver_version

    version = driver_version(0)
    major = _version_tuple(version)[:1]
    if not major:
        return Check("driver", WARN, f"NVIDIA driver version unknown ({version})")
    if capability >= 120 and major[0] < MIN_DRIVER_SM120:
        return Check("driver", FAIL, f"NVIDIA driver {version}: sm_120 needs {MIN_DRIVER_SM120} or newer")
    return Check("driver", OK, f"NVIDIA driver {version}")


def _triton_check() -> Check:
    try:
        import triton
    except ImportError:
        return Check("triton", FAIL, "triton is not installed")
    version = str(triton.__version__)
    if _version_tuple(version)[:2] < MIN_TRITON:
        return Check("triton", FAIL, f"triton {version}: needs {'.'.join(map(str, MIN_TRITON))} or newer")
    return Check("triton", OK, f"triton {version}")


def _profile_check() -> Check:
    from mla_kernels.arch import resolve_profile

    try:
        profile = resolve_profile(None)
    except ValueError as exc:
        return Check("arch profile", FAIL, str(exc))
    return Check("arch profile", OK, f"{env.ARCH_PROFILE.name}={env.ARCH_PROFILE.get() or '(unset)'} -> {profile}")


def _timed(name: str, fn: Callable[[], str]) -> Check:
    start = time.perf_counter()
    try:
        detail = fn()
    except AssertionError as exc:
        return Check(name, FAIL, f"wrong result: {' '.join(str(exc).split())[:300]}")
    except Exception as exc:  # noqa: BLE001 - a kernel that cannot run is this check's finding
        return Check(name, FAIL, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    return Check(name, OK, f"{detail} ({time.perf_counter() - start:.1f} s with compile)")


def _kernel_checks(device: object) -> Iterator[Check]:
    import torch

    from mla_kernels import (
        INDEXER_IMPLS,
        check_indexer_output,
        indexer_logits_reference,
        indexer_topk,
        make_decode_inputs,
        make_indexer_inputs,
        sparse_mla_decode,
        sparse_mla_decode_with_record,
    )
    from mla_kernels.decode import KERNEL_IMPLS, PROFILED_IMPLS, launch_label
    from mla_kernels.testing import check_decode

    inp = make_decode_inputs(4, 64, 512, num_tokens=4 * 4096, device=device, seed=11, invalid_frac=0.05)
    ref = sparse_mla_decode(inp.q, inp.kv_cache, inp.indices, impl="reference")

    def decode(impl: str, profile: str | None) -> Callable[[], str]:
        def run() -> str:
            out, lse, record = sparse_mla_decode_with_record(inp.q, inp.kv_cache, inp.indices, impl=impl,
                                                             arch_profile=profile)  # fmt: skip
            torch.cuda.synchronize()
            check_decode(out, lse, *ref)
            err = (out.float() - ref[0].float()).abs().max().item()
            cfg = ""
            if impl in PROFILED_IMPLS:
                spill = "?" if record.spill_bytes is None else record.spill_bytes
                cfg = f", {launch_label(record)}, spill {spill} B"
            return f"B=4 H=64 top-k 512 matches the reference (max |diff| {err:.1e}){cfg}"

        return run

    def indexer(impl: str) -> Callable[[], str]:
        def run() -> str:
            ix = make_indexer_inputs(2, [3000, 700], max_context=4096, topk=512, device=device, seed=5)
            got = indexer_topk(*ix.args(), impl=impl)
            logits = indexer_logits_reference(ix.q_idx, ix.weights, ix.index_cache, ix.block_table, ix.seq_lens)
            recall = check_indexer_output(got, logits, ix.block_table, ix.seq_lens, ix.topk)
            return f"B=2 contexts 3000/700 top-k 512 matches the reference (recall {recall['recall_min']:.3f})"

        return run

    # Every kernel the suites time: each decode kernel, the tuned ones also under the sm_120 profile, and
    # every indexer path (the implementation tables are mla_kernels', so a new kernel is checked here too).
    for impl in KERNEL_IMPLS:
        yield _timed(f"decode {impl}", decode(impl, "native" if impl in PROFILED_IMPLS else None))
        if impl in PROFILED_IMPLS:
            yield _timed(f"decode {impl} sm_120 profile", decode(impl, "sm_120"))
    for impl in INDEXER_IMPLS:
        if impl != "reference":
            yield _timed(f"indexer {impl}", indexer(impl))


def _ceiling_check(device: object) -> Check:
    import torch

    from settings.gpu import ceilings, gpu_spec

    name = torch.cuda.get_device_name(device)
    measured = ceilings(device)
    text = f"copy {measured['copy_gbps']:,.0f} GB/s, bf16 matmul {measured['matmul_tflops']:,.0f} TFLOP/s"
    spec = gpu_spec(name)
    if spec is None:
        return Check("ceilings", OK, f"{text} (no public specification listed for {name})")
    bw, mm = measured["copy_gbps"] / spec.bandwidth_gbps, measured["matmul_tflops"] / spec.bf16_tflops
    text += f"; {bw:.0%} / {mm:.0%} of the {spec.name} datasheet ({spec.bandwidth_gbps:,.0f} GB/s, " \
            f"{spec.bf16_tflops:,.1f} TFLOP/s)"
    if min(bw, mm) < MIN_CEILING_FRACTION:
        return Check("ceilings", FAIL, text + f": below {MIN_CEILING_FRACTION:.0%} (throttled or shared GPU?)")
    return Check("ceilings", OK, text)


def iter_checks(with_ceilings: bool = True) -> Iterator[Check]:
    """Every check in order, each as soon as it is done: kernel checks compile, so the first ones take a while."""
    yield Check("python", OK, f"Python {platform.python_version()} on {platform.machine()}")
    gpu, device = _gpu_checks()
    yield from gpu
    yield _triton_check()
    yield _profile_check()
    if device is None:
        yield Check("kernels", SKIP, "need a GPU")
        return
    yield from _kernel_checks(device)
    yield _ceiling_check(device) if with_ceilings else Check("ceilings", SKIP, "--no-ceilings")


def handler(args: argparse.Namespace) -> int:
    checks: list[Check] = []
    for check in iter_checks(with_ceilings=not args.no_ceilings):
        checks.append(check)  # each shown as it is done; with --json on stderr, so stdout stays one document
        print(f"[{check.status:>4}] {check.name:26s} {check.detail}", file=sys.stderr if args.json else sys.stdout,
              flush=True)  # fmt: skip
    failed = [c for c in checks if c.status == FAIL]
    if args.json:
        print(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=1))
    else:
        names = ", ".join(c.name for c in failed)
        verdict = f"NOT ready, failed: {names}" if failed else "ready"
        print(f"mlaperf doctor: {verdict}")
    return exits.FOUND if failed else exits.OK


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check that this machine can run the kernels: GPU, versions, every kernel, ceilings",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument("--no-ceilings", action="store_true", help="skip measuring copy bandwidth and matmul rate")
    parser.set_defaults(func=handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlaperf")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["doctor", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
