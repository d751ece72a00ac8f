"""The compiled one-pass release (``_native.release``) and group copies (``_native.defer``).

``free()`` and a free group's end go through ``NativeOps.release`` on the CPU: the pages of a
slot tensor (``slots // ps``) or of a group's bytearray copies, sorted distinct for the paged
allocator, checked against the room left and written into the free list's buffer at the place
the list says. Here each is held to a plain-Python statement of that effect on random inputs,
including wrap-around at the end of the ring, out-of-order pages past the loop's sort limits,
and every refusal (nothing written). The allocators built on it are held to the spec model by
the forced-backend soaks of ``test_impl_backend.py``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator, base
from kvpool.impl.native_ops import NativeOps, native_available
from kvpool.impl.numpy_ops import NumpyOps
from kvpool.spec.errors import ContractViolation

pytestmark = pytest.mark.skipif(not native_available(), reason="extension not built")

INT64 = torch.int64
MERGE_SORT = 4096  # csrc/dedup.c: more distinct pages out of order than this go to numpy's sort


def _all_owned(num_bytes: int = 1 << 16) -> np.ndarray:
    """An ownership bitmap in which every page is handed out (the guard lets every release
    through: these tests are about placement; ``test_impl_ownership.py`` about the guard)."""
    return np.full(num_bytes, 0xFF, dtype=np.uint8)


def _native() -> Any:
    from kvpool.impl import _native  # type: ignore[attr-defined]

    return _native


def _expected(values: list[int], ps: int, dedup: bool) -> list[int]:
    pages = [v // ps for v in values]
    return sorted(set(pages)) if dedup else pages


def _written(buf_len: int, at: int, backwards: bool, pages: list[int]) -> dict[int, int]:
    """Buffer index -> page, for ``pages`` written at ``at`` (or ending there) modulo the
    buffer's length."""
    start = at - len(pages) if backwards else at
    return {(start + i) % buf_len: p for i, p in enumerate(pages)}


@given(values=st.lists(st.integers(-(2**8), 2**15), max_size=80),
       ps=st.sampled_from([1, 3, 4, 16]), dedup=st.booleans(), backwards=st.booleans(),
       split=st.integers(0, 80), data=st.data())
