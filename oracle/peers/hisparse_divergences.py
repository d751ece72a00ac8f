"""The divergence registry's entries for SGLang 0.5.23's ``HiSparseTokenToKVPoolAllocator``
(target ``sglang-hisparse``, the HiSparse family; clauses ``HSP-*``, SPEC.md section 20), part
of :data:`kvpool.oracle.peers.divergences.REGISTRY`."""

from __future__ import annotations

from .known_divergence import KnownDivergence

HISPARSE_DIVERGENCES: tuple[KnownDivergence, ...] = (
    KnownDivergence("SGL-HSP-UNCHECKED", "sglang-hisparse", "HSP-8", ("checked", False),
        "HiSparseTokenToKVPoolAllocator checks no caller error before it acts: free of a slot "
        "already free releases its pages a second time and only then asserts "
        "available_size() <= size (AssertionError, the state changed); alloc at page size > 1 "
        "raises NotImplementedError; alloc_device_buffer asserts need_size % page_size == 0 "
        "and a device shortage after it has unbound the request's slots; "
        "free_hisparse_indices frees any device slot; a last_loc past the mapping raises "
        "IndexError. No ContractViolation exists in SGLang.",
        "sglang/srt/mem_cache/allocator/hisparse.py@0.5.23 free, alloc, alloc_device_buffer, "
        "free_hisparse_indices",
        ("HSP-4", "HSP-5", "HSP-7", "HSP-9", "HSP-10", "ERR-1"),
        sequence='a = make("sglang-hisparse", size=8, page_size=1, ratio=2)\n'
        "x = a.alloc(2)\na.free(x)\n"
        "with raises(AssertionError):  # noticed after the pages went back a second time\n"
        "    a.free(x)\n"
        "assert a.logical_attn_allocator.get_all_free_pages().tolist()[:4] == [1, 2, 1, 2]",
    ),
    KnownDivergence("SGL-HSP-DECODE-PS1", "sglang-hisparse", "HSP-6", ("decode_ps1", False),
        "alloc_decode at page size 1 goes to the logical PagedTokenToKVPoolAllocator, whose "
        "CPU path counts no new page when every request opens one ((seq - 1) % 1 == 0) and "
        "hands out last_loc + 1, a slot another request may hold (SGL-DECODE-PS1 of the "
        "single pool). The scheduler decodes HiSparse models at page size > 1; the target is "
        "run with alloc_logical_only in place of alloc_decode at page size 1.",
        "sglang/srt/mem_cache/allocator/paged.py@0.5.23 alloc_decode, alloc_decode_naive",
        sequence='a = make("sglang-hisparse", size=8, page_size=1, ratio=2)\n'
        "x, y = a.alloc(2), a.alloc(1)\n"
        "d = a.alloc_decode(t([3]), t([3]), t([2]))\n"
        "assert d.tolist() == y.tolist() == [3]  # slot 3 handed out twice",
    ),
    KnownDivergence("SGL-HSP-DSV4-DECODE-LEAK", "sglang-hisparse-dsv4", "HSP-14",
        ("atomic_decode", False),
        "DeepSeekV4HiSparseTokenToKVPoolAllocator.alloc_decode is its logical "
        "SWATokenToKVPoolAllocator's, which has no capacity pre-check (SGL-SWA-DECODE-LEAK): "
        "when the full side is out of pages the SWA side still takes one and keeps it, the "
        "call returns None. The scheduler checks capacity before a decode; the target is "
        "sent no decode while a logical side lacks a page.",
        "sglang/srt/mem_cache/allocator/hisparse.py@0.5.23 "
        "DeepSeekV4HiSparseTokenToKVPoolAllocator.alloc_decode; swa.py alloc_decode",
        ("HSP-12", "HSP-13"),
        sequence='a = make("sglang-hisparse-dsv4", size=12, size_swa=16, page_size=4,\n'
        "         size_hisparse=2, hisparse_page_size=1, c4_logical_size=4)\n"
        "a.alloc_extend(t([0, 0]), t([0, 0]), t([1, 5]), t([1, 5]), t([-1, -1]), 6)\n"
        "assert a.alloc_decode(t([5]), t([5]), t([7])) is None\n"
        "assert a.swa_available_size() == 0  # the SWA side kept the page it took",
    ),
)
