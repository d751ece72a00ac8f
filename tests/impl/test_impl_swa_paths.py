"""kvpool.impl.SWATokenToKVPoolAllocator's less travelled paths against the hybrid spec: the
device (torch) branch of the mapping, the one-segment wrappers, empty and trimmed segments,
the capacity hooks, resize, the pair helpers and the self-checks (``SWA-*``)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
import torch
from kvpool.impl import SWATokenToKVPoolAllocator
from kvpool.impl.hooks import EvictRequest
from kvpool.spec import ContractViolation, HybridResizeConfig
from kvpool.spec.rules import OWNED, STAGED
from test_impl_swa import T, make, run, spec_state, state


def swa(ps: int = 4, size: int = 64, size_swa: int = 32, **kw: Any) -> SWATokenToKVPoolAllocator:
    return SWATokenToKVPoolAllocator(size, size_swa, ps, torch.float16, "cpu", None,
                                     kw.pop("need_sort", False), checked=kw.pop("checked", True))


def row_of(a: SWATokenToKVPoolAllocator, n: int) -> torch.Tensor:
    got = a.alloc(n) if a.page_size == 1 else a.alloc_extend(T([0]), T([0]), T([n]), T([n]),
                                                             T([-1]), n)
    assert got is not None
    return got


@pytest.mark.parametrize(("ps", "need_sort"), [(1, False), (2, True), (4, False), (4, True)])
def test_device_branch_of_the_mapping_matches_the_spec_SWA_10_SWA_14(ps: int,
                                                                     need_sort: bool) -> None:
    """The torch ops the mapping runs on CUDA (no numpy view of the tensor), run here on CPU
    tensors by dropping the view: the same traffic gives the spec's states."""
    pair = make(ps, need_sort)
    pair.impl._pairs._np = None
    run(pair, random.Random(ps + 7 * need_sort), 150)


@pytest.mark.parametrize("device_branch", [False, True])
def test_segment_shapes_match_the_spec_SWA_14(device_branch: bool) -> None:
    """One-segment wrappers, an empty segment, a shared page trimmed off a non-aligned start,
    a segment trimmed away entirely: both sides freed as the spec frees them."""
    shapes: list[list[tuple[int, int]]] = [
        [(0, 4), (4, 12)],              # two pages then one: free_segment per segment
        [(0, 0), (0, 5), (5, 12)],      # empty; page 1 shared by positions 4 and 5..7
        [(0, 6), (6, 8), (8, 12)],      # the middle segment lies on the shared page only
    ]
    for shape in shapes:
        pair = make(4, False)
        pair.impl._pairs._np = None if device_branch else pair.impl._pairs._np
        row = row_of(pair.impl, 12).tolist()
        pair.spec.alloc_extend([0], [12], [-1])
        segs = [(row[a:b], a) for a, b in shape]
        if shape[0] == (0, 4):
            for idx, start in segs:
                pair.impl.free_segment(T(idx), start_pos=start)
                pair.spec.free_segment(idx, start_pos=start)
        else:
            pair.impl.free_segments([(T(idx), start) for idx, start in segs])
            pair.spec.free_segments(segs)
        assert state(pair.impl) == spec_state(pair.spec), shape
        assert pair.impl.full_available_size() == 96 and pair.impl.swa_available_size() == 48
        pair.impl.check_invariants()


def test_full_segment_wrapper_frees_the_full_side_SWA_12() -> None:
    a = swa()
    row = row_of(a, 8)
    a.free_swa(row)
    a.free_full_segment(row[:4], start_pos=0)
    a.free_full_segments([(row[4:], 4)])
    assert (a.full_available_size(), a.swa_available_size()) == (64, 32)
    a.check_invariants()


def test_swa_segment_off_the_row_layout_is_refused_unchanged_SEG_1() -> None:
    a = swa()
    row = row_of(a, 8)
    before = state(a)
    with pytest.raises(ContractViolation, match="SEG-1"):
        a.free_swa_segment(row[:4], start_pos=1)
    assert state(a) == before


def test_groups_do_not_nest_GROUP_1() -> None:
    for checked in (True, False):
        a = swa(checked=checked)
        a.free_group_begin()
        with pytest.raises(ContractViolation, match="GROUP-1"):
            a.free_group_begin()


def test_alloc_kinds_follow_the_page_size_SWA_6_SWA_7_SWA_9() -> None:
    with pytest.raises(NotImplementedError, match="SWA-6"):
        swa(4).alloc(4)
    one = swa(1)
    with pytest.raises(NotImplementedError, match="SWA-7"):
        one.alloc_extend(T([0]), T([0]), T([2]), T([2]), T([-1]), 2)
    with pytest.raises(NotImplementedError, match="SWA-9"):
        one.alloc_decode(T([1]), T([1]), T([-1]))
    assert state(one)[:3] == (list(range(1, 65)), [], list(range(1, 33)))