def test_release_writes_the_pages_where_asked(values: list[int], ps: int, dedup: bool,
                                              backwards: bool, split: int, data: Any) -> None:
    """From a tensor (divided by ps) or from bytearray parts (page ids as they are): the pages,
    sorted distinct when asked, at ``[at, at + k)`` or ``[at - k, at)`` modulo the length;
    ``-1 - k`` with nothing written when ``k`` exceeds the room; None, nothing written, when
    the guard refuses a page (negative, or named twice without dedup)."""
    pages = _expected(values, ps, dedup)
    refused = any(p < 0 for p in pages) or len(set(pages)) != len(pages)
    buf_len = data.draw(st.integers(max(1, len(pages)), len(pages) + 20))
    at = data.draw(st.integers(0, buf_len))
    room = data.draw(st.integers(0, len(pages) + 3))
    ids = [v // ps for v in values]
    parts = [bytearray(np.array(ids[:split], dtype=np.int64).tobytes()),
             bytearray(np.array(ids[split:], dtype=np.int64).tobytes())]
    sources: list[tuple[Any, int]] = [(torch.tensor(values, dtype=INT64), ps), (parts, 7)]
    for source, given_ps in sources:  # a list's parts are page ids: its ps is not applied
        buf = np.full(buf_len, -5, dtype=np.int64)
        got = _native().release(given_ps, source, dedup, buf, at, backwards, room, _all_owned())
        if len(pages) > room:
            assert got == -1 - len(pages)
            assert buf.tolist() == [-5] * buf_len
            continue
        if refused:
            assert got is None
            assert buf.tolist() == [-5] * buf_len
            continue
        assert got == len(pages)
        want = [-5] * buf_len
        for i, p in _written(buf_len, at, backwards, pages).items():
            want[i] = p
        assert buf.tolist() == want


@pytest.mark.parametrize("num_pages", [65, 700, MERGE_SORT])
def test_release_sorts_many_pages_out_of_order(num_pages: int) -> None:
    """Past the insertion sort (64) the loop merge-sorts, repeats dropped, up to MERGE_SORT."""
    rng = np.random.default_rng(num_pages)
    ids = rng.permutation(num_pages) + 1
    slots = torch.from_numpy(np.repeat(ids, 2) * 4 + 1)  # each page twice, shuffled
    buf = np.zeros(num_pages, dtype=np.int64)
    assert _native().release(4, slots, True, buf, num_pages, True, num_pages,
                            _all_owned()) == num_pages
    assert buf.tolist() == list(range(1, num_pages + 1))


def test_release_leaves_too_many_pages_out_of_order_to_numpy() -> None:
    """More than MERGE_SORT distinct pages out of order: None, nothing written (the numpy form
    sorts them); in order, any number is taken."""
    buf = np.zeros(MERGE_SORT + 1, dtype=np.int64)
    shuffled = torch.arange(MERGE_SORT + 1, 0, -1)
    assert _native().release(1, shuffled, True, buf, 0, False, 10**6, _all_owned()) is None
    assert not buf.any()
    ascending = torch.arange(1, MERGE_SORT + 2)
    assert _native().release(1, ascending, True, buf, 0, False, 10**6,
                            _all_owned()) == MERGE_SORT + 1
    assert buf.tolist() == ascending.tolist()


@pytest.mark.parametrize("form", ["int32", "strided", "meta", "numpy", "part_int32",
                                  "part_odd_bytes", "part_bytes"])
def test_release_hands_other_inputs_back(form: str) -> None:
    """A tensor the loop does not read, or a list item that is not a bytearray of whole int64s:
    None, nothing written."""
    sources = {
        "int32": torch.arange(8, dtype=torch.int32),
        "strided": torch.arange(16)[::2],
        "meta": torch.empty(8, dtype=INT64, device="meta"),
        "numpy": np.arange(8, dtype=np.int64),
        "part_int32": [bytearray(8), np.arange(2, dtype=np.int32)],
        "part_odd_bytes": [bytearray(12)],
        "part_bytes": [bytes(8)],
    }
    buf = np.full(20, -5, dtype=np.int64)
    assert _native().release(4, sources[form], True, buf, 10, True, 20, _all_owned()) is None
    assert buf.tolist() == [-5] * 20


def test_release_argument_checks() -> None:
    """Wrong argument count: TypeError; page size < 1, a position outside the buffer or more
    pages than it holds: ValueError; a buffer of another item size: TypeError. Nothing
    written."""
    buf = np.full(4, -5, dtype=np.int64)
    slots = torch.arange(3)
    with pytest.raises(TypeError, match="takes 8 arguments"):
        _native().release(1, slots, True, buf, 0, False)
    with pytest.raises(ValueError, match="page size"):
        _native().release(0, slots, True, buf, 0, False, 9, _all_owned())
    for at in (-1, 5):
        with pytest.raises(ValueError, match="do not fit"):
            _native().release(1, slots, True, buf, at, False, 9, _all_owned())
    with pytest.raises(ValueError, match="do not fit"):
        _native().release(1, torch.arange(5), False, buf, 0, False, 9, _all_owned())
    with pytest.raises(TypeError, match="int64 buffer"):
        _native().release(1, slots, True, np.zeros(4, dtype=np.int32), 0, False, 9,
                          _all_owned())
    assert buf.tolist() == [-5] * 4


@given(values=st.lists(st.integers(-(2**62), 2**62), max_size=40),
       ps=st.sampled_from([1, 3, 16]))
def test_defer_copies_the_page_ids(values: list[int], ps: int) -> None:
    """A new bytearray of ``slots // ps`` (ps 1: the slots), as the numpy backend's page ids;
    writing the tensor afterwards leaves it alone (GROUP-3)."""
    slots = torch.tensor(values, dtype=INT64)
    copy = _native().defer(slots, ps)
    assert isinstance(copy, bytearray)
    want = NumpyOps(ps, "cpu").page_ids(slots).tolist()
    slots.fill_(-1)
    assert np.frombuffer(copy, dtype=np.int64).tolist() == want


def test_defer_hands_other_inputs_back_and_the_ops_copy_them() -> None:
    """``_native.defer`` of a tensor it does not read: None; ``NativeOps.defer`` then keeps
    the numpy form's page ids as a bytearray, so a group's copies are all of one kind."""
    strided = torch.arange(40)[::3]
    assert _native().defer(strided, 4) is None
    with pytest.raises(ValueError, match="page size"):
        _native().defer(strided, 0)
    for source in (strided, strided.to(torch.int32)):
        copy = NativeOps(4, "cpu").defer(source)
        assert isinstance(copy, bytearray)
        assert np.frombuffer(copy, dtype=np.int64).tolist() == [v // 4 for v in strided.tolist()]


@pytest.mark.parametrize("need_sort", [False, True])
@pytest.mark.parametrize("paged", [False, True])
def test_one_pass_release_matches_the_numpy_backend(paged: bool, need_sort: bool) -> None:
    """Frees, grouped frees with repeats and a double free refused (FREE-3): the compiled
    allocator's lists equal the numpy one's after every call, and a refused call changes
    neither."""
    def make(ops: type[NumpyOps]) -> Any:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(base, "ops_for", ops)
            if paged:
                return PagedTokenToKVPoolAllocator(96, 4, torch.float16, "cpu", None, need_sort)
            return TokenToKVPoolAllocator(24, torch.float16, "cpu", None, need_sort)

    pair = make(NativeOps), make(NumpyOps)
    assert [type(a._ops) for a in pair] == [NativeOps, NumpyOps]
    rng = np.random.default_rng(3)

    def state(a: Any) -> tuple[list[int], list[int], int]:
        return a.free_pages.tolist(), a.release_pages.tolist(), a.available_size()

    for _ in range(40):
        num_slots = pair[0].page_size * int(rng.integers(1, 4))
        rows = [a.alloc(num_slots) for a in pair]
        assert all(r is not None for r in rows)
        order = rng.permutation(rows[0].numel())
        grouped = bool(rng.integers(0, 2))
        for a, row in zip(pair, rows, strict=True):
            shuffled = row[torch.from_numpy(order)]
            if grouped:
                a.free_group_begin()
                a.free(shuffled[: len(order) // 2])
                a.free(shuffled[len(order) // 2 :])
                if paged:
                    a.free(shuffled[:1])  # a page named twice in one group: once (GROUP-6)
                a.free_group_end()
            else:
                a.free(shuffled)
            with pytest.raises(Exception, match="FREE-3"):
                a.free(torch.arange(a.page_size, a.page_size * (a.num_pages + 1)))
        assert state(pair[0]) == state(pair[1])
        for a in pair:
            a.check_invariants()


@given(pages=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30),
       ps=st.sampled_from([1, 3, 16]), data=st.data())
def test_slots_at_lays_out_the_pages_from_a_position(pages: list[int], ps: int,
                                                     data: Any) -> None:
    """``alloc``'s one pass: every slot of ``num_pages`` pages from ``start`` (wrapping at the
    end of the buffer), page-major, as the numpy backend's ``slots_of_pages``."""
    start = data.draw(st.integers(0, len(pages) - 1))
    num_pages = data.draw(st.integers(0, len(pages)))
    view = np.array(pages, dtype=np.int64)
    got = NativeOps(ps, "cpu").take_slots(view, start, num_pages, _all_owned())
    assert got is not None and got.dtype == INT64
    taken = np.roll(view, -start)[:num_pages]
    assert got.tolist() == NumpyOps(ps, "cpu").slots_of_pages(taken).tolist()


def test_slots_at_argument_checks() -> None:
    """A start outside the buffer, a negative or too large count, or ps < 1: ValueError."""
    view = np.arange(4, dtype=np.int64)
    for start, num_pages, ps in ((4, 1, 1), (-1, 1, 1), (0, 5, 1), (0, -1, 1), (0, 1, 0)):
        with pytest.raises(ValueError, match="slots_at"):
            _native().slots_at(ps, view, start, num_pages, _all_owned())
    empty = _native().slots_at(1, view, 9, 0, _all_owned())  # nothing to take: any start
    assert empty.dtype == INT64 and empty.shape == (0,)


@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300),
       width=st.sampled_from([0, 5, 11, 12, 22, 23, 33, 34, 63]))
def test_sort_values_sorts_or_declines(values: list[int], width: int) -> None:
    """Repeats kept; a range below 2^33 sorted (True), a wider one left as it was (False)."""
    base = values[0] if values else 0
    narrowed = [max(-(2**63), min(2**63 - 1, base + v % (1 << width))) for v in values]
    array = np.array(narrowed, dtype=np.int64)
    ok = _native().sort_values(array)
    if ok:
        assert array.tolist() == sorted(narrowed)
    else:
        assert array.tolist() == narrowed and len(values) > 64
        assert max(narrowed) - min(narrowed) >= 2**33


@pytest.mark.parametrize("top_bit", [32, 33, 34])
def test_sort_values_range_limit_is_2_to_the_33(top_bit: int) -> None:
    """Past the insertion sort's 64 values, a range of 2^33 - 1 is radix-sorted in three
    11-bit digits and one of 2^33 (or 2^34 - 1) is declined: no digit is ever dropped."""
    span = (1 << top_bit) - 1 if top_bit != 33 else 1 << 33
    values = [(i * 7919) % 100 for i in range(100)]
    values = [v * (span // 99) for v in values] + [span]  # min 0, max span
    array = np.array(values[::-1], dtype=np.int64)
    ok = _native().sort_values(array)
    assert ok is (span < 1 << 33)
    assert array.tolist() == (sorted(values) if ok else values[::-1])


def test_merge_of_staged_pages_over_a_wide_range_matches_numpy() -> None:
    """Staged pages in several runs whose range the radix sort declines (≥ 2^33: values an
    unchecked free can stage): numpy's sort takes them, and the merge is the numpy backend's."""
    front = np.array([3, 9, 2**40], dtype=np.int64)
    staged = np.array([5, 2**41, 1, 2**35, 4] * 20, dtype=np.int64)
    want_k, want = NumpyOps(1, "cpu").merge_sorted(front, staged.copy(), front_sorted=True)
    got_k, got = NativeOps(1, "cpu").merge_sorted(front, staged.copy(), front_sorted=True)
    assert (got_k, got.tolist()) == (want_k, want.tolist())
    assert got.tolist() == sorted([3, 9, 2**40, *staged.tolist()])


@pytest.mark.parametrize("num_pages", [100, MERGE_SORT + 10])
def test_paged_free_of_many_pages_out_of_order_matches_numpy(num_pages: int) -> None:
    """A paged ``free`` of many pages out of order (past the loop's insertion sort, and past
    MERGE_SORT, where the numpy sort of ``NativeOps.distinct`` takes over) releases the same
    sorted distinct pages as the numpy backend."""
    def freed(ops: type[NumpyOps]) -> list[int]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(base, "ops_for", ops)
            alloc = PagedTokenToKVPoolAllocator(4 * num_pages, 4, torch.float16, "cpu", None,
                                                False)
        row = alloc.alloc(4 * num_pages)
        assert row is not None
        order = torch.from_numpy(np.random.default_rng(num_pages).permutation(row.numel()))
        alloc.free(row[order])
        alloc.check_invariants()
        pages: list[int] = alloc.free_pages.tolist()
        return pages

    assert freed(NativeOps) == freed(NumpyOps) == list(range(1, num_pages + 1))
    shuffled = np.random.default_rng(1).permutation(np.arange(1, 200, dtype=np.int64))
    assert NativeOps(4, "cpu").distinct(shuffled.copy()).tolist() == list(range(1, 200))


def _in_runs(staged: list[int], data: Any) -> tuple[list[int], list[int]]:
    """``staged`` cut into runs at drawn offsets, each run sorted (the seams may descend), and
    those offsets: what ``Staging.runs`` vouches for."""
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(staged) - 1)),
                                         max_size=4)))) if len(staged) > 1 else []
    bounds = [0, *cuts, len(staged)]
    runs = [sorted(staged[a:b]) for a, b in itertools.pairwise(bounds)]
    return [p for run in runs for p in run], cuts


