"""Checked mode of kvpool's unified full + SWA pool (``UNI-11``, ``UNI-10``, ``UNI-8``).

Freeing, sliding or translating an id whose page is not live (freed, never handed out, out of
range) raises ``ContractViolation("UNI-11")``; ``free_full`` of a page whose SWA side is bound
``UNI-10``; a rejected call leaves everything as it was (tables, free ids, views, census, bytes).
A pool that does not check (``checked=False`` subclass forced on) fails these tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from kvpool.impl.unified_swa import UnifiedSWAAllocator
from kvpool.spec.errors import ContractViolation
from kvpool.spec.unified_state import PLANTABLE

Call = Callable[[UnifiedSWAAllocator, torch.Tensor], Any]
CALLS: list[tuple[str, Call]] = [
    ("free", lambda a, x: a.free(x)),
    ("free_swa", lambda a, x: a.free_swa(x)),
    ("free_full", lambda a, x: a.free_full(x)),
    ("free_segment", lambda a, x: a.free_segment(x, start_pos=0)),
    ("translate_full", lambda a, x: a.translate_kv_indices_for_transfer(x)),
    ("translate_swa", lambda a, x: a.translate_loc_from_full_to_swa(x)),
]


def snapshot(a: UnifiedSWAAllocator) -> tuple[Any, ...]:
    return (a.unified_state(), a.available_size(), a.full_available_size(),
            a.swa_available_size(), a.store.raw.clone().tolist())


def state_with_a_freed_page(cls: type, lazy: bool) -> tuple[UnifiedSWAAllocator, torch.Tensor]:
    a = cls(64 * 4 * 32, 4, lazy=lazy)
    first, second = a.alloc(8), a.alloc(8)
    assert first is not None and second is not None
    a.free(first)
    return a, first


def check_rejects(cls: type, lazy: bool, name: str, call: Call, bad: str) -> None:
    a, freed = state_with_a_freed_page(cls, lazy)
    x = {"freed": freed, "never": torch.tensor([60 * 4]), "range": torch.tensor([10 ** 6]),
         "negative": torch.tensor([-4])}[bad]
    before = snapshot(a)
    with pytest.raises(ContractViolation, match="UNI-11"):
        call(a, x)
    assert snapshot(a) == before, f"{name} changed the state before raising"
    assert a.verify_byte_accounting() == []


@pytest.mark.parametrize("bad", ["freed", "never", "range", "negative"])
@pytest.mark.parametrize("name,call", CALLS)
@pytest.mark.parametrize("lazy", [False, True])
def test_a_page_not_live_is_uni_11(lazy: bool, name: str, call: Call, bad: str) -> None:
    check_rejects(UnifiedSWAAllocator, lazy, name, call, bad)


def test_free_full_of_a_bound_swa_page_is_uni_10() -> None:
    a = UnifiedSWAAllocator(64 * 4 * 32, 4, lazy=True)
    ids = a.alloc(8)
    assert ids is not None
    before = snapshot(a)
    with pytest.raises(ContractViolation, match="UNI-10"):
        a.free_full(ids)
    assert snapshot(a) == before


def test_a_mixed_free_is_rejected_whole() -> None:
    """One dead page among live ones: nothing is freed."""
    a, freed = state_with_a_freed_page(UnifiedSWAAllocator, False)
    live = torch.arange(12, 16)
    before = snapshot(a)
    with pytest.raises(ContractViolation, match="UNI-11"):
        a.free(torch.cat([live, freed[:1]]))
    assert snapshot(a) == before


def test_alloc_of_a_partial_page_is_uni_8() -> None:
    a = UnifiedSWAAllocator(64 * 4 * 32, 4)
    with pytest.raises(ContractViolation, match="UNI-8"):
        a.alloc(3)


class Unchecked(UnifiedSWAAllocator):
    """Never validates ids (checked mode switched off whatever the caller asks)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "checked": False})


@pytest.mark.parametrize("name,call", CALLS[:1] + CALLS[4:5])
def test_an_unchecked_pool_fails(name: str, call: Call) -> None:
    with pytest.raises((Exception, pytest.fail.Exception)):  # whatever way it breaks
        check_rejects(Unchecked, False, name, call, "freed")


@pytest.mark.parametrize("fault", PLANTABLE)
@pytest.mark.parametrize("lazy", [False, True])
def test_the_census_reports_each_planted_fault(lazy: bool, fault: str) -> None:
    """``verify_byte_accounting()`` is empty on a healthy pool and names the planted fault's
    clause (``UNI-13``)."""
    a = UnifiedSWAAllocator(64 * 4 * 32, 4, lazy=lazy)
    assert a.alloc(8) is not None and a.verify_byte_accounting() == []
    assert a.unified_plant(fault)
    clause = "UNI-3" if fault == "frontier_cross" else "UNI-4"
    assert any(clause in line for line in a.verify_byte_accounting())


def test_a_fault_needs_two_live_pages() -> None:
    a = UnifiedSWAAllocator(64 * 4 * 32, 4)
    assert a.alloc(4) is not None
    assert not a.unified_plant("stale_binding:full")
    assert a.verify_byte_accounting() == []
