"""The divergence registry's entries for SGLang 0.5.23's ``MambaSlotAllocator`` (target
``sglang-mamba-slot``, the mamba-slot family; clauses ``MSLOT-*``, SPEC.md section 18), part of
:data:`kvpool.oracle.peers.divergences.REGISTRY`."""

from __future__ import annotations

from .known_divergence import KnownDivergence

MAMBA_SLOT_DIVERGENCES: tuple[KnownDivergence, ...] = (
    KnownDivergence("SGL-MAMBA-UNCHECKED", "sglang-mamba-slot", "MSLOT-6", ("checked", False),
        "MambaSlotAllocator checks no caller error: free appends any ids (a double free, slot "
        "0, ids past the end, a slot still pre-allocated to the group); alloc(-k) hands out "
        "every free slot but the last k (free_slots[:-k]); alloc_group_begin inside an open "
        "group drops that group's undrawn slots (a leak). No ContractViolation exists in SGLang.",
        "sglang/srt/mem_cache/allocator/mamba.py@0.5.23 free, _do_alloc, alloc_group_begin",
        ("MSLOT-7", "MSLOT-8", "ERR-1"),
        sequence='a = make("sglang-mamba-slot", size=4)\nslot = a.alloc(1)\na.free(slot)\n'
        "a.free(slot)  # accepted: slot 1 is listed free twice\n"
        "assert a.free_slots.tolist() == [2, 3, 4, 1, 1]\n"
        "assert a.alloc(-1).tolist() == [2, 3, 4, 1]  # a negative count is not refused",
    ),
    KnownDivergence("SGL-MAMBA-CLEAR-GROUP", "sglang-mamba-slot", "MSLOT-11",
        ("clear_in_group", False),
        "clear() resets the free list but not the open group's iterator: the next alloc(1) "
        "hands out a pre-allocated slot that clear() also listed free, and alloc_group_end() "
        "appends the undrawn slots a second time. The scheduler clears only an idle pool, so "
        "the target is run without clear() inside a group.",
        "sglang/srt/mem_cache/allocator/mamba.py@0.5.23 clear (_alloc_iter kept)",
        sequence='a = make("sglang-mamba-slot", size=4)\na.alloc_group_begin(2)\na.clear()\n'
        "assert a.alloc(1).tolist() == [1]  # drawn from the group clear() closed\n"
        "assert 1 in a.free_slots.tolist()  # and listed free as well",
    ),
)