@given(free=st.lists(st.integers(1, 400), max_size=40, unique=True),
       staged=st.lists(st.integers(1, 400), max_size=100, unique=True),
       spread=st.sampled_from([0, 0, 32, 33]), vouched=st.booleans(), data=st.data())
def test_merge_front_merges_in_the_buffer_or_declines(free: list[int], staged: list[int],
                                                      spread: int, vouched: bool,
                                                      data: Any) -> None:
    """The stack's list ``buf[top:]`` ascends and its staged pages lie anywhere below it, in
    any order or in runs the caller vouches ascend (``runs``: only their seams are read, and
    they may descend): True with ``sorted(free + staged)`` as ``buf[top - count:]`` and every
    other entry below it (unused, or the staged pages' own span) untouched outside the staged
    span; False, nothing moved, when the staged range reaches 2^33 (``spread`` 33 or more,
    past 64 pages)."""
    free = sorted(set(free) - set(staged))
    if spread and staged:  # page ids far apart: the radix sort's range limit
        staged = [p << spread if i % 2 else p for i, p in enumerate(staged)]
    runs: list[int] | None = None
    if vouched:
        staged, runs = _in_runs(staged, data)
    count = len(staged)
    base = data.draw(st.integers(0, 30))
    top = base + count + data.draw(st.integers(0, 2 * count + 5))
    buf = np.full(top + len(free), -7, dtype=np.int64)
    buf[base : base + count] = staged
    buf[top:] = free
    before = buf.copy()
    if not _native().merge_front(buf, top, base, count, runs):
        assert buf.tolist() == before.tolist()
        assert count > 64 and max(staged) - min(staged) >= 2**33
        return
    assert buf[top - count :].tolist() == sorted(free + staged)
    outside = [i for i in range(top - count) if not base <= i < base + count]
    assert [int(buf[i]) for i in outside] == [int(before[i]) for i in outside]


