# Adapted from SGLang's test/registered/unit/mem_cache/test_swa_unittest.py
# (sgl-project/sglang, Copyright the SGLang Team, Apache License 2.0,
# http://www.apache.org/licenses/LICENSE-2.0). Assertions are SGLang's, unchanged.
# Adaptations, only to run on the CPU against SGLang 0.5.23's API and against both allocators:
#   - each test class runs twice, on SGLang 0.5.23's SWATokenToKVPoolAllocator and on kvpool's
#     (``SWA`` class attribute; the module-level builders became methods that read it);
#   - device "cpu" instead of get_device(); unittest.TestCase instead of CustomTestCase (whose
#     module imports SGLang's test frontend); the CI registration calls are dropped;
#   - left out, their API is newer than 0.5.23: TestFreeKvRow (4 tests; free_kv_row_segments
#     and BasePrefixCache.free_kv_row do not exist in 0.5.23) and its _SinglePoolAllocator;
#     left out, CUDA-only (skipUnless(cuda) upstream; kvpool has no per-request SWA ring): the
#     four sync-detection tests, TestSWAReqRingFree (3 tests) and the NPU-path test.
"""SGLang's own unit tests of the hybrid (SWA) allocator and its segment frees, on SGLang
0.5.23 and on kvpool. kvpool must pass every test SGLang passes, except the differences in
:data:`INTENDED`, each named with its clause; PURE_SWA_ONLY names the test of SGLang's
pure-SWA class, which kvpool does not replace (``install()`` keeps SGLang's)."""

from __future__ import annotations

import unittest
from typing import Any
from unittest import mock
from unittest.mock import patch

import pytest
import torch
from sglang_upstream import load_runtime, variants

pytestmark = pytest.mark.peers

# SGLang's names the tests use, bound by _load() when the first test runs
envs: Any = None
InvariantCheckLevel: Any = None
ReqToTokenPool: Any = None
SWAKVPool: Any = None
PureSWATokenToKVPoolAllocator: Any = None
ContractAssertionError: Any = None


def _load() -> dict[str, dict[str, Any]]:
    """Load SGLang's runtime, bind its names here; each implementation's allocator class."""
    global envs, InvariantCheckLevel, ReqToTokenPool, SWAKVPool, PureSWATokenToKVPoolAllocator
    global ContractAssertionError
    load_runtime()
    from kvpool.integrations.sglang_debug import ContractAssertionError
    from kvpool.integrations.sglang_hybrid import SWATokenToKVPoolAllocator as KvpoolSWA
    from sglang.srt.environ import InvariantCheckLevel, envs
    from sglang.srt.mem_cache.allocator.swa import PureSWATokenToKVPoolAllocator
    from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator as SglangSWA
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
    from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool
    return {"sglang": {"SWA": SglangSWA}, "kvpool": {"SWA": KvpoolSWA}}


class _Builders:
    """The upstream module-level builders, reading the allocator class from ``SWA``."""

    SWA: Any

    def _build_swa_allocator(self, page_size: int = 1, req_size: int = 8,
                             max_context_len: int = 64, kv_size: int = 64, kv_size_swa: int = 32,
                             swa_req_ring_size: int | None = None) -> Any:
        head_num = 8
        head_dim = 128
        num_layers = 24
        global_interval = 4
        dtype = torch.bfloat16
        device = "cpu"
        full_attention_layer_ids = [i for i in range(0, num_layers, global_interval)]
        full_attention_layer_ids_set = set(full_attention_layer_ids)
        swa_attention_layer_ids = [
            i for i in range(num_layers) if i not in full_attention_layer_ids_set
        ]
        req_to_token_pool = ReqToTokenPool(size=req_size, max_context_len=max_context_len,
                                           device=device, enable_memory_saver=False)
        kv_pool = SWAKVPool(size=kv_size, size_swa=kv_size_swa, page_size=page_size, dtype=dtype,
                            head_num=head_num, head_dim=head_dim,
                            swa_attention_layer_ids=swa_attention_layer_ids,
                            full_attention_layer_ids=full_attention_layer_ids, device=device)
        kv_pool.swa_req_ring_size = swa_req_ring_size
        allocator = self.SWA(size=kv_size, size_swa=kv_size_swa, page_size=page_size, dtype=dtype,
                             device=device, kvcache=kv_pool, need_sort=False,
                             req_to_token_pool=req_to_token_pool)
        return allocator, req_to_token_pool

    @staticmethod
    def _build_pure_swa_allocator(size_swa: int = 16) -> Any:
        kv_pool = SWAKVPool(size=0, size_swa=size_swa, page_size=1, dtype=torch.bfloat16,
                            head_num=8, head_dim=128, swa_attention_layer_ids=list(range(4)),
                            full_attention_layer_ids=[], device="cpu")
        return PureSWATokenToKVPoolAllocator(size_swa=size_swa, page_size=1, dtype=torch.bfloat16,
                                             device="cpu", kvcache=kv_pool, need_sort=False)


