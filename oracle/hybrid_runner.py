"""Run the hybrid state machine over a target's page sizes and ``need_sort`` values.

``run_hybrid("sglang-swa")`` or ``run_hybrid(factory)``: every configuration the target's
:class:`~kvpool.oracle.hybrid_targets.HybridCapabilities` allow, derandomized, stopping at the
first divergence (a :class:`~kvpool.oracle.hybrid_executor.HybridFailure` with its repro).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from .hybrid_executor import HybridFailure
from .hybrid_machine import hybrid_machine
from .hybrid_targets import HYBRID_TARGETS, HybridCapabilities
from .runner import shrink_budget

EVENTS = ("arrive", "short", "decode", "extend", "slide-aligned", "slide-unaligned",
          "finish-free", "finish-segments", "group")


@dataclass
class HybridResult:
    """What one hybrid run found, per configuration run (``page_size``, ``need_sort``)."""

    target: str
    configs: list[tuple[int, bool]] = field(default_factory=list)
    examples: int = 0
    calls: int = 0
    events: dict[str, int] = field(default_factory=dict)
    failure: HybridFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.calls > 0

    def summary(self) -> str:
        reached = ", ".join(f"{k} {v}" for k, v in sorted(self.events.items()))
        failed = f"FAIL [{self.failure.clause}]" if self.failure else "NO CALLS"
        status = "ok" if self.ok else failed
        return (f"{self.target}: {status}; {len(self.configs)} configurations, {self.examples} "
                f"examples, {self.calls} calls; events: {reached}")


def resolve(target: str | Callable[..., Any]) -> tuple[Any, HybridCapabilities, str]:
    """A hybrid factory, its capabilities and a printable path."""
    factory = HYBRID_TARGETS[target] if isinstance(target, str) else target
    caps = getattr(factory, "kvpool_hybrid_capabilities", HybridCapabilities(checked=False))
    return factory, caps, f"{factory.__module__}:{factory.__qualname__}"


def run_hybrid(target: str | Callable[..., Any], *, max_examples: int = 60,
               caps: HybridCapabilities | None = None, step_count: int = 30,
               shrink_seconds: float = 5.0, seed: int | None = None) -> HybridResult:
    """Run every configuration of ``target``; stop at the first failure (shrunk)."""
    factory, declared, path = resolve(target)
    caps = caps or declared
    result = HybridResult(path)
    for page_size in caps.page_sizes:
        for need_sort in caps.need_sort:
            cls = hybrid_machine(factory, caps, path, page_size, need_sort)
            if seed is not None:
                cls._hypothesis_internal_use_seed = seed
            run_settings = settings(
                max_examples=max_examples, stateful_step_count=step_count, deadline=None,
                database=None, derandomize=seed is None, report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck), print_blob=False)
            result.configs.append((page_size, need_sort))
            try:
                with shrink_budget(shrink_seconds):
                    run_state_machine_as_test(cls, settings=run_settings)
            except HybridFailure as err:
                result.failure = err
            result.examples += cls.stats.pop("examples")
            result.calls += cls.stats.pop("calls")
            for event, count in cls.stats.items():
                result.events[event] = result.events.get(event, 0) + count
            if result.failure is not None:
                return result
    return result