def test_merge_front_large_runs_sorted_and_overlapping() -> None:
    """Past the insertion sort's 64 pages: staged pages in several descending runs (sorted by
    the radix sort), merged with free pages interleaved with them, and a merged span that
    reaches the staged pages (they are copied out first)."""
    rng = np.random.default_rng(5)
    pages = rng.permutation(np.arange(1, 3001, dtype=np.int64))
    staged, free = pages[:1200], np.sort(pages[1200:])
    for start, top in ((0, 2400), (0, 1500), (300, 1500)):
        buf = np.zeros(top + free.size, dtype=np.int64)
        buf[start : start + staged.size] = staged
        buf[top:] = free
        assert _native().merge_front(buf, top, start, staged.size, None)
        assert buf[top - staged.size :].tolist() == list(range(1, 3001))
    wide = np.array([p << 33 if p % 2 else p for p in range(1, 101)], dtype=np.int64)
    buf = np.concatenate((wide[::-1], np.arange(1 << 40, (1 << 40) + 5, dtype=np.int64)))
    before = buf.copy()
    assert not _native().merge_front(buf, 100, 0, 100, None)  # range past 2^33: declined
    assert buf.tolist() == before.tolist()


def test_merge_front_argument_checks() -> None:
    """Staged pages not clear of the list, a negative base or count, a top past the buffer:
    ValueError, nothing moved."""
    buf = np.arange(10, dtype=np.int64)
    for top, start, count in ((5, 3, 3), (5, -1, 2), (5, 0, -1), (11, 0, 2)):
        with pytest.raises(ValueError, match="merge_front"):
            _native().merge_front(buf, top, start, count, None)
    assert buf.tolist() == list(range(10))
    assert _native().merge_front(buf, 4, 0, 0, None) and buf.tolist() == list(range(10))
    with pytest.raises(TypeError):  # a run offset that is not an int
        _native().merge_front(buf, 5, 0, 3, [1, "2"])
    assert buf.tolist() == list(range(10))


