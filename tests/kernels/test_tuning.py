"""The MMA autotuner's rules (pure Python: no GPU, no compile): split counts, the keep rule, candidates
per architecture. The compiled side of the keep rule is tests/kernels/test_compile_report.py."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest
import torch

from mla_kernels._common import KernelLaunch
from mla_kernels.arch import ARCHS, RESIDENT_BLOCKS, parse_arch, profile_target, resident_blocks, resolve_profile
from mla_kernels.decode import (
    CANDIDATES,
    MAX_SPLITS,
    SPILL_ALLOWED,
    WGMMA_CANDIDATES,
    MmaConfig,
    arch_candidates,
    launch_label,
    simt_tile,
    split_counts,
    tuning,
    verdict,
)
from mla_kernels.record import LaunchRecord


@pytest.mark.parametrize(
    ("batch", "expected"),
    [(1, (8, 1)), (16, (8, 1)), (32, (4, 5, 1)), (64, (2, 3, 1)), (128, (1, 2))],
)
def test_split_counts_one_wave_cover_and_none(batch, expected):
    # 64 heads in one block, top-k 512 in tiles of 64 (8 tiles), 132 SMs (H200)
    assert split_counts(batch, 64, 64, 512, 64, 132) == expected


def test_split_counts_never_exceed_tiles_or_max_splits():
    assert max(split_counts(1, 64, 16, 2048, 32, 132)) == MAX_SPLITS == 32
    assert split_counts(1, 64, 16, 512, 16, 132) == (32, 1)  # one request: one 16-token tile a split
    assert max(split_counts(1, 64, 16, 512, 32, 132)) == 16  # 16 tiles of 32 cover 512
    assert max(split_counts(1, 64, 64, 100, 64, 132)) == 2  # two tiles of 64 cover 100 slots
    assert split_counts(4096, 64, 16, 512, 32, 132) == (1,)


def test_keep_rule_shared_memory_and_spills():
    spec = (16, 32, 4, 1, 2, 0)
    assert verdict(120, 101376, spec, 50176, 0) is None
    assert verdict(120, 101376, spec, 101377, 0) == "shared 101,377 B > 101,376 B"
    assert verdict(120, 101376, spec, 50176, 40) == "spills 40 B/thread"
    allowed = next(iter(SPILL_ALLOWED))
    assert verdict(allowed[0], ARCHS[allowed[0]].shared_per_block, allowed[1], 1024, 400) is None


def test_keep_rule_residency_of_grid_barrier_kernels():
    # The one-launch indexer waits on its whole grid: a config is kept only where its blocks per SM fit.
    assert RESIDENT_BLOCKS["indexer.coop"] == 2
    spec = ("indexer.coop", 64, 8, 2)  # BLOCK_T, num_warps, num_stages
    assert verdict(90, 232448, spec, 25600, 0, registers=128) is None  # 2 x 8 warps x 128 registers = 64K
    assert verdict(90, 232448, spec, 25600, 0, registers=129) == (
        "1 blocks fit an SM (129 registers, 25,600 B shared), its grid barrier needs 2"
    )
    assert verdict(120, 101376, spec, 50176, 0, registers=64) is None  # 2 x (49 + 1 reserved) KB <= 100 KB
    assert "grid barrier" in verdict(120, 101376, spec, 50177, 0, registers=64)
    assert verdict(90, 232448, (16, 32, 4, 1, 2, 0), 25600, 0, registers=255) is None  # no barrier: no rule
    assert resident_blocks(120, 32, 16, 0) == 3  # 1,536 threads per SM on sm_120
    assert resident_blocks(90, 32, 16, 0) == 4


def test_spill_allowances_are_measured_and_never_for_sm120():
    for (capability, spec), why in SPILL_ALLOWED.items():
        assert capability != 120, "a config kept for sm_120 must not spill"
        tiles = {c.tile for c in (*CANDIDATES, *WGMMA_CANDIDATES)}
        assert spec in tiles or spec == ("simt", *simt_tile(capability)) or str(spec[0]).startswith("indexer.")
        assert " us " in why  # each names its measurement
    assert simt_tile(120) == (16, 4)  # the spill-free SIMT tile off sm_90


def test_fused_64_head_blocks_are_candidates_only_with_warpgroup_mma():
    assert any(c.block_h == 64 and not c.block_d for c in arch_candidates(90))
    assert arch_candidates(90) == CANDIDATES
    sm120 = arch_candidates(120)
    assert all(c.block_h < 64 for c in sm120 if not c.block_d) and any(not c.block_d for c in sm120)
    # two-pass 64-head blocks hold [64, BLOCK_D] at most: candidates on mma.sync GPUs too
    assert {c for c in CANDIDATES if c.block_d} <= set(sm120) and any(c.block_h == 64 and c.block_d for c in sm120)


def test_one_config_type_from_text_to_label():
    fused = MmaConfig.parse("64x64x8x2x3")
    assert fused == MmaConfig(64, 64, 8, 2, 1, 3, 0, "fixed") and fused.tile == (64, 64, 8, 2, 3, 0)
    two_pass = MmaConfig.parse("64x128x8x1x0x128", num_splits=1, source="default")
    assert two_pass.block_d == 128 and two_pass in CANDIDATES
    assert fused.label == "64x64x8x2 pf3" and two_pass.label == "64x128x8x1 2-pass d128"
    wgmma = MmaConfig.parse("64x64x8x2x0w", source="default")
    assert wgmma == WGMMA_CANDIDATES[0] and wgmma.label == "64x64x8x2 pf0 wgmma"
    assert wgmma.tile != MmaConfig.parse("64x64x8x2x0g").tile != fused.tile  # three kernels, three keep keys
    ws = MmaConfig.parse("64x32x8x3x1s", source="default")  # the warp-specialized wgmma kernel: a fourth
    assert ws == WGMMA_CANDIDATES[3] and ws.label == "64x32x8x3 pf1 ws-wgmma" and ws.wgmma and ws.gluon
    assert ws.tile != MmaConfig.parse("64x32x8x3x1w").tile
    for bad in ("64x64x8", "64x64x8x2x3x0x1", "64xAx8x2x3"):
        with pytest.raises(ValueError, match=f"'{bad}' is not BLOCK_HxBLOCK_NxWARPSxSTAGESxPREFETCH"):
            MmaConfig.parse(bad)
    config = {"BLOCK_H": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2, "PREFETCH": 3, "NUM_SPLITS": 4,
              "BLOCK_D": 0}  # fmt: skip
    assert launch_label(LaunchRecord("decode", "mma", (), config)) == "64x64x8x2 pf3 S4"
    two_pass = LaunchRecord("decode", "mma", (), {**config, "BLOCK_D": 128, "num_stages": 1})
    assert launch_label(two_pass) == "64x64x8x1 2-pass d128"


def test_profiles_and_architecture_names(monkeypatch):
    assert [parse_arch(t) for t in ("120", "sm_120", "12.0", "sm90")] == [120, 120, 120, 90]
    with pytest.raises(ValueError, match="unknown architecture 'sm_75'"):
        parse_arch("sm_75")
    monkeypatch.delenv("MLAPERF_ARCH_PROFILE", raising=False)
    assert resolve_profile(None) == "native"
    monkeypatch.setenv("MLAPERF_ARCH_PROFILE", "sm_120")
    assert resolve_profile(None) == "sm_120" and resolve_profile("sm_90") == "sm_90"
    cpu = torch.device("cpu")  # off CUDA the smallest target's shared memory applies
    assert profile_target("sm_120", cpu) == (120, 101376)
    assert profile_target("sm_90", cpu) == (90, 101376)  # a config must also fit the device it runs on


def test_candidates_keep_what_the_compiled_rule_keeps(monkeypatch):
    # The search space for an sm_120 profile on a 132-SM device, with compile results given per config.
    monkeypatch.setattr(tuning._common, "interpreting", lambda: False)
    monkeypatch.setattr(tuning, "profile_target", lambda profile, device: (120, 101376))
    monkeypatch.setattr(tuning._common, "num_sms", lambda device: 132)
    spilling = {(16, 32, 8, 1, 2, 0)}
    # a two-pass config is kept only when both of its kernels are: here its output pass spills
    two_pass = next(c.tile for c in arch_candidates(120) if c.block_d)
    spills = {(two_pass, "output")} | {(s, "mma") for s in spilling}
    monkeypatch.setattr(tuning, "kept_by_compile", lambda launch, spec, cap, limit: (spec, launch.name) not in spills)

    def build(cfg: MmaConfig) -> list[KernelLaunch]:
        names = ("scores", "output") if cfg.block_d else ("mma", "combine")
        return [KernelLaunch(name, None, (1,), ()) for name in names]

    got = tuning.candidates(64, 64, 512, torch.device("cpu"), "sm_120", build=build)
    tiles = {c.tile for c in got}
    assert tiles == {c.tile for c in arch_candidates(120)} - spilling - {two_pass}
    assert all(isinstance(c, MmaConfig) and c.num_splits >= 1 for c in got)
    assert all(c.num_splits == 1 for c in got if c.block_d)  # two passes: no split-K
    monkeypatch.setattr(tuning, "kept_by_compile", lambda launch, spec, cap, limit: False)
    with pytest.raises(RuntimeError, match="no MMA decode config is kept for profile 'sm_120'"):
        tuning.candidates(64, 64, 512, torch.device("cpu"), "sm_120", build=build)


def test_kept_by_compile_is_the_keep_rule_on_compiled_metadata(monkeypatch):
    # The one helper both tuners (MMA decode, indexer autotuners) prune with.
    from mla_kernels import aot, arch
    from mla_kernels._common import KernelLaunch

    launch = KernelLaunch("indexer.select", None, (1,), (), {})
    spec = ("indexer.select", 1024, 4, 1)
    stats = aot.CompileStats(registers=64, spill_bytes=0, shared=8192, mma=(), seconds=0.0)
    monkeypatch.setattr(aot, "compile_launch", lambda launch, capability: stats)
    assert arch.kept_by_compile(launch, spec, 120, 101376)
    assert not arch.kept_by_compile(launch, spec, 120, 8191)  # over the shared-memory limit
    monkeypatch.setattr(aot, "compile_launch", lambda launch, capability: replace(stats, spill_bytes=8))
    assert not arch.kept_by_compile(launch, spec, 120, 101376)

    def no_toolchain(launch, capability):
        raise aot.CompileError("cuobjdump not found (a test)")

    monkeypatch.setattr(aot, "compile_launch", no_toolchain)
    monkeypatch.setattr(arch, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="indexer.select configs not checked for sm_120: cuobjdump not found"):
        assert arch.kept_by_compile(launch, spec, 120, 101376)  # kept: launching decides
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per cause
        assert arch.kept_by_compile(launch, spec, 120, 101376)


def test_compile_memo_tells_apart_what_compiles_apart(monkeypatch):
    # compile_launch's in-process memo (keyed without hashing the signature) answers a repeated launch without
    # compiling, and compiles again for anything that changes the compile: constexprs, warps, stages, target,
    # an argument's dtype, alignment, or an int becoming 1.
    from mla_kernels import aot

    compiled: list[KernelLaunch] = []

    def compile_uncached(launch, capability):
        compiled.append(launch)
        return aot.CompileStats(registers=len(compiled), spill_bytes=0, shared=0, mma=(), seconds=0.0)

    monkeypatch.setattr(aot, "_BY_LAUNCH", {})
    monkeypatch.setattr(aot, "lookup", lambda launch, capability: None)
    monkeypatch.setattr(aot, "store", lambda launch, capability, stats: None)
    monkeypatch.setattr(aot, "compile_uncached", compile_uncached)
    buf = torch.zeros(64, dtype=torch.float32)
    base = KernelLaunch("k", "kernel", (1,), (buf, 32), {"BLOCK": 64}, num_warps=4, num_stages=2)
    assert aot.compile_launch(base, 90).registers == 1
    same = replace(base, args=(torch.zeros(64, dtype=torch.float32), 48), grid=(7,))  # other buffer, int, grid
    assert aot.compile_launch(same, 90).registers == 1 and len(compiled) == 1
    others = [
        replace(base, constexprs={"BLOCK": 128}), replace(base, num_warps=8), replace(base, num_stages=3),
        replace(base, args=(buf.to(torch.int32), 32)), replace(base, args=(buf[1:], 32)),
        replace(base, args=(buf, 1)), replace(base, args=(buf, 33)),
    ]
    for n, launch in enumerate(others, start=2):
        assert aot.compile_launch(launch, 90).registers == n
    assert aot.compile_launch(base, 120).registers == len(others) + 2


def test_interpreter_probe_runs_here() -> None:
    """The probe kernel behind the launchers' interpreter check runs (None: no problem) where the
    interpreter is on; on a GPU run it is not asked."""
    from mla_kernels import _common

    if not _common.interpreting():
        pytest.skip("the interpreter is off (a GPU run)")
    assert _common.interpreter_problem() is None


def test_the_tuner_skips_only_configs_that_cannot_compile_or_fit():
    """A candidate that Triton cannot compile or the device cannot hold is skipped; any other error is a bug
    in that candidate and stops the search, naming the config."""
    from triton.runtime.errors import OutOfResources, PTXASError

    cfg = CANDIDATES[0]

    def raising(exc: BaseException):  # noqa: ANN202
        def measure() -> float:
            raise exc

        return measure

    assert tuning.time_candidate(cfg, lambda: 0.25) == 0.25
    assert tuning.time_candidate(cfg, raising(OutOfResources(232448, 101376, "shared memory"))) is None
    assert tuning.time_candidate(cfg, raising(PTXASError("ptxas fatal: too many registers"))) is None
    too_big = RuntimeError("Triton Error [CUDA]: too many resources requested for launch")
    assert tuning.time_candidate(cfg, raising(too_big)) is None
    for exc in (TypeError("unexpected keyword argument 'BLOCK_X'"), RuntimeError("CUDA error: illegal address")):
        with pytest.raises(RuntimeError, match=r"MMA decode config 64x64x8x2 pf3 S1 failed: .*(BLOCK_X|illegal)"):
            tuning.time_candidate(cfg, raising(exc))


def test_tuned_configs_depend_on_every_module_the_decode_imports() -> None:
    """The autotune cache key hashes the decode package and the mla_kernels modules its kernels import (the
    cache layout, PDL): a change to any of them re-tunes instead of reusing a config tuned for other code."""
    import ast
    from pathlib import Path

    from mla_kernels.decode import tuning

    package = Path(tuning.__file__).resolve().parents[1]
    hashed = {*package.glob("*.py"), *(package / "decode").glob("*.py")}
    for path in (package / "decode").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
                assert package / f"{node.module.split('.')[0]}.py" in hashed, (path.name, node.module)
    assert len(tuning._source_hash()) == 16 and tuning._source_hash() is tuning._source_hash()


def test_cache_files_follow_one_rule(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # noqa: ANN001
    from mla_kernels._common import DiskCache
    from settings import env

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for var, name in ((env.AUTOTUNE_CACHE, "autotune.json"), (env.COMPILE_CACHE, "compile.json"),
                      (env.CEILINGS_FILE, "ceilings.json")):  # fmt: skip
        monkeypatch.delenv(var.name, raising=False)
        assert env.cache_file(var, name) == tmp_path / "mlaperf" / name
        monkeypatch.setenv(var.name, "0")
        assert env.cache_file(var, name) is None and DiskCache(var, name).path() is None
        monkeypatch.setenv(var.name, str(tmp_path / "x.json"))
        assert DiskCache(var, name).path() == tmp_path / "x.json"
    assert env.ceilings_file() == tmp_path / "x.json"