def _swa_alloc(allocator: Any, need_size: int) -> Any:
    """SWA-pool alloc that also works for page_size > 1 (built-in alloc asserts page_size == 1)."""
    if allocator.page_size == 1:
        return allocator.alloc(need_size)

    assert need_size % allocator.page_size == 0
    full_indices = allocator.full_attn_allocator.alloc(need_size)
    swa_indices = allocator.swa_attn_allocator.alloc(need_size)
    assert full_indices is not None and swa_indices is not None
    allocator.full_to_swa_index_mapping[full_indices] = swa_indices
    return full_indices


class _TestSWA(_Builders):
    assertEqual: Any
    assertTrue: Any
    assertFalse: Any
    assertRaises: Any
    subTest: Any

    def test_swa_memory_pool_paged_free_clears_full_page_mapping(self) -> None:
        page_size = 4
        allocator, _ = self._build_swa_allocator(page_size=page_size, kv_size=16,
                                                 kv_size_swa=16)

        full_indices = _swa_alloc(allocator, page_size)
        self.assertEqual(allocator.swa_available_size(), 16 - page_size)

        allocator.free_swa(full_indices[:1])
        self.assertEqual(allocator.swa_available_size(), 16)
        self.assertTrue(
            torch.all(allocator.full_to_swa_index_mapping[full_indices.to(torch.int64)] == 0))

        allocator.free_swa(full_indices[1:2])
        self.assertEqual(allocator.swa_available_size(), 16)

    def test_free_swa_group_owns_deferred_indices(self) -> None:
        for page_size in (1, 4):
            with self.subTest(page_size=page_size):
                self._free_swa_group_owns_deferred_indices(page_size)

    def _free_swa_group_owns_deferred_indices(self, page_size: int) -> None:
        allocator, _ = self._build_swa_allocator(page_size=page_size, kv_size=32 * page_size,
                                                 kv_size_swa=32 * page_size)
        index_batches = []
        for size in (2, 3, 1, 4):
            indices = _swa_alloc(allocator, size * page_size)
            assert indices is not None
            index_batches.append(indices)
        original_indices = torch.cat([indices.clone() for indices in index_batches])

        available_before_free = allocator.swa_available_size()
        allocator.free_group_begin()
        for indices in index_batches:
            allocator.free_swa_segment(indices, start_pos=0)

        # The reps were gathered at enqueue time, not from these views.
        self.assertEqual(len(allocator.swa_page_ids_group), len(index_batches))
        self.assertEqual(allocator.swa_available_size(), available_before_free)
        for indices in index_batches:
            indices.zero_()
        allocator.free_group_end()

        self.assertTrue(torch.equal(
            allocator.full_to_swa_index_mapping[original_indices.to(torch.int64)],
            torch.zeros_like(original_indices)))
        self.assertEqual(allocator.swa_available_size(),
                         available_before_free + original_indices.numel())

    def test_free_swa_group_owns_mapping_at_enqueue_time(self) -> None:
        allocator, _ = self._build_swa_allocator(kv_size=8, kv_size_swa=8)
        old_full = _swa_alloc(allocator, 1)
        new_full = _swa_alloc(allocator, 1)
        assert old_full is not None and new_full is not None
        old_swa = allocator.full_to_swa_index_mapping[old_full].clone()
        new_swa = allocator.full_to_swa_index_mapping[new_full].clone()

        allocator.free_group_begin()
        allocator.free_swa(old_full)

        # Cache reconciliation can transfer a different SWA slot onto the same
        # full slot before the group flushes. The deferred free still owns the
        # mapping observed above, not this replacement mapping.
        allocator.set_full_to_swa_mapping(old_full, new_swa)
        allocator.clear_full_to_swa_mapping(new_full)
        allocator.free_group_end()

        torch.testing.assert_close(allocator.full_to_swa_index_mapping[old_full], new_swa)
        self.assertTrue(torch.isin(old_swa, allocator.swa_attn_allocator.free_pages).item())
        self.assertFalse(torch.isin(new_swa, allocator.swa_attn_allocator.free_pages).item())

    def _build_two_mapped_slots(self, page_size: int = 1) -> Any:
        allocator, _ = self._build_swa_allocator(page_size=page_size, kv_size=8 * page_size,
                                                 kv_size_swa=8 * page_size)
        old_full = _swa_alloc(allocator, page_size)
        new_full = _swa_alloc(allocator, page_size)
        assert old_full is not None and new_full is not None
        old_swa = allocator.full_to_swa_index_mapping[old_full].clone()
        new_swa = allocator.full_to_swa_index_mapping[new_full].clone()
        return allocator, old_full, new_full, old_swa, new_swa

    def _swa_slot_is_free(self, allocator: Any, swa_index: Any) -> bool:
        # free_pages holds page ids for page_size > 1 and token ids otherwise,
        # so compare in page space (a no-op divide when page_size == 1).
        swa_pages = swa_index // allocator.page_size
        free_pages = allocator.swa_attn_allocator.free_pages
        return bool(torch.isin(swa_pages, free_pages).all().item())

    def _run_remap_during_free_group(self, allocator: Any, old_full: Any, new_full: Any,
                                     new_swa: Any) -> None:
        """Queue a combined free, then transfer another SWA slot onto the same
        full slot before the group flushes -- what tombstone recovery does."""
        allocator.free_group_begin()
        allocator.free(old_full)
        allocator.set_full_to_swa_mapping(old_full, new_swa)
        allocator.clear_full_to_swa_mapping(new_full)
        allocator.free_group_end()

    def test_free_group_owns_mapping_at_enqueue_time(self) -> None:
        for page_size in (1, 4):
            with self.subTest(page_size=page_size):
                allocator, old_full, new_full, old_swa, new_swa = (
                    self._build_two_mapped_slots(page_size=page_size))
                available_before = allocator.swa_available_size()

                self._run_remap_during_free_group(allocator, old_full, new_full, new_swa)

                self.assertTrue(self._swa_slot_is_free(allocator, old_swa),
                                "the SWA slot owned at enqueue time leaked")
                self.assertFalse(self._swa_slot_is_free(allocator, new_swa),
                                 "the replacement SWA slot was freed while still mapped")
                self.assertEqual(allocator.swa_available_size(), available_before + page_size)
                # Everything still in use stays reachable through the mapping.
                mapped = allocator.full_to_swa_index_mapping[:-1]
                num_mapped = int((mapped > 0).sum().item())
                num_in_use = allocator.swa_attn_allocator.size - allocator.swa_available_size()
                self.assertEqual(num_mapped, num_in_use)

    def test_pure_swa_rejects_mapping_edits(self) -> None:
        allocator = self._build_pure_swa_allocator()
        indices = allocator.alloc(2)
        with self.assertRaises(NotImplementedError):
            allocator.clear_full_to_swa_mapping(indices)
        with self.assertRaises(NotImplementedError):
            allocator.set_full_to_swa_mapping(indices, indices)
        torch.testing.assert_close(allocator.full_to_swa_index_mapping[indices], indices)