def test_sizes_and_ring_attributes_SWA_5() -> None:
    a = swa()
    assert (a.size, a.size_full, a.size_swa) == (32, 64, 32)
    assert a.swa_req_ring is False and a.swa_ring_cost_tokens == 0


@pytest.mark.parametrize(("full", "swa_size", "error"), [(-4, 16, True), (16, -1, True),
                                                         (0, 16, False), (16, 0, False)])
def test_checked_resize_refuses_negative_sizes_LIFE_2(full: int, swa_size: int,
                                                      error: bool) -> None:
    a = swa()
    config = HybridResizeConfig(full_max_total_num_tokens=full, swa_max_total_num_tokens=swa_size)
    if error:
        before = (a.size_full, a.size_swa)
        with pytest.raises(ContractViolation, match="LIFE-2"):
            a.resize(config)
        assert (a.size_full, a.size_swa) == before
    else:
        a.resize(config)
        assert (a.size_full, a.size_swa, a.available_size()) == (full, swa_size, 0)


def test_pair_helpers_set_and_clear_the_mapping() -> None:
    """SGLang's HiCache path: clear pairs without freeing, then pair again."""
    a = swa()
    row = row_of(a, 8)
    peers = a.translate_loc_from_full_to_swa(row).clone()
    a.clear_full_to_swa_mapping(row[:4])
    assert a.translate_loc_from_full_to_swa(row).tolist() == [0] * 4 + peers[4:].tolist()
    a.set_full_to_swa_mapping(row[:4], peers[:4])
    assert a.translate_loc_from_full_to_swa(row).tolist() == peers.tolist()
    a.check_invariants()


class Cache:
    """The spec's hybrid cache protocol: ``evict(full, swa)`` frees whole held rows."""

    def __init__(self, a: SWATokenToKVPoolAllocator, rows: list[torch.Tensor]) -> None:
        self.a, self.rows, self.asked = a, rows, []

    def evict(self, num_tokens: int, swa_num_tokens: int) -> None:
        self.asked.append((num_tokens, swa_num_tokens))
        if self.rows:
            self.a.free(self.rows.pop(0))


class SglangCache(Cache):
    """SGLang 0.5.23's: ``supports_prefix_sharing`` and ``evict_for_alloc(EvictParams)``."""

    def __init__(self, a: SWATokenToKVPoolAllocator, rows: list[torch.Tensor],
                 sharing: bool = True) -> None:
        super().__init__(a, rows)
        self.sharing = sharing

    def supports_prefix_sharing(self) -> bool:
        return self.sharing

    def evict_for_alloc(self, params: Any) -> None:
        self.evict(params.num_tokens, params.swa_num_tokens)


@pytest.mark.parametrize("kind", [Cache, SglangCache])
def test_capacity_hooks_ask_for_both_shortfalls_SWA_17(kind: type[Cache]) -> None:
    """Full 40 and SWA 8 tokens available: 16 tokens fall 8 short on the SWA side only; after
    the eviction both fit. No shortfall, no request."""
    a = swa()
    held = row_of(a, 24)
    cache = kind(a, [held])
    a.evict_to_free_tokens(cache, 8)
    assert cache.asked == []                                   # 8 fit exactly
    a.evict_to_free_tokens(None, 100)
    assert a.check_decode_capacity(num_tokens=16, tree_cache=cache)
    assert cache.asked == [(0, 8)]
    assert a.available_size() == 32
    assert a.check_decode_capacity(num_tokens=32, tree_cache=cache)   # fits exactly
    assert not a.check_decode_capacity(num_tokens=41, tree_cache=cache)
    assert cache.asked == [(0, 8), (0, 9)]                     # asked, nothing left to give


def test_a_cache_without_prefix_sharing_is_not_asked_SWA_17() -> None:
    a = swa()
    cache = SglangCache(a, [row_of(a, 24)], sharing=False)
    assert not a.check_decode_capacity(num_tokens=16, tree_cache=cache)
    assert cache.asked == []


def test_census_reports_a_group_closed_under_deferred_swa_pages_GROUP_2() -> None:
    a = swa()
    row = row_of(a, 8)
    a.free_group_begin()
    a.free_swa(row[:4])
    a.check_invariants()
    a.free_group = None                                        # closed without releasing
    with pytest.raises(AssertionError, match="GROUP-2: SWA pages deferred"):
        a.check_invariants()


