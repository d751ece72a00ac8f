"""The compiled CPU backend (``NativeOps``) against the numpy one, at the edges the loops own.

``test_impl_backend.py`` ties both host backends to the torch one on random valid batches; here:
int64 wrap-around (the loops compute in unsigned arithmetic, as numpy does), the inputs the loops
hand to the numpy form (int32, strided, lengths that disagree, irregular batches: same result or
same error), ``distinct`` on unsorted runs, the merge with staged pages in several runs, and the
extension's own argument checks. Where the extension is not built the module checks only that
this is allowed (``KVPOOL_REQUIRE_NATIVE`` unset).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from kvpool.impl import PagedTokenToKVPoolAllocator
from kvpool.impl.backend import TorchOps
from kvpool.impl.native_ops import NativeOps, native_available
from kvpool.impl.numpy_ops import NumpyOps
from kvpool.spec.layout import merge_bound
from torch.overrides import TorchFunctionMode

INT64_MAX = 2**63 - 1


def test_native_is_built_where_required() -> None:
    """CI sets ``KVPOOL_REQUIRE_NATIVE=1``: there the extension must have been compiled."""
    if os.environ.get("KVPOOL_REQUIRE_NATIVE") == "1":
        assert native_available(), "kvpool.impl._native was not built"
    if not native_available():
        with pytest.raises(ImportError):
            NativeOps(4, "cpu")


needs_native = pytest.mark.skipif(not native_available(), reason="extension not built")


def _outcome(call: Any, *args: Any) -> Any:
    """``call(*args)`` as an int or a list of ints, or the type of the error it raised."""
    try:
        out = call(*args)
    except Exception as error:  # compared between the backends, not swallowed
        return type(error)
    if isinstance(out, int):
        return out
    return [int(v) for v in out.tolist()]


def _both(ps: int) -> tuple[NativeOps, NumpyOps]:
    return NativeOps(ps, "cpu"), NumpyOps(ps, "cpu")


BIG = st.integers(-(2**63), INT64_MAX)


@needs_native
@given(ps=st.sampled_from([1, 3, 4, 16]), data=st.data())
def test_wraparound_matches_numpy(ps: int, data: Any) -> None:
    """Values anywhere in int64 (overflowing sums and products included): the same counts and
    slots as the numpy backend, or the same error."""
    native, host = _both(ps)
    bs = data.draw(st.integers(1, 6))
    seq = torch.tensor(data.draw(st.lists(BIG, min_size=bs, max_size=bs)))
    last = torch.tensor(data.draw(st.lists(BIG, min_size=bs, max_size=bs)))
    pages = np.array(data.draw(st.lists(BIG, min_size=0, max_size=bs)), dtype=np.int64)
    assert native.decode_new_pages(seq) == host.decode_new_pages(seq)
    assert (_outcome(native.decode_slots, seq, last, pages)
            == _outcome(host.decode_slots, seq, last, pages))
    assert _outcome(native.page_ids, seq) == _outcome(host.page_ids, seq)
    pre = torch.tensor(data.draw(st.lists(BIG, min_size=bs, max_size=bs)))
    # the torch form wraps like the loops (numpy's few-requests form counts in host ints)
    assert native.extend_new_pages(pre, seq) == TorchOps(ps, "cpu").extend_new_pages(pre, seq)


@needs_native
@given(ps=st.sampled_from([1, 2, 4, 16]), data=st.data())
def test_extend_near_the_int64_edges_matches_numpy(ps: int, data: Any) -> None:
    """Regular batches whose slots sit next to the int64 limits: the same slots as the torch
    form, which wraps around like the loops (numpy's few-requests form adds host ints and
    raises OverflowError instead)."""
    native, ref = NativeOps(ps, "cpu"), TorchOps(ps, "cpu")
    bs = data.draw(st.integers(1, 6))
    pre = [data.draw(st.integers(0, 3 * ps)) for _ in range(bs)]
    seq = [p + data.draw(st.integers(0, 3 * ps)) for p in pre]
    last = [data.draw(st.sampled_from([INT64_MAX, INT64_MAX - 1, -(2**63), -1, 5]))
            for _ in range(bs)]
    pre_t, seq_t, last_t = torch.tensor(pre), torch.tensor(seq), torch.tensor(last)
    count = ref.extend_new_pages(pre_t, seq_t)
    assert native.extend_new_pages(pre_t, seq_t) == count
    page_values = st.sampled_from([INT64_MAX // ps, min(INT64_MAX // ps + 1, INT64_MAX), 2**62,
                                   7])
    pages = np.array([data.draw(page_values) for _ in range(count)], dtype=np.int64)
    tokens = sum(seq) - sum(pre)
    assert (_outcome(native.extend_slots, pre_t, seq_t, last_t, pages, tokens)
            == _outcome(ref.extend_slots, pre_t, seq_t, last_t, torch.from_numpy(pages), tokens))


@needs_native
@pytest.mark.parametrize("ps", [1, 4])
@pytest.mark.parametrize(("pre", "seq", "pages", "tokens"), [
    ([0, 2], [5, 1], [3, 4], 5),  # a negative extend
    ([0, 0], [5, 3], [3, 4], 9),  # token total above Σ extend
    ([0, 0], [5, 3], [3, 4], 7),  # token total below Σ extend
    ([0, 0], [5, 3], [3], 8),  # fewer pages than the batch needs
    ([0, 0], [5, 3], [3, 4, 5, 6, 7, 8, 9, 10, 11], 8),  # more pages than the batch needs
    ([], [], [], 3),  # an empty batch with tokens
])
def test_irregular_batches_take_the_numpy_form(ps: int, pre: list[int], seq: list[int],
                                               pages: list[int], tokens: int) -> None:
    """An irregular batch: the same result or the same error as the numpy backend."""
    native, host = _both(ps)
    pre_t, seq_t = torch.tensor(pre, dtype=torch.int64), torch.tensor(seq, dtype=torch.int64)
    last = torch.full((len(pre),), 40, dtype=torch.int64)
    pages_np = np.array(pages, dtype=np.int64)
    assert (_outcome(native.extend_slots, pre_t, seq_t, last, pages_np.copy(), tokens)
            == _outcome(host.extend_slots, pre_t, seq_t, last, pages_np.copy(), tokens))


@needs_native
@pytest.mark.parametrize("form", ["int32", "int32_prefix", "int32_seq", "int32_last",
                                  "strided", "short_last", "short_prefix"])
def test_other_inputs_take_the_numpy_form(form: str) -> None:
    """int32 (all, or one of the lengths) or strided lengths, or lengths that disagree in size:
    the numpy backend's result or error (the loops read only int64, contiguous, equal-length
    CPU tensors)."""
    native, host = _both(4)
    pre, seq, last = torch.tensor([0, 3, 1]), torch.tensor([6, 9, 4]), torch.tensor([-1, 30, 8])
    if form == "int32":
        pre, seq, last = (t.to(torch.int32) for t in (pre, seq, last))
    elif form == "int32_prefix":
        pre = pre.to(torch.int32)
    elif form == "int32_seq":
        seq = seq.to(torch.int32)
    elif form == "int32_last":
        last = last.to(torch.int32)
    elif form == "strided":
        pre, seq, last = (t.repeat_interleave(2)[::2] for t in (pre, seq, last))
    elif form == "short_last":  # contiguous slices: what follows them in memory is known
        last = torch.tensor([-1, 30, 10**6])[:2]
        seq = torch.tensor([6, 9, 5])  # an opener past the end of last_loc
    else:
        pre = torch.tensor([0, 3, 101])[:2]
    pages = np.array([11, 12, 13, 14], dtype=np.int64)
    for call in ("decode_new_pages", "page_ids"):
        assert _outcome(getattr(native, call), seq) == _outcome(getattr(host, call), seq)
    assert (_outcome(native.decode_slots, seq, last, pages[:2])
            == _outcome(host.decode_slots, seq, last, pages[:2]))
    count = _outcome(host.extend_new_pages, pre, seq)
    assert _outcome(native.extend_new_pages, pre, seq) == count
    assert (_outcome(native.extend_slots, pre, seq, last, pages[:3], 15)
            == _outcome(host.extend_slots, pre, seq, last, pages[:3], 15))


@needs_native
@given(runs=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 5)), max_size=150))
def test_distinct_of_runs_matches_numpy(runs: list[tuple[int, int]]) -> None:
    """Runs of equal pages in any order, few (sorted by the loop) or many (by numpy): each page
    once, ascending, as the numpy backend."""
    values = np.array([v for v, n in runs for _ in range(n)], dtype=np.int64)
    native, host = _both(4)
    assert native.distinct(values.copy()).tolist() == host.distinct(values.copy()).tolist()
    assert native.distinct(values.copy()).tolist() == sorted({v for v, _ in runs})


@needs_native
@given(free=st.lists(st.integers(1, 200), unique=True), data=st.data())
def test_merge_matches_numpy(free: list[int], data: Any) -> None:
    """Staged pages in one or several sorted runs (a repeat of a free page included: an
    unchecked double free): the same replaced count and merged pages as the numpy backend."""
    free.sort()
    runs = data.draw(st.lists(st.lists(st.integers(1, 220), min_size=1, max_size=8),
                              min_size=1, max_size=4))
    staged = np.array([p for run in runs for p in sorted(run)], dtype=np.int64)
    front = np.array(free, dtype=np.int64)  # backend form, as the allocator passes them
    native, host = _both(1)
    got_k, got = native.merge_sorted(front, staged, front_sorted=True)
    want_k, want = host.merge_sorted(front, staged, front_sorted=True)
    assert (got_k, got.tolist()) == (want_k, want.tolist())
    # unsorted front: both take the whole-list sort
    got_k, got = native.merge_sorted(front[::-1].copy(), staged, front_sorted=False)
    want_k, want = host.merge_sorted(front[::-1].copy(), staged, front_sorted=False)
    assert (got_k, got.tolist()) == (want_k, want.tolist())
    assert want.tolist() == sorted(free + staged.tolist())


@needs_native
def test_a_cpu_allocator_uses_the_loops() -> None:
    """An allocator on the CPU runs ``NativeOps`` (unless ``KVPOOL_NATIVE=0``), and its results
    are fresh tensors (``ALIAS-1``)."""
    if os.environ.get("KVPOOL_NATIVE") == "0":
        pytest.skip("KVPOOL_NATIVE=0 in this environment")
    alloc = PagedTokenToKVPoolAllocator(64, 4, torch.float16, "cpu", None, False)
    assert type(alloc._ops) is NativeOps
    lens = torch.tensor([0]), torch.tensor([6])
    out = alloc.alloc_extend(lens[0], lens[0], lens[1], lens[1], torch.tensor([-1]), 6)
    assert out is not None and out.tolist() == [4, 5, 6, 7, 8, 9]
    before = alloc.free_pages.tolist()
    out.fill_(-1)
    assert alloc.free_pages.tolist() == before


@needs_native
def test_extension_argument_checks() -> None:
    """The extension refuses a wrong argument count or a buffer of another item size with
    TypeError (never reads it)."""
    from kvpool.impl import _native  # type: ignore[attr-defined]

    with pytest.raises(TypeError, match="takes 1 arguments"):
        _native.distinct_runs()
    with pytest.raises(TypeError, match="int64 buffer"):
        _native.distinct_runs(np.zeros(3, dtype=np.int32))
    with pytest.raises(TypeError):
        _native.merge_below(np.zeros(3, dtype=np.int64), np.ones(2, dtype=np.int64),
                            np.zeros(5, dtype=np.int32))
    with pytest.raises(ValueError, match="output too small"):
        _native.merge_below(np.arange(5, dtype=np.int64), np.array([9], dtype=np.int64),
                            np.zeros(2, dtype=np.int64))
    slots = torch.arange(64, 74)  # 10 slots at page size 4, offset 1: index 0, 3, 7
    for start, ps, offset, size in ((0, 4, 1, 2), (0, 4, 1, 4), (0, 4, 4, 3), (0, 4, -1, 3),
                                    (10, 4, 0, 1), (-1, 4, 1, 3), (0, 0, 0, 3)):
        out = np.full(size, -7, dtype=np.int64)
        with pytest.raises(ValueError, match="segment_page_ids"):
            _native.segment_page_ids(slots, start, ps, offset, out)
        assert out.tolist() == [-7] * size  # nothing written
    out = np.empty(3, dtype=np.int64)
    assert _native.segment_page_ids(slots, 0, 4, 1, out) is True
    assert out.tolist() == [16, 16, 17]
    out = np.empty(2, dtype=np.int64)  # slots[3:]: index 0 and 4 at offset 0
    assert _native.segment_page_ids(slots, 3, 4, 0, out) is True
    assert out.tolist() == [16, 17]


@needs_native
@pytest.mark.parametrize(("free", "staged"), [
    ([*range(1, 51), *range(200, 401)], [*range(60, 151), *range(401, 406)]),  # long runs
    ([*range(2, 600, 2)], [*range(1, 500, 2)]),  # interleaved one by one
    ([*range(1, 300)], [*range(300, 310)]),  # every free page below the staged ones
    ([*range(100, 300)], [*range(1, 90)]),  # every staged page below the free ones
    ([*range(1, 40), *range(41, 90)], [40, 40, 90]),  # repeats (unchecked double frees)
])
def test_merge_of_long_runs_matches_numpy(free: list[int], staged: list[int]) -> None:
    """The run-copying merge on runs longer than its linear scan: numpy's result."""
    native, host = _both(1)
    front, new = np.array(free, dtype=np.int64), np.array(staged, dtype=np.int64)
    got_k, got = native.merge_sorted(front, new, front_sorted=True)
    want_k, want = host.merge_sorted(front, new, front_sorted=True)
    assert (got_k, got.tolist()) == (want_k, want.tolist())
    assert got.tolist() == sorted([p for p in free if p < max(staged)] + staged)