class _TestFreeFullPartition(_Builders):
    """`free_full` releases only the full side of a hybrid SWA allocator."""

    assertEqual: Any

    def setUp(self) -> None:
        self.allocator, _ = self._build_swa_allocator()
        self.full_baseline = self.allocator.full_available_size()
        self.swa_baseline = self.allocator.swa_available_size()

    def _sizes(self) -> tuple[int, int]:
        return self.allocator.full_available_size(), self.allocator.swa_available_size()

    def test_free_full_touches_only_the_full_pool(self) -> None:
        indices = _swa_alloc(self.allocator, 4)
        # free_full's precondition: the SWA peers are already released.
        self.allocator.free_swa(indices)
        self.assertEqual(self._sizes(), (self.full_baseline - 4, self.swa_baseline))

        self.allocator.free_full(indices)
        self.assertEqual(self._sizes(), (self.full_baseline, self.swa_baseline))

    def test_free_full_is_deferred_inside_a_free_group(self) -> None:
        indices = _swa_alloc(self.allocator, 4)
        self.allocator.free_swa(indices)

        self.allocator.free_group_begin()
        self.allocator.free_full(indices)
        self.assertEqual(self.allocator.full_available_size(), self.full_baseline - 4)
        self.allocator.free_group_end()

        self.assertEqual(self.allocator.full_available_size(), self.full_baseline)


