"""Explicit examples for the CPU hot paths: small extends, decode openings, free-group copies.

The random tests (``test_impl_host_layout.py``, ``test_impl_backend.py``, the case table) tie
these paths to the spec; the examples below pin each branch with hand-computed numbers, on the
CPU's default backend (compiled where built), on the numpy backend forced and on the torch
backend forced on the CPU (the CUDA path), so that a change in any shows as a wrong number here:

- ``host_layout.extend_slots_few`` writes whole page rows in place; a request's last row runs
  into the next request's span (overwritten next) or into the spare page at the end
  (``EXTEND-5/7``).
- a free group keeps a copy of every ``free()`` input (``ops.defer``: its page ids, page size
  1: its slots; deduplicated once at the group's end when paged), mixed with segment frees in
  enqueue order for the token allocator (``GROUP-3/4``); a refused group end changes nothing
  (``FREE-3``).
- ``page_ids`` / ``copy`` / ``distinct`` of both backends agree (int32, strided, 2-D inputs).
- the host lengths and per-request page counts that ``extend_new_pages`` reads serve the
  layout of the same call only (same tensors; counted again when ``num_new_pages`` is given).
ci profile: about 1 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from host_backends import HOST_OPS
from impl_adapter import free_list
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator, host_layout
from kvpool.impl.backend import TorchOps
from kvpool.impl.numpy_ops import NumpyOps
from kvpool.spec import ContractViolation

BACKENDS = pytest.mark.parametrize("backend", ["default", "numpy", "torch"])


def _use(backend: str, request: pytest.FixtureRequest) -> None:
    """``default``: the CPU's own choice (compiled when built); ``numpy`` / ``torch`` forced."""
    if backend != "default":
        request.getfixturevalue(f"{backend}_ops")


def _paged(size: int, ps: int, need_sort: bool = False) -> PagedTokenToKVPoolAllocator:
    return PagedTokenToKVPoolAllocator(size, ps, torch.float16, "cpu", None, need_sort)


def _token(size: int, need_sort: bool = False) -> TokenToKVPoolAllocator:
    return TokenToKVPoolAllocator(size, torch.float16, "cpu", None, need_sort)


