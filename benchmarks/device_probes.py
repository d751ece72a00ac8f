"""What the device benchmarks measure of one call: launches, syncs and times per call.

Shared by :mod:`benchmarks.device_calls` (the per-call table) and
:mod:`benchmarks.device_kernels` (the kernel launch floor and specialisation).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks import cuda

PROBE_CALLS = 10
CALLS_PER_WINDOW = 40
WINDOWS = 5
Call = Callable[[], Any]


def sync(device: str) -> None:
    """Wait for the device (no-op on the CPU)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def call_launches(call: Call, device: str) -> float:
    """Launches per call over ``PROBE_CALLS`` calls (CPU: top-level torch operators)."""
    if device.startswith("cuda"):
        return cuda.launches(call, PROBE_CALLS)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(PROBE_CALLS):
            call()
    count = sum(e.name.startswith("aten::") and e.cpu_parent is None for e in prof.events())
    return count / PROBE_CALLS


def call_syncs(call: Call, device: str) -> float | None:
    """Host-device syncs per call over ``PROBE_CALLS`` calls (None on the CPU)."""
    return cuda.syncs(call, PROBE_CALLS) if device.startswith("cuda") else None


def timed(call: Call, device: str) -> tuple[float, float | None]:
    """Median host µs and median CUDA-event µs per call over ``WINDOWS`` windows."""
    host: list[float] = []
    event: list[float] = []
    cuda = device.startswith("cuda")
    for _ in range(WINDOWS):
        sync(device)
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for _ in range(CALLS_PER_WINDOW):
            call()
        host.append((time.perf_counter() - t0) * 1e6 / CALLS_PER_WINDOW)
        if cuda:
            end.record()
            torch.cuda.synchronize()
            event.append(start.elapsed_time(end) * 1e3 / CALLS_PER_WINDOW)
    return statistics.median(host), (statistics.median(event) if event else None)


def fmt(value: float | None, spec: str) -> str:
    """``value`` formatted, or "-" for a figure this device has not got."""
    return "-" if value is None else format(value, spec)
