"""GPU measurement: the same workloads on a CUDA device, with launches and syncs per call.

Used only when ``torch.cuda.is_available()`` (and not ``--no-cuda``). ``cuda_measure`` wraps
``timing.measure`` (host-side µs per step, what the scheduler pays) and adds, per step:

- ``cuda_event_us``: device-timeline span from CUDA events around a window of steps (includes
  any work the step leaves queued);
- ``kernel_launches``: CUDA kernels and memcpy/memset activities recorded by
  ``torch.profiler`` over ``PROBE_STEPS`` steps, divided by the step count;
- ``host_syncs``: synchronising calls reported by ``torch.cuda.set_sync_debug_mode("warn")``
  over ``PROBE_STEPS`` steps, divided by the step count (only its "called a synchronizing CUDA
  operation" warnings count: torch 2.11 also warns once that the mode is a prototype).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch

from benchmarks.timing import Sample, Settings, Step, measure

PROBE_STEPS = 10


@dataclass(frozen=True)
class CudaSample:
    """A host ``Sample`` plus device-side figures per step."""

    host: Sample
    cuda_event_us: float
    kernel_launches: float
    host_syncs: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {**self.host.as_dict(), "cuda_event_us": self.cuda_event_us,
                "kernel_launches": self.kernel_launches, "host_syncs": self.host_syncs}


def _event_us(step: Step, n: int) -> float:
    event_cls: Any = torch.cuda.Event
    start = event_cls(enable_timing=True)
    end = event_cls(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        step()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) * 1e3 / n


SYNC_WARNING = "called a synchronizing CUDA operation"


def launches(step: Step, num_steps: int = PROBE_STEPS) -> float:
    """CUDA kernels, memcpys and memsets per step over ``num_steps`` steps (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(num_steps):
            step()
        torch.cuda.synchronize()
    count = 0
    for evt in prof.events():
        if str(evt.device_type).endswith("CUDA"):
            count += 1
    return count / num_steps


def syncs(step: Step, num_steps: int = PROBE_STEPS) -> float:
    """Host-device synchronisations per step over ``num_steps`` steps (sync debug mode)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(num_steps):
                step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum(SYNC_WARNING in str(w.message) for w in caught) / num_steps


def cuda_measure(step: Step, settings: Settings, max_steps: int | None = None) -> CudaSample:
    """Host timing, CUDA-event timing, launches and syncs per step of ``step``."""
    host = measure(step, settings, max_steps)
    return CudaSample(host, _event_us(step, max(1, host.steps_per_window)),
                      launches(step), syncs(step))


def cuda_available() -> bool:
    """Whether a CUDA device can be used."""
    return bool(torch.cuda.is_available())
