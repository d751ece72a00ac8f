"""``alloc_extend_swa_tail`` (SWA-20): kvpool.impl's hybrid allocator call for call equal to the
spec, its refusals; the assignable mapping (SWA-1). The spec's own tests are in
tests/spec/test_spec_hybrid_tail.py."""

from __future__ import annotations

import random

import pytest
import torch
from kvpool.impl import SWATokenToKVPoolAllocator
from kvpool.spec import ContractViolation, HybridModel


def T(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def tail(a: SWATokenToKVPoolAllocator, prefix: int, seq: int, last_loc: int,
         swa_tail_len: int, extend: int | None = None) -> torch.Tensor | None:
    extend = seq - prefix if extend is None else extend
    return a.alloc_extend_swa_tail(T([prefix]), T([prefix]), T([seq]), T([seq]), T([last_loc]),
                                   extend, swa_tail_len)


def pairs(a: SWATokenToKVPoolAllocator) -> dict[int, int]:
    return {f: s for f, s in enumerate(a.full_to_swa_index_mapping[:-1].tolist()) if s}


def _compare(ps: int, need_sort: bool, seed: int) -> None:
    rng = random.Random(seed)
    impl = SWATokenToKVPoolAllocator(96, 48, ps, torch.float16, "cpu", None, need_sort,
                                     checked=True)
    spec = HybridModel(96, 48, ps, need_sort=need_sort)
    rows: list[list[int]] = []
    for _ in range(40):
        if rows and rng.random() < 0.4:
            row = rows.pop(rng.randrange(len(rows)))
            peers = spec.translate_loc_from_full_to_swa(row)
            head = sum(1 for p in peers if p == 0)
            for model in (spec, impl):
                model.free_full(row[:head] if model is spec else T(row[:head]))
                model.free(row[head:] if model is spec else T(row[head:]))
        else:
            seq = rng.randrange(1, 24)
            swa_tail_len = seq - ps * rng.randrange(0, seq // ps + 1)  # starts on a page
            want = spec.alloc_extend_swa_tail([0], [seq], [-1], seq, swa_tail_len)
            got = tail(impl, 0, seq, -1, swa_tail_len)
            assert (None if got is None else got.tolist()) == want
            if want is not None:
                rows.append(want)
        assert pairs(impl) == spec.mapping
        assert impl.full_attn_allocator.free_pages.tolist() == spec.full.free_pages
        assert impl.swa_attn_allocator.free_pages.tolist() == spec.swa.free_pages
        assert impl.available_size() == spec.available_size()
        impl.check_invariants()


@pytest.mark.parametrize(("ps", "need_sort"), [(2, False), (4, False), (4, True)])
def test_impl_matches_the_spec_call_for_call_SWA_20(ps: int, need_sort: bool) -> None:
    for seed in range(3):
        _compare(ps, need_sort, seed)


@pytest.mark.parametrize("checked", [False, True])
def test_impl_refuses_a_bad_tail_unchanged_SWA_20(checked: bool) -> None:
    a = SWATokenToKVPoolAllocator(64, 32, 4, torch.float16, "cpu", None, False, checked=checked)
    before = (pairs(a), a.full_available_size(), a.swa_available_size())
    for args in ((0, 10, -1, 5), (0, 10, -1, 11)):
        with pytest.raises(ContractViolation) as err:
            tail(a, *args)
        assert err.value.clause == "SWA-20"
    with pytest.raises(ContractViolation, match="one request"):
        a.alloc_extend_swa_tail(T([0, 0]), T([0, 0]), T([4, 4]), T([4, 4]), T([-1, -1]), 8, 4)
    assert (pairs(a), a.full_available_size(), a.swa_available_size()) == before
    assert tail(a, 0, 16, -1, 16) is not None
    assert tail(a, 0, 48, -1, 24) is None  # 12 full pages, but only 4 left


def test_the_mapping_is_assignable_SWA_1() -> None:
    a = SWATokenToKVPoolAllocator(16, 16, 4, torch.float16, "cpu", None, False)
    row = a.alloc_extend(T([0]), T([0]), T([4]), T([4]), T([-1]), 4)
    assert row is not None
    fresh = a.full_to_swa_index_mapping.clone()
    a.full_to_swa_index_mapping = fresh  # as SGLang code may assign it
    assert a.full_to_swa_index_mapping is fresh
    a.free_swa(row)  # the release reads and clears the new tensor
    assert fresh[row].tolist() == [0, 0, 0, 0] and a.swa_available_size() == 16
    for bad in (fresh[:-1], fresh.to(torch.int32), [0] * fresh.numel()):
        with pytest.raises(ContractViolation) as err:
            a.full_to_swa_index_mapping = bad  # type: ignore[assignment]
        assert err.value.clause == "SWA-1" and a.full_to_swa_index_mapping is fresh


def test_page_size_one_has_no_tail_allocation_SWA_20() -> None:
    a = SWATokenToKVPoolAllocator(16, 16, 1, torch.float16, "cpu", None, False)
    with pytest.raises(NotImplementedError, match="SWA-20"):
        tail(a, 0, 4, -1, 4)


def test_checked_mode_refuses_before_the_shortage_decision_EXTEND_1() -> None:
    """A wrong extend_num_tokens is a caller error even when the SWA side is short (checked
    mode checks the whole call before deciding None)."""
    a = SWATokenToKVPoolAllocator(64, 8, 4, torch.float16, "cpu", None, False, checked=True)
    assert tail(a, 0, 16, -1, 12) is None  # 3 SWA pages wanted, 2 exist
    with pytest.raises(ContractViolation):
        tail(a, 0, 16, -1, 12, extend=15)


def test_the_slots_before_the_tail_lose_a_stale_peer_SWA_20() -> None:
    """As SGLang's, the call clears the mapping of the full slots before the tail: a stale
    entry left on a free full page (set by a caller) reads as released afterwards."""
    a = SWATokenToKVPoolAllocator(64, 32, 4, torch.float16, "cpu", None, False)
    a.set_full_to_swa_mapping(T([4, 5, 6, 7]), T([4, 5, 6, 7]))
    row = tail(a, 0, 8, -1, 4)
    assert row is not None and row.tolist() == list(range(4, 12))
    assert a.full_to_swa_index_mapping[row].tolist() == [0, 0, 0, 0, 4, 5, 6, 7]