@needs_native
@pytest.mark.parametrize("viewed", ["prefix", "seq"])
def test_a_view_at_a_counted_address_is_checked_afresh(viewed: str) -> None:
    """The layout reuses the count's checked addresses only for the very tensors it counted: a
    strided view starting at the address of either counted tensor (another tensor) is read as
    the numpy form reads it, for the extend and for the decode."""
    native, host = _both(4)
    # the views' values and the first three at their address differ but have the same token
    # and page totals, so reading the wrong ones would not look irregular
    pre, seq = torch.tensor([0, 2, 1, 0, 2, 0]), torch.tensor([5, 7, 6, 0, 7, 0])
    last = torch.tensor([-1, 30, 41])
    pages = np.array([11, 12, 13, 14], dtype=np.int64)
    if viewed == "prefix":  # [0, 1, 2] at pre's address (which holds 0, 2, 1 first)
        pre_arg, seq_arg = pre.view(3, 2)[:, 0], torch.tensor([5, 6, 7])
    else:  # [5, 6, 7] at seq's address (which holds 5, 7, 6 first)
        pre_arg, seq_arg = torch.tensor([0, 1, 2]), seq.view(3, 2)[:, 0]
    assert pre_arg.tolist() == [0, 1, 2] and seq_arg.tolist() == [5, 6, 7]
    tokens = int((seq_arg - pre_arg).sum())
    native.extend_new_pages(pre, seq)
    got = _outcome(native.extend_slots, pre_arg, seq_arg, last, pages, tokens)
    assert got == _outcome(host.extend_slots, pre_arg, seq_arg, last, pages, tokens)
    if viewed == "seq":
        native.decode_new_pages(seq)
        assert (_outcome(native.decode_slots, seq_arg, last, pages[:1])
                == _outcome(host.decode_slots, seq_arg, last, pages[:1]))


