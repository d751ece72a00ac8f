"""Deliberately broken unified full + Mamba composites: one bug each, on kvpool's
``UnifiedMambaAllocator`` (no SGLang needed), each with the one ``UMB-*`` clause the
unified_mamba family reports it under at its default budget (``BROKEN_UNIFIED_MAMBA``;
``test_oracle_unified_mamba.py`` runs them). Each has a module-level factory (its name in lower
case) that a printed repro imports."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from kvpool.impl.unified_mamba import UnifiedMambaAllocator
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import Result, run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.unified_mamba.peer import STATE_BYTES
from kvpool.oracle.families.unified_mamba.targets import FULL
from kvpool.spec import ContractViolation


class ClearKeepsFreeOrder(UnifiedMambaAllocator):
    """``clear()`` keeps the full end's free virtual ids in the order frees left them (the
    pages live before it appended after), instead of restoring the hand-out order (UMB-1)."""

    def clear(self) -> None:
        kept = [int(v) for v in getattr(self, "free_virtual", [])]
        super().clear()
        rest = [int(v) for v in self.free_virtual if int(v) not in set(kept)]
        if kept:
            self.free_virtual = np.array(kept + rest, dtype=np.int64)


class AllocHandsOutLast(UnifiedMambaAllocator):
    """``alloc(n)`` returns its token ids last first: the hand-out order is lost (UMB-2)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        out = super().alloc(need_size)
        return out.flip(0) if out is not None and out.numel() > 1 else out


class AvailableShortOnePage(UnifiedMambaAllocator):
    """``available_size()`` leaves one page out of its view when it has any (UMB-3)."""

    def available_size(self) -> int:
        got = super().available_size()
        return max(0, got - self.page_size)


class StateViewCountsOneMore(UnifiedMambaAllocator):
    """The state view (``mamba_allocator.available_size()``) counts one slot more than fits
    (UMB-4)."""

    def state_available_size(self) -> int:
        return super().state_available_size() + 1


class StateSlotsLastFirst(UnifiedMambaAllocator):
    """A state allocation returns its slot ids last first (UMB-5)."""

    def alloc_state(self, count: int = 1) -> torch.Tensor | None:
        out = super().alloc_state(count)
        return out.flip(0) if out is not None and out.numel() > 1 else out


class PrepareKeepsGroupFrees(UnifiedMambaAllocator):
    """``prepare_mamba_allocation(n)`` leaves an open free group's deferred frees queued: the
    state end cannot count the full pages they release (UMB-5)."""

    def flush_deferred_full_frees(self) -> None:
        return


class SlotCostRoundsDown(UnifiedMambaAllocator):
    """``mamba_slot_full_token_cost()`` rounds down: a state slot of 176 bytes is worth 5
    full tokens of 32, not 6 (UMB-6)."""

    def mamba_slot_full_token_cost(self) -> int:
        return self.state_bytes // self.entry_bytes


class TransferReadsNextPage(UnifiedMambaAllocator):
    """``translate_kv_indices_for_transfer`` answers the rows one physical page up (UMB-7)."""

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        rows = super().translate_kv_indices_for_transfer(kv_indices)
        return rows + self.page_size


class DoubleFreeIgnored(UnifiedMambaAllocator):
    """A free of a free id (or one named twice) is accepted silently instead of refused with
    ``ContractViolation("UMB-8")`` (UMB-8)."""

    def free(self, free_index: torch.Tensor) -> None:
        try:
            super().free(free_index)
        except ContractViolation:
            return


class CensusBlind(UnifiedMambaAllocator):
    """``verify_byte_accounting()`` reports nothing, whatever the tables hold: a state
    frontier crossing full's goes unseen (UMB-8)."""

    def verify_byte_accounting(self) -> list[str]:
        return []


class SizeCountsAPageTwice(UnifiedMambaAllocator):
    """``size`` counts the live full tokens' last page twice: the leak identity
    ``size == available_size() + live tokens`` fails once a page is live (UMB-1)."""

    @property
    def size(self) -> int:
        live = self.full.live * self.page_size
        return self.available_size() + live + (self.page_size if live else 0)