@pytest.mark.parametrize("runs", [None, [], [700], [5, 1999], [0], [2000]])
def test_merge_front_moves_nothing_right_below_the_front(runs: list[int] | None) -> None:
    """Staged pages that ascend right below the list and end below its front (a batch given
    back in the order it was taken) are already ``sort(free ∪ staged)``: True, every entry of
    the buffer as it was, whether the runs are vouched for or read (an offset outside the
    staged pages: read). One page too high, or one out of order, and they are merged."""
    free = np.arange(3000, 5000, dtype=np.int64)
    buf = np.concatenate((np.full(50, -7, dtype=np.int64),
                          np.arange(1000, 3000, dtype=np.int64), free))
    before = buf.copy()
    assert _native().merge_front(buf, 2050, 50, 2000, runs)
    assert buf.tolist() == before.tolist()
    high = before.copy()
    high[2049] = 3500  # above the front: merged behind 3499
    assert _native().merge_front(high, 2050, 50, 2000, runs)
    assert high[50:].tolist() == sorted([*before[50:2049].tolist(), 3500, *free.tolist()])
    swapped = before.copy()
    swapped[[1049, 1050]] = swapped[[1050, 1049]]  # one seam inside the first run descends
    assert _native().merge_front(swapped, 2050, 50, 2000, None)
    assert swapped.tolist() == before.tolist()