def test_census_reports_a_negative_mapping_entry_SWA_1() -> None:
    for index in (5, -2):                                     # -2: the last full slot's entry
        a = swa()
        a.full_to_swa_index_mapping[index] = -3
        assert "SWA-1: a mapping entry is negative" in a.verify_byte_accounting()


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda t, page: t.status.__setitem__(page, OWNED), "checked-mode status of pages"),
    (lambda t, page: (t.status.__setitem__(page, STAGED), t.staged.append(page)),
     "checked-mode staged list disagrees"),
])
def test_checked_table_disagreeing_with_the_lists_is_reported_MODEL_3(corrupt: Any,
                                                                      message: str) -> None:
    a = swa()
    side = a.full_attn_allocator
    assert side._table is not None
    side.check_invariants()
    corrupt(side._table, 16)                                   # a free page
    with pytest.raises(AssertionError, match=message):
        side.check_invariants()


def test_production_default_is_unchecked_and_clear_drops_every_pair_SWA_18() -> None:
    a = SWATokenToKVPoolAllocator(32, 32, 4, torch.float16, "cpu", None, False)
    assert a.checked is False
    row = row_of(a, 32)                                       # every slot, the last included
    a.clear()
    assert a.translate_loc_from_full_to_swa(row).tolist() == [0] * 32
    assert (a.full_available_size(), a.swa_available_size()) == (32, 32)


def test_a_kv_pool_without_register_mapping_is_accepted() -> None:
    class Pool:
        full_kv_pool = swa_kv_pool = swa_req_ring_size = None

    a = SWATokenToKVPoolAllocator(64, 32, 4, torch.float16, "cpu", Pool(), False)
    a.clear()
    assert a.available_size() == 32


@pytest.mark.parametrize(("size", "size_swa", "n", "fits"), [
    (16, 32, 16, True), (16, 32, 20, False),       # the full side holds exactly / not 5 pages
    (32, 16, 16, True), (32, 16, 20, False),       # the SWA side
])
def test_extend_fits_exactly_the_smaller_side_SWA_7(size: int, size_swa: int, n: int,
                                                    fits: bool) -> None:
    pair = make(4, False, size=size, size_swa=size_swa)
    got = pair.impl.alloc_extend(T([0]), T([0]), T([n]), T([n]), T([-1]), n)
    want = pair.spec.alloc_extend([0], [n], [-1], n)
    assert (got is not None) is fits and (None if got is None else got.tolist()) == want
    pair.same()


def test_alloc_takes_exactly_what_is_free_and_refuses_a_bad_size_SWA_6() -> None:
    a = swa(1, size=8, size_swa=8)
    with pytest.raises(ContractViolation, match="ALLOC-2"):
        a.alloc(None)  # type: ignore[arg-type]
    got = a.alloc(8)
    assert got is not None and got.tolist() == list(range(1, 9))
    assert a.alloc(1) is None


def test_extend_rules_come_before_the_swa_last_loc_rule_SWA_8() -> None:
    """A last_loc on a free page continuing a partial prefix: the spec names the full side's
    extend rule, not SWA-8 (whose released peer it also has)."""
    pair = make(4, False)
    free_slot = 4 * 20 + 1                                   # page 20 is free
    with pytest.raises(ContractViolation) as want:
        pair.spec.alloc_extend([2], [3], [free_slot], 1)
    with pytest.raises(ContractViolation) as got:
        pair.impl.alloc_extend(T([2]), T([2]), T([3]), T([3]), T([free_slot]), 1)
    assert got.value.clause == want.value.clause != "SWA-8"
    pair.same()


def _same_refusal(pair: Any, spec_call: Any, impl_call: Any) -> str:
    """Both refuse with the same clause and neither changes; returns the clause."""
    before = state(pair.impl)
    with pytest.raises(ContractViolation) as want:
        spec_call(pair.spec)
    with pytest.raises(ContractViolation) as got:
        impl_call(pair.impl)
    assert got.value.clause == want.value.clause
    assert state(pair.impl) == before
    pair.same()
    return str(got.value.clause)


def test_checked_decode_and_free_refusals_match_the_spec_SWA_8_SEG_4_FREE_1() -> None:
    pair = make(4, False)
    row = row_of(pair.impl, 5).tolist()
    pair.spec.alloc_extend([0], [5], [-1])
    free_slot = 4 * 20 + 1                                   # page 20 is free
    assert _same_refusal(pair, lambda h: h.alloc_decode([3], [free_slot]),
                         lambda a: a.alloc_decode(T([3]), T([3]), T([free_slot]))) != "SWA-8"
    assert _same_refusal(pair, lambda h: h.free_full([10_000]),
                         lambda a: a.free_full(T([10_000]))) == "FREE-1"
    assert _same_refusal(pair, lambda h: h.free_segments([(row[4:], 4), (row[:4], 0)]),
                         lambda a: a.free_segments([(T(row[4:]), 4), (T(row[:4]), 0)])) == "SEG-4"
    pair.impl.free_swa(T(row))
    pair.spec.free_swa(row)
    # position 5 continues the partial page 1 (positions 4..5) whose SWA peer is gone
    assert _same_refusal(pair, lambda h: h.alloc_decode([6], [row[4]]),
                         lambda a: a.alloc_decode(T([6]), T([6]), T([row[4]]))) == "SWA-8"


