"""The divergence registry's entries for SGLang 0.5.23's ``PureSWATokenToKVPoolAllocator``
(target ``sglang-pure-swa``, the hybrid family's pure variant; clauses ``SWA-21..25``, SPEC.md
section 15), part of :data:`kvpool.oracle.peers.divergences.REGISTRY`."""

from __future__ import annotations

from .known_divergence import KnownDivergence

PURE_SWA_DIVERGENCES: tuple[KnownDivergence, ...] = (
    KnownDivergence("SGL-PURE-SWA-UNCHECKED", "sglang-pure-swa", "SWA-11", ("checked", False),
        "PureSWATokenToKVPoolAllocator checks no caller error: a slot released by free_swa and "
        "named again by free() is appended to the free list a second time (a double free; "
        "available_size() then counts a held slot as free); free() drops slot 0 silently; "
        "translating a free slot answers the slot; resize() to unequal full and SWA sizes is "
        "accepted (the pool takes the SWA size, size_full reports the other).",
        "sglang/srt/mem_cache/allocator/swa.py@0.5.23 PureSWATokenToKVPoolAllocator.free, "
        "free_swa, translate_loc_from_full_to_swa; SWATokenToKVPoolAllocator.resize",
        ("SWA-16", "SWA-25", "ERR-1"),
        sequence='a = make("sglang-pure-swa", size=4, size_swa=4, page_size=1)\n'
        "slots = a.alloc(2)\n"
        "a.free_swa(slots[:1])  # the window slid: slot 1 is free\n"
        "a.free(slots[:1])  # accepted: slot 1 is listed free twice\n"
        "assert a.swa_attn_allocator.free_pages.tolist()[-2:] == [1, 1]\n"
        "assert a.available_size() == 4  # the whole pool, while slot 2 is held",
    ),
    KnownDivergence("SGL-PURE-SWA-RESIZE-GROW", "sglang-pure-swa", "SWA-25",
        ("resize_grow", False),
        "resize() sets the pool's size but keeps full_to_swa_index_mapping, the constructor's "
        "identity of size + 2 entries: after growing the pool, slots past the old size have no "
        "entry in the mapping the KV pool registered (the attention kernels read it), although "
        "translate_loc_from_full_to_swa() still answers them (it returns its input).",
        "sglang/srt/mem_cache/allocator/swa.py@0.5.23 SWATokenToKVPoolAllocator.resize, "
        "PureSWATokenToKVPoolAllocator.__init__ / clear (the mapping is built once)",
        ("SWA-22",),
        sequence='a = make("sglang-pure-swa", size=4, size_swa=4, page_size=1)\n'
        "a.resize(SimpleNamespace(full_max_total_num_tokens=8, swa_max_total_num_tokens=8))\n"
        "assert a.available_size() == 8\n"
        "assert a.full_to_swa_index_mapping.tolist() == [0, 1, 2, 3, 4, -1]  # not up to 8",
    ),
)