class _TestSWAPeerMappedContract(_Builders):
    """page_size 1 gives back every peer the mapping names, without filtering:
    the contract replaces what `swa_indices > 0` used to absorb."""

    assertTrue: Any
    assertFalse: Any

    def _strict(self) -> Any:
        return envs.SGLANG_INVARIANT_CHECK.override(int(InvariantCheckLevel.STRICT))

    def _condition_checked_by(self, allocator: Any, indices: Any,
                              start_pos: int | None = None) -> bool:
        """The predicate free_swa hands the async assert, as a python bool."""
        with self._strict():  # noqa: SIM117 (upstream form)
            with mock.patch.object(torch, "_assert_async") as assert_async:
                if start_pos is None:
                    allocator.free_swa(indices)
                else:
                    allocator.free_swa_segment(indices, start_pos=start_pos)
        return bool(assert_async.call_args.args[0])

    def test_segment_free_flags_a_page_whose_peer_is_already_gone(self) -> None:
        allocator, _ = self._build_swa_allocator(page_size=4)
        live = _swa_alloc(allocator, 8)
        stale = _swa_alloc(allocator, 8)
        allocator.clear_full_to_swa_mapping(stale)

        self.assertTrue(self._condition_checked_by(allocator, live, start_pos=0))
        self.assertFalse(self._condition_checked_by(allocator, stale, start_pos=0))

    def test_free_swa_flags_a_slot_whose_peer_is_already_gone(self) -> None:
        allocator, _ = self._build_swa_allocator()
        live = _swa_alloc(allocator, 4)
        stale = _swa_alloc(allocator, 4)
        # Whoever released the peer left the mapping reading as the padding slot.
        allocator.clear_full_to_swa_mapping(stale)

        self.assertTrue(self._condition_checked_by(allocator, live))
        self.assertFalse(self._condition_checked_by(allocator, stale))


