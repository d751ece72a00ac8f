"""Run the hybrid family over a target's page sizes and ``need_sort`` values.

``run_hybrid("sglang-swa")`` or ``run_hybrid(factory)``: every configuration the target's
:class:`~kvpool.oracle.families.hybrid.targets.HybridCapabilities` allow, each through the engine's
:func:`~kvpool.oracle.engine.runner.run_config` (derandomized, shrunk and minimized like any
family),
stopping at the first divergence (a :class:`~kvpool.oracle.engine.report.Failure` with its trace).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvpool.spec.wording import counted

from ...engine.report import Failure
from ...engine.runner import Result, run_config
from ...engine.target import Config, Target
from .machine import FAMILY
from .targets import HYBRID_TARGETS, HybridCapabilities


@dataclass
class HybridResult:
    """What one hybrid run found: its per-configuration results, summed."""

    target: str
    results: list[Result] = field(default_factory=list)

    @property
    def configs(self) -> list[tuple[int, bool]]:
        return [(r.config.page_size, r.config.need_sort) for r in self.results]

    @property
    def examples(self) -> int:
        return sum(r.examples for r in self.results)

    @property
    def calls(self) -> int:
        return sum(r.calls for r in self.results)

    @property
    def events(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for r in self.results:
            out.update(r.coverage)
        return out

    @property
    def failure(self) -> Failure | None:
        return next((r.failure for r in self.results if r.failure is not None), None)

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)

    def summary(self) -> str:
        reached = ", ".join(f"{k} {v}" for k, v in sorted(self.events.items()))
        bad = next((r for r in self.results if not r.ok), None)
        status = "ok" if self.ok else (bad.status() if bad else "NO CALLS")
        return (f"{self.target}: {status}; {counted(len(self.results), 'configuration')}, "
                f"{counted(self.examples, 'example')}, {counted(self.calls, 'call')}; "
                f"events: {reached}")


def hybrid_target(target: str | Callable[..., Any],
                  caps: HybridCapabilities | None = None) -> Target:
    """A hybrid factory (or an alias of ``HYBRID_TARGETS``) as an engine :class:`Target`."""
    factory = HYBRID_TARGETS[target] if isinstance(target, str) else target
    return FAMILY.target(factory, caps)


def run_hybrid(target: str | Callable[..., Any], *, max_examples: int = 60,
               caps: HybridCapabilities | None = None, step_count: int = 30,
               shrink_seconds: float = 5.0, seed: int | None = None) -> HybridResult:
    """Run every configuration of ``target``; stop at the first failure (shrunk, minimized)."""
    resolved = hybrid_target(target, caps)
    result = HybridResult(resolved.path)
    for page_size in resolved.caps.page_sizes:
        for need_sort in resolved.caps.need_sort:
            r = run_config(resolved, Config(page_size, need_sort), max_examples=max_examples,
                           seed=seed, step_count=step_count, shrink_seconds=shrink_seconds)
            result.results.append(r)
            if not r.ok:
                return result
    return result
