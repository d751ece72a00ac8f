"""SGLang 0.5.23's ``DeepSeekV4HiSparseTokenToKVPoolAllocator`` and kvpool's
(:class:`kvpool.impl.hisparse_dsv4.DeepSeekV4HiSparseAllocator`) against
:class:`kvpool.spec.hisparse_dsv4.HiSparseDSV4Model`: the compressed capacity (``HSP-2`` at
compress ratio 4), the compressed last locations (``HSP-10``), and on random prefill / decode /
device-buffer / free / free-group sequences the whole census after every call (the logical
full and SWA free lists, the device free list, the compressed mapping, the three capacity
views). The model's own cases run everywhere; SGLang's skip where it is not installed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.spec import ContractViolation
from kvpool.spec.hisparse_dsv4 import HiSparseDSV4Model, compressed_ids

PS, HPS = 8, 2  # the logical page (a multiple of 4) and the C4 device page
SIZES = {"size": 64, "size_swa": 32, "page_size": PS, "size_hisparse": 8,
         "hisparse_page_size": HPS, "c4_logical_size": 16}


def model() -> HiSparseDSV4Model:
    return HiSparseDSV4Model(SIZES["size"], SIZES["size_swa"], PS,
                             size_hisparse=SIZES["size_hisparse"], hisparse_page_size=HPS,
                             c4_logical_size=SIZES["c4_logical_size"])


def sglang() -> Any:
    from kvpool.oracle.families.hisparse.peer import sglang_hisparse_dsv4

    return sglang_hisparse_dsv4(**SIZES)  # not installed: skipped outside CI (conftest.py)


def kvpool() -> Any:
    """kvpool's variant over kvpool's SWA allocator (checked)."""
    from kvpool.impl import SWATokenToKVPoolAllocator
    from kvpool.impl.hisparse_dsv4 import DeepSeekV4HiSparseAllocator

    logical = SWATokenToKVPoolAllocator(SIZES["size"], SIZES["size_swa"], PS, torch.float16,
                                        "cpu", None, False, checked=True)
    return DeepSeekV4HiSparseAllocator(logical, size_hisparse=SIZES["size_hisparse"],
                                       hisparse_page_size=HPS,
                                       c4_logical_size=SIZES["c4_logical_size"])


TARGETS = {"kvpool": kvpool, "sglang": sglang}


def t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def census(x: Any) -> tuple[Any, ...]:
    logical = x.logical_attn_allocator
    return (logical.full_attn_allocator.get_all_free_pages().tolist(),
            logical.swa_attn_allocator.get_all_free_pages().tolist(),
            x.hisparse_attn_allocator.get_all_free_pages().tolist(),
            x.full_to_hisparse_device_index_mapping.tolist(), x.available_size(),
            x.full_available_size(), x.swa_available_size())


def model_census(m: HiSparseDSV4Model) -> tuple[Any, ...]:
    return (m.logical.full.get_all_free_pages(), m.logical.swa.get_all_free_pages(),
            m.device.get_all_free_pages(), m.mapping_list(), m.available_size(),
            m.full_available_size(), m.swa_available_size())


def test_the_model_binds_every_fourth_position_HSP_5() -> None:
    m = model()
    row = m.alloc_extend([0], [10], [-1])
    assert row == list(range(8, 18))
    assert compressed_ids(row) == [2, 3] and m.mapping == {2: 2, 3: 3}
    assert m.available_size() == min(16, 4 * 6) and m.swa_available_size() == 16  # SWA side
    assert m.get_last_loc_compressed([-1, 10, 11]) == [-1, 1, 2]
    assert m.get_last_loc_hisparse_device([-1, 11, 15]) == [-1, 2, 3]
    with pytest.raises(ContractViolation, match=r"\[HSP-16\]"):
        m.alloc_device_buffer([2, 3], 3)
    assert m.alloc_device_buffer([2, 3], 4) == [2, 3, 4, 5] and not m.mapping


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_matches_the_model_on_a_prefill_and_its_buffer_HSP_7(name: str) -> None:
    x, m = TARGETS[name](), model()
    assert census(x) == model_census(m)
    row = m.alloc_extend([0], [30], [-1])
    assert x.alloc_extend(t([0]), t([0]), t([30]), t([30]), t([-1]), 30).tolist() == row
    assert census(x) == model_census(m)
    ids = compressed_ids(row)
    assert x.alloc_device_buffer(t(ids), 4).tolist() == m.alloc_device_buffer(ids, 4)
    assert census(x) == model_census(m)
    assert x.get_last_loc_compressed(t([-1, 2, 3, 9])).tolist() == \
        m.get_last_loc_compressed([-1, 2, 3, 9])


OPS = st.lists(st.tuples(st.sampled_from(["arrive", "chunk", "decode", "buffer", "finish",
                                          "group", "clear"]),
                         st.integers(0, 7), st.integers(1, 20)), max_size=25)


@pytest.mark.parametrize("name", sorted(TARGETS))
@settings(max_examples=30, deadline=None)
@given(ops=OPS)
def test_random_sequences_agree_with_the_model_HSP_2_HSP_10(
        name: str, ops: list[tuple[str, int, int]]) -> None:
    """Each op on both (an op the model finds short or invalid is skipped on both); the whole
    census equal after every one."""
    x, m = TARGETS[name](), model()
    rows: list[list[int]] = []
    buffers: list[list[int]] = []
    for op, pick, n in ops:
        trial = copy.deepcopy(m)
        row = rows[pick % len(rows)] if rows else None
        try:
            if op == "arrive" or (op == "chunk" and row is not None):
                pre = len(row) if op == "chunk" and row is not None else 0
                loc = row[-1] if op == "chunk" and row is not None else -1
                if trial.alloc_extend([pre], [pre + n], [loc]) is None:
                    continue
                got = x.alloc_extend(t([pre]), t([pre]), t([pre + n]), t([pre + n]), t([loc]),
                                     n)
                want = m.alloc_extend([pre], [pre + n], [loc])
                assert got.tolist() == want
                if op == "arrive":
                    rows.append(list(want or []))
                elif row is not None:
                    row += want or []
            elif op == "decode" and row is not None:
                if trial.alloc_decode([len(row) + 1], [row[-1]]) is None:
                    continue
                got = x.alloc_decode(t([len(row) + 1]), t([len(row) + 1]), t([row[-1]]))
                want = m.alloc_decode([len(row) + 1], [row[-1]])
                assert got.tolist() == want
                row += want or []
            elif op == "buffer" and row is not None:
                ids, need = compressed_ids(row), HPS * (n % 4)
                trial.alloc_device_buffer(ids, need)
                assert x.alloc_device_buffer(t(ids), need).tolist() == \
                    m.alloc_device_buffer(ids, need)
                buffers.append([])  # the buffer's pages may be shared: not freed here
            elif op in ("finish", "group") and row is not None:
                rows.remove(row)
                if op == "group":
                    x.free_group_begin()
                    m.free_group_begin()
                x.free(t(row))
                m.free(row)
                if op == "group":
                    x.free_group_end()
                    m.free_group_end()
            elif op == "clear":
                x.clear()
                m.clear()
                rows, buffers = [], []
        except ContractViolation:
            continue  # the op broke a caller rule (the model refused it on its copy)
        assert census(x) == model_census(m), op