class _TestSWAPageRepsFree(_Builders):
    """page_size > 1: with a start position the SWA side frees one representative
    per page instead of expanding, filtering and dedup'ing through torch.unique."""

    PS = 4
    assertTrue: Any
    assertRaisesRegex: Any
    subTest: Any

    def test_free_swa_segment_debug_rejects_invalid_page_mappings(self) -> None:
        page_size = 4

        def leading_hole(mapping: Any, full_indices: Any, _swa_indices: Any) -> None:
            mapping[full_indices[0]] = 0

        def multiple_peers(mapping: Any, full_indices: Any, swa_indices: Any) -> None:
            mapping[full_indices[2:page_size]] = swa_indices[page_size + 2: 2 * page_size]

        def duplicate_peer(mapping: Any, full_indices: Any, swa_indices: Any) -> None:
            mapping[full_indices[page_size: 2 * page_size]] = swa_indices[:page_size]

        def duplicate_representative(_mapping: Any, full_indices: Any, _swa_indices: Any) -> None:
            full_indices[-page_size:] = full_indices[:page_size]

        for name, mutate, num_tokens in (
            ("leading_hole", leading_hole, page_size),
            ("multiple_peers", multiple_peers, page_size),
            ("duplicate_peer", duplicate_peer, 2 * page_size),
            # At page size 4, representatives 0 and 64 belong to separate programs.
            ("duplicate_representative", duplicate_representative, 65 * page_size),
        ):
            with self.subTest(name=name):
                num_allocated_tokens = max(2 * page_size, num_tokens)
                kv_size = max(8 * page_size, num_allocated_tokens)
                allocator, _ = self._build_swa_allocator(page_size=page_size, kv_size=kv_size,
                                                         kv_size_swa=kv_size)
                full_indices = _swa_alloc(allocator, num_allocated_tokens)
                mapping = allocator.full_to_swa_index_mapping
                swa_indices = mapping[full_indices].clone()
                mutate(mapping, full_indices, swa_indices)
                allocator.swa_attn_allocator.debug_mode = True

                # Exercise debug validation without CI's fatal async assertion.
                with (
                    patch.dict("os.environ",
                               {"SGLANG_INVARIANT_CHECK": str(int(InvariantCheckLevel.OFF))}),
                    self.assertRaisesRegex(AssertionError,
                                           "swa pages do not match the mapped pages"),
                ):
                    allocator.free_swa_segment(full_indices[:num_tokens], start_pos=0)

    def test_segment_free_releases_the_mapped_pages_for_every_tail(self) -> None:
        ps = self.PS
        for num_tokens in (1, ps, ps + 1, 3 * ps - 1, 3 * ps):
            with self.subTest(num_tokens=num_tokens):
                allocator, _ = self._build_swa_allocator(page_size=self.PS)
                indices = _swa_alloc(allocator, 3 * ps)
                mapping = allocator.full_to_swa_index_mapping
                expected = torch.unique(mapping[indices[:num_tokens]] // ps)
                before = allocator.swa_attn_allocator.free_pages.numel()

                allocator.free_swa_segment(indices[:num_tokens], start_pos=0)

                free_pages = allocator.swa_attn_allocator.free_pages
                freed = free_pages[: free_pages.numel() - before]
                self.assertTrue(torch.equal(torch.sort(freed)[0], expected))
                # The whole last page goes back, and its mapping with it.
                touched = -(num_tokens // -ps) * ps
                self.assertTrue(torch.all(mapping[indices[:touched]] == 0))
                self.assertTrue(torch.all(mapping[indices[touched:]] > 0))


# -- the differences kvpool keeps on purpose, each with its clause ----------------------------
def _kvpool_raises_where_sglang_hands_the_predicate_to_assert_async(
        self: Any, page_size: int, segment: bool) -> None:
    """SWA-11: under SGLANG_INVARIANT_CHECK kvpool checks the peers on the host and raises its
    clause at once; it hands no predicate to ``torch._assert_async`` (SGLang's asynchronous
    signal), so the upstream test's probe of that call has nothing to read. Same live and stale
    slots, same level: the live release passes, the stale one is refused, nothing changed."""
    allocator, _ = self._build_swa_allocator(page_size=page_size)
    live = _swa_alloc(allocator, 2 * page_size if segment else 4)
    stale = _swa_alloc(allocator, 2 * page_size if segment else 4)
    allocator.clear_full_to_swa_mapping(stale)

    def release(indices: Any) -> None:
        if segment:
            allocator.free_swa_segment(indices, start_pos=0)
        else:
            allocator.free_swa(indices)

    with envs.SGLANG_INVARIANT_CHECK.override(int(InvariantCheckLevel.STRICT)):
        release(live)
        before = allocator.swa_available_size()
        with pytest.raises(ContractAssertionError) as err:
            release(stale)
    assert err.value.clause == "SWA-11" and allocator.swa_available_size() == before


INTENDED: dict[str, tuple[str, Any]] = {
    "test_segment_free_flags_a_page_whose_peer_is_already_gone": (
        "SWA-11", lambda self: _kvpool_raises_where_sglang_hands_the_predicate_to_assert_async(
            self, 4, segment=True)),
    "test_free_swa_flags_a_slot_whose_peer_is_already_gone": (
        "SWA-11", lambda self: _kvpool_raises_where_sglang_hands_the_predicate_to_assert_async(
            self, 1, segment=False)),
}
# A test of SGLang's pure-SWA allocator (all layers sliding-window), which kvpool does not
# replace: install() keeps SGLang's class, so it runs on SGLang's side only.
PURE_SWA_ONLY = {"test_pure_swa_rejects_mapping_edits"}


globals().update(variants(
    __name__, (_TestSWA, _TestFreeFullPartition, _TestSWAPeerMappedContract, _TestSWAPageRepsFree),
    _load,
    {"sglang": {},
     "kvpool": {**{name: instead for name, (_, instead) in INTENDED.items()},
                **{name: unittest.skip("SGLang's pure-SWA class (kvpool keeps it)")(
                    getattr(_TestSWA, name)) for name in PURE_SWA_ONLY}}}))
