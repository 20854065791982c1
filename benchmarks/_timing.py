"""GPU timing for asv: a clock that reads CUDA events, and cold-L2 CUDA-graph replays.

asv calls ``timer()`` before and after the timed calls and divides by ``number``. ``CLOCK`` is that
timer: on the GPU it synchronizes the device and returns the GPU seconds accumulated between the
start/end events recorded around each graph replay, so a sample is the mean GPU time of ``number``
replays, free of Python launch overhead. Before each replay (outside the events) the L2 cache is
flushed by reading a buffer twice its size, and the replays rotate over graphs captured on
different index sets / requests, so every replay reads its KV bytes from DRAM. On the CPU tier
(Triton interpreter, synchronous) the clock is the wall clock.

torch is imported lazily: this module is imported by every asv process, including cheap ones.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


class GpuClock:
    """asv ``timer``: accumulated GPU seconds of recorded replays (wall clock when not on a GPU)."""

    def __init__(self) -> None:
        self.events = False
        self._total = 0.0
        self._pending: list[tuple[Any, Any]] = []

    def record(self, start: Any, end: Any) -> None:
        self._pending.append((start, end))

    def __call__(self) -> float:
        if not self.events:
            return time.perf_counter()
        if self._pending:
            import torch

            torch.cuda.synchronize()
            for start, end in self._pending:
                self._total += start.elapsed_time(end) * 1e-3  # elapsed_time is in ms
            self._pending.clear()
        return self._total


CLOCK = GpuClock()


class L2Flush:
    """Evicts ``device``'s L2 when called: the one cold-L2 rule of the suites and the measurement scripts.

    Reading (not writing) a buffer twice the L2's size leaves it full of clean lines, so no write-back gets
    charged to the kernel timed next (a memset flush leaves up to the whole L2 dirty for it to write back).
    """

    def __init__(self, device: Any) -> None:
        import torch

        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 << 20)
        self._buf = torch.ones(max(2 * l2, 32 << 20) // 4, dtype=torch.float32, device=device)
        self._out = torch.empty((), dtype=torch.float32, device=device)

    def __call__(self) -> None:
        import torch

        torch.sum(self._buf, dim=0, out=self._out)


class Replayer:
    """Runs a case's kernel(s) once per call: CUDA-graph replay on GPU, eager call on the CPU tier.

    ``fns[k]()`` runs the case on input set ``k`` and returns its outputs. On CUDA every ``fns[k]`` is
    warmed up (autotuning resolves here, before capture) and captured into its own graph; the graph's
    output tensors are kept so the correctness gate can check what the timed graphs compute.
    """

    def __init__(self, fns: Sequence[Callable[[], Any]], device: Any) -> None:
        import torch

        if not fns:
            raise ValueError("Replayer needs at least one function")
        self.fns = list(fns)
        self.device = torch.device(device)
        self.gpu = self.device.type == "cuda"
        self._next = 0
        self.number = 1  # replays per asv sample; set by the suite from pick_number()
        self.graphs: list[Any] = []
        self.graph_outputs: list[Any] = []
        self.flush_l2: L2Flush | None = None  # the GPU's; the CPU tier has nothing to flush
        if self.gpu:
            self._capture()
            self.flush_l2 = L2Flush(self.device)

    def _capture(self) -> None:
        import torch

        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.fns[0]()  # warm-up: compile and autotune (same shapes for every set) ...
            for fn in self.fns:  # ... and allocate
                fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        for fn in self.fns:  # one memory pool per graph: replays never clobber another's outputs
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = fn()
            self.graphs.append(graph)
            self.graph_outputs.append(out)
        for graph in self.graphs:  # first replays upload the graphs; keep them out of the samples
            graph.replay()
        torch.cuda.synchronize(self.device)

    def outputs(self, k: int) -> Any:
        """Outputs of input set ``k`` as the timed path computes them (graph replay on GPU)."""
        if not self.gpu:
            return self.fns[k]()
        import torch

        self.graphs[k].replay()
        torch.cuda.synchronize(self.device)
        return self.graph_outputs[k]

    def replay(self, clock: GpuClock = CLOCK) -> None:
        """One timed call: flush L2, then replay the next graph between two recorded events."""
        k = self._next
        self._next = (k + 1) % len(self.fns)
        if not self.gpu:
            self.fns[k]()
            return
        import torch

        assert self.flush_l2 is not None
        self.flush_l2()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        self.graphs[k].replay()
        end.record()
        clock.record(start, end)

    def measure(self, calls: int) -> list[float]:
        """Seconds per call for ``calls`` timed calls (GPU time on CUDA, wall time on the CPU tier)."""
        clock = GpuClock()
        clock.events = self.gpu
        times = []
        for _ in range(calls):
            before = clock()
            self.replay(clock)
            times.append(clock() - before)
        return times

    def pick_number(self, target_s: float = 2e-3, cap: int = 20) -> int:
        """Replays per asv sample so a sample holds about ``target_s`` of GPU time."""
        if not self.gpu:
            return 1
        t = statistics.median(self.measure(3))
        return max(1, min(cap, int(target_s / max(t, 1e-7))))
