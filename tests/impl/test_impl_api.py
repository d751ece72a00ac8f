"""The SGLang-facing surface beyond the case table: attributes, capacity hooks (``CAP-*``), the
census (``CAP-3``), kvcache delegation, ``free_page_ids``, ``resize`` (``LIFE-2``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from impl_adapter import call_impl, free_list, make_impl
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
from kvpool.spec import AllocatorModel, ContractViolation, ResizeConfig


class EvictingCache:
    """A tree cache that frees ``held`` slots (page by page) when asked to evict."""

    def __init__(self, alloc: Any, held: torch.Tensor) -> None:
        self.alloc, self.held, self.asked = alloc, held, []

    def evict(self, num_tokens: int) -> None:
        self.asked.append(num_tokens)
        take, self.held = self.held[:num_tokens], self.held[num_tokens:]
        self.alloc.free(take)


def test_attributes_match_sglang() -> None:
    paged = PagedTokenToKVPoolAllocator(64, 16, torch.bfloat16, "cpu", "kv", True)
    assert (paged.size, paged.size_full, paged.page_size, paged.num_pages) == (64, 64, 16, 4)
    assert (paged.dtype, paged.device, paged.need_sort, paged.get_kvcache()) == (
        torch.bfloat16, "cpu", True, "kv")
    assert paged.free_pages.tolist() == [1, 2, 3, 4]
    with pytest.raises(AttributeError):  # a read-only property
        paged.free_pages = torch.tensor([1])  # type: ignore[misc]
    token = TokenToKVPoolAllocator(5, torch.float16, "cpu", None, False)
    assert (token.size, token.page_size, token.available_size()) == (5, 1, 5)
    ids = torch.tensor([3, 1])
    assert token.translate_kv_indices_for_transfer(ids) is ids  # LIFE-3
    for alloc in (PagedTokenToKVPoolAllocator(8, 4, torch.float16, "cpu", None, False), token):
        with pytest.raises(NotImplementedError):
            alloc.get_cpu_copy(ids)
        with pytest.raises(NotImplementedError):
            alloc.load_cpu_copy(None, ids)
    with pytest.raises(NotImplementedError):  # EXTEND-9
        token.alloc_extend(ids, ids, ids, ids, ids, 0)
    with pytest.raises(NotImplementedError):
        token.alloc_decode(ids, ids, ids)


def test_cpu_copy_delegates_to_kvcache() -> None:
    class KV:
        def get_cpu_copy(self, indices: Any, mamba_indices: Any = None) -> Any:
            return ("get", indices.tolist(), mamba_indices)

        def load_cpu_copy(self, cpu: Any, indices: Any, mamba_indices: Any = None) -> Any:
            return ("load", cpu, indices.tolist())

    alloc = PagedTokenToKVPoolAllocator(32, 4, torch.float16, "cpu", KV(), False)
    assert alloc.get_cpu_copy(torch.tensor([4]), mamba_indices=7) == ("get", [4], 7)
    assert alloc.load_cpu_copy("c", torch.tensor([5])) == ("load", "c", [5])


@pytest.mark.parametrize("paged", [False, True])
def test_capacity_hooks_evict_the_shortfall(paged: bool) -> None:
    """CAP-1 / CAP-2: evict ``num_tokens - available_size()``, then compare, as the model."""
    ps = 4 if paged else 1
    alloc = make_impl(paged=paged, size=8 * ps, page_size=ps, need_sort=False)
    model = AllocatorModel(8 * ps, ps, paged=paged)
    held = alloc.alloc(6 * ps)
    model_held = model.alloc(6 * ps)
    assert held is not None and model_held is not None
    cache = EvictingCache(alloc, held)
    model_cache = EvictingCache(model, model_held)
    assert not alloc.check_decode_capacity(num_tokens=3 * ps, tree_cache=None)
    assert alloc.check_decode_capacity(num_tokens=4 * ps, tree_cache=cache)
    assert model.check_decode_capacity(num_tokens=4 * ps, tree_cache=model_cache)
    assert cache.asked == model_cache.asked == [2 * ps]
    alloc.evict_to_free_tokens(cache, 3 * ps)  # enough available: nothing asked
    assert cache.asked == [2 * ps]
    assert free_list(alloc) == model.get_all_free_pages()


class SglangStyleCache:
    """SGLang 0.5.23's tree-cache protocol: ``supports_prefix_sharing`` and
    ``evict_for_alloc(EvictParams)``; no ``evict(int)``."""

    def __init__(self, alloc: Any, held: torch.Tensor, sharing: bool = True) -> None:
        self.alloc, self.held, self.sharing, self.asked = alloc, held, sharing, []

    def supports_prefix_sharing(self) -> bool:
        return self.sharing

    def evict_for_alloc(self, params: Any) -> None:
        self.asked.append((params.num_tokens, params.swa_num_tokens, params.mamba_num))
        take, self.held = self.held[: params.num_tokens], self.held[params.num_tokens :]
        self.alloc.free(take)


@pytest.mark.parametrize("paged", [False, True])
def test_capacity_hooks_speak_sglangs_cache_protocol(paged: bool) -> None:
    """CAP-1: a cache with ``evict_for_alloc`` gets ``EvictParams(num_tokens=shortfall)``; one
    that does not share prefixes is not asked; ``requests`` / ``spec_algorithm`` are accepted."""
    ps = 4 if paged else 1
    alloc = make_impl(paged=paged, size=8 * ps, page_size=ps, need_sort=False)
    held = alloc.alloc(6 * ps)
    assert held is not None
    closed = SglangStyleCache(alloc, held, sharing=False)
    assert not alloc.check_decode_capacity(num_tokens=4 * ps, tree_cache=closed,
                                           requests=[object()], spec_algorithm=None)
    assert closed.asked == []
    cache = SglangStyleCache(alloc, held)
    assert alloc.check_decode_capacity(num_tokens=4 * ps, tree_cache=cache, requests=[],
                                       spec_algorithm="EAGLE")
    assert cache.asked == [(2 * ps, 0, 0)] and alloc.available_size() == 4 * ps


@pytest.mark.parametrize("paged", [False, True])
def test_release_pages_are_the_staged_pages(paged: bool) -> None:
    """SGLang's ``release_pages``: need_sort frees wait there in release order until a merge."""
    ps = 4 if paged else 1
    alloc = make_impl(paged=paged, size=8 * ps, page_size=ps, need_sort=True)
    out = alloc.alloc(3 * ps)
    assert out is not None and alloc.release_pages.tolist() == []
    alloc.free(out[2 * ps :])
    alloc.free(out[: ps])
    assert alloc.release_pages.tolist() == [3, 1]  # pages (token: slots) in release order
    assert alloc.available_size() == 7 * ps
    alloc.merge_and_sort_free()
    assert alloc.release_pages.tolist() == []


