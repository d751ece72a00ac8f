"""The HiSparse rules (``HSP-1..11``, SPEC.md section 20) on the spec model
(:class:`kvpool.spec.hisparse.HiSparseModel`) and on kvpool's allocator
(:class:`kvpool.impl.hisparse.HiSparseTokenToKVPoolAllocator`): concrete call sequences, each
caller error rejected with its clause and nothing changed (``ERR-1``), then random scheduler
sequences on which the model's invariants hold and the allocator's census (both free lists, the
whole mapping, ``available_size()``) equals the model's after every call."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.impl import HiSparseTokenToKVPoolAllocator
from kvpool.spec import ContractViolation
from kvpool.spec.hisparse import HiSparseModel


def t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def make(size: int, ps: int, ratio: int = 2, need_sort: bool = False) -> Any:
    return HiSparseTokenToKVPoolAllocator(size, ps, torch.float16, "cpu", None, need_sort, ratio)


def census(x: Any) -> tuple[list[int], list[int], list[int], int]:
    return (x.logical_attn_allocator.get_all_free_pages().tolist(),
            x.hisparse_attn_allocator.get_all_free_pages().tolist(),
            x.full_to_hisparse_device_index_mapping.tolist(), x.available_size())


def model_census(m: HiSparseModel) -> tuple[list[int], list[int], list[int], int]:
    return (m.logical.get_all_free_pages(), m.device.get_all_free_pages(), m.mapping_list(),
            m.available_size())


def extend(x: Any, pre: list[int], seq: list[int], loc: list[int], *, logical_only: bool = False
           ) -> Any:
    fn = x.alloc_logical_only if logical_only else x.alloc_extend
    return fn(t(pre), t(pre), t(seq), t(seq), t(loc), sum(seq) - sum(pre))


@pytest.mark.parametrize(("size", "ps", "ratio"), [(8, 1, 2), (16, 4, 3), (8, 4, 1)])
def test_sizes_and_the_fresh_mapping_HSP_1(size: int, ps: int, ratio: int) -> None:
    m, x = HiSparseModel(size, ps, ratio=ratio), make(size, ps, ratio)
    assert x.size == x.size_full == m.size_full == size * ratio
    assert m.logical.num_pages == size * ratio // ps and m.device.num_pages == size // ps
    assert census(x) == model_census(m)
    assert m.mapping_list()[-1] == -1 and len(m.mapping_list()) == size * ratio + ps + 1
    for bad in ((-1, ps, ratio), (size, 0, ratio), (size, ps, 0)):
        with pytest.raises(ContractViolation, match=r"\[HSP-1\]"):
            HiSparseModel(bad[0], bad[1], ratio=bad[2])
        with pytest.raises(ContractViolation, match=r"\[HSP-1\]"):
            make(*bad)


def test_capacity_is_the_smaller_side_HSP_2() -> None:
    m, x = HiSparseModel(8, 4, ratio=2), make(8, 4)
    assert m.alloc_logical_only([0], [8], [-1]) == extend(x, [0], [8], [-1],
                                                          logical_only=True).tolist()
    assert m.available_size() == x.available_size() == 8  # logical 8 free, device 8 free
    m.alloc_extend([0], [4], [-1])
    extend(x, [0], [4], [-1])
    assert m.available_size() == x.available_size() == 4  # the device side: 1 page
    assert census(x) == model_census(m)


def test_alloc_binds_and_rolls_back_HSP_4() -> None:
    m, x = HiSparseModel(2, 1, ratio=3), make(2, 1, 3)
    assert m.alloc(2) == x.alloc(2).tolist() == [1, 2]
    assert m.mapping == {1: 1, 2: 2}
    assert m.alloc(1) is None and x.alloc(1) is None  # device short: slot 3 goes back
    assert census(x) == model_census(m) and m.logical.get_all_free_pages()[0] == 3
    with pytest.raises(ContractViolation, match=r"\[HSP-4\]"):
        make(8, 4).alloc(4)


def test_extend_continues_on_the_bound_device_page_HSP_5() -> None:
    m, x = HiSparseModel(16, 4, ratio=2), make(16, 4)
    row = m.alloc_extend([0], [6], [-1])
    assert extend(x, [0], [6], [-1]).tolist() == row
    more = m.alloc_extend([6], [9], [row[-1]])
    assert extend(x, [6], [9], [row[-1]]).tolist() == more
    assert m.translate(more) == [10, 11, 12] and census(x) == model_census(m)
    buf = m.alloc_device_buffer(row + more, 12)
    assert x.alloc_device_buffer(t(row + more), 12).tolist() == buf
    tail = m.alloc_decode([10], [more[-1]])
    assert x.alloc_decode(t([10]), t([10]), t([more[-1]])).tolist() == tail
    before = census(x)
    for target in (m, x):
        with pytest.raises(ContractViolation, match=r"\[HSP-5\]"):  # unbound mid-page
            if target is m:
                m.alloc_extend([10], [11], tail)
            else:
                extend(x, [10], [11], tail)
    assert census(x) == before == model_census(m)


def test_device_buffer_reuses_pads_and_grows_HSP_7() -> None:
    m, x = HiSparseModel(16, 4, ratio=2), make(16, 4)
    row = m.alloc_extend([0], [6], [-1])
    extend(x, [0], [6], [-1])
    buf = m.alloc_device_buffer(row, 12)  # 6 bound, 2 pad, 4 from a new page
    assert x.alloc_device_buffer(t(row), 12).tolist() == buf == [*range(4, 12), 12, 13, 14, 15]
    assert census(x) == model_census(m) and not m.mapping
    with pytest.raises(ContractViolation, match=r"\[HSP-7\]"):
        x.alloc_device_buffer(t(row), 3)
    m2, x2 = HiSparseModel(16, 4, ratio=2), make(16, 4)
    row = m2.alloc_extend([0], [9], [-1])
    extend(x2, [0], [9], [-1])
    assert m2.alloc_device_buffer(row, 4) == x2.alloc_device_buffer(t(row), 4).tolist()
    assert census(x2) == model_census(m2) and m2.device.get_all_free_pages() == [2, 3, 4]


def test_free_unbinds_and_frees_both_sides_HSP_8_HSP_9() -> None:
    m, x = HiSparseModel(8, 4, ratio=2), make(8, 4)
    row = m.alloc_extend([0], [5], [-1])
    extend(x, [0], [5], [-1])
    before = census(x)
    with pytest.raises(ContractViolation, match=r"\[HSP-8\]"):  # slot 5 stays bound
        x.free(t(row[:1]))
    with pytest.raises(ContractViolation, match=r"\[HSP-8\]"):
        m.free(row[:1])
    assert census(x) == before
    for target in (m, x):  # from mid-page: the bound slots do not start a page
        with pytest.raises(ContractViolation, match=r"\[HSP-7\]"):
            target.alloc_device_buffer(row[1:5] if target is m else t(row[1:5]), 4)
    assert census(x) == before == model_census(m)
    m2, x2 = HiSparseModel(8, 4, ratio=2), make(8, 4)
    row = m2.alloc_extend([0], [4], [-1])
    extend(x2, [0], [4], [-1])
    buf = m2.alloc_device_buffer(row, 4)
    assert x2.alloc_device_buffer(t(row), 4).tolist() == buf
    m2.free(row)
    x2.free(t(row))
    with pytest.raises(ContractViolation, match=r"\[HSP-9\]"):
        x2.free_hisparse_indices(t([8]))  # a free device page
    m2.free_hisparse_indices([0, *buf])
    x2.free_hisparse_indices(t([0, *buf]))
    assert census(x2) == model_census(m2) and m2.available_size() == 8


def test_locations_groups_and_clear_HSP_10_HSP_11() -> None:
    m, x = HiSparseModel(4, 1, ratio=2), make(4, 1)
    row = m.alloc_extend([0], [2], [-1])
    extend(x, [0], [2], [-1])
    assert m.get_last_loc_hisparse_device([2, -1]) == [2, -1]
    assert x.get_last_loc_hisparse_device(t([2, -1])).tolist() == [2, -1]
    assert x.get_last_loc_compressed(t([2, -1])).tolist() == [2, -1]
    with pytest.raises(ContractViolation, match=r"\[HSP-10\]"):
        x.get_last_loc_hisparse_device(t([10]))
    x.free_group_begin()
    x.free(t(row))  # immediate
    m.free(row)
    assert census(x) == model_census(m)
    x.free_group_end()
    x.clear()
    m.clear()
    assert census(x) == model_census(m)


@st.composite
def programs(draw: st.DrawFn) -> tuple[int, int, int, bool, list[tuple[str, int, int]]]:
    ps = draw(st.sampled_from([1, 4]))
    size = ps * draw(st.integers(1, 6))
    ops = draw(st.lists(st.tuples(st.sampled_from(["arrive", "chunk", "buffer", "decode",
                                                   "finish", "alloc"]),
                                  st.integers(0, 7), st.integers(1, 9)), max_size=30))
    return size, ps, draw(st.integers(1, 3)), draw(st.booleans()), ops


@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_sequences_keep_the_invariants_and_agree_HSP_3(
        prog: tuple[int, int, int, bool, list[tuple[str, int, int]]]) -> None:
    """HSP-3 on random scheduler sequences: the model's invariants after every call, and
    kvpool's census equal to the model's."""
    size, ps, ratio, need_sort, ops = prog
    m, x = HiSparseModel(size, ps, ratio=ratio, need_sort=need_sort), make(size, ps, ratio,
                                                                          need_sort)
    rows: list[list[int]] = []
    buffers: list[list[int]] = []
    for op, pick, n in ops:
        snapshot = copy.deepcopy(m)
        try:
            if op == "arrive" or (op == "chunk" and not rows):
                got = m.alloc_extend([0], [n], [-1])
                assert (extend(x, [0], [n], [-1]) is None) == (got is None)
                rows += [got] if got else []
            elif op == "alloc" and ps == 1:
                got = m.alloc(n)
                out = x.alloc(n)
                assert (out.tolist() if out is not None else None) == got
                rows += [got] if got else []
            elif (op == "chunk" or op == "decode") and rows:
                row = rows[pick % len(rows)]
                fn = m.alloc_extend if op == "chunk" else m.alloc_logical_only
                got = fn([len(row)], [len(row) + n], [row[-1]])
                out = extend(x, [len(row)], [len(row) + n], [row[-1]],
                             logical_only=op == "decode")
                assert (out.tolist() if out is not None else None) == got
                row += got or []
            elif op == "buffer" and rows:
                row = rows[pick % len(rows)]
                got = m.alloc_device_buffer(row, ps * (n % 3))
                assert x.alloc_device_buffer(t(row), ps * (n % 3)).tolist() == got
                buffers.append(got)
            elif op == "finish" and rows:
                row = rows.pop(pick % len(rows))
                m.free(row)
                x.free(t(row))
                if buffers:
                    buf = buffers.pop()
                    m.free_hisparse_indices(buf)
                    x.free_hisparse_indices(t(buf))
        except ContractViolation as err:  # the random op broke a caller rule: both refuse
            assert model_census(m) == model_census(snapshot), err
            m = snapshot
            continue
        m.check_invariants()
        x.check_invariants()
        assert census(x) == model_census(m), (op, pick, n)
