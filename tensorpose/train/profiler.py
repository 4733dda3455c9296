"""Where a training step's time goes, measured on every run without host syncs in the step.

Phases: ``data`` (waiting for the loader), ``h2d`` (host-to-device copy), ``prepare``
(on-device augmentation and targets), ``forward``, ``backward``, ``optimizer``. On a CPU each
phase is timed with ``perf_counter`` (CPU ops are synchronous); on CUDA the device phases are
bracketed by CUDA events that are only read in :meth:`StepProfiler.flush` (called at log
intervals), ``data`` stays a host timer, and every phase is an NVTX range for Nsight Systems.

:class:`DevicePrefetcher` copies the next batch to the GPU with ``non_blocking`` on a side
stream while the current step runs (pinned memory makes the copy asynchronous); on a CPU it
passes batches through. :func:`trace_profiler` writes a torch.profiler Chrome trace of a few
scheduled steps (``tensorpose train --profile``).
The input pipeline alone is diagnosed by :mod:`tensorpose.train.diagnose` (``tensorpose
profile-data``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

__all__ = [
    "PHASES",
    "DevicePrefetcher",
    "StepProfiler",
    "to_device",
    "trace_profiler",
    "verdict",
]

PHASES = ("data", "h2d", "prepare", "forward", "backward", "optimizer")


class StepProfiler:
    """Per-phase step timers (see the module docstring).

    Example:
        >>> prof = StepProfiler(torch.device("cpu"))
        >>> with prof.phase("forward"):
        ...     _ = torch.ones(3) * 2
        >>> prof.step_done(); prof.flush(); prof.steps
        1
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.steps = 0
        self._pending: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self._util: list[float] = []

    @contextlib.contextmanager
    def phase(self, name: str, stream: torch.cuda.Stream | None = None):
        """Time the enclosed code as phase ``name`` (on ``stream`` for CUDA events)."""
        if not self.cuda or name == "data":
            if self.cuda:
                torch.cuda.nvtx.range_push(name)
            t0 = time.perf_counter()
            try:
                yield
            finally:
                self.seconds[name] += time.perf_counter() - t0
                if self.cuda:
                    torch.cuda.nvtx.range_pop()
            return
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.nvtx.range_push(name)
        start.record(stream)
        try:
            yield
        finally:
            end.record(stream)
            torch.cuda.nvtx.range_pop()
            self._pending.append((name, start, end))

    def step_done(self) -> None:
        self.steps += 1

    def flush(self) -> None:
        """Read the pending CUDA events (one wait for the last one): call at log intervals."""
        if not self._pending:
            return
        self._pending[-1][2].synchronize()
        for name, start, end in self._pending:
            self.seconds[name] += start.elapsed_time(end) / 1000
        self._pending.clear()
        with contextlib.suppress(Exception):  # needs pynvml; "when measurable"
            self._util.append(float(torch.cuda.utilization()))

    def summary(self, wall_seconds: float | None = None) -> dict:
        """Milliseconds per step and share of each phase, the step total, GPU utilisation when
        measurable, and :func:`verdict`'s sentence."""
        self.flush()
        n = max(self.steps, 1)
        total = sum(self.seconds.values())
        out = {
            "steps": self.steps,
            "ms_per_step": {k: 1000 * v / n for k, v in self.seconds.items()},
            "share": {k: (v / total if total > 0 else 0.0) for k, v in self.seconds.items()},
            "step_ms": 1000 * total / n,
            "gpu_utilization": sum(self._util) / len(self._util) if self._util else None,
        }
        if wall_seconds is not None:
            out["wall_ms_per_step"] = 1000 * wall_seconds / n
        out["verdict"] = verdict(out["share"], out["gpu_utilization"])
        return out

    def table(self, summary: dict | None = None) -> str:
        s = summary or self.summary()
        lines = [f"step time breakdown ({s['steps']} steps, {s['step_ms']:.1f} ms/step):"]
        for k in PHASES:
            lines.append(f"  {k:<10s} {s['ms_per_step'][k]:9.2f} ms  {100 * s['share'][k]:5.1f}%")
        lines.append(f"  {s['verdict']}")
        return "\n".join(lines)