def test_without_the_extension_the_numpy_backend_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without a C compiler: ``native_available()`` is False, ``NativeOps`` refuses
    to be built (ImportError) and CPU allocators run ``NumpyOps``."""
    from kvpool.impl import native_ops
    from kvpool.impl.backend_choice import ops_for

    monkeypatch.setattr(native_ops, "_native", None)
    monkeypatch.delenv("KVPOOL_NATIVE", raising=False)
    assert not native_ops.native_available()
    with pytest.raises(ImportError, match="not built"):
        NativeOps(4, "cpu")
    assert type(ops_for(4, "cpu")) is NumpyOps
    alloc = PagedTokenToKVPoolAllocator(64, 4, torch.float16, "cpu", None, False)
    assert type(alloc._ops) is NumpyOps


@needs_native
def test_a_counted_tensor_moved_to_other_memory_is_read_there() -> None:
    """A counted tensor whose storage is replaced before the layout (``set_``) is read at its
    new address, not the one the count checked (whose memory is kept alive here, with values
    that would lay out regularly too)."""
    native, host = _both(4)
    pre, seq = torch.tensor([0, 3]), torch.tensor([5, 9])
    kept = seq[:]  # the counted memory stays alive
    last = torch.tensor([-1, 30])
    pages = np.array([11, 12, 13, 14], dtype=np.int64)
    native.extend_new_pages(pre, seq)
    seq.set_(torch.tensor([9, 5]))  # the same token and page totals, another layout
    assert kept.tolist() == [5, 9]
    assert (_outcome(native.extend_slots, pre, seq, last, pages, 11)
            == _outcome(host.extend_slots, pre, seq, last, pages, 11))
    seq.set_(torch.tensor([4, 8]))  # no request opens a page
    native.decode_new_pages(seq)
    kept = seq[:]
    seq.set_(torch.tensor([5, 9]))  # both open one
    assert kept.tolist() == [4, 8]
    assert (_outcome(native.decode_slots, seq, last, pages[:2])
            == _outcome(host.decode_slots, seq, last, pages[:2]))


@needs_native
def test_merge_of_nothing_staged_is_refused_like_numpy() -> None:
    """The allocator merges only when pages are staged; called with none, both CPU backends
    refuse (numpy's max of an empty array) rather than move any free page."""
    front = np.array([1, 2, 3], dtype=np.int64)
    for backend in _both(1):
        with pytest.raises(ValueError):
            backend.merge_sorted(front, np.empty(0, dtype=np.int64), front_sorted=True)


@needs_native
@pytest.mark.parametrize("form", ["int64", "int32", "strided", "array", "array_int32",
                                  "array_strided"])
def test_write_matches_numpy(form: str) -> None:
    """``write`` puts the pages at ``[start, start + k)`` of the buffer and nothing elsewhere,
    whatever the pages' form (the loops copy int64 contiguous tensors and arrays; others take
    numpy)."""
    values = [7, 3, 9]
    doubled = [v for v in values for _ in (0, 1)]
    pages: Any = {"int64": torch.tensor(values), "int32": torch.tensor(values, dtype=torch.int32),
                  "strided": torch.tensor(doubled)[::2],
                  "array": np.array(values, dtype=np.int64),
                  "array_int32": np.array(values, dtype=np.int32),
                  "array_strided": np.array(doubled, dtype=np.int64)[::2]}[form]
    results = []
    for backend in _both(1):
        view = np.zeros(8, dtype=np.int64)
        backend.write(view, 4, pages)
        results.append(view.tolist())
    assert results[0] == results[1] == [0, 0, 0, 0, 7, 3, 9, 0]


@needs_native
@pytest.mark.parametrize(("start", "count"), [(6, 3), (-1, 2), (8, 1), (9, 0)])
def test_write_outside_the_buffer_is_refused(start: int, count: int) -> None:
    """The extension never writes outside the buffer: ValueError, buffer unchanged."""
    from kvpool.impl import _native  # type: ignore[attr-defined]

    view = np.zeros(8, dtype=np.int64)
    with pytest.raises(ValueError, match="outside a buffer of 8"):
        _native.write_at(view, start, torch.arange(1, 1 + count))
    with pytest.raises(ValueError, match="outside a buffer of 8"):
        _native.copy_into(view, start, np.arange(1, 1 + count, dtype=np.int64))
    assert view.tolist() == [0] * 8


def _two_step(host: NumpyOps, free: np.ndarray, top: int, count: int, lay_out: Any) -> Any:
    """What the allocator's two-step path gives: None when short, else the layout of the first
    ``count`` free pages (or the error it raises) and ``count``."""
    if count > free.size - top:
        return None
    return _outcome(lay_out, free[top : top + count]), count


def _stack_with_staging(data: Any, max_listed: int) -> tuple[np.ndarray, int, int, int,
                                                               list[int], bool]:
    """A paged free list's buffer as a one-pass take sees it: ``[junk | staged | junk | list]``.
    Returns ``(buffer, top, base, num_staged, the list, in_place)``, where ``in_place`` (the
    list ascends, ``base`` is given) allows the take to merge."""
    in_place = data.draw(st.booleans())
    listed = data.draw(st.lists(st.integers(1, 500), max_size=max_listed))
    if in_place:
        listed.sort()
    staged = data.draw(st.sampled_from([[], [], [7], [450, 2, 99, 3, 600, 41, 42],
                                        [1, 2, 3], [0, 0]]))
    if staged == [0, 0]:  # pages right below the list's front: nothing to move
        staged = list(range(max(0, (listed[0] if listed else 10) - 3),
                            listed[0] if listed else 10))
    before, after = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))
    buf = np.array([-5] * before + staged + [-6] * after + listed, dtype=np.int64)
    return buf, before + len(staged) + after, before, len(staged), listed, in_place


