"""One layer's decode step: lightning indexer -> top-k -> sparse MLA decode, eager or as a CUDA graph."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .decode import IMPLS as DECODE_IMPLS
from .decode import sparse_mla_decode, sparse_mla_decode_with_record
from .indexer import (
    INDEXER_IMPLS,
    IndexerInputs,
    indexer_topk,
    indexer_topk_with_record,
    indexer_workspace,
    make_indexer_inputs,
)
from .indexer.select_rule import check_select
from .record import LaunchRecord
from .testing import make_kv_cache


@dataclass
class StepInputs(IndexerInputs):
    """The indexer's inputs (q_idx, weights, index_cache, block_table, seq_lens, topk) plus attention's."""

    q: torch.Tensor  # [B, H, 512] bf16, attention queries
    kv_cache: torch.Tensor  # [num_pages, 149504+] uint8, FP8 MODEL1 layout, same pages as index_cache

    @property
    def batch(self) -> int:
        return int(self.q.shape[0])


def make_step_inputs(
    batch: int,
    context: int | list[int],
    *,
    max_context: int = 131072,
    num_heads: int = 64,
    topk: int = 512,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> StepInputs:
    """Synthetic requests over both caches; pages shuffled, block-table entries past a request's pages -1."""
    idx = make_indexer_inputs(batch, context, max_context=max_context, topk=topk, device=device, seed=seed)
    num_pages = idx.index_cache.shape[0]
    kv_cache = make_kv_cache(num_pages * 256, device=device, seed=seed)
    g = torch.Generator(device="cpu").manual_seed(seed + 7)
    q = torch.randn(batch, num_heads, 512, generator=g).to(torch.bfloat16).to(device)
    return StepInputs(idx.q_idx, idx.weights, idx.index_cache, idx.block_table, idx.seq_lens, topk, q, kv_cache)


class DecodeStep:
    """indexer -> top-k -> sparse decode for B requests with any pairing of implementations.

    ``run()`` is eager (``run_with_records()`` also returns each op's ``LaunchRecord``). ``capture()``
    warms up (resolving every autotune choice) and records a CUDA graph over fixed buffers; ``replay()``
    re-runs it on whatever the input tensors now hold. ``select``: the indexer's select path for every run
    (``indexer_topk``'s ``select``; None follows its rule).
    """

    def __init__(
        self, inputs: StepInputs, decode_impl: str = "mma", indexer_impl: str = "bf16", select: str | None = None
    ) -> None:
        if decode_impl not in DECODE_IMPLS:
            raise ValueError(f"decode_impl must be one of {', '.join(DECODE_IMPLS)}; got {decode_impl!r}")
        if indexer_impl not in INDEXER_IMPLS:
            raise ValueError(f"indexer_impl must be one of {', '.join(INDEXER_IMPLS)}; got {indexer_impl!r}")
        self.inputs = inputs
        self.decode_impl = decode_impl
        self.indexer_impl = indexer_impl
        self.select = check_select(select)  # the indexer's select path for every run (None: its rule)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.indices: torch.Tensor | None = None
        self.out: torch.Tensor | None = None
        self.lse: torch.Tensor | None = None
        # The indexer's workspace, the step's own: reused by every run and the captured graph (the selects that
        # use it leave it zeroed), so no run zeroes a fresh one.
        self.workspace = indexer_workspace(inputs.batch, inputs.q.device)
        # The longest request, read once here (one sync at setup, none per run) for the indexer's select
        # rule (``indexer_topk``'s ``max_seq_len``); only speed depends on it if the lengths change later.
        self.max_seq_len = int(inputs.seq_lens.max()) if inputs.batch else 0

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        out, lse, _ = self.run_with_records()
        return out, lse

    def run_with_records(self) -> tuple[torch.Tensor, torch.Tensor, dict[str, LaunchRecord]]:
        """``(out, lse, {"indexer": record, "decode": record})``: the step's outputs and what each op ran."""
        inp = self.inputs
        self.indices, indexer = indexer_topk_with_record(
            *inp.args(), impl=self.indexer_impl, workspace=self.workspace, max_seq_len=self.max_seq_len,
            select=self.select,
        )
        self.out, self.lse, decode = sparse_mla_decode_with_record(
            inp.q, inp.kv_cache, self.indices, impl=self.decode_impl
        )
        return self.out, self.lse, {"indexer": indexer, "decode": decode}

    def warmup(self, iters: int = 2) -> None:
        for _ in range(iters):
            self.run()
        if self.inputs.q.is_cuda:
            torch.cuda.synchronize()

    def capture(self) -> None:
        if not self.inputs.q.is_cuda:
            raise RuntimeError("CUDA-graph capture needs CUDA inputs")
        self.warmup()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.run()
        self.graph = graph

    def replay(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.graph is None:
            raise RuntimeError("call capture() before replay()")
        self.graph.replay()
        assert self.out is not None and self.lse is not None
        return self.out, self.lse

    def reference(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The torch reference step: reference indexer, reference decode -> (out, lse, indices)."""
        inp = self.inputs
        indices = indexer_topk(*inp.args(), impl="reference")
        out, lse = sparse_mla_decode(inp.q, inp.kv_cache, indices, impl="reference")
        return out, lse, indices