@pytest.mark.parametrize("ops", [NativeOps, NumpyOps])
def test_paged_merge_in_place_only_where_compiled(ops: type) -> None:
    """``Staging.merge_in_place``: the compiled backend merges the paged stack in its buffer
    (the list starts ``count`` pages earlier, nothing staged); numpy declines (the allocator's
    ``merge_sorted`` path). Both give SGLang's order."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "ops_for", ops)
        alloc = PagedTokenToKVPoolAllocator(64, 4, torch.float16, "cpu", None, True)
    row = alloc.alloc(40)
    assert row is not None
    alloc.free(row[24:])
    alloc.free(row[:8])
    top, staged = alloc._free.top, alloc._staged
    merged = staged.merge_in_place()
    assert merged is (ops is NativeOps)
    if not merged:
        alloc.merge_and_sort_free()
    assert (alloc._free.top, len(staged)) == (top - 6, 0)
    assert alloc.free_pages.tolist() == [1, 2, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
    alloc.check_invariants()


def _paged_pair(num_pages: int, ps: int) -> list[PagedTokenToKVPoolAllocator]:
    """The same need_sort paged allocator on the compiled and on the numpy backend."""
    pair = []
    for ops in (NativeOps, NumpyOps):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(base, "ops_for", ops)
            pair.append(PagedTokenToKVPoolAllocator(num_pages * ps, ps, torch.float16, "cpu",
                                                    None, True))
    return pair


def _same_state(pair: list[PagedTokenToKVPoolAllocator]) -> None:
    """Both backends hold the same free list and the same staged pages in release order."""
    for alloc in pair:
        alloc.check_invariants()
    native, host = pair
    assert native.free_pages.tolist() == host.free_pages.tolist()
    assert native.release_pages.tolist() == host.release_pages.tolist()


def _extend_args(prefix: list[int], seq: list[int], last: list[int]) -> tuple[Any, ...]:
    pre, sl = torch.tensor(prefix), torch.tensor(seq)
    return pre, pre, sl, sl, torch.tensor(last), sum(seq) - sum(prefix)


def test_batches_freed_in_take_order_lie_where_the_merge_puts_them() -> None:
    """alloc_extend, then free of its result, over and over (a prefill batch whose requests
    end together): the first free after a merge goes just below the list's front and every
    later one into the gap the next take leaves, so the staged pages sit right before the list,
    in runs the frees vouch ascend. When the bound runs short the one pass merges them in place
    (no separate ``merge_and_sort_free``) and both backends agree throughout."""
    pair = _paged_pair(640, 1)  # room for 10 run offsets
    args = _extend_args([0, 0, 0], [90, 70, 40], [-1, -1, -1])  # 200 new pages, bound 204
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pair[0], "merge_and_sort_free", None)  # the compiled one pass merges
        merges = 0
        for step in range(14):
            outs = [alloc.alloc_extend(*args) for alloc in pair]
            assert outs[0] is not None and outs[1] is not None
            assert outs[0].tolist() == outs[1].tolist()
            for alloc, out in zip(pair, outs, strict=True):
                alloc.free(out)
            _same_state(pair)
            staged, top = pair[0]._staged, pair[0]._free.top
            assert staged.base + staged.count == top  # right below the front
            assert staged.runs == list(range(200, staged.count, 200)), step
            merges += step > 0 and staged.count == 200  # merged by the take, then staged
    assert merges == 4  # every third call: 640 pages hold three batches


def test_releases_beyond_the_gap_compact_the_staged_pages() -> None:
    """Frees with no take between them outgrow the gap below the list: the staged pages move
    to the buffer's start once, in release order, and later frees follow them there. A free
    of unsorted pages (``free_page_ids``) makes the merge read them all. With need_sort
    switched off, a push that would reach staged pages lying right below the front compacts
    them first. Both backends agree at every step."""
    ps = 2
    pair = _paged_pair(128, ps)  # room for 2 run offsets
    rows = [[alloc.alloc(8 * ps) for alloc in pair] for _ in range(3)]
    for row in rows:
        for alloc, got in zip(pair, row, strict=True):
            assert got is not None
            alloc.free(got[: 4 * ps])
        _same_state(pair)
    assert pair[0]._staged.base == 0 and pair[0]._staged.runs == [4, 8]
    for alloc in pair:
        alloc.free_page_ids(torch.tensor([8, 6, 7]))
    _same_state(pair)
    assert pair[0]._staged.runs is None
    for alloc in pair:
        alloc.merge_and_sort_free()
    _same_state(pair)
    for alloc, row in zip(pair, rows[1], strict=True):
        alloc.free(row[4 * ps :])  # staged just below the front
    assert pair[0]._staged.base + pair[0]._staged.count == pair[0]._free.top
    for alloc, row in zip(pair, rows[2], strict=True):
        alloc.need_sort = False
        alloc.free(row[4 * ps :])  # pushed where the staged pages lay: they move first
    _same_state(pair)
    assert pair[0]._staged.base == 0
    for alloc in pair:
        alloc.need_sort = True
        alloc.merge_and_sort_free()
    _same_state(pair)
    # every page but 5 (the first row's, which free_page_ids left owned), sorted
    assert pair[0].free_pages.tolist() == [p for p in range(1, 129) if p != 5]


@pytest.mark.parametrize("call", ["extend", "decode"])
def test_one_pass_take_leaves_an_unsorted_list_to_the_full_merge(call: str) -> None:
    """need_sort switched on after pushes left the list out of order: the one-pass take does
    not merge in place (the list is not known to ascend) but answers False, and the allocator
    sorts ``free ∪ staged`` whole before it takes, as on the numpy backend (SGLang's order:
    the smallest pages first)."""
    ps = 4
    pair = _paged_pair(12, ps)
    for alloc in pair:
        alloc.need_sort = False
        rows = [alloc.alloc(2 * ps) for _ in range(5)]
        assert all(row is not None for row in rows)
        alloc.free(rows[1])  # pushed: the list is 3, 4, 11, 12 (still ascending)
        alloc.free(rows[3])  # 7, 8, 3, 4, 11, 12: out of its order
        alloc.need_sort = True
        alloc.free(rows[0])  # staged: 1, 2
        alloc.free(rows[2])  # staged: 1, 2, 5, 6
    _same_state(pair)
    assert pair[0]._free_sorted is False
    if call == "extend":  # bound 13 // 4 + 3 + 1 = 7 > 6 free pages: merge, take 4
        outs = [alloc.alloc_extend(*_extend_args([0, 0, 0], [8, 4, 1], [-1, -1, -1]))
                for alloc in pair]
        want = [1, 2, 3, 4]
    else:  # 7 opening requests > 6 free pages: merge, take 7
        seq = torch.tensor([1, 5, 9, 1, 5, 9, 1])
        last = torch.tensor([-1, 39, 43, -1, 39, 43, -1])  # on pages 9, 10: still handed out
        outs = [alloc.alloc_decode(seq, seq, last) for alloc in pair]
        want = [1, 2, 3, 4, 5, 6, 7]
    assert outs[0] is not None and outs[1] is not None
    assert outs[0].tolist() == outs[1].tolist()
    assert sorted({int(s) // ps for s in outs[0].tolist()}) == want  # from sort(free ∪ staged)
    _same_state(pair)


@pytest.mark.parametrize("extra", [1, -1])
def test_irregular_extend_batch_is_refused_before_any_merge(extra: int) -> None:
    """A batch whose ``extend_num_tokens`` disagrees with its lengths (unchecked): the one pass
    hands it to the two-step form before anything moves, and both backends refuse it
    (``EXTEND-1``) with the staged pages still staged, although the bound exceeds the list."""
    ps = 4
    pair = _paged_pair(10, ps)
    for alloc in pair:
        got = alloc.alloc(8 * ps)
        assert got is not None
        alloc.free(got[4 * ps :])  # staged right below the front; 2 pages free
    pre, seq = torch.tensor([0, 0]), torch.tensor([5, 3])  # 3 new pages, bound 2 + 2 + 1 > 2
    for alloc in pair:
        staged = len(alloc._staged)
        with pytest.raises(ContractViolation, match="EXTEND-1"):
            alloc.alloc_extend(pre, pre, seq, seq, torch.tensor([-1, -1]), 8 + extra)
        assert len(alloc._staged) == staged == 4  # nothing merged
    _same_state(pair)


def test_run_offsets_stay_under_a_byte_per_page() -> None:
    """A free per page keeps one run offset each only up to ``num_pages // 64`` of them; past
    that the staging forgets them (the merge reads every staged page) and the merge still
    gives SGLang's order."""
    pair = _paged_pair(256, 1)  # at most 4 offsets
    for alloc in pair:
        got = alloc.alloc(12)
        assert got is not None
        for slot in got.tolist()[::2]:
            alloc.free(torch.tensor([slot]))
        if alloc is pair[0]:
            assert alloc._staged.runs is None
        alloc.merge_and_sort_free()
    _same_state(pair)
    assert pair[0].free_pages.tolist()[:6] == [1, 3, 5, 7, 9, 11]
    native = pair[0]
    got = native.alloc(8)
    assert got is not None
    for slot in got.tolist()[:5]:
        native.free(torch.tensor([slot]))
    assert native._staged.runs == [1, 2, 3, 4]  # 5 frees: the first run and 4 offsets