def _t(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def test_extend_few_rows_spill_into_the_next_request_EXTEND_5() -> None:
    """ps 4: request 0 (prefix 2, seq 9: 2 tokens on its last page, then pages 7 and 3 with 4
    and 1 tokens) is followed by request 1 (fresh, 6 tokens on pages 5 and 8); request 0's last
    row [12, 16) runs over request 1's first 3 slots, which request 1 then writes, and request
    1's last row runs into the spare page."""
    pages = np.array([7, 3, 5, 8], dtype=np.int64)
    out = host_layout.extend_slots_few([2, 0], [9, 6], [41, -1], pages, 4, 13,
                                       host_layout.Counting(), np.arange(4))
    assert out is not None
    assert out.tolist() == [42, 43, 28, 29, 30, 31, 12, 20, 21, 22, 23, 32, 33]
    assert out.size == 13  # the spare page is not part of the result


def test_extend_few_with_a_request_of_no_tokens_EXTEND_5() -> None:
    """An empty request between two others writes nothing; the first one's spill is covered by
    the third (ps 4, pages 9 and 6)."""
    pages = np.array([9, 6], dtype=np.int64)
    out = host_layout.extend_slots_few([0, 3, 0], [1, 3, 4], [-1, 50, -1], pages, 4, 5,
                                       host_layout.Counting(), np.arange(4))
    assert out is not None and out.tolist() == [36, 24, 25, 26, 27]


@BACKENDS
def test_alloc_extend_small_batch_slots_EXTEND_5(backend: str,
                                                 request: pytest.FixtureRequest) -> None:
    """A two-request extend on a fresh pool (ps 4): pages come from the front of the free list
    in request order; part 1 continues ``last_loc``."""
    _use(backend, request)
    alloc = _paged(64, 4)
    head = alloc.alloc(4)  # page 1: request 0's prefix of 3 tokens lives there
    assert head is not None and head.tolist() == [4, 5, 6, 7]
    out = alloc.alloc_extend(_t([3, 0]), _t([3, 0]), _t([9, 5]), _t([9, 5]), _t([6, -1]), 11)
    assert out is not None
    # request 0: position 3 -> slot 7, then pages 2, 3 (4 + 1 tokens); request 1: pages 4, 5
    assert out.tolist() == [7, 8, 9, 10, 11, 12, 16, 17, 18, 19, 20]
    assert free_list(alloc)[:2] == [6, 7]
    alloc.check_invariants()


@BACKENDS
def test_alloc_decode_openings_DECODE_5(backend: str, request: pytest.FixtureRequest) -> None:
    """Requests 1 and 3 open a page ((seq - 1) % 4 == 0) and take pages 12 and 13 in order;
    the others continue ``last_loc`` (every ``last_loc`` on a page handed out: pages 1..11);
    an int32 strided input gives the same slots."""
    _use(backend, request)
    alloc = _paged(64, 4)
    assert alloc.alloc(44) is not None  # pages 1..11: slots 4..47
    seq, last = [3, 5, 7, 9], [5, 7, 41, 43]
    out = alloc.alloc_decode(_t(seq), _t(seq), _t(last))
    assert out is not None and out.tolist() == [6, 48, 42, 52]
    wide = torch.tensor([v for v in seq for _ in (0, 1)], dtype=torch.int32)[::2]
    wide_last = torch.tensor([v for v in last for _ in (0, 1)], dtype=torch.int32)[::2]
    again = alloc.alloc_decode(wide, wide, wide_last)
    assert again is not None and again.tolist() == [6, 56, 42, 60]
    assert again.dtype == torch.int64
    alloc.check_invariants()


@BACKENDS
@pytest.mark.parametrize("need_sort", [False, True])
def test_paged_group_dedups_across_frees_once_GROUP_4(backend: str, need_sort: bool,
                                                      request: pytest.FixtureRequest) -> None:
    """Two frees in a group that share page 3 and name pages out of order release the sorted
    distinct pages once, as one ``free()`` of both inputs."""
    _use(backend, request)
    alloc = _paged(32, 4, need_sort)
    assert alloc.alloc(20) is not None  # pages 1..5
    alloc.free_group_begin()
    alloc.free(_t([20, 21, 13]))  # pages 5, 5, 3
    alloc.free(torch.tensor([[14, 4]], dtype=torch.int32))  # pages 3, 1 (2-D, int32)
    assert alloc.available_size() == 12  # nothing released yet
    alloc.free_group_end()
    assert alloc.available_size() == 24
    rest = [6, 7, 8]
    assert free_list(alloc) == ([*rest, 1, 3, 5] if need_sort else [1, 3, 5, *rest])
    alloc.check_invariants()


@BACKENDS
def test_token_group_keeps_free_and_segment_order_GROUP_4(
        backend: str, request: pytest.FixtureRequest) -> None:
    """Token allocator: ``free()`` copies and segment pages of one group are appended in
    enqueue order, duplicates of the caller's making included as given."""
    _use(backend, request)
    alloc = _token(10)
    row = alloc.alloc(6)
    assert row is not None and row.tolist() == [1, 2, 3, 4, 5, 6]
    alloc.free_group_begin()
    alloc.free(row[4:])  # 5, 6
    alloc.free_segments([(row[:2], 0)])  # 1, 2
    alloc.free(torch.tensor([4, 3], dtype=torch.int32))
    alloc.free_group_end()
    assert free_list(alloc) == [7, 8, 9, 10, 5, 6, 1, 2, 4, 3]
    alloc.check_invariants()


@BACKENDS
@pytest.mark.parametrize("paged", [False, True])
def test_refused_group_end_changes_nothing_FREE_3(backend: str, paged: bool,
                                                  request: pytest.FixtureRequest) -> None:
    """A group whose ``free()`` inputs would free more pages than exist is refused at its end
    with FREE-3; the free list, the count and the open group stay as they were."""
    _use(backend, request)
    alloc = _paged(16, 4) if paged else _token(4)
    ps = alloc.page_size
    got = alloc.alloc(2 * ps)
    assert got is not None
    alloc.free_group_begin()
    alloc.free(got)
    alloc.free(torch.tensor([k * ps for k in range(3, 5)]))  # pages 3, 4 are free already
    before = (free_list(alloc), alloc.available_size())
    with pytest.raises(ContractViolation, match="FREE-3"):
        alloc.free_group_end()
    assert (free_list(alloc), alloc.available_size()) == before
    assert alloc.free_group is not None  # still open


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("ps", [1, 3, 4])
def test_group_copies_agree_across_backends(dtype: torch.dtype, ps: int) -> None:
    """``page_ids`` / ``copy`` / ``distinct`` of the numpy and torch backends give the same
    values, as new int64 arrays (writing into the input afterwards changes nothing)."""
    values = [9, 4, 4, 17, 0, 8, 30, 9]
    for form in ("flat", "strided", "2d"):
        results: list[list[list[int]]] = []
        for ops in (*(host(ps, "cpu") for host in HOST_OPS), TorchOps(ps, "cpu")):
            source = torch.tensor(values, dtype=dtype)
            slots: Any = {"flat": source, "strided": torch.tensor(
                [v for v in values for _ in (0, 1)], dtype=dtype)[::2],
                "2d": source.reshape(2, 4)}[form]
            ids, copied = ops.page_ids(slots), ops.copy(slots)
            slots.fill_(-7)  # the copies are the backend's own
            distinct = ops.distinct(ops.page_ids(torch.tensor(values, dtype=dtype)))
            results.append([[int(v) for v in x.tolist()] for x in (ids, copied, distinct)])
            assert all(str(x.dtype).endswith("int64") for x in (ids, copied, distinct))
        assert all(result == results[0] for result in results)
        assert results[0][0] == [v // ps for v in values]
        assert results[0][1] == values
        assert results[0][2] == sorted({v // ps for v in values})


@pytest.mark.parametrize("ps", [1, 4])
def test_extend_runs_take_the_counted_pages_per_request_EXTEND_4(ps: int) -> None:
    """``host_layout.extend_slots`` given the count's pages per request lays out the same
    slots as when it derives them (ps 4: requests of 2 + 4 + 1 and 0 + 3 tokens on pages
    7, 3 and 5; ps 1: one page per token)."""
    pre, seq, last = np.array([2, 0]), np.array([9, 3]), np.array([41 if ps == 4 else 8, -1])
    if ps == 4:
        pages, counted = np.array([7, 3, 5]), np.array([2, 1])
        want = [42, 43, 28, 29, 30, 31, 12, 20, 21, 22]
    else:
        pages, counted = np.array([7, 3, 5, 11, 12, 13, 14, 15, 16, 17]), seq - pre
        want = pages.tolist()
    for per_request in (None, counted):
        out = host_layout.extend_slots(pre, seq, last, pages, ps, 10, host_layout.Counting(),
                                       per_request)
        assert out is not None and out.tolist() == want
    # a count that disagrees with the lengths is what the layout uses at ps 1 (its extends)
    assert host_layout.extend_slots(pre, seq, last, pages, 1, 10, host_layout.Counting(),
                                    np.array([7, -1])) is None


def test_extend_reuses_host_arrays_only_for_the_same_tensors_EXTEND_5() -> None:
    """A batch above ``FEW_REQUESTS``: the host arrays and counts read for the page count serve
    ``extend_slots`` only when it gets those very tensors. The other tensors below have the
    same token and page totals, so a reuse would lay out the counted lengths without error."""
    ops, ref = NumpyOps(4, "cpu"), TorchOps(4, "cpu")
    size = host_layout.FEW_REQUESTS + 1
    pre, seq = torch.zeros(size, dtype=torch.int64), torch.full((size,), 4)
    fresh = torch.full((size,), -1)
    assert ops.extend_new_pages(pre, seq) == size  # one page each, 4 tokens each
    pages = np.arange(10, 10 + size, dtype=np.int64)
    other_pre = torch.tensor([2] + [0] * (size - 1))
    other_seq = torch.tensor([8] + [4] * (size - 2) + [2])  # 4 * size tokens, size pages
    other_last = torch.tensor([41] + [-1] * (size - 1))
    got = ops.extend_slots(other_pre, other_seq, other_last, pages, 4 * size)
    want = ref.extend_slots(other_pre, other_seq, other_last, torch.from_numpy(pages), 4 * size)
    assert got.tolist() == want.tolist()
    assert got.tolist()[:2] == [42, 43]  # not the counted batch's [40, 41]
    assert ops.extend_new_pages(pre, seq) == size
    got = ops.extend_slots(pre, seq, fresh, pages, 4 * size)
    assert got.tolist() == [4 * p + i for p in pages.tolist() for i in range(4)]


@pytest.mark.parametrize("host", HOST_OPS)
def test_regular_batches_never_take_the_torch_form_EXTEND_5(
        host: type[NumpyOps], monkeypatch: pytest.MonkeyPatch) -> None:
    """A regular batch above ``FEW_REQUESTS``, counted then laid out with the same tensors, is
    laid out by the host form itself (the torch form is only the irregular batches' fallback):
    the same slots as the torch backend with that fallback made to fail."""
    from kvpool.impl import backend

    ps, size = 4, host_layout.FEW_REQUESTS + 3
    pre = torch.tensor([0, 3, 5, 1, 0, 8, 2][:size])
    seq = torch.tensor([6, 9, 5, 4, 13, 17, 3][:size])
    last = torch.tensor([-1, 30, 44, 60, -1, 71, 85][:size])
    ref = TorchOps(ps, "cpu")
    num_pages = ref.extend_new_pages(pre, seq)
    pages = np.arange(100, 100 + num_pages, dtype=np.int64)
    tokens = int((seq - pre).sum())
    want = ref.extend_slots(pre, seq, last, torch.from_numpy(pages), tokens).tolist()

    def torch_form(*args: Any) -> torch.Tensor:
        raise AssertionError("a regular batch took the torch form")

    monkeypatch.setattr(backend.layout, "extend_slots", torch_form)
    ops = host(ps, "cpu")
    assert ops.extend_new_pages(pre, seq) == num_pages
    assert ops.extend_slots(pre, seq, last, pages, tokens).tolist() == want


@pytest.mark.parametrize("batch", [1, host_layout.FEW_REQUESTS + 1])
def test_given_page_count_lays_out_this_calls_lengths_EXTEND_4(batch: int) -> None:
    """``num_new_pages`` given (SGLang's SWA composite): a short call that left its host lengths
    behind, then the same tensors changed in place (same token and page totals) and passed
    again, lays out the new values (ps 4; the other requests of the batch are empty)."""
    alloc = _paged(4 * 8, 4)
    got = alloc.alloc(28)  # pages 1..7: one page free
    assert got is not None
    pre, seq = torch.zeros(batch, dtype=torch.int64), torch.zeros(batch, dtype=torch.int64)
    last = torch.full((batch,), -1)
    seq[0] = 8  # two new pages
    assert alloc.alloc_extend(pre, pre, seq, seq, last, 8) is None  # short
    alloc.free(got[24:])  # page 7: the free list is [7, 8]
    pre[0], seq[0], last[0] = 2, 10, 5  # positions [2, 10): slots 6, 7, then two new pages
    out = alloc.alloc_extend(pre, pre, seq, seq, last, 8, num_new_pages=2)
    assert out is not None and out.tolist() == [6, 7, 28, 29, 30, 31, 32, 33]
    alloc.check_invariants()


@BACKENDS
def test_a_given_page_count_must_be_the_batchs_EXTEND_4(
        backend: str, request: pytest.FixtureRequest) -> None:
    """Unchecked too, ``alloc_extend`` refuses a ``num_new_pages`` other than the batch's page
    count (SGLang slices its free list by it and hands pages out twice): ContractViolation
    ``EXTEND-4``, nothing taken; the right count takes what no count takes."""
    _use(backend, request)
    args = (_t([0, 0]), _t([0, 0]), _t([8, 1]), _t([8, 1]), _t([-1, -1]), 9)
    left = []
    for given in (None, 3):  # the batch needs 3 pages (4 + 4 + 1 tokens at ps 4)
        alloc = _paged(64, 4)
        out = alloc.alloc_extend(*args, num_new_pages=given)
        assert out is not None and len(out) == 9
        left.append(alloc.available_size() // 4)
    assert left == [13, 13]
    for wrong in (2, 4, -1):
        alloc = _paged(64, 4)
        with pytest.raises(ContractViolation) as raised:
            alloc.alloc_extend(*args, num_new_pages=wrong)
        assert raised.value.clause == "EXTEND-4"
        assert alloc.available_size() // 4 == 16
        alloc.check_invariants()


@pytest.mark.parametrize("ops", [*(host(4, "cpu") for host in HOST_OPS), TorchOps(4, "cpu")])
@pytest.mark.parametrize(("pages", "want"), [
    ([5, 5, 3, 3, 5, 5, 1], [1, 3, 5]),  # page-major runs that repeat later (runs first)
    ([2, 7, 7, 2], [2, 7]),  # no run at the front, a repeat later
    ([9, 9, 9], [9]),
    ([6, 4], [4, 6]),
    ([3, 6, 9], [3, 6, 9]),  # ascending once each: no sort needed
    ([3, 6, 6], [3, 6]),  # ascending with a repeat at the end
    ([3, 6, 5], [3, 5, 6]),
    ([8], [8]),
    ([], []),
])
def test_distinct_is_sorted_and_once_each_FREE_4(ops: TorchOps, pages: list[int],
                                                 want: list[int]) -> None:
    """``distinct`` gives each value once, ascending, whether the input starts with a run of
    equal pages (a row's slots) or not."""
    given: Any = np.array(pages, dtype=np.int64)
    if isinstance(ops, TorchOps) and not isinstance(ops, NumpyOps):
        given = torch.from_numpy(given)
    assert [int(v) for v in ops.distinct(given).tolist()] == want


@BACKENDS
def test_alloc_extend_page_size_one_small_batch_EXTEND_5(backend: str,
                                                         request: pytest.FixtureRequest) -> None:
    """Page size 1 (the run form for any batch on the CPU): every token takes the next free
    page in request order; an empty request takes none."""
    _use(backend, request)
    alloc = _paged(16, 1)
    assert alloc.alloc(3) is not None  # pages 1..3
    out = alloc.alloc_extend(_t([2, 0, 1]), _t([2, 0, 1]), _t([4, 0, 2]), _t([4, 0, 2]),
                             _t([1, -1, 3]), 3)
    assert out is not None and out.tolist() == [4, 5, 6]
    assert free_list(alloc)[0] == 7
    alloc.check_invariants()