def verdict(share: dict[str, float], gpu_utilization: float | None = None) -> str:
    """A plain-language diagnosis of a phase breakdown."""
    wait = share.get("data", 0.0) + share.get("h2d", 0.0)
    util = f" (GPU utilisation {gpu_utilization:.0f}%)" if gpu_utilization is not None else ""
    if wait >= 0.2:
        return (
            f"data wait is {100 * wait:.0f}% of step time{util}: the step is starved. Raise "
            "data.workers, move augmentation to the device (data.backend=device on a GPU), "
            "cache decoded images (data.cache_images), pin memory, or use a larger batch."
        )
    top = max(("prepare", "forward", "backward", "optimizer"), key=lambda k: share.get(k, 0.0))
    hint = {
        "prepare": "on-device augmentation/targets dominate: check their batch size and dtype",
        "forward": "the model's compute dominates: try AMP, channels_last or torch.compile",
        "backward": "the model's compute dominates: try AMP, channels_last or torch.compile",
        "optimizer": "the optimiser step dominates: large fully connected layers? try a fused "
        "optimiser or fewer parameters",
    }[top]
    return (
        f"compute-bound: data wait is {100 * wait:.0f}% of step time{util}; {top} is the "
        f"largest phase ({100 * share.get(top, 0.0):.0f}%): {hint}."
    )


def to_device(batch, device: torch.device, non_blocking: bool = False):
    """Tensors of a (nested) batch on ``device``; other values unchanged."""
    if torch.is_tensor(batch):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)) and batch and torch.is_tensor(batch[0]):
        return type(batch)(to_device(v, device, non_blocking) for v in batch)
    if hasattr(batch, "to") and hasattr(batch, "__dataclass_fields__"):  # AugmentParams
        return batch.to(device)
    return batch


def _record_stream(batch, stream: torch.cuda.Stream) -> None:
    if torch.is_tensor(batch):
        if batch.is_cuda:
            batch.record_stream(stream)
    elif isinstance(batch, dict):
        for v in batch.values():
            _record_stream(v, stream)


class DevicePrefetcher:
    """Iterate ``loader`` with batches on ``device``, timing ``data`` and ``h2d`` phases.

    On CUDA the copy of batch ``i + 1`` is issued (``non_blocking``, side stream) before batch
    ``i`` is handed out, so it overlaps the step of batch ``i``; the compute stream waits for
    the copy only when it uses the batch. On a CPU batches pass through.
    """

    def __init__(self, loader: Iterable, device: torch.device, profiler: StepProfiler) -> None:
        self.loader, self.device, self.prof = loader, device, profiler

    def __len__(self) -> int:
        return len(self.loader)

    def _next(self, it: Iterator):
        with self.prof.phase("data"):
            return next(it, None)

    def __iter__(self):
        it = iter(self.loader)
        if self.device.type != "cuda":
            while (batch := self._next(it)) is not None:
                with self.prof.phase("h2d"):
                    batch = to_device(batch, self.device)
                yield batch
            return
        stream = torch.cuda.Stream(self.device)

        def load():
            b = self._next(it)
            if b is None:
                return None
            with torch.cuda.stream(stream), self.prof.phase("h2d", stream):
                return to_device(b, self.device, non_blocking=True)

        nxt = load()
        while nxt is not None:
            torch.cuda.current_stream(self.device).wait_stream(stream)
            batch = nxt
            _record_stream(batch, torch.cuda.current_stream(self.device))
            nxt = load()
            yield batch


def trace_profiler(run_dir: str | Path, device: torch.device, wait: int = 2, warmup: int = 2,
                   active: int = 4):  # fmt: skip
    """A ``torch.profiler.profile`` that records ``active`` steps after ``wait + warmup`` and
    writes ``run_dir/trace.json`` (open in chrome://tracing or Perfetto). Call ``.step()``
    after every training step."""
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    path = Path(run_dir) / "trace.json"
    return profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
        record_shapes=False,
    )