def _runs(buf: np.ndarray, base: int, num_staged: int, data: Any) -> list[int] | None:
    """What ``Staging.runs`` may say of the staged pages: one run when they ascend (vouched
    or not), else nothing (read them all)."""
    staged = buf[base : base + num_staged].tolist()
    return [] if staged == sorted(staged) and data.draw(st.booleans()) else None


def _after_take(buf: np.ndarray, top: int, base: int, num_staged: int, listed: list[int],
                merge: bool) -> tuple[np.ndarray, int, int]:
    """The buffer, top and staged count a take leaves (before it takes pages): SGLang's
    ``sort(free ∪ staged)`` from ``top - num_staged`` when it merges."""
    if not merge:
        return buf, top, num_staged
    merged = buf.copy()
    merged[top - num_staged :] = sorted(listed + buf[base : base + num_staged].tolist())
    return merged, top - num_staged, 0


def _check_one_pass(one_pass: Any, buf: np.ndarray, want_buf: np.ndarray, top: int,
                    base: int, staged: int, want: Any, regular: bool) -> None:
    """A one-pass answer against the two steps on the list the merge (if any) left: the
    counters, the list and the pages still staged (the rest of the buffer is unused), and the
    slots (None when short; False only for an irregular batch, which the two-step form
    answers)."""
    assert one_pass is not None and one_pass is not False
    slots, new_top, left = one_pass
    assert left == staged
    assert buf[top:].tolist() == want_buf[top:].tolist()
    assert buf[base : base + staged].tolist() == want_buf[base : base + staged].tolist()
    if slots is False:
        assert not regular and new_top == top
        return
    assert (None if slots is None else (slots.tolist(), new_top - top)) == want
    if slots is None:
        assert new_top == top