@pytest.mark.parametrize(("start", "n"), [(1, 8), (2, 8), (2, 10), (4, 8)])
def test_swa_segment_from_any_start_frees_each_page_once_SWA_14(start: int, n: int) -> None:
    """Positions start..start+n-1 of a 12-token row: one SWA page per row page touched, also
    when the segment starts mid-page and ends one page later than a stride of 4 reaches."""
    pair = make(4, False)
    row = row_of(pair.impl, 12).tolist()
    pair.spec.alloc_extend([0], [12], [-1])
    pair.impl.free_swa_segment(T(row[start:start + n]), start_pos=start)
    pair.spec.free_swa_segment(row[start:start + n], start_pos=start)
    pair.same()


def test_checked_segment_and_swa_refusals_match_the_spec_SEG_1_SWA_11_SWA_12() -> None:
    pair = make(4, False)
    row = row_of(pair.impl, 8).tolist()
    pair.spec.alloc_extend([0], [8], [-1])
    for slot, clause in ((0, "FREE-2"), (10_000, "FREE-1")):
        assert _same_refusal(pair, lambda h, s=slot: h.free_swa([s]),
                             lambda a, s=slot: a.free_swa(T([s]))) == clause
        assert _same_refusal(pair, lambda h, s=slot: h.free_full_segment([s], start_pos=0),
                             lambda a, s=slot: a.free_full_segment(T([s]), start_pos=0)) == clause
    assert _same_refusal(pair, lambda h: h.free_full_segments([(row[:4], 0)]),
                         lambda a: a.free_full_segments([(T(row[:4]), 0)])) == "SWA-12"
    for start in (None, 0.0):
        assert _same_refusal(pair, lambda h, s=start: h.free_swa_segment(row[:4], start_pos=s),
                             lambda a, s=start: a.free_swa_segment(T(row[:4]), start_pos=s)
                             ) == "SEG-1"
    pair.impl.free_swa(T(row[:4]))
    pair.spec.free_swa(row[:4])
    assert _same_refusal(pair, lambda h: h.free_swa_segment(row[:4], start_pos=0),
                         lambda a: a.free_swa_segment(T(row[:4]), start_pos=0)) == "SWA-11"


def test_census_covers_the_swa_side_and_the_mapping_SWA_19() -> None:
    a = swa(need_sort=False)
    row = row_of(a, 8)
    assert a.verify_byte_accounting() == []
    twice = a.swa_attn_allocator
    twice.free(a.translate_loc_from_full_to_swa(row[:1]))   # SWA page freed, pair kept
    problems = a.verify_byte_accounting()
    assert any(p.startswith("SWA-2: full slot") for p in problems), problems
    with pytest.raises(ContractViolation, match="FREE-3"):  # again: the guard refuses
        twice.free(a.translate_loc_from_full_to_swa(row[:1]))
    # listed free twice all the same (the guard bypassed): the census reports it
    page = a.translate_loc_from_full_to_swa(row[:1]) // twice.page_size
    twice._release(page, guarded=False)
    assert any(p.startswith("swa: INV-2") for p in a.verify_byte_accounting())


@pytest.mark.parametrize(("side", "message"), [("full", "checked-mode status"),
                                               ("swa", "staging broken")])
def test_check_invariants_checks_each_side(side: str, message: str) -> None:
    a = swa()
    row_of(a, 8)
    if side == "full":
        table = a.full_attn_allocator._table
        assert table is not None
        table.status[16] = OWNED                              # a free page, listed as held
    else:
        a.swa_attn_allocator._staged.count = 3                # more staged than the room left
    with pytest.raises(AssertionError, match=message):
        a.check_invariants()


def test_evict_request_is_sglangs_evict_params_value() -> None:
    """Fields default to 0 as in SGLang's EvictParams; an immutable, hashable value."""
    request = EvictRequest()
    assert (request.num_tokens, request.swa_num_tokens, request.mamba_num) == (0, 0, 0)
    assert hash(EvictRequest(num_tokens=4)) == hash(EvictRequest(num_tokens=4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.num_tokens = 8  # type: ignore[misc]
