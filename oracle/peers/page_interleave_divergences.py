"""The divergence registry's entries for SGLang 0.5.23's ``PageInterleavePoolAllocator``
(target ``sglang-page-interleave``, the page_interleave family; clauses ``PINTER-*``, SPEC.md
section 19), part of :data:`kvpool.oracle.peers.divergences.REGISTRY`."""

from __future__ import annotations

from .known_divergence import KnownDivergence

PAGE_INTERLEAVE_DIVERGENCES: tuple[KnownDivergence, ...] = (
    KnownDivergence("SGL-PINTER-UNCHECKED", "sglang-page-interleave", "PINTER-11",
        ("checked", False),
        "PageInterleavePoolAllocator checks no caller error outside SGLANG_DEBUG_MEMORY_POOL: "
        "free() lists any page (a double free, a reserved page 0..N-1, a page past the pool, a "
        "page already freed inside the open group) in its owner's class; a prefix that is not "
        "page-aligned or an extension that opens no page fails a bare assert; nested free "
        "groups fail the base's assert. No ContractViolation exists in SGLang.",
        "sglang/srt/mem_cache/allocator/page_interleave.py@0.5.23 free, alloc_extend; "
        "base.py free_group_begin",
        ("ERR-1",),
        sequence='a = make("sglang-page-interleave", size=2, page_size=1, shard_size=2)\n'
        "a.free(t([2]))  # page 2 is free: accepted\n"
        "assert a.class_free_pages[0].tolist() == [2, 2, 4]  # listed twice\n"
        "a.free(t([1]))  # page 1 is reserved (rank 1's padding page): accepted\n"
        "assert a.class_free_pages[1].tolist() == [1, 3, 5]",
    ),
)
