"""Reference-model behaviour outside the case table: copies and aliasing, resize, the capacity
hooks, the census and its diagnostics, the token kind's missing extend/decode."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from kvpool.spec import AllocatorModel, ContractViolation, HybridResizeConfig, ResizeConfig
from kvpool.spec.census import census, describe_pages


class TinyTreeCache:
    """A prefix cache holding whole rows; ``evict`` frees rows through the model, oldest first,
    until ``num_tokens`` tokens came back or nothing is left."""

    def __init__(self, model: AllocatorModel, rows: list[list[int]]) -> None:
        self.model = model
        self.rows = rows
        self.requests: list[int] = []

    def evict(self, num_tokens: int) -> None:
        self.requests.append(num_tokens)
        freed = 0
        while self.rows and freed < num_tokens:
            row = self.rows.pop(0)
            self.model.free(row)
            freed += len(row)


def paged(size: int, ps: int, *, need_sort: bool = False) -> AllocatorModel:
    return AllocatorModel(size, ps, paged=True, need_sort=need_sort)


# -- kinds and construction -----------------------------------------------------------------------

@pytest.mark.parametrize("call", ["alloc_extend", "alloc_decode"])
def test_token_kind_has_no_extend_or_decode_EXTEND_9(call: str) -> None:
    model = AllocatorModel(8)
    args = ([0], [1], [-1]) if call == "alloc_extend" else ([1], [-1])
    with pytest.raises(NotImplementedError, match="only for paged allocator"):
        getattr(model, call)(*args)
    assert model.get_all_free_pages() == list(range(1, 9))


def test_kind_defaults_MODEL_1() -> None:
    assert not AllocatorModel(8).paged
    assert AllocatorModel(8, 4).paged
    assert AllocatorModel(8, 1, paged=True).paged
    model = AllocatorModel(4 * 5 + 3, 4)
    assert (model.num_pages, model.get_all_free_pages()) == (5, [1, 2, 3, 4, 5])
    assert model.status_of(1) == "free"


@pytest.mark.parametrize("ps", [2, 4, 16])
def test_slot_lies_on_page_slot_div_ps_MODEL_2(ps: int) -> None:
    """Any one slot of a page releases that page: slot s is on page s // ps, offset s % ps."""
    model = paged(4 * ps, ps)
    assert model.alloc(4 * ps) == list(range(ps, 5 * ps))
    for page, offset in ((3, ps - 1), (1, 0), (4, ps // 2)):
        model.free([page * ps + offset])
        assert model.get_all_free_pages()[0] == page
        assert model.status_of(page) == "free"
    assert model.owned_pages() == [2]


@pytest.mark.parametrize("kwargs", [{"page_size": 0}, {"page_size": 4, "paged": False}])
def test_invalid_page_size_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="page_size"):
        AllocatorModel(8, **kwargs)


@pytest.mark.parametrize("size", [-1, 2.5, True])
def test_invalid_size_rejected_LIFE_2(size: Any) -> None:
    with pytest.raises(ContractViolation) as err:
        AllocatorModel(size)
    assert err.value.clause == "LIFE-2"


@pytest.mark.parametrize("need_size", [True, 2.0, "4", -4])
def test_alloc_non_int_or_negative_ALLOC_2(need_size: Any) -> None:
    model = paged(16, 4)
    with pytest.raises(ContractViolation) as err:
        model.alloc(need_size)
    assert err.value.clause == "ALLOC-2"
    assert str(err.value).startswith("[ALLOC-2] ")
    assert isinstance(err.value, ValueError)


def test_alloc_unaligned_raises_ALLOC_1() -> None:
    model = paged(64, 16)
    before = model.snapshot()
    for need_size in (1, 15, 17, 5):  # B7: SGLang would floor these silently
        with pytest.raises(ContractViolation) as err:
            model.alloc(need_size)
        assert err.value.clause == "ALLOC-1"
    assert model.snapshot() == before


# -- aliasing and copies --------------------------------------------------------------------------

@pytest.mark.parametrize(("ps", "is_paged"), [(1, False), (1, True), (4, True)])
def test_group_copies_free_input_at_enqueue_GROUP_3(ps: int, is_paged: bool) -> None:
    """B5: the caller mutates its list after free() inside a group; the group releases what
    was named at enqueue time."""
    model = AllocatorModel(8 * ps, ps, paged=is_paged)
    first = model.alloc(2 * ps)
    second = model.alloc(2 * ps)
    assert first is not None and second is not None
    model.free_group_begin()
    view = list(first)
    model.free(view)
    segment = list(second[:ps])
    model.free_segment(segment, start_pos=0)
    view[:] = second[ps:]  # the row slot is reused: the list now names live slots
    segment[:] = [0] * len(segment)
    model.free_group_end()
    model.check_invariants()
    freed = {s // ps for s in first + second[:ps]}
    assert set(model.get_all_free_pages()) == set(range(1, 9)) - {s // ps for s in second[ps:]}
    assert freed <= set(model.get_all_free_pages())
    model.free(second[ps:])  # still owned: no double free
    assert sorted(model.get_all_free_pages()) == list(range(1, 9))


def test_results_are_not_mutated_later_ALIAS_1() -> None:
    model = paged(32, 4)
    got = model.alloc(8)
    assert got is not None
    kept = list(got)
    free_view = model.get_all_free_pages()
    free_view.append(99)  # the caller's list, not the model's
    model.free(got)
    again = model.alloc(8)
    assert got == kept and again == kept
    assert 99 not in model.get_all_free_pages()
    translated = model.translate_kv_indices_for_transfer(kept)
    translated.append(1)
    assert kept == [4, 5, 6, 7, 8, 9, 10, 11]


def test_copy_is_independent() -> None:
    model = paged(32, 4, need_sort=True)
    slots = model.alloc(8)
    assert slots is not None
    clone = model.copy()
    model.free(slots)
    assert clone.owned_pages() == [1, 2] and model.owned_pages() == []
    assert clone.snapshot() != model.snapshot()
    clone.check_invariants()


def test_statuses_and_deferred_pages_MODEL_3() -> None:
    model = paged(24, 4, need_sort=True)
    assert model.alloc(16) == list(range(4, 20))
    model.free([4])
    model.free_group_begin()
    model.free([8, 9])
    model.free_segment([12, 13], start_pos=0)
    assert [model.status_of(p) for p in range(1, 7)] == [
        "staged", "deferred", "deferred-seg", "owned", "free", "free"]
    assert model.deferred_pages() == [2, 3]
    assert model.owned_pages() == [2, 3, 4]
    assert model.available_size() == 3 * 4  # GROUP-5
    assert model.pages_freed_by([16, 17, 19]) == [4]
    assert model.status_of(4) == "owned"  # pages_freed_by changes nothing


# -- lifecycle ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("ps", "is_paged"), [(1, False), (2, True), (16, True)])
def test_resize_then_clear_LIFE_2(ps: int, is_paged: bool) -> None:
    model = AllocatorModel(8 * ps, ps, paged=is_paged, need_sort=True)
    slots = model.alloc(4 * ps)
    assert slots is not None
    model.free(slots[:ps])
    model.free_group_begin()
    model.resize(ResizeConfig(max_total_num_tokens=3 * ps + ps // 2))
    assert (model.size, model.num_pages) == (3 * ps + ps // 2, 3)
    assert model.get_all_free_pages() == [1, 2, 3]
    assert model.deferred_pages() == [] and model.free_group is None
    model.free_group_begin()  # the old group is gone (LIFE-1)
    model.check_invariants()
    model.resize(ResizeConfig(0))
    assert model.alloc(ps) is None and model.available_size() == 0
    model.check_invariants()


@pytest.mark.parametrize("config", [ResizeConfig(16), HybridResizeConfig(16, 8)])
def test_resize_configs_are_values_LIFE_2_SWA_18(config: Any) -> None:
    """A resize config is an immutable value: equal configs hash alike (usable as keys) and a
    field cannot be reassigned after it was handed to ``resize``."""
    assert hash(config) == hash(copy.copy(config)) and config == copy.copy(config)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_total_num_tokens = 32


@pytest.mark.parametrize("tokens", [-1, 1.5, None])
def test_resize_rejects_bad_size_unchanged_LIFE_2(tokens: Any) -> None:
    model = paged(32, 4)
    model.alloc(8)
    before = model.snapshot()
    with pytest.raises(ContractViolation) as err:
        model.resize(ResizeConfig(tokens))
    assert err.value.clause == "LIFE-2"
    assert model.snapshot() == before and model.size == 32


def test_clear_resets_everything_LIFE_1() -> None:
    model = paged(32, 4, need_sort=True)
    assert model.alloc(12) is not None
    model.free([4])
    model.free_group_begin()
    model.free_segment([8], start_pos=0)
    model.clear()
    assert model.get_all_free_pages() == list(range(1, 9))
    assert model.snapshot() == paged(32, 4, need_sort=True).snapshot()
    model.check_invariants()


def test_get_all_free_pages_is_free_then_staged_LIFE_4() -> None:
    model = paged(24, 2, need_sort=True)
    assert model.alloc(8) == list(range(2, 10))
    model.free([8, 9, 2])
    model.free([6])
    assert model.free_pages == list(range(5, 13))
    assert model.staged == [1, 4, 3]
    assert model.get_all_free_pages() == [*range(5, 13), 1, 4, 3]


# -- capacity hooks -------------------------------------------------------------------------------

def _cached_model() -> tuple[AllocatorModel, TinyTreeCache]:
    model = paged(32, 4)
    rows = [model.alloc(8), model.alloc(4), model.alloc(8)]
    assert all(row is not None for row in rows)
    return model, TinyTreeCache(model, [row for row in rows if row is not None])


def test_evict_asks_for_the_shortfall_CAP_1() -> None:
    model, cache = _cached_model()
    assert model.available_size() == 12
    model.evict_to_free_tokens(cache, 12)
    model.evict_to_free_tokens(cache, 5)
    assert cache.requests == []  # no shortfall: the cache is not asked
    model.evict_to_free_tokens(cache, 18)
    assert cache.requests == [6]
    assert model.available_size() == 20  # the first row (8 tokens) covered the 6
    model.evict_to_free_tokens(None, 100)  # no cache: nothing to do
    assert model.available_size() == 20


def test_evict_asks_for_a_shortfall_of_one_token_CAP_1() -> None:
    model, cache = _cached_model()
    model.evict_to_free_tokens(cache, 13)                     # 12 available
    assert cache.requests == [1]


def test_check_decode_capacity_evicts_then_answers_CAP_2() -> None:
    model, cache = _cached_model()
    assert model.check_decode_capacity(num_tokens=12, tree_cache=cache)
    assert cache.requests == []
    assert model.check_decode_capacity(num_tokens=24, tree_cache=cache)
    assert cache.requests == [12] and model.available_size() == 24
    assert not model.check_decode_capacity(num_tokens=40, tree_cache=cache)
    assert cache.requests == [12, 16] and cache.rows == []
    assert model.available_size() == 32
    assert not model.check_decode_capacity(num_tokens=33, tree_cache=None)
    model.check_invariants()


# -- census and diagnostics -----------------------------------------------------------------------

def test_verify_byte_accounting_healthy_is_empty_CAP_3() -> None:
    model = paged(32, 4, need_sort=True)
    assert model.verify_byte_accounting() == []
    assert model.alloc(16) is not None
    model.free([4, 8])
    assert model.verify_byte_accounting() == []


def test_census_names_double_listing_INV_2() -> None:
    model = paged(32, 4, need_sort=True)
    assert model.alloc(8) is not None
    model.staged.append(model.free_pages[0])  # listed in free and staged
    problems = model.verify_byte_accounting()
    assert any(p.startswith("INV-2: page 3 ") for p in problems), problems
    with pytest.raises(AssertionError, match="INV-2"):
        model.check_invariants()


@pytest.mark.parametrize("bad_page", [0, 9, -1])
def test_census_names_pages_outside_the_pool_INV_3(bad_page: int) -> None:
    model = paged(32, 4)
    assert model.alloc(4) is not None
    model.free_pages.insert(0, bad_page)
    problems = model.verify_byte_accounting()
    assert [p for p in problems if p.startswith("INV-3")] == [
        f"INV-3: page {bad_page} is listed free but is not a page of 1..8"]


def test_census_names_available_size_mismatch_INV_4(monkeypatch: pytest.MonkeyPatch) -> None:
    model = paged(32, 4)
    monkeypatch.setattr(model, "available_size", lambda: 31)
    problems = model.verify_byte_accounting()
    assert len(problems) == 1 and problems[0].startswith("INV-4: available_size() is 31")


def test_census_counts_more_pages_than_exist_INV_1() -> None:
    problems = census([1, 2, 2], [1], num_pages=2, page_size=1, available_size=4)
    assert any(p.startswith("INV-1") for p in problems)
    assert any(p.startswith("INV-2: page 1 is listed 2 times") for p in problems)
    assert census([2], [], num_pages=2, page_size=4, available_size=4, deferred=[2]) == [
        "INV-2: page 2 is listed 2 times (double free)"]


def test_check_invariants_catches_status_drift_MODEL_3() -> None:
    model = paged(32, 4)
    assert model.alloc(4) is not None
    model.free_pages.append(1)  # listed free while its status says owned
    model.free_pages.remove(8)
    model.free_pages.append(8)
    with pytest.raises(AssertionError, match="MODEL-3"):
        model.check_invariants()


def test_debug_print() -> None:
    model = paged(32, 4, need_sort=True)
    assert model.alloc(20) == list(range(4, 24))
    model.free([20])
    model.free_group_begin()
    model.free([8, 16])
    assert model.debug_print() == (
        "paged ps=4 pages=8 need_sort=True available=16\n"
        "  free:     6-8\n"
        "  staged:   5\n"
        "  deferred: 2 4\n"
        "  owned:    1-4")
    token = AllocatorModel(4)
    assert token.debug_print().splitlines()[1:] == [
        "  free:     1-4", "  staged:   -", "  deferred: closed", "  owned:    -"]


def test_describe_pages_keeps_order() -> None:
    assert describe_pages([1, 2, 3, 7, 9, 10]) == "1-3 7 9-10"
    assert describe_pages([3, 2, 1]) == "3 2 1"
    assert describe_pages([]) == "-"


@pytest.mark.parametrize(("ps", "is_paged"), [(1, False), (1, True), (4, True)])
def test_empty_free_is_a_no_op_FREE_6(ps: int, is_paged: bool) -> None:
    model = AllocatorModel(8 * ps, ps, paged=is_paged)
    model.alloc(2 * ps)
    before = model.snapshot()
    model.free([])
    model.free_segments([([], 0)])
    model.free_group_begin()
    model.free([])
    assert model.deferred_pages() == []
    model.free_group_end()
    assert model.snapshot() == before


@pytest.mark.parametrize(("ps", "is_paged", "need_sort"),
                         [(1, False, False), (4, True, False), (4, True, True)])
def test_free_full_is_free_FREE_7(ps: int, is_paged: bool, need_sort: bool) -> None:
    by_free = AllocatorModel(8 * ps, ps, paged=is_paged, need_sort=need_sort)
    by_full = by_free.copy()
    for model, release in ((by_free, by_free.free), (by_full, by_full.free_full)):
        slots = model.alloc(3 * ps)
        assert slots is not None
        release(slots[ps:])
    assert by_full.snapshot() == by_free.snapshot()


@pytest.mark.parametrize(("ps", "is_paged"), [(1, False), (4, True)])
def test_need_sort_stages_frees_and_counts_them_available_SORT_1(ps: int, is_paged: bool) -> None:
    model = AllocatorModel(8 * ps, ps, paged=is_paged, need_sort=True)
    slots = model.alloc(4 * ps)
    assert slots is not None
    free_before = list(model.free_pages)
    model.free(slots[:ps])
    assert model.free_pages == free_before  # not reusable until a merge
    assert model.staged == [slots[0] // ps]
    assert model.available_size() == 5 * ps
    assert model.alloc(4 * ps) == [s for p in free_before for s in range(p * ps, p * ps + ps)]


def test_free_page_ids_releases_exactly_the_pages_in_order_FREE_8() -> None:
    """Page ids, in the given order, no sort; each owned and named once; deferred with the
    segment pages inside a group; a token model's is ``free``."""
    m = AllocatorModel(32, 4, paged=True)  # pages 1..8
    assert m.alloc(16) == list(range(4, 20))  # pages 1..4
    m.free_page_ids([3, 1])
    assert m.free_pages[:2] == [3, 1]
    before = m.snapshot()
    for bad, clause in (([2, 2], "FREE-3"), ([1], "FREE-3"), ([0], "FREE-2"), ([9], "FREE-1"),
                        ([True], "FREE-1")):  # a bool is no page id (not page 1)
        with pytest.raises(ContractViolation) as err:
            m.free_page_ids(bad)
        assert err.value.clause == clause
        assert m.snapshot() == before
    m.free_page_ids([])
    assert m.snapshot() == before
    m.free_group_begin()
    m.free_page_ids([4])
    m.free([8])  # page 2, a free() input
    assert m.status_of(4) == "deferred-seg" and m.available_size() == 4 * 6
    m.free_group_end()
    assert m.free_pages[:2] == [4, 2]  # free() inputs released first, then the page ids
    # (each prepended: GROUP-4)
    sorted_model = AllocatorModel(32, 4, paged=True, need_sort=True)
    sorted_model.alloc(12)
    sorted_model.free_page_ids([3, 1])
    assert sorted_model.staged == [3, 1]
    token = AllocatorModel(8, 1, paged=False)
    assert token.alloc(3) == [1, 2, 3]
    token.free_page_ids([3, 1])
    assert token.free_pages[-2:] == [3, 1]