def test_census_reports_real_violations() -> None:
    """CAP-3: the census reads the buffers; a healthy pool reports nothing."""
    alloc = PagedTokenToKVPoolAllocator(32, 4, torch.float16, "cpu", None, False)
    out = alloc.alloc(8)
    assert out is not None and alloc.verify_byte_accounting() == []
    alloc.free(out[:4])
    with pytest.raises(ContractViolation, match="FREE-3"):
        alloc.free(out[:4])  # the unchecked path's guard refuses the double free
    assert alloc.verify_byte_accounting() == []
    alloc.free_pages[1] = alloc.free_pages[0]  # corrupt the buffer: page 1 listed twice
    assert any(v.startswith("INV-2") for v in alloc.verify_byte_accounting())
    alloc.clear()
    alloc.free_pages[0] = 0  # corrupt the buffer through the view: page 0 listed free
    assert any(v.startswith("INV-3") for v in alloc.verify_byte_accounting())
    with pytest.raises(AssertionError, match="INV-3"):
        alloc.check_invariants()


@pytest.mark.parametrize("checked", [False, True])
@pytest.mark.parametrize("need_sort", [False, True])
def test_free_page_ids_releases_pages_in_order(checked: bool, need_sort: bool) -> None:
    """SGLang's ``free_page_ids``: exactly the pages given, in order (like a segment)."""
    alloc = make_impl(paged=True, size=32, page_size=4, need_sort=need_sort, checked=checked)
    call_impl(alloc, "alloc", (16,))
    alloc.free_page_ids(torch.tensor([3, 1]))
    expected = [5, 6, 7, 8, 3, 1] if need_sort else [3, 1, 5, 6, 7, 8]
    assert free_list(alloc) == expected
    alloc.free_group_begin()
    alloc.free_page_ids(torch.tensor([4]))
    alloc.free(torch.tensor([8]))
    assert alloc.available_size() == 24
    alloc.free_group_end()
    assert free_list(alloc) == ([*expected, 2, 4] if need_sort else [4, 2, *expected])
    alloc.check_invariants()


def test_resize_rebuilds_the_pool() -> None:
    """LIFE-2: new size, then clear; the buffers follow the new page count."""
    alloc = make_impl(paged=True, size=16, page_size=4, need_sort=True, checked=True)
    call_impl(alloc, "alloc", (8,))
    alloc.resize(ResizeConfig(40))
    assert (alloc.size, alloc.num_pages, free_list(alloc)) == (40, 10, list(range(1, 11)))
    assert call_impl(alloc, "alloc", (40,)) == list(range(4, 44))
    alloc.check_invariants()


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize(("group", "page_ids", "then_free"), [
    (False, [2, 2], None),     # a page named twice in one call
    (False, [3], None),        # a page that is free
    (True, [2, 2], None),      # named twice inside a group
    (True, [2], [8, 9]),       # a later free() inside the group names the deferred page again
])
def test_free_page_ids_checked_rejects_double_frees_as_the_model(
        need_sort: bool, group: bool, page_ids: list[int], then_free: list[int] | None) -> None:
    """Checked mode: a page freed twice by ``free_page_ids`` is FREE-3, as the spec model says,
    and the rejected call changes nothing."""
    alloc = make_impl(paged=True, size=32, page_size=4, need_sort=need_sort, checked=True)
    model = AllocatorModel(32, 4, need_sort=need_sort)
    assert call_impl(alloc, "alloc", (8,)) == model.alloc(8) == list(range(4, 12))
    if group:
        alloc.free_group_begin()
        model.free_group_begin()
    if then_free is not None:
        alloc.free_page_ids(torch.tensor(page_ids))
        model.free_page_ids(page_ids)
    before = (free_list(alloc), alloc.available_size())
    with pytest.raises(ContractViolation, match="FREE-3") as raised:
        if then_free is None:
            alloc.free_page_ids(torch.tensor(page_ids))
        else:
            alloc.free(torch.tensor(then_free))
    with pytest.raises(ContractViolation) as expected:
        if then_free is None:
            model.free_page_ids(page_ids)
        else:
            model.free(then_free)
    assert raised.value.clause == expected.value.clause
    assert (free_list(alloc), alloc.available_size()) == before
    alloc.check_invariants()
    if group:
        alloc.free_group_end()
        model.free_group_end()
        assert free_list(alloc) == model.get_all_free_pages()
        alloc.check_invariants()