class FullMovesWithoutCopy(UnifiedMambaAllocator):
    """Compaction of the full end rebinds a moved page's virtual id without copying its bytes:
    the page copy is never issued (UMB-7)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.full.mover = lambda dst, src: None


class WriteLocOnePageUp(UnifiedMambaAllocator):
    """``translate_write_loc`` answers the rows one page up from the ones the reads use: KV is
    written where no read finds it (UMB-7)."""

    def translate_write_loc(self, loc: torch.Tensor, *, out: torch.Tensor | None = None,
                            out_width: int | None = None) -> torch.Tensor:
        return super().translate_write_loc(loc, out=None, out_width=out_width) + self.page_size


class StateShowsAStrayHole(UnifiedMambaAllocator):
    """``unified_state()`` lists, on the full end, a hole just past its frontier (outside its
    span): its own bookkeeping is inconsistent (UMB-8)."""

    def unified_state(self) -> Any:
        snap = super().unified_state()
        full = snap.sides["full"]
        stray = full.span_low - 1
        sides = {**snap.sides, "full": dataclasses.replace(full, holes=(*full.holes, stray))}
        return dataclasses.replace(snap, sides=sides)


@dataclass(frozen=True)
class BrokenUnifiedMamba:
    """A broken composite, the clause the family reports it under (``clauses``, a 1-tuple) and
    the clause its bug breaks (``cause``; the same for every one here)."""

    cls: type[UnifiedMambaAllocator]
    clauses: tuple[str, ...]
    module: str = "broken_unified_mamba"
    cause: str = ""

    def __post_init__(self) -> None:
        if not self.cause:
            object.__setattr__(self, "cause", self.clauses[0])

    @property
    def name(self) -> str:
        return self.cls.__name__.lower()

    @property
    def factory(self) -> Callable[..., Any]:
        """The module-level factory ``<module>:<name>`` (importable for repro code)."""
        return getattr(importlib.import_module(self.module), self.name)  # type: ignore[no-any-return]

    @property
    def path(self) -> str:
        return f"{self.module}:{self.name}"

    def run(self, **budget: Any) -> Result:
        """The unified_mamba family on this composite at its default budget (unless ``budget``,
        ``run_config``'s keywords, says otherwise), page sizes 1, 4, 16 in turn: the first
        failing configuration's result, else the last one's."""
        fam = family("unified_mamba")
        budget = {"max_examples": fam.default_examples, "step_count": fam.default_steps,
                  **budget}
        result: Result | None = None
        for page_size in FULL.page_sizes:
            result = run_config(fam.target(self.factory), Config(page_size, False), **budget)
            if result.failure is not None or result.error is not None:
                return result
        assert result is not None
        return result

    def reported(self, **budget: Any) -> str | None:
        """The clause the run reports (None: it passed)."""
        result = self.run(**budget)
        assert result.error is None, result.error
        return result.failure.clause if result.failure is not None else None


BROKEN_UNIFIED_MAMBA = (
    BrokenUnifiedMamba(ClearKeepsFreeOrder, ("UMB-1",)),
    BrokenUnifiedMamba(AllocHandsOutLast, ("UMB-2",)),
    BrokenUnifiedMamba(AvailableShortOnePage, ("UMB-3",)),
    BrokenUnifiedMamba(StateViewCountsOneMore, ("UMB-4",)),
    BrokenUnifiedMamba(StateSlotsLastFirst, ("UMB-5",)),
    BrokenUnifiedMamba(PrepareKeepsGroupFrees, ("UMB-5",)),
    BrokenUnifiedMamba(SlotCostRoundsDown, ("UMB-6",)),
    BrokenUnifiedMamba(TransferReadsNextPage, ("UMB-7",)),
    BrokenUnifiedMamba(DoubleFreeIgnored, ("UMB-8",)),
    BrokenUnifiedMamba(CensusBlind, ("UMB-8",)),
    BrokenUnifiedMamba(SizeCountsAPageTwice, ("UMB-1",)),
    BrokenUnifiedMamba(FullMovesWithoutCopy, ("UMB-7",)),
    BrokenUnifiedMamba(WriteLocOnePageUp, ("UMB-7",)),
    BrokenUnifiedMamba(StateShowsAStrayHole, ("UMB-8",)),
)


def _factory(cls: type[UnifiedMambaAllocator]) -> Callable[..., Any]:
    def factory(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
                need_sort: bool = False) -> Any:
        return cls(total_bytes, page_size, state_bytes=STATE_BYTES, lazy=lazy, device=device,
                   checked=True)

    factory.__name__ = factory.__qualname__ = cls.__name__.lower()
    factory.kvpool_unified_mamba_capabilities = FULL  # type: ignore[attr-defined]
    return factory


for _broken in BROKEN_UNIFIED_MAMBA:
    globals()[_broken.name] = _factory(_broken.cls)
