"""One entry of the divergence registry (:mod:`.divergences`): a recorded difference between a
real allocator and the contract (SPEC.md), the rule it switches off and its minimal sequence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KnownDivergence:
    """One recorded difference between a real allocator and the contract (SPEC.md)."""

    id: str
    # "sglang-token", "sglang-paged", "sglang-swa", "sglang-unified", "sglang-mamba-slot",
    # "sglang" (every "sglang-*" target), "vllm",
    # "kvcached-token", "kvcached-paged" or "kvcached" (both)
    target: str
    clause: str
    excludes: tuple[str, Any]  # (Capabilities field, value that switches the rule off)
    reason: str
    pointer: str
    reported: tuple[str, ...] = ()  # clauses an oracle report names when the rule is re-enabled
    # the shortest call sequence that shows it, one call per line in the target's own API
    # (``a = alloc.alloc(4)``); a test replays it where the target can be built here
    sequence: str = ""

    def reported_clauses(self) -> tuple[str, ...]:
        return (self.clause, *self.reported)

    def applies_to(self, target: str) -> bool:
        family = self.target in ("sglang", "kvcached") and target.startswith(f"{self.target}-")
        return self.target == target or family