def _all_owned(num_bytes: int = 1 << 16) -> np.ndarray:
    """An ownership bitmap in which every page is handed out (the guard lets every call
    through: these tests are about the layout; ``tests/impl/test_impl_ownership.py`` about the
    guard)."""
    return np.full(num_bytes, 0xFF, dtype=np.uint8)

@needs_native
@given(ps=st.sampled_from([1, 2, 4, 16]), data=st.data())
def test_one_pass_extend_matches_the_two_steps(ps: int, data: Any) -> None:
    """``take_extend`` on a stack with staged pages: when pages are staged and SGLang's bound
    ``merge_bound`` exceeds the free list, the merge in place (the list ascends, ``base``
    given: SGLang's sorted union, whether the staged pages lie right below the list or not) or
    False with nothing moved; then the numpy backend's count, shortage and layout on the list
    it left (long enough or not); None, nothing moved, when the token total is not the
    lengths' (the two steps raise)."""
    native, host = _both(ps)
    bs = data.draw(st.integers(1, 8))
    pre = [data.draw(st.integers(0, 3 * ps)) for _ in range(bs)]
    seq = [p + data.draw(st.integers(0, 3 * ps)) for p in pre]
    last = [-1 if p == 0 else 40 * ps + (p - 1) % ps for p in pre]
    tokens = sum(seq) - sum(pre) + data.draw(st.sampled_from([0, 0, 0, 1, -1]))
    free, top, base, staged, listed, in_place = _stack_with_staging(data, 3 * bs + 2)
    before = free.copy()
    pre_t, seq_t, last_t = torch.tensor(pre), torch.tensor(seq), torch.tensor(last)
    # the device lengths as the host ones, or their copies (read on their own)
    pre_d, seq_d = (t.clone() if data.draw(st.booleans()) else t for t in (pre_t, seq_t))
    one_pass = native.take_extend(free, top, staged, base if in_place else -1,
                                  _runs(free, base, staged, data), pre_d, pre_t, seq_d, seq_t,
                                  last_t, tokens, _all_owned())
    if tokens < 1 or tokens != sum(seq) - sum(pre):  # handed back before anything moves
        assert one_pass is None and free.tolist() == before.tolist()
        return
    merge = staged > 0 and merge_bound(tokens, bs, ps) > len(listed)
    if merge and not in_place:
        assert one_pass is False and free.tolist() == before.tolist()
        return
    want_buf, want_top, want_staged = _after_take(before, top, base, staged, listed, merge)
    count = host.extend_new_pages(pre_t, seq_t)
    want = _two_step(host, want_buf, want_top, count, lambda pages: host.extend_slots(
        pre_t, seq_t, last_t, pages, tokens))
    _check_one_pass(one_pass, free, want_buf, want_top, base, want_staged, want,
                    regular=tokens == sum(seq) - sum(pre))


