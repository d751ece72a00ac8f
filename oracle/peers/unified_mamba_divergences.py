"""The divergence registry's entries for SGLang 0.5.23's ``UnifiedMambaTokenToKVPoolAllocator``
(target ``sglang-unified-mamba``, the unified_mamba family; clauses ``UMB-*``, SPEC.md section
21), part of :data:`kvpool.oracle.peers.divergences.REGISTRY`."""

from __future__ import annotations

from .known_divergence import KnownDivergence

_MAKE = 'a = make("sglang-unified-mamba", total_bytes=2432, page_size=1, lazy={lazy})\n'

UNIFIED_MAMBA_DIVERGENCES: tuple[KnownDivergence, ...] = (
    KnownDivergence("SGL-UMB-UNCHECKED", "sglang-unified-mamba", "UMB-8", ("checked", False),
        "Caller errors are not rejected with a typed error: a freed full id translates to 0 "
        "(the sink row); a second free of a page is accepted (lazy) or raises AssertionError "
        "(eager); a second free of a state slot is accepted under lazy compaction (the state "
        "view then counts it twice) and raises AssertionError under eager.",
        "sglang/srt/mem_cache/allocator/unified_sub_pool.py@0.5.23 free, _free_lazy",
        ("ERR-1",),
        sequence=_MAKE.format(lazy=True) + "row = a.alloc(2)\na.free(row[:1])\n"
        "assert a.translate_kv_indices_for_transfer(row[:1]).tolist() == [0]  # no error\n"
        "s = a.mamba_allocator.alloc(1)\nbefore = a.mamba_allocator.available_size()\n"
        "a.mamba_allocator.free(s)\na.mamba_allocator.free(s)  # accepted\n"
        "assert a.mamba_allocator.available_size() == before + 2",
    ),
    KnownDivergence("SGL-UMB-DECODE-PS1", "sglang-unified-mamba", "UMB-2", ("decode_ps1", False),
        "alloc_decode at page size 1 (the full end's MultiEndedAllocator) counts new pages as "
        "seq % 1 == 1 (never true): it binds nothing and returns last_loc + 1, still free. The "
        "scheduler decodes by alloc there.",
        "sglang/srt/mem_cache/allocator/unified_sub_pool.py@0.5.23 alloc_decode",
        ("UMB-3", "UMB-7"),
        sequence=_MAKE.format(lazy=False) + "row = a.alloc(3)\n"
        "out = a.alloc_decode(t([4]), t([4]), row[-1:])\n"
        "assert out.tolist() == [row[-1].item() + 1]  # not bound\n"
        "assert not a.full_attn_allocator.is_slot_allocated(out.item())",
    ),
    KnownDivergence("SGL-UMB-CENSUS", "sglang-unified-mamba", "UMB-8", ("census_tables", False),
        "verify_byte_accounting() checks frontiers, spans and memos only: it stays empty with a "
        "live full virtual page bound to another live page's physical page (two pages, one "
        "set of bytes). It does report the state end's frontier crossing full's.",
        "sglang/srt/mem_cache/allocator/unified_sub_pool.py@0.5.23 "
        "_chain_byte_accounting_violations",
        sequence=_MAKE.format(lazy=False) + "a.alloc(2)\n"
        "v2p = a.full_attn_allocator.virtual_to_physical\n"
        "live = [v for v, p in enumerate(v2p.tolist()[1:-1], start=1) if p >= 0]\n"
        "v2p[live[0]] = v2p[live[1]]  # two live pages, one physical page\n"
        "assert a.verify_byte_accounting() == []",
    ),
)
