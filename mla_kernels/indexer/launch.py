"""Indexer launchers: validate, allocate, pick configs (by measured rules; Triton's autotuner for the select), launch.

``indexer_topk`` is the public entry (``indexer_topk_with_record`` also returns the ``LaunchRecord``
of what ran). The compile matrix over these launchers' kernels and configs is ``matrix``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from dataclasses import replace

import torch
import triton

from .._common import KernelLaunch, interpreting, next_pow2, num_sms, pdl_constexprs
from ..arch import RESIDENT_BLOCKS, kept_by_compile, profile_target, resident_programs
from ..record import ConfigValue, KernelRun, LaunchRecord
from . import coop
from .checks import _check_args, _Dims, check_max_seq_len, check_workspace
from .kernels import _fp32_maxctx_scores_kernel, _radix_select_kernel
from .radix import candidates as radix_candidates
from .radix import plan as radix_plan
from .radix import radix_select, state_rows
from .radix import workspace as radix_workspace
from .radix_kernels import WS_WIDTH, _radix_compact_kernel, _radix_pass_kernel
from .reference import _topk_slots, indexer_logits_reference
from .select_rule import SELECTS, check_select, select_path
from .split import plan as split_plan
from .split import split_select
from .split_kernels import _chunk_topk_kernel, _merge_topk_kernel
from .tiles import COOP_CONFIGS, SCORES_TILE, SELECT_CONFIGS
from .token_scores import _bf16_scores_kernel_t, _coop_topk_kernel

KERNELS = {"scores_t": _bf16_scores_kernel_t, "select": _radix_select_kernel, "fp32_maxctx": _fp32_maxctx_scores_kernel,
           "chunk_topk": _chunk_topk_kernel, "merge_topk": _merge_topk_kernel, "radix_pass": _radix_pass_kernel,
           "radix_compact": _radix_compact_kernel, "coop": _coop_topk_kernel}

# Fixed configs for the interpreter (big tiles: fewer Python-level programs) and the SIMT baseline.
_INTERP_BLOCK_T = 128
_INTERP_SELECT_BLOCK = 1024
_FP32_BLOCK_T = 64
_FP32_WARPS = 4


def config_spec(name: str, cfg: triton.Config) -> tuple[object, ...]:
    """The key of an indexer config in the keep rule (``SPILL_ALLOWED``)."""
    return (name, *cfg.kwargs.values(), cfg.num_warps, cfg.num_stages)


def _kept_configs(
    name: str, kernel: object, runtime: tuple[object, ...], given: Mapping[str, object], configs: list[triton.Config],
    capability: int, shared_limit: int,
) -> list[triton.Config]:
    """The ``configs`` of ``kernel`` that the keep rule keeps on sm_<capability> for a call with ``runtime``
    arguments and ``given`` values (constexprs among them), each compiled ahead of time as it would launch."""
    constexpr = {p.name for p in kernel.params if p.is_constexpr}  # type: ignore[attr-defined]
    kept = []
    for cfg in configs:
        values = {**given, **cfg.kwargs}
        launch = KernelLaunch(
            name, kernel, (1,), runtime, {k: v for k, v in values.items() if k in constexpr},
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )  # fmt: skip
        if kept_by_compile(launch, config_spec(name, cfg), capability, shared_limit):
            kept.append(cfg)
    return kept


def _kept_by_compile(name: str, kernel: object):  # noqa: ANN202 - Triton's early_config_prune callback
    def prune(configs: list[triton.Config], named_args: dict[str, object], **kwargs: object) -> list[triton.Config]:
        constexpr = {p.name for p in kernel.params if p.is_constexpr}  # type: ignore[attr-defined]
        runtime = tuple(named_args[n] for n in kernel.arg_names if n not in constexpr)  # type: ignore[attr-defined]
        device = next(v.device for v in runtime if isinstance(v, torch.Tensor))
        capability, limit = profile_target("native", device)
        # the call's kwargs also hold grid / warmup (not constexprs: filtered out)
        kept = _kept_configs(name, kernel, runtime, {**named_args, **kwargs}, configs, capability, limit)
        if not kept and name in RESIDENT_BLOCKS:  # a config that might not fit would hang, not run slowly
            raise RuntimeError(f"no {name} config fits {RESIDENT_BLOCKS[name]} blocks per SM on sm_{capability}: "
                               f"choose another select than {name!r} (indexer_topk's select)")  # fmt: skip
        return kept or configs[:1]

    return prune


@functools.cache
def _coop_tuner(kernel: object) -> triton.runtime.Autotuner:
    """The one-launch kernel's autotuner over ``tiles.COOP_CONFIGS``. With that one tile Triton's autotuner
    neither times nor prunes (it prunes only among several configs), so ``_coop_topk`` applies the keep rule
    itself before each launch (``_coop_block_kept``). Keyed by the kernel, so a test's mutated copy gets its
    own."""
    prune = {"early_config_prune": _kept_by_compile("indexer.coop", kernel)}
    # ws_ptr: a timed run adds to the radix workspace; it is put back after each.
    return triton.autotune(configs=list(COOP_CONFIGS), key=["H", "BLOCK_H"], prune_configs_by=prune,
                           restore_value=["ws_ptr"])(kernel)  # fmt: skip


@functools.cache
def _tuned_select() -> triton.runtime.Autotuner:
    prune = {"early_config_prune": _kept_by_compile("indexer.select", _radix_select_kernel)}
    return triton.autotune(configs=list(SELECT_CONFIGS), key=["topk"], prune_configs_by=prune)(_radix_select_kernel)


# Scores programs per SM over the whole batch (each strides over its request's tokens) where the programs an
# SM holds cannot be counted (under the interpreter, or no toolchain to compile the launch ahead of time).
SCORES_PROGRAMS_PER_SM = 8


def _programs_per_request(device: torch.device, batch: int, per_sm: int | None = None) -> int:
    return max(1, triton.cdiv(num_sms(device) * (per_sm or SCORES_PROGRAMS_PER_SM), batch))


def _wave_programs(launch: KernelLaunch, d: _Dims, max_seq_len: int | None = None, per_sm: int | None = None) -> int:
    """Programs per request of the scores grid: one wave (the device's SMs x the programs of ``launch`` one SM
    holds, shared by the batch), and no more than the longest request has tiles (``max_seq_len`` where given,
    else the block table's capacity). A second, partial wave had left the last programs running alone: with
    one wave the scores kernel took 24.6 / 67.2 / 231.0 against 28.5 / 73.4 / 244.0 us at 64 requests and 4K /
    16K / 64K tokens (docs/measurements/indexer_waves_session31.log). ``per_sm`` overrides the programs an SM
    holds; where the launch cannot be compiled here to count them, ``SCORES_PROGRAMS_PER_SM``."""
    device = next(a.device for a in launch.args if isinstance(a, torch.Tensor))
    if per_sm is None:
        per_sm = resident_programs(launch, profile_target("native", device)[0]) or SCORES_PROGRAMS_PER_SM
    tokens = d.max_context if max_seq_len is None else min(max_seq_len, d.max_context)
    return max(1, min(num_sms(device) * per_sm // d.batch, triton.cdiv(tokens, int(launch.constexprs["BLOCK_T"]))))


Tensor = torch.Tensor  # the argument builders' inputs


def _score_args(
    q: Tensor, w: Tensor, cache: Tensor, bt: Tensor, sl: Tensor, logits: Tensor, d: _Dims, ws: Tensor | None = None,
    topk: int = 0,
) -> tuple[object, ...]:
    """The scores kernel's runtime arguments; ``ws`` (a radix workspace) only where it runs pass 0 into it
    (``HIST``) or zeroes it (``ZERO_WS``): otherwise the logits stand in for the unused pointer."""
    return (
        q, w, cache, bt, sl, logits, logits if ws is None else ws,
        q.stride(0), q.stride(1), w.stride(0), cache.stride(0), bt.stride(0), logits.stride(0),
        0 if ws is None else ws.stride(0), d.heads, d.num_pages, d.max_context, topk,
    )  # fmt: skip


def _select_args(logits: Tensor, bt: Tensor, sl: Tensor, out: Tensor, topk: int, d: _Dims) -> tuple[object, ...]:
    return (logits, bt, sl, out, logits.stride(0), bt.stride(0), out.stride(0), topk, d.max_context, d.num_pages)


def _fp32_args(
    q: Tensor, w: Tensor, cache: Tensor, bt: Tensor, sl: Tensor, logits: Tensor, d: _Dims
) -> tuple[object, ...]:
    # The baseline scores the whole capacity: no max_ctx.
    return (
        q, w, cache, bt, sl, logits,
        q.stride(0), q.stride(1), w.stride(0), cache.stride(0), bt.stride(0), logits.stride(0), d.heads, d.num_pages,
    )  # fmt: skip


def _tuned_run(
    tuner: triton.runtime.Autotuner, name: str, grid: object, args: tuple[object, ...], constexprs: dict[str, object]
) -> KernelRun:
    """Launch through Triton's autotuner; the run is built from the config it launched with (its
    ``best_config``, set just before the launch) and the kernel that launch compiled."""
    constexprs = {**pdl_constexprs(tuner.fn, args), **constexprs}
    compiled = tuner[grid](*args, **constexprs, launch_pdl=bool(constexprs.get("PDL", False)))
    best = tuner.best_config
    given = {**constexprs, **best.kwargs}
    grid_of = grid(given) if callable(grid) else grid
    launch = KernelLaunch(name, tuner.fn, tuple(grid_of), args, given, best.num_warps, best.num_stages)
    return KernelRun.of(launch, compiled)


def _run_scores(
    q: torch.Tensor,
    w: torch.Tensor,
    cache: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    logits: torch.Tensor,
    d: _Dims,
    topk: int,
    ws: torch.Tensor | None = None,
    per_sm: int | None = None,
    zero_ws: torch.Tensor | None = None,
    max_seq_len: int | None = None,
) -> KernelRun:
    """Launch the scores kernel into ``logits``: with the radix select's pass 0 into ``ws`` (a zeroed
    workspace, ``HIST``) or zeroing ``zero_ws`` for the select's passes (``ZERO_WS``) when given; a fixed
    config under the interpreter, on the GPU ``tiles.SCORES_TILE`` on a one-wave grid
    (``_wave_programs``; ``per_sm`` overrides the programs an SM holds)."""
    if ws is not None and zero_ws is not None:
        raise ValueError("give ws (pass 0 in the scores kernel) or zero_ws (zero it there), not both")
    block_h = max(16, next_pow2(d.heads))
    args = _score_args(q, w, cache, bt, sl, logits, d, zero_ws if ws is None else ws, topk)
    flags = {"HIST": ws is not None, "ZERO_WS": zero_ws is not None}
    if interpreting():
        per_req = _programs_per_request(q.device, d.batch, per_sm)
        grid = (min(per_req, triton.cdiv(d.max_context, _INTERP_BLOCK_T)), d.batch)
        constexprs = {"BLOCK_H": block_h, "BLOCK_T": _INTERP_BLOCK_T, "FP32_MATH": True, **flags}
        launch = KernelLaunch("indexer.scores", _bf16_scores_kernel_t, grid, args, constexprs)
        return KernelRun.of(launch, launch.run())
    block_t, warps, stages = SCORES_TILE
    constexprs = {"BLOCK_H": block_h, "BLOCK_T": block_t, "FP32_MATH": False, **flags}
    launch = KernelLaunch("indexer.scores", _bf16_scores_kernel_t, (1, d.batch), args, constexprs, warps, stages)
    launch = replace(launch, grid=(_wave_programs(launch, d, max_seq_len, per_sm), d.batch))
    return KernelRun.of(launch, launch.run())


def _bf16_topk(
    q: torch.Tensor,
    w: torch.Tensor,
    cache: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    topk: int,
    d: _Dims,
    workspace: torch.Tensor | None = None,
    max_seq_len: int | None = None,
    select: str | None = None,
) -> tuple[torch.Tensor, LaunchRecord]:
    dev = q.device
    logits = torch.empty((d.batch, d.max_context), dtype=torch.float32, device=dev)
    out = torch.empty((d.batch, topk), dtype=torch.int32, device=dev)
    path = select_path(d.batch, select, max_seq_len)
    cp = coop.plan(d, topk, dev) if path == "coop" else None
    record = None if cp is None else _coop_topk(q, w, cache, bt, sl, logits, out, topk, d, cp, workspace)
    if record is not None:
        return out, record
    path = "radix" if path == "coop" else path
    # The radix paths' workspace: the caller's kept one (every path leaves it zeroed), else a fresh one, zeroed
    # here when the scores kernel runs pass 0 into it (a memset node), else by that kernel (``ZERO_WS``).
    fused = path == "radix_fused"
    ws_cand = None
    if path in ("radix", "radix_fused"):
        ws_cand = radix_workspace(d, dev, zeroed=fused) if workspace is None else (workspace, radix_candidates(d, dev))
    ws = ws_cand[0] if ws_cand is not None else None
    scores = _run_scores(q, w, cache, bt, sl, logits, d, topk, ws if fused else None,
                         zero_ws=None if fused else ws, max_seq_len=max_seq_len)  # fmt: skip
    select_runs, select_config = _select(logits, bt, sl, out, topk, d, path, ws_cand, max_seq_len)
    config = _record_config(scores.config, scores.grid[0], select_config)
    # the single-program select (where the split does not apply) is the one config still autotuned here
    source = "autotuner" if select_config["select"] == "single" and not interpreting() else "fixed"
    return out, LaunchRecord("indexer", "bf16", (scores, *select_runs), config, "native", source, interpreting())


def _record_config(tiles: Mapping[str, ConfigValue], programs: int, select: Mapping[str, ConfigValue]
                   ) -> dict[str, ConfigValue]:
    """A bf16 launch record's config: the score tiles' (``tiles``, a run's config), the programs per request,
    then the select's."""
    return {"BLOCK_H": tiles["BLOCK_H"], "BLOCK_T": tiles["BLOCK_T"], "num_warps": tiles["num_warps"],
            "num_stages": tiles["num_stages"], "programs_per_request": programs, **select}


def _coop_topk(
    q: torch.Tensor,
    w: torch.Tensor,
    cache: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    logits: torch.Tensor,
    out: torch.Tensor,
    topk: int,
    d: _Dims,
    cp: coop.CoopPlan,
    workspace: torch.Tensor | None = None,
) -> LaunchRecord | None:
    """The "coop" path into ``out``: scores and select in one launch (one per phase under the
    interpreter); returns its record, or None, launching nothing, where this device's architecture keeps the
    kernel at none of ``coop.SEL_BLOCKS`` (``_coop_block_kept``). ``workspace`` (``indexer_workspace``, which
    the kernel leaves zeroed) saves the zeroing of a fresh one, a graph node of its own."""
    # zeroed: the kernel's histograms, barriers and counters
    ws = state_rows(d.batch, q.device) if workspace is None else workspace
    cand = radix_candidates(d, q.device)
    run_args = coop.args(q, w, cache, bt, sl, logits, ws, cand, out, d=d, topk=topk)
    if interpreting():
        launches = coop.phase_launches(_coop_topk_kernel, run_args, d, cp)
        runs = tuple(KernelRun.of(launch, launch.run()) for launch in launches)
        source = "fixed"
    else:
        kept = _coop_kept_plan(cp, run_args, d, topk, q.device)
        if kept is None:
            return None
        cp = kept
        tuner = _coop_tuner(_coop_topk_kernel)
        runs = (_tuned_run(tuner, "indexer.coop", (cp.programs, d.batch), run_args,
                           {**coop.constexprs(d, cp), "PHASE": -1}),)  # fmt: skip
        source = "autotuner"
    c = runs[-1].config
    config = _record_config(c, cp.programs, {"select": "coop", "SELECT_BLOCK": cp.sel_block,
                                             "select_num_warps": c["num_warps"]})
    return LaunchRecord("indexer", "bf16", runs, config, "native", source, interpreting())


# The select block ``_coop_kept_plan`` chose, by (kernel, architecture, shared memory, plan, heads, top-k): what the
# tuner's key held. Checking on every call cost 34 us of host time a call on the 2-core development CPU.
_COOP_KEPT: dict[tuple[object, ...], coop.CoopPlan | None] = {}


def _coop_kept_plan(
    cp: coop.CoopPlan, run_args: tuple[object, ...], d: _Dims, topk: int, device: torch.device
) -> coop.CoopPlan | None:
    """``coop.kept_plan`` on this device's architecture (``_coop_block_kept``), once per key of ``_COOP_KEPT``;
    None (with a warning, once) where no select block is kept."""
    capability, limit = profile_target("native", device)
    key = (_coop_topk_kernel, capability, limit, cp, d.heads, topk)
    if key not in _COOP_KEPT:
        _COOP_KEPT[key] = coop.kept_plan(cp, lambda p: _coop_block_kept(p, run_args, d, capability, limit))
        if _COOP_KEPT[key] is None:
            warnings.warn(f"indexer.coop is kept at no select block on sm_{capability}: the radix select runs",
                          RuntimeWarning, stacklevel=4)  # fmt: skip
    return _COOP_KEPT[key]


def _coop_block_kept(
    cp: coop.CoopPlan, run_args: tuple[object, ...], d: _Dims, capability: int, shared_limit: int
) -> bool:
    """Whether the keep rule keeps a one-launch config at ``cp``'s select block on sm_<capability>, residency
    for its grid barriers included (a config that might not be resident would hang). Its tuner's prune never
    runs on its one config, so this is the check. With triton 3.6 the 64-token tile at select block 256 spills
    8 B a thread on sm_120, where the plan picks that block for one request (docs/compile-matrix.md)."""
    given = {**coop.constexprs(d, cp), "PHASE": -1}
    kept = _kept_configs("indexer.coop", _coop_topk_kernel, run_args, given, list(COOP_CONFIGS), capability,
                        shared_limit)  # fmt: skip
    return bool(kept)


def _select(
    logits: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    out: torch.Tensor,
    topk: int,
    d: _Dims,
    path: str,
    ws_cand: tuple[torch.Tensor, torch.Tensor] | None = None,
    max_seq_len: int | None = None,
) -> tuple[tuple[KernelRun, ...], dict[str, int | bool | str]]:
    """The top-k select's runs on ``path`` (one of ``SELECTS``) and its config for the record. The
    radix paths use ``ws_cand`` (``radix.workspace``; "radix_fused": pass 0 already ran in the scores
    kernel). The split paths run one program a request where the longest request (``max_seq_len``) has at
    most ``split.ONE_MAX`` tokens, and fall back to the single-program radix select (fixed under the
    interpreter, autotuned on the GPU) where the split does not apply."""
    if path not in SELECTS or path == "coop":
        raise ValueError(f"select path must be one of {SELECTS} but 'coop' (one launch with the scores), got {path!r}")
    if path in ("radix", "radix_fused"):
        rp = radix_plan(d, topk, logits.device)
        runs = radix_select(logits, bt, sl, out, topk, d, rp, ws_cand, first_pass=int(path == "radix_fused"))
        return runs, {"select": path, "SELECT_BLOCK": rp.block, "select_num_warps": rp.warps,
                      "select_programs": rp.programs}
    split = split_plan(d, topk, radix=path == "split_radix", longest=max_seq_len)  # None: single-program radix
    if split is not None:
        runs = split_select(logits, bt, sl, out, topk, d, split)
        return runs, {"select": path, "SELECT_BLOCK": split.chunk, "select_num_warps": split.chunk_warps,
                      "chunks": split.chunks, "MERGE_BLOCK": split.merge_block, "merge_num_warps": split.merge_warps}
    select_args = _select_args(logits, bt, sl, out, topk, d)
    if interpreting():
        launch = KernelLaunch("indexer.select", _radix_select_kernel, (d.batch,), select_args,
                              {"BLOCK": _INTERP_SELECT_BLOCK})  # fmt: skip
        run = KernelRun.of(launch, launch.run())
    else:
        run = _tuned_run(_tuned_select(), "indexer.select", (d.batch,), select_args, {})
    single = {"select": "single", "SELECT_BLOCK": run.config["BLOCK"], "select_num_warps": run.config["num_warps"]}
    return (run,), single


def _fp32_maxctx_topk(
    q: torch.Tensor,
    w: torch.Tensor,
    cache: torch.Tensor,
    bt: torch.Tensor,
    sl: torch.Tensor,
    topk: int,
    d: _Dims,
) -> tuple[torch.Tensor, LaunchRecord]:
    logits = torch.empty((d.batch, d.max_context), dtype=torch.float32, device=q.device)
    block_t = _INTERP_BLOCK_T if interpreting() else _FP32_BLOCK_T
    launch = KernelLaunch(
        "indexer.fp32_maxctx", _fp32_maxctx_scores_kernel, (d.max_context // block_t, d.batch),
        _fp32_args(q, w, cache, bt, sl, logits, d), {"BLOCK_T": block_t}, num_warps=_FP32_WARPS,
    )  # fmt: skip
    scores = KernelRun.of(launch, launch.run())
    out = _topk_slots(logits, bt, topk)
    config = {"BLOCK_T": scores.config["BLOCK_T"], "num_warps": scores.config["num_warps"],
              "num_stages": scores.config["num_stages"], "programs": scores.grid[0] * scores.grid[1]}  # fmt: skip
    runs = (scores, KernelRun("torch.topk"))
    return out, LaunchRecord("indexer", "fp32_maxctx", runs, config, "native", "fixed", interpreting())


def indexer_topk(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    impl: str = "bf16",
    workspace: torch.Tensor | None = None,
    max_seq_len: int | None = None,
    select: str | None = None,
) -> torch.Tensor:
    """int32 ``[B, topk]`` physical slots of each request's ``topk`` highest indexer logits.

    ``q_idx`` bf16 ``[B, H, 128]`` (H a multiple of 16), ``weights`` fp32 ``[B, H]``, ``index_cache``
    uint8 ``[num_pages, page_stride]``, ``block_table`` int32 ``[B, max_pages]``, ``seq_lens`` int32
    ``[B]``. Valid slots come first in each row; ``-1`` pads rows with fewer than ``topk`` tokens.
    What ran: :func:`indexer_topk_with_record`.

    ``workspace``: a buffer from :func:`indexer_workspace` for the same batch size, owned by the caller
    and given to every call (a decode step's layers, a captured graph): the one-launch and radix selects use
    it and leave it zeroed, so no call zeroes a fresh one first. Calls that may run at the same time
    (other streams, graphs replayed concurrently) need one each.

    ``max_seq_len``: the longest request's length in tokens (``seq_lens.max()``), where the caller has it
    on the host without a sync. It chooses among select paths that return the same slots (``select_rule``)
    and sizes the scores kernel's grid (every program strides to its request's real length): a wrong value
    costs time, never correctness.

    ``select``: the bf16 path's top-k select, one of ``SELECTS`` for every batch whatever the rule says (a
    measurement comparing select paths); None (the default) follows the rule. Every path returns the same slots.
    """
    return indexer_topk_with_record(
        q_idx, weights, index_cache, block_table, seq_lens, topk, impl, workspace, max_seq_len, select
    )[0]


def indexer_workspace(batch: int, device: torch.device | str) -> torch.Tensor:
    """A zeroed workspace for :func:`indexer_topk` calls of ``batch`` requests (int32 ``[batch, WS_WIDTH]``)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
        raise ValueError(f"batch must be a non-negative int, got {batch!r}")
    return state_rows(batch, device)


def indexer_topk_with_record(
    q_idx: torch.Tensor,
    weights: torch.Tensor,
    index_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    impl: str = "bf16",
    workspace: torch.Tensor | None = None,
    max_seq_len: int | None = None,
    select: str | None = None,
) -> tuple[torch.Tensor, LaunchRecord]:
    """:func:`indexer_topk`, returning ``(slots, record)``: the ``LaunchRecord`` of the kernels that ran
    and the configs they ran with (``mla_kernels.record``)."""
    d = _check_args(q_idx, weights, index_cache, block_table, seq_lens, topk, impl)
    check_max_seq_len(max_seq_len)
    check_select(select)
    if workspace is not None:
        workspace = check_workspace(workspace, d.batch, WS_WIDTH, q_idx)
    if impl == "reference":
        logits = indexer_logits_reference(q_idx, weights, index_cache, block_table, seq_lens)
        record = LaunchRecord("indexer", "reference", (KernelRun("torch"), KernelRun("torch.topk")))
        return _topk_slots(logits, block_table, topk), record
    if d.batch == 0 or d.max_pages == 0 or d.num_pages == 0:
        empty = torch.full((d.batch, topk), -1, dtype=torch.int32, device=q_idx.device)
        return empty, LaunchRecord("indexer", impl, (), interpreted=interpreting())
    if impl == "fp32_maxctx":
        return _fp32_maxctx_topk(q_idx, weights, index_cache, block_table, seq_lens, topk, d)
    return _bf16_topk(q_idx, weights, index_cache, block_table, seq_lens, topk, d, workspace, max_seq_len, select)
