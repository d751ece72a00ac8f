"""kvpool's ``PureSWATokenToKVPoolAllocator`` (SWA-21..25) against ``PureSWAModel``, call for
call, and its checked mode's typed errors (nothing changed on a refusal)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from kvpool.impl.swa_pure import PureSWATokenToKVPoolAllocator
from kvpool.spec import ContractViolation, HybridResizeConfig
from kvpool.spec.hybrid_pure import PureSWAModel


def _pair(size: int, need_sort: bool = False,
          checked: bool = True) -> tuple[PureSWATokenToKVPoolAllocator, PureSWAModel]:
    a = PureSWATokenToKVPoolAllocator(size, 1, torch.float16, "cpu", None, need_sort,
                                      checked=checked)
    return a, PureSWAModel(size, need_sort=need_sort)


def _same(a: PureSWATokenToKVPoolAllocator, m: PureSWAModel) -> None:
    assert a.full_attn_allocator.get_all_free_pages().tolist() == m.full.get_all_free_pages()
    assert (a.available_size(), a.full_available_size(), a.swa_available_size()) == (
        m.available_size(), m.full_available_size(), m.swa_available_size())
    assert a.verify_byte_accounting() == []
    a.check_invariants()


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("checked", [False, True])
def test_calls_match_the_model_SWA_22_SWA_24(need_sort: bool, checked: bool) -> None:
    a, m = _pair(8, need_sort, checked)
    assert a.full_attn_allocator is a.swa_attn_allocator  # SWA-21
    row = a.alloc(5)
    assert row is not None and row.tolist() == m.alloc(5)
    x = row[:2].to(torch.int32)
    assert a.translate_loc_from_full_to_swa(x) is x  # SWA-22: the input itself
    a.free_swa(row[:2])
    m.free_swa(row[:2].tolist())
    _same(a, m)
    a.free_full(row[:2])
    m.free_full(row[:2].tolist())
    _same(a, m)
    a.free_group_begin()
    m.free_group_begin()
    a.free_segments([(row[2:3], 2), (row[3:], 3)])
    m.free_segments([(row[2:3].tolist(), 2), (row[3:].tolist(), 3)])
    assert a.swa_deferred_pages() == m.swa_deferred_pages()
    a.free_group_end()
    m.free_group_end()
    _same(a, m)
    a.resize(SimpleNamespace(full_max_total_num_tokens=12, swa_max_total_num_tokens=12))
    m.resize(HybridResizeConfig(12, 12))
    assert a.full_to_swa_index_mapping.tolist() == [*range(13), -1]
    _same(a, m)


def test_checked_errors_change_nothing_SWA_11_SWA_16_SWA_25() -> None:
    a, _ = _pair(6)
    row = a.alloc(3)
    assert row is not None
    a.free_swa(row[:1])
    before = (a.full_attn_allocator.get_all_free_pages().tolist(), a.available_size())
    bad = [(lambda: a.free(row[:1]), "SWA-11"),
           (lambda: a.free_swa(torch.tensor([2, 2])), "SWA-11"),
           (lambda: a.free_swa_segment(row[:1], start_pos=0), "SWA-11"),
           (lambda: a.translate_loc_from_full_to_swa(row[:1]), "SWA-16"),
           (lambda: a.resize(SimpleNamespace(full_max_total_num_tokens=6,
                                             swa_max_total_num_tokens=4)), "SWA-25")]
    for call, clause in bad:
        with pytest.raises(ContractViolation) as err:
            call()
        assert err.value.clause == clause
        assert (a.full_attn_allocator.get_all_free_pages().tolist(), a.available_size()) == before


def test_page_size_above_one_and_paged_calls_are_refused_SWA_21() -> None:
    with pytest.raises(ContractViolation) as err:
        PureSWATokenToKVPoolAllocator(16, 4, torch.float16, "cpu", None, False)
    assert err.value.clause == "SWA-21"
    a, _ = _pair(4, checked=False)
    for name in ("alloc_extend", "alloc_decode", "alloc_extend_swa_tail"):
        with pytest.raises(NotImplementedError, match="SWA-21"):
            getattr(a, name)()
    with pytest.raises(ContractViolation) as err:
        a.full_to_swa_index_mapping = torch.zeros(6, dtype=torch.int64)
    assert err.value.clause == "SWA-22"