@needs_native
@given(ps=st.sampled_from([1, 3, 4, 16]), data=st.data())
def test_one_pass_decode_matches_the_two_steps(ps: int, data: Any) -> None:
    """``take_decode``: as extend's, the merge test being that the batch outnumbers the free
    list; the numpy backend's count of opening requests, shortage and layout; None, nothing
    moved, for an empty batch (the two steps give its empty result)."""
    native, host = _both(ps)
    bs = data.draw(st.integers(0, 10))
    seq = torch.tensor(data.draw(st.lists(st.integers(1, 6 * ps), min_size=bs, max_size=bs)),
                       dtype=torch.int64)
    last = torch.tensor(data.draw(st.lists(st.integers(0, 10**5), min_size=bs, max_size=bs)),
                        dtype=torch.int64)
    free, top, base, staged, listed, in_place = _stack_with_staging(data, bs + 2)
    before = free.copy()
    one_pass = native.take_decode(free, top, staged, base if in_place else -1,
                                  _runs(free, base, staged, data), seq, seq.clone(), last,
                                  _all_owned())
    if bs == 0:
        assert one_pass is None and free.tolist() == before.tolist()
        return
    merge = staged > 0 and bs > len(listed)
    if merge and not in_place:
        assert one_pass is False and free.tolist() == before.tolist()
        return
    want_buf, want_top, want_staged = _after_take(before, top, base, staged, listed, merge)
    want = _two_step(host, want_buf, want_top, host.decode_new_pages(seq),
                     lambda pages: host.decode_slots(seq, last, pages))
    _check_one_pass(one_pass, free, want_buf, want_top, base, want_staged, want, regular=True)


