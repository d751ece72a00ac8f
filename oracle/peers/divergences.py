"""The one registry of known divergences of real allocators from the contract (SPEC.md).

Each entry names the target it applies to, the clause it breaks, why, and where the behaviour
comes from. A target's capability declaration switches off exactly the rules its entries name
(``excludes``: a ``Capabilities`` field and the value it takes); everything else must conform.
``tests/oracle/test_oracle_peers.py`` re-enables each entry and checks that the oracle finds the
divergence with the registered clause, so the registry cannot drift from the behaviour.
"""

from __future__ import annotations

from .hisparse_divergences import HISPARSE_DIVERGENCES
from .known_divergence import KnownDivergence
from .mamba_divergences import MAMBA_SLOT_DIVERGENCES
from .page_interleave_divergences import PAGE_INTERLEAVE_DIVERGENCES
from .pure_swa_divergences import PURE_SWA_DIVERGENCES
from .unified_mamba_divergences import UNIFIED_MAMBA_DIVERGENCES

REGISTRY: tuple[KnownDivergence, ...] = (
    KnownDivergence(
        "SGL-UNCHECKED",
        "sglang",
        "ERR-1",
        ("checked", False),
        "Caller errors are accepted silently: double free, slot 0, out-of-range ids, unaligned "
        "alloc (floored), broken last_loc; asserts only under SGLANG_DEBUG_MEMORY_POOL, after "
        "the state changed. No ContractViolation exists in SGLang. Found by re-enabling the "
        "rule: paged alloc(-4) at page size 4 returns every free page but one (free_pages[:-1]).",
        "sglang/srt/mem_cache/allocator/{token,paged}.py@0.5.23; SPEC.md §14 bugs B2, B7",
        sequence=(
            'alloc = make("sglang-paged", size=16, page_size=4)\n'
            'slots = alloc.alloc(-4)  # a negative size is not refused\n'
            'assert len(slots) == 12  # every free page but one'
        ),
    ),
    KnownDivergence(
        "SGL-SEG-DISJOINT",
        "sglang-paged",
        "SEG-5",
        ("segments", "disjoint"),
        "free_segment asserts a page-aligned start_pos and free_segments asserts that consecutive "
        "segments share no page (_page_disjoint), so touching segments with a shared boundary "
        "page (legal under SEG-5) raise AssertionError.",
        "sglang/srt/mem_cache/allocator/base.py@0.5.23 _page_disjoint; PR #37729; issue #38981 "
        "(SPEC.md §14 bug B17(c)). At page size 1 (the token class) segments never "
        "share a page, so the token allocator keeps the SEG-5 rule.",
        ("SEG-2",),
        sequence=(
            'alloc = make("sglang-paged", size=32, page_size=4)\n'
            "row = alloc.alloc(8)  # one request's kv row: two pages\n"
            "# legal under SEG-5: the two segments share the row's second page\n"
            'with raises(AssertionError):\n'
            '    alloc.free_segments([(row[:6], 0), (row[6:], 6)])'
        ),
    ),
    KnownDivergence(
        "SGL-HOOKS-IMPORT",
        "sglang",
        "CAP-1",
        ("capacity_hooks", False),
        "Not a contract difference: the hooks import sglang.srt.mem_cache.base_prefix_cache, "
        "whose imports need packages a CPU peer environment lacks (pydantic, torchvision), so "
        "they raise ModuleNotFoundError before any change; once SGLang's runtime is loaded "
        "(load_sglang_runtime) they work and conform (peers.sequences.shows_here).",
        "sglang/srt/mem_cache/allocator/base.py@0.5.23 evict_to_free_tokens (local import of "
        "EvictParams); oracle/peers/peer_import.py PLACEHOLDER_NAMES",
        ("CAP-2",),
        sequence=(
            'alloc = make("sglang-token", size=8)\n'
            "with raises(ModuleNotFoundError):  # the hook's local import, before any change\n"
            '    alloc.evict_to_free_tokens(None, 1)'
        ),
    ),
    KnownDivergence(
        "SGL-DECODE-PS1",
        "sglang-paged",
        "DECODE-6",
        ("page_sizes", (4, 16)),
        "PagedTokenToKVPoolAllocator.alloc_decode at page_size 1 counts new pages as "
        "seq % ps == 1 (never true), consumes no page and returns last_loc + 1, which stays in "
        "the free list. SGLang uses TokenToKVPoolAllocator for page size 1, so the paged "
        "target is run at page sizes > 1 only.",
        "sglang/srt/utils/common.py get_num_new_pages(decode=True)@0.5.23; "
        "SPEC.md §14 (DECODE-4 row)",
        ("DECODE-4", "DECODE-5", "DECODE-7", "INV-1", "INV-2", "INV-4"),
        sequence=(
            'alloc = make("sglang-paged", size=16, page_size=1)\n'
            'slot = alloc.alloc(1)\n'
            'new = alloc.alloc_decode(seq_lens=t([2]), seq_lens_cpu=t([2]), last_loc=slot)\n'
            'assert alloc.available_size() == 15  # no page was taken for new\n'
            'assert alloc.alloc(1).tolist() == new.tolist()  # so it is handed out twice'
        ),
    ),
    KnownDivergence(
        "SGL-RESIZE-PS1",
        "sglang-paged",
        "LIFE-2",
        ("page_sizes", (4, 16)),
        "BaseTokenToKVPoolAllocator.resize updates num_pages only when page_size > 1, so a "
        "paged allocator at page size 1 keeps its old page count: after resize to fewer tokens "
        "available_size() reports the old size (INV-4). Page size 1 is the token class's job.",
        "sglang/srt/mem_cache/allocator/base.py@0.5.23 resize ('if self.page_size > 1')",
        ("INV-4", "INV-1", "LIFE-1"),
        sequence=(
            'alloc = make("sglang-paged", size=16, page_size=1)\n'
            'alloc.resize(SimpleNamespace(max_total_num_tokens=8))\n'
            'assert alloc.available_size() == 16  # the old page count'
        ),
    ),
    KnownDivergence(
        "SGL-SWA-UNCHECKED",
        "sglang-swa",
        "SWA-11",
        ("checked", False),
        "Hybrid caller errors are accepted silently (the expect() checks run only under "
        "SGLANG_INVARIANT_CHECK): at page size 1 a second free_swa of a slot releases the "
        "padding slot 0 into the SWA pool (free list [..., 1, 0], available_size() == size "
        "while a slot is held); free_swa_segment of a page whose peer is gone releases SWA "
        "page 0 (B13, the fix PR #38519 is not in 0.5.23); free_full of a live pair frees the "
        "full page and strands its SWA page (SWA-12); translating a freed slot answers 0.",
        "sglang/srt/mem_cache/allocator/swa.py@0.5.23 _free_swa_pages_none_cuda, free_full "
        "(_SWA_PEER_MAPPED / _SWA_PEER_RELEASED); SPEC.md §14 bug B13",
        ("SWA-12", "SWA-16", "SWA-8", "ERR-1"),
        sequence=(
            'alloc = make("sglang-swa", size=16, size_swa=8, page_size=1)\n'
            'slots = alloc.alloc(2)\n'
            'alloc.free_swa(slots[:1])\n'
            'alloc.free_swa(slots[:1])  # accepted: releases the padding slot 0 into the SWA pool\n'
            'assert alloc.swa_available_size() == 8  # the whole SWA pool, while a slot is held'
        ),
    ),
    KnownDivergence(
        "SGL-SWA-DECODE-LEAK",
        "sglang-swa",
        "SWA-9",
        ("atomic_decode", False),
        "SWATokenToKVPoolAllocator.alloc_decode has no capacity pre-check: the full side "
        "allocates first, and when the SWA side then returns None the composite returns None "
        "while the full side keeps its new pages (they leak: full_available_size() drops and "
        "no slot is returned). alloc_extend pre-checks both sides; alloc_decode does not.",
        "sglang/srt/mem_cache/allocator/swa.py@0.5.23 alloc_decode; PR #35338 (SPEC.md §14 "
        "bug B14)",
        ("INV-1", "SWA-5"),
        sequence=(
            'alloc = make("sglang-swa", size=32, size_swa=8, page_size=4)\n'
            'row = alloc.alloc_extend(prefix_lens=t([0]), prefix_lens_cpu=t([0]),\n'
            '                         seq_lens=t([8]), seq_lens_cpu=t([8]),\n'
            '                         last_loc=t([-1]), extend_num_tokens=8)\n'
            'assert alloc.full_available_size() == 24 and alloc.swa_available_size() == 0\n'
            'new = alloc.alloc_decode(seq_lens=t([9]), seq_lens_cpu=t([9]), last_loc=row[-1:])\n'
            'assert new is None\n'
            'assert alloc.full_available_size() == 20  # a full page taken, no slot returned'
        ),
    ),
    KnownDivergence(
        "SGL-SWA-RESIZE-GROW",
        "sglang-swa",
        "SWA-18",
        ("resize_grow", False),
        "resize() sets both sides' sizes but keeps full_to_swa_index_mapping, sized for the "
        "constructor's full pool: after growing the full pool, slots past the old size are "
        "paired into the trailing -1 entry or out of range, so their pairs are lost (or the "
        "pairing raises IndexError) and translate(-1) no longer reads -1.",
        "sglang/srt/mem_cache/allocator/swa.py@0.5.23 resize / clear (mapping[:-1].fill_(0) "
        "on the constructor's tensor)",
        ("SWA-2", "SWA-1", "ERR-1", "SWA-6", "SWA-7", "SWA-9", "SWA-16"),
        sequence=(
            'alloc = make("sglang-swa", size=16, size_swa=8, page_size=1)\n'
            'config = SimpleNamespace(full_max_total_num_tokens=32, swa_max_total_num_tokens=8)\n'
            'alloc.resize(config)\n'
            'for _ in range(2):  # 16 full slots, their SWA peers released\n'
            '    alloc.free_swa(alloc.alloc(8))\n'
            "# the pairing table still has the constructor's 16 + 2 entries\n"
            'with raises(IndexError):\n'
            '    alloc.alloc(8)'
        ),
    ),
    KnownDivergence(
        "SGL-SWA-SEG-DISJOINT",
        "sglang-swa",
        "SEG-5",
        ("segments", "disjoint"),
        "free_swa_segment and the full side's free_segment assert a page-aligned start_pos, and "
        "free_segments asserts page-disjoint segments (_page_disjoint), as for the single "
        "pools (SGL-SEG-DISJOINT).",
        "sglang/srt/mem_cache/allocator/swa.py@0.5.23 _free_swa_pages; base.py _page_disjoint",
        ("ERR-1", "SWA-14"),
        sequence=(
            'alloc = make("sglang-swa", size=32, size_swa=32, page_size=4)\n'
            'row = alloc.alloc_extend(prefix_lens=t([0]), prefix_lens_cpu=t([0]),\n'
            '                         seq_lens=t([8]), seq_lens_cpu=t([8]),\n'
            '                         last_loc=t([-1]), extend_num_tokens=8)\n'
            "# legal under SEG-5: the two segments share the row's second page\n"
            'with raises(AssertionError):\n'
            '    alloc.free_segments([(row[:6], 0), (row[6:], 6)])'
        ),
    ),
    KnownDivergence(
        "SGL-CENSUS-ALIAS",
        "sglang-token",
        "ALIAS-3",
        ("ownership", False),
        "BaseTokenToKVPoolAllocator.get_all_free_pages() returns self.free_pages itself when "
        "nothing is staged, so a caller that writes into the census it received rewrites the "
        "token free list (the next alloc hands out the written values): found by the ownership "
        "probe, which writes -1 into every census it reads. The paged class builds a new tensor "
        "(torch.cat) and keeps the rule. The probes of the token target are switched off "
        "together (inputs included; one capability).",
        "sglang/srt/mem_cache/allocator/base.py@0.5.23 get_all_free_pages",
        sequence=(
            'alloc = make("sglang-token", size=8)\n'
            'census = alloc.get_all_free_pages()\n'
            'census[:] = -1  # the caller writes into the census it received\n'
            'assert alloc.alloc(2).tolist() == [-1, -1]'
        ),
    ),
    KnownDivergence(
        "SGL-PAGE-IDS-ALIAS",
        "sglang-paged",
        "ALIAS-2",
        ("page_ids", False),
        "PagedTokenToKVPoolAllocator.free_page_ids under need_sort stages the caller's tensor "
        "itself (staged_pages.extend((page_ids,))), so a caller that reuses its tensor after "
        "the call rewrites the staged pages (the next merge hands out what it wrote, e.g. "
        "page 0): found by the ownership probe, which writes 0 into every tensor passed to a "
        "free. Without need_sort the pages are copied by torch.cat, inside a group by "
        "_copy_for_free_group. free_page_ids is switched off for the paged target (one "
        "capability); free / free_segments keep their probes.",
        "sglang/srt/mem_cache/allocator/paged.py@0.5.23 free_page_ids, _release_page_ids "
        "(lines 359-380)",
        sequence=(
            'alloc = make("sglang-paged", size=16, page_size=4, need_sort=True)\n'
            'pages = alloc.alloc(4)[::4] // 4\n'
            'alloc.free_page_ids(pages)\n'
            'pages[:] = 0  # the caller reuses its tensor\n'
            'alloc.merge_and_sort_free()\n'
            'assert alloc.alloc(4).tolist() == [0, 1, 2, 3]  # the padding page'
        ),
    ),
    KnownDivergence("SGL-UNI-DECODE-PS1", "sglang-unified", "UNI-8", ("decode_ps1", False),
        "alloc_decode at page size 1 counts new pages as seq % 1 == 1 (never true): it binds "
        "nothing and returns last_loc + 1, still free. The scheduler decodes by alloc there.",
        "sglang/srt/mem_cache/allocator/unified_hybrid_swa.py@0.5.23 alloc_decode",
        ("UNI-10", "UNI-11", "UNI-7", "DATA-1", "DATA-2"),
        sequence='a = make("sglang-unified-swa", total_bytes=1024, page_size=1, lazy=False)\n'
        "row = a.alloc(3)\nassert a.alloc_decode(t([4]), t([4]), row[-1:]).tolist() == [4]\n"
        "assert 4 in a.full_attn_allocator.free_virtual_ids.tolist()  # still free",
    ),
    KnownDivergence("SGL-UNI-UNCHECKED", "sglang-unified", "UNI-11", ("checked", False),
        "Caller errors are not rejected: a freed id translates to 0 (the sink row); a second "
        "free of a page is accepted (lazy) or raises AssertionError (eager), not a typed error.",
        "sglang/srt/mem_cache/allocator/unified_sub_pool.py@0.5.23 free", ("ERR-1",),
        sequence='a = make("sglang-unified-swa", total_bytes=1024, page_size=1, lazy=False)\n'
        "row = a.alloc(2)\na.free(row[:1])\n"
        "assert a.translate_kv_indices_for_transfer(row[:1]).tolist() == [0]  # no error",
    ),
    KnownDivergence("SGL-UNI-CENSUS", "sglang-unified", "UNI-13", ("census_tables", False),
        "verify_byte_accounting() checks frontiers, spans and memos only: it stays empty with "
        "a page freed twice (lazy: page -1 among the holes) and with a stale v2p entry.",
        "sglang/srt/mem_cache/allocator/unified_sub_pool.py@0.5.23 _byte_accounting_violations",
        sequence='a = make("sglang-unified-swa", total_bytes=1024, page_size=1, lazy=True)\n'
        "row = a.alloc(3)\na.free(row[:1])\na.free(row[:1])  # accepted\n"
        "assert a.verify_byte_accounting() == []\nv2p = a.full_attn_allocator.virtual_to_physical\n"
        "v2p[int(row[1])] = v2p[int(row[2])]\nassert a.verify_byte_accounting() == []",
    ),
    KnownDivergence("SGL-UNI-FREE-ORDER", "sglang-unified", "UNI-10", ("free_any_order", False),
        "Lazy compaction at page size 1: free appends the virtual ids in the caller's order, "
        "not ascending (no unique/sort when token == page), so later allocations differ.",
        "sglang/srt/mem_cache/allocator/unified_sub_pool.py@0.5.23 _free_lazy", ("UNI-8",),
        sequence='a = make("sglang-unified-swa", total_bytes=1024, page_size=1, lazy=True)\n'
        "row = a.alloc(3)\na.free(row.flip(0))\n"
        "assert a.full_attn_allocator.free_virtual_ids[-3:].tolist() == [3, 2, 1]",
    ),
    *MAMBA_SLOT_DIVERGENCES,
    *HISPARSE_DIVERGENCES,
    *PURE_SWA_DIVERGENCES,
    *UNIFIED_MAMBA_DIVERGENCES,
    *PAGE_INTERLEAVE_DIVERGENCES,
    KnownDivergence(
        "VLLM-UNCHECKED",
        "vllm",
        "ERR-1",
        ("checked", False),
        "BlockPool validates nothing a caller passes: free_blocks of a block that is already "
        "free drops its ref_cnt below zero and leaves the queue as it is, the null block (page 0) "
        "is skipped silently; only get_new_blocks raises (ValueError) when too few are free, "
        "which the adapter turns into None after asking get_num_free_blocks, as vLLM's "
        "scheduler does. No ContractViolation exists in vLLM.",
        "vllm/v1/core/block_pool.py@0.33.0 BlockPool.free_blocks, get_new_blocks; "
        "oracle/peers/adapters.py",
        sequence=(
            'alloc = make("vllm", size=16, page_size=4)\n'
            'slots = alloc.alloc(4)\n'
            'alloc.free(slots)\n'
            "alloc.free(slots)  # accepted: the block's ref_cnt drops to -1\n"
            'with raises(AssertionError):  # noticed only by the next allocation\n'
            '    alloc.alloc(4)'
        ),
    ),
    KnownDivergence(
        "VLLM-ORDER",
        "vllm",
        "FREE-5",
        ("reference_order", False),
        "Not a contract difference: free_blocks prepends the released blocks in the order "
        "given (LIFO reuse, eviction order chosen by the caller), where SGLang prepends the "
        "sorted distinct pages; any order is conformant (contract order).",
        "vllm/v1/core/block_pool.py@0.33.0 free_blocks (free_block_queue.prepend_n)",
        ("ALLOC-5", "EXTEND-7", "DECODE-7", "LIFE-4"),
        sequence=(
            'alloc = make("vllm", size=16, page_size=4)\n'
            'a, b = alloc.alloc(4), alloc.alloc(4)\n'
            'alloc.free(torch.cat([b, a]))\n'
            "assert alloc.alloc(4).tolist() == b.tolist()  # SGLang's order: a (sorted) first"
        ),
    ),
    KnownDivergence(
        "KVC-UNCHECKED",
        "kvcached",
        "ERR-1",
        ("checked", False),
        "Caller errors are not rejected: alloc(-n) is taken as a request for nothing (the "
        "manager's 'available_size() < need_size' test passes and its loop never runs) and "
        "returns an empty tensor; frees are passed to KVCacheManager.free, which checks nothing "
        "unless KVCACHED_SANITY_CHECK is set (a page it does not know is logged and skipped). "
        "No ContractViolation exists in kvcached.",
        "kvcached/kv_cache_manager.py@0.1.6 KVCacheManager._alloc, free (SANITY_CHECK); "
        "kvcached/integration/sglang/patches.py@0.1.6 alloc",
        sequence=(
            'alloc = make("kvcached-token", size=8)\n'
            'assert alloc.alloc(-2).numel() == 0  # a negative size is not refused\n'
            'assert alloc.available_size() == 8'
        ),
    ),
    KnownDivergence(
        "KVC-SHORT-RAISES",
        "kvcached-token",
        "ALLOC-3",
        ("shortage_raises", (TypeError,)),
        "A shortage raises TypeError instead of returning None: KVCacheManager.alloc answers "
        "None when fewer blocks are free than asked, and ElasticTokenToKVPoolAllocator.alloc "
        "passes that None to torch.tensor (minimal trace: create(size=8), alloc(9)). Nothing "
        "is taken before the raise, so the declaration takes the TypeError for the None and "
        "still requires the state to be unchanged. The paged class tests for None first.",
        "kvcached/integration/sglang/patches.py@0.1.6 lines 378-380 "
        "(ElasticTokenToKVPoolAllocator.alloc: torch.tensor(self.kvcached_allocator.alloc("
        "need_size))); kvcached/kv_cache_manager.py@0.1.6 lines 446-450 (_alloc returns None); "
        "the paged class's alloc, patches.py lines 492-496, returns None",
        sequence=(
            'alloc = make("kvcached-token", size=8)\n'
            'with raises(TypeError):  # a shortage should return None\n'
            '    alloc.alloc(9)\n'
            'assert alloc.available_size() == 8  # nothing was taken'
        ),
    ),
    KnownDivergence(
        "KVC-ORDER",
        "kvcached-paged",
        "FREE-5",
        ("reference_order", False),
        "Not a contract difference: KVCacheManager hands out blocks best-fit from its mapped "
        "pages, then from the front of the physical free-page list, and free() returns emptied "
        "pages to its back (FIFO reuse), where SGLang prepends sorted pages; any order is "
        "conformant (contract order). The token class (one block per physical page here) "
        "hands out and takes back in SGLang's exact order.",
        "kvcached/kv_cache_manager.py@0.1.6 _alloc, _pick_avail_page, free; "
        "csrc/page_allocator.cpp@0.1.6 PageAllocator::alloc_page, free_pages",
        ("ALLOC-5", "EXTEND-7", "DECODE-7", "LIFE-4", "GROUP-4"),
        sequence=(
            'alloc = make("kvcached-paged", size=64, page_size=4)\n'
            'a, b = alloc.alloc(4), alloc.alloc(4)\n'
            'alloc.free(a)\n'
            'assert alloc.alloc(4).tolist() != a.tolist()  # FIFO reuse; SGLang hands out a again'
        ),
    ),
)


def divergences_for(target: str) -> list[KnownDivergence]:
    """The registry entries that apply to ``target`` (e.g. ``"sglang-paged"``)."""
    return [d for d in REGISTRY if d.applies_to(target)]

