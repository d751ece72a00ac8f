"""kvpool.impl.SWATokenToKVPoolAllocator against the hybrid spec (SWA-*): the same random
traffic on both, states compared after every call; checked-mode errors; SGLang's signatures."""

from __future__ import annotations

import inspect
import random
from dataclasses import dataclass

import pytest
import torch
from kvpool.impl import SWATokenToKVPoolAllocator
from kvpool.spec import ContractViolation, HybridModel, HybridResizeConfig
from kvpool.spec.window import slide_end


def T(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def state(a: SWATokenToKVPoolAllocator) -> tuple[object, ...]:
    full, swa = a.full_attn_allocator, a.swa_attn_allocator
    pairs = {f: s for f, s in enumerate(a.full_to_swa_index_mapping[:-1].tolist()) if s}
    return (full.free_pages.tolist(), full.release_pages.tolist(), swa.free_pages.tolist(),
            swa.release_pages.tolist(), pairs, a.available_size())


def spec_state(h: HybridModel) -> tuple[object, ...]:
    return (h.full.free_pages, h.full.staged, h.swa.free_pages, h.swa.staged, h.mapping,
            h.available_size())


@dataclass
class Pair:
    impl: SWATokenToKVPoolAllocator
    spec: HybridModel

    def same(self) -> None:
        assert state(self.impl) == spec_state(self.spec)
        self.impl.check_invariants()


def make(ps: int, need_sort: bool, checked: bool = True, size: int = 96,
         size_swa: int = 48) -> Pair:
    impl = SWATokenToKVPoolAllocator(size, size_swa, ps, torch.float16, "cpu", None, need_sort,
                                     checked=checked)
    return Pair(impl, HybridModel(size, size_swa, ps, need_sort=need_sort))


def run(pair: Pair, rng: random.Random, steps: int) -> None:
    """Grow, decode, slide (free_swa / free_swa_segment), finish (free_full + free or
    free_full_segments + free_segments, in or out of a group)."""
    ps = pair.spec.page_size
    rows: list[tuple[list[int], int]] = []
    for _ in range(steps):
        op = rng.random()
        if op < 0.3 or not rows:
            n = rng.randint(1, 3 * ps + 2)
            if ps == 1:
                got, want = pair.impl.alloc(n), pair.spec.alloc(n)
            else:
                got = pair.impl.alloc_extend(T([0]), T([0]), T([n]), T([n]), T([-1]), n)
                want = pair.spec.alloc_extend([0], [n], [-1], n)
            assert (None if got is None else got.tolist()) == want
            if want is not None:
                rows.append((want, 0))
        elif op < 0.55 and ps > 1:
            picks = rng.sample(range(len(rows)), min(len(rows), rng.randint(1, 3)))
            seqs = [len(rows[i][0]) + 1 for i in picks]
            locs = [rows[i][0][-1] for i in picks]
            if any(rows[i][1] >= len(rows[i][0]) and (s - 1) % ps for i, s in zip(picks, seqs)):
                continue
            got = pair.impl.alloc_decode(T(seqs), T(seqs), T(locs))
            want = pair.spec.alloc_decode(seqs, locs)
            assert (None if got is None else got.tolist()) == want
            for k, i in enumerate(picks):
                if want is not None:
                    rows[i] = (rows[i][0] + [want[k]], rows[i][1])
        elif op < 0.8:
            i = rng.randrange(len(rows))
            row, front = rows[i]
            end = slide_end(len(row), rng.randint(1, 2 * ps + 1), ps)
            if end <= front:
                continue
            if rng.random() < 0.5:
                pair.impl.free_swa(T(row[front:end]))
                pair.spec.free_swa(row[front:end])
            else:
                pair.impl.free_swa_segment(T(row[front:end]), start_pos=front)
                pair.spec.free_swa_segment(row[front:end], start_pos=front)
            rows[i] = (row, end)
        else:
            row, front = rows.pop(rng.randrange(len(rows)))
            grouped = rng.random() < 0.5
            for side in (pair.impl, pair.spec):
                if grouped:
                    side.free_group_begin()
            if rng.random() < 0.5:
                pair.impl.free_full(T(row[:front]))
                pair.spec.free_full(row[:front])
                pair.impl.free(T(row[front:]))
                pair.spec.free(row[front:])
            else:
                pair.impl.free_full_segments([(T(row[:front]), 0)])
                pair.spec.free_full_segments([(row[:front], 0)])
                pair.impl.free_segments([(T(row[front:]), front)])
                pair.spec.free_segments([(row[front:], front)])
            if grouped:
                pair.impl.check_invariants()
                for side in (pair.impl, pair.spec):
                    side.free_group_end()
        pair.same()


@pytest.mark.parametrize(("ps", "need_sort", "checked"),
                         [(1, False, True), (1, True, False), (2, True, True), (4, False, True),
                          (4, False, False), (4, True, False)])
def test_random_traffic_matches_the_spec_SWA_7_SWA_10_SWA_14_SWA_15(
        ps: int, need_sort: bool, checked: bool) -> None:
    """SWA-7, SWA-9, SWA-10, SWA-13..15: the same results, free lists, staging and pairs."""
    pair = make(ps, need_sort, checked)
    run(pair, random.Random(ps * 10 + need_sort), 250)


def test_refused_decode_keeps_both_sides_SWA_9() -> None:
    """SWA-9: an SWA-side shortage refuses the decode before the full side moves (B14)."""
    pair = make(4, False, size=64, size_swa=8)
    row = pair.impl.alloc_extend(T([0]), T([0]), T([8]), T([8]), T([-1]), 8)
    assert row is not None
    before = state(pair.impl)
    assert pair.impl.alloc_decode(T([9]), T([9]), row[-1:]) is None
    assert state(pair.impl) == before


@pytest.mark.parametrize("ps", [1, 4])
def test_checked_errors_match_the_spec_and_change_nothing_SWA_11_SWA_12_SWA_16(ps: int) -> None:
    """SWA-8, SWA-11, SWA-12, SWA-16: the spec's clause, nothing changed."""
    pair = make(ps, False)
    n = 6
    rows = []
    for _ in range(2):
        if ps == 1:
            rows.append(pair.impl.alloc(n).tolist())  # type: ignore[union-attr]
            pair.spec.alloc(n)
        else:
            got = pair.impl.alloc_extend(T([0]), T([0]), T([n]), T([n]), T([-1]), n)
            rows.append(got.tolist())  # type: ignore[union-attr]
            pair.spec.alloc_extend([0], [n], [-1], n)
    row, row2 = rows
    pair.impl.free_swa(T(row[:ps]))
    pair.spec.free_swa(row[:ps])
    pair.impl.free_swa(T(row2))                     # the partial page's peers go too
    pair.spec.free_swa(row2)
    bad = [("free_swa", lambda t: t.free_swa(row[:1])), ("free", lambda t: t.free(row[:1])),
           ("free_full", lambda t: t.free_full(row[ps:])),
           ("translate", lambda t: t.translate_loc_from_full_to_swa([90]))]
    if ps > 1:
        bad.append(("extend", lambda t: t.alloc_extend([n], [n + 1], [row2[n - 1]], 1)))
    for name, call in bad:
        before = state(pair.impl)
        with pytest.raises(ContractViolation) as want:
            call(pair.spec)
        with pytest.raises(ContractViolation) as got:
            if name == "extend":
                pair.impl.alloc_extend(T([n]), T([n]), T([n + 1]), T([n + 1]), T([row2[n - 1]]), 1)
            elif name == "translate":
                pair.impl.translate_loc_from_full_to_swa(T([90]))
            else:
                call(_Tensorise(pair.impl))
        assert got.value.clause == want.value.clause, name
        assert state(pair.impl) == before
    pair.same()


class _Tensorise:
    """Calls the allocator with tensors where the spec takes lists."""

    def __init__(self, target: SWATokenToKVPoolAllocator) -> None:
        self.target = target

    def __getattr__(self, name: str) -> object:
        method = getattr(self.target, name)
        return lambda idx: method(T(idx))


def test_resize_grows_the_mapping_SWA_18() -> None:
    """SWA-18: after a resize past the constructor's size every full slot can be paired."""
    a = SWATokenToKVPoolAllocator(16, 16, 4, torch.float16, "cpu", None, False)
    a.resize(HybridResizeConfig(full_max_total_num_tokens=64, swa_max_total_num_tokens=64))
    row = a.alloc_extend(T([0]), T([0]), T([60]), T([60]), T([-1]), 60)
    assert row is not None and a.translate_loc_from_full_to_swa(row).min() > 0
    a.check_invariants()


def test_kvcache_interface_and_signatures() -> None:
    """The KV pool gets the mapping; SGLang 0.5.23's parameter names and order."""
    registered: list[torch.Tensor] = []

    class Pool:
        full_kv_pool = swa_kv_pool = None
        swa_req_ring_size = None

        def register_mapping(self, mapping: torch.Tensor) -> None:
            registered.append(mapping)

    a = SWATokenToKVPoolAllocator(32, 16, 4, torch.float16, "cpu", Pool(), False)
    assert registered[-1] is a.full_to_swa_index_mapping and int(registered[-1][-1]) == -1
    ring = Pool()
    ring.swa_req_ring_size = 8  # type: ignore[assignment]
    with pytest.raises(NotImplementedError, match="ring"):
        SWATokenToKVPoolAllocator(32, 16, 4, torch.float16, "cpu", ring, False)
    expected = {
        "__init__": ["size", "size_swa", "page_size", "dtype", "device", "kvcache", "need_sort",
                     "req_to_token_pool"],
        "alloc_extend": ["prefix_lens", "prefix_lens_cpu", "seq_lens", "seq_lens_cpu", "last_loc",
                         "extend_num_tokens"],
        "alloc_decode": ["seq_lens", "seq_lens_cpu", "last_loc"],
        "free_swa_segment": ["free_index", "start_pos"],
        "translate_loc_from_full_to_swa": ["kv_indices"],
    }
    for name, params in expected.items():
        got = list(inspect.signature(getattr(SWATokenToKVPoolAllocator, name)).parameters)[1:]
        assert got[: len(params)] == params, name