@needs_native
def test_one_pass_hands_other_inputs_to_the_two_steps() -> None:
    """int32 or strided lengths, lengths of different sizes, tensors off the CPU, not tensors,
    or no tokens: None (the two-step path decides), with nothing taken."""
    native = NativeOps(4, "cpu")
    free = np.arange(1, 20, dtype=np.int64)
    before = free.copy()
    pre, seq, last = torch.tensor([0, 4]), torch.tensor([6, 9]), torch.tensor([-1, 30])
    for args in ((pre.int(), pre, seq, seq, last, 11), (pre, pre, seq, seq, last[:1], 11),
                 (pre, pre, seq.repeat_interleave(2)[::2], seq, last, 11),
                 (pre, pre, seq, seq, last, 0), (pre, pre.clone(), seq, seq[:1], last, 11),
                 (pre, pre, seq, seq, last.to("meta"), 11), (pre, pre, seq, seq, [-1, 30], 11),
                 (pre.to("meta"), pre, seq, seq, last, 11), (pre, pre, seq, seq.int(), last, 11)):
        assert native.take_extend(free, 0, 0, -1, None, *args, _all_owned()) is None
    for args in ((seq.int(), seq, last), (seq, seq, last[:1]), (seq, seq[:1], last),
                 (seq, seq.to("meta"), last), (seq, seq, [-1, 30]), (seq, seq.clone()[:1], last),
                 (seq, seq, last.int())):
        assert native.take_decode(free, 0, 0, -1, None, *args, _all_owned()) is None
    assert free.tolist() == before.tolist()


class _Subclass(torch.Tensor):
    """A tensor of a subclass: the loops never read it in place (only an exact
    ``torch.Tensor``'s dtype, contiguity and length are torch's own answers)."""


class _OneValue(torch.Tensor):
    """A subclass whose ``numel()`` says 1 whatever it holds."""

    def numel(self) -> int:
        return 1


def _one_passes(native: NativeOps, make: Any, make_last: Any = None) -> list[Any]:
    """What ``take_extend``, ``take_decode`` and ``release`` answer, and what they leave in a
    free list, for the tensors of one batch as ``make`` gives them (``last_loc`` as
    ``make_last`` does, when given)."""
    pre, seq = make(torch.tensor([0, 4])), make(torch.tensor([6, 9]))
    last = (make_last or make)(torch.tensor([21, 30]))
    answers = []
    for call in (lambda free: native.take_extend(free, 0, 0, -1, None, pre, pre, seq, seq,
                                                 last, 11, _all_owned()),
                 lambda free: native.take_decode(free, 0, 0, -1, None, seq, seq, last,
                                                 _all_owned()),
                 lambda free: native.release(make(torch.tensor([40, 9, 41])), True, free, 4,
                                             False, 9, _all_owned())):
        free = np.arange(1, 20, dtype=np.int64)
        answer = call(free)
        if isinstance(answer, tuple) and isinstance(answer[0], torch.Tensor):
            answer = (answer[0].tolist(), *answer[1:])
        answers.append((answer, free.tolist()))
    return answers


def _through_allocator(make: Any) -> list[Any]:
    """An extend, a decode and a free through a fresh allocator (ps 4) with the tensors as
    ``make`` gives them: the slots handed out and the free list left."""
    alloc = PagedTokenToKVPoolAllocator(64, 4, torch.float16, "cpu", None, False)
    head = alloc.alloc(16)  # pages 1..4: request 1's prefix of 4 tokens on page 1
    assert head is not None
    pre, seq = make(torch.tensor([0, 4])), make(torch.tensor([6, 9]))
    last = make(torch.cat((torch.tensor([-1]), head[3:4])))
    out = alloc.alloc_extend(pre, pre, seq, seq, last, 11)
    assert out is not None
    alloc.free(make(out[:6]))
    return [out.tolist(), alloc.free_pages.tolist()]


@needs_native
def test_tensor_subclasses_are_left_to_the_numpy_form() -> None:
    """A subclass's tensors are never read in place, so one that lies about its length cannot
    make the loops read past its storage: every one-pass call answers None, nothing moved (the
    two-step numpy form reads their values instead); through an allocator the slots are those
    of plain tensors."""
    native = NativeOps(4, "cpu")
    plain = _one_passes(native, lambda t: t)
    # extend: pages 1, 2 for the first request's 6 tokens, 3, 4 for the second's 5 (its prefix
    # ends a page); decode: only the second request opens a page ((9 - 1) % 4 == 0), the first
    # continues its last_loc 21; release: pages
    # 40 // 4 and 9 // 4, sorted distinct, at 4
    fresh = list(range(1, 20))
    assert plain == [(([4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16], 4, 0), fresh),
                     (([22, 4], 1, 0), fresh), (2, [*fresh[:4], 2, 10, *fresh[6:]])]
    for subclass in (_Subclass, _OneValue):
        assert _one_passes(native, lambda t, c=subclass: t.as_subclass(c)) == [
            (None, fresh), (None, fresh), (None, fresh)]
    want = _through_allocator(lambda t: t)
    assert _through_allocator(lambda t: t.as_subclass(_Subclass)) == want


@needs_native
def test_torch_function_modes_leave_the_reads_to_the_numpy_form() -> None:
    """While a ``TorchFunctionMode`` is active (it could answer any read of a tensor), the
    one-pass calls read nothing in place and answer None, nothing moved; through an allocator
    the answers are the ones without the mode, and the mode sees the values being read."""
    seen: list[str] = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            seen.append(getattr(func, "__name__", ""))
            return func(*args, **(kwargs or {}))

    native = NativeOps(4, "cpu")
    fresh = list(range(1, 20))
    with Watch():
        watched = _one_passes(native, lambda t: t)
    assert watched == [(None, fresh), (None, fresh), (None, fresh)]
    want = _through_allocator(lambda t: t)
    seen.clear()
    with Watch():
        got = _through_allocator(lambda t: t)
    assert got == want
    assert seen  # the numpy form's reads went through torch's dispatch


@needs_native
def test_one_pass_declines_to_merge_staged_pages_that_reach_the_list() -> None:
    """Staged pages said to lie at ``[base, base + staged)`` past ``top`` (inside the list): the
    one pass does not merge them in place but answers False, nothing moved (the allocator's
    own merge decides)."""
    native = NativeOps(4, "cpu")
    free = np.array([9, 3, 1, 2, 5, 6], dtype=np.int64)
    before = free.tolist()
    pre, seq, last = torch.tensor([0, 0]), torch.tensor([8, 8]), torch.tensor([-1, -1])
    seq3, last3 = torch.tensor([5, 9, 1]), torch.tensor([3, 7, 0])  # 3 requests > 2 free
    for base in (3, 4, -1):  # reaching into the list at 4, or no base at all
        assert native.take_extend(free, 4, 2, base, [], pre, pre, seq, seq, last, 16,
                                  _all_owned()) is False
        assert native.take_decode(free, 4, 2, base, [], seq3, seq3, last3, _all_owned()) is False
    assert free.tolist() == before


@needs_native
def test_a_native_count_forgets_what_the_numpy_count_kept() -> None:
    """A count the numpy form made (strided lengths) keeps host arrays for the layout; when the
    same tensor objects are counted again by the loop (``set_`` moved them to contiguous memory
    with other values), a numpy layout that follows must not use those stale arrays: the
    result (or error) is the numpy backend's for the new values."""
    size, ps = 6, 4
    outcomes = []
    for backend in _both(ps):
        old_pre = torch.zeros(2 * size, dtype=torch.int64)
        pre = old_pre[::2]  # strided: the numpy form counts it (and keeps its arrays)
        seq = torch.full((size,), 4)
        assert backend.extend_new_pages(pre, seq) == size
        pre.set_(torch.tensor([1] + [0] * (size - 1)))  # contiguous now, one token fewer
        backend.extend_new_pages(pre, seq)
        last = torch.tensor([40] + [-1] * (size - 1))
        pages = np.arange(10, 10 + size, dtype=np.int64)
        # 4 * size tokens: right for the old lengths, irregular for the new ones
        outcomes.append(_outcome(backend.extend_slots, pre, seq, last, pages, 4 * size))
    assert outcomes[0] == outcomes[1]


@needs_native
def test_a_native_decode_count_forgets_what_the_numpy_count_kept() -> None:
    """As for the extend: openings the numpy form found for a strided ``seq_lens`` are not
    reused by a numpy layout after the loop counted the same tensor moved to other values."""
    ps = 4
    outcomes = []
    for backend in _both(ps):
        old_seq = torch.tensor([5, 0, 9, 0, 2, 0])
        seq = old_seq[::2]  # strided [5, 9, 2]: the numpy form finds openers 0 and 1
        assert backend.decode_new_pages(seq) == 2
        seq.set_(torch.tensor([2, 5, 9]))  # contiguous: openers 1 and 2
        backend.decode_new_pages(seq)
        last = torch.tensor([40, 20, 60], dtype=torch.int32)  # int32: the numpy layout
        pages = np.array([7, 8], dtype=np.int64)
        outcomes.append(_outcome(backend.decode_slots, seq, last, pages))
    assert outcomes[0] == outcomes[1] == [41, 28, 32]
