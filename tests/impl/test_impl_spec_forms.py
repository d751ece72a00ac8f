"""kvpool.impl's vectorised forms of spec rules give the spec functions' results.

- new pages per request (``EXTEND-4``): ``impl.layout.new_pages_per_request`` on torch tensors
  and numpy arrays is ``kvpool.spec.layout.num_new_pages`` per request;
- segment pages (``SEG-2``, ``SEG-5``, ``SEG-6``):
  ``AllocatorBase._segment_pages`` (each backend's ``segment_pages``) is the vectorised form of
  ``kvpool.spec.segments.segment_pages``
  and ``free_segments`` walks its segments with the spec's ``next_trim``: for rows that follow
  the layout, at any start and page size, the impl releases the pages of ``segments_pages``.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from host_backends import HOST_OPS
from hypothesis import given
from hypothesis import strategies as st
from kvpool.impl import PagedTokenToKVPoolAllocator
from kvpool.impl.backend import TorchOps
from kvpool.impl.checked import host_list
from kvpool.impl.host_layout import div_floor
from kvpool.impl.layout import new_pages_per_request
from kvpool.spec import AllocatorModel
from kvpool.spec.layout import num_new_pages
from kvpool.spec.segments import segment_pages, segments_pages


@given(st.sampled_from([1, 2, 3, 4, 16, 64]),
       st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=8))
def test_new_pages_per_request_equals_spec(ps: int, pairs: list[tuple[int, int]]) -> None:
    pre = [min(a, b) for a, b in pairs]
    seq = [max(a, b) for a, b in pairs]
    want = [num_new_pages(p, s, ps) for p, s in zip(pre, seq)]
    t = torch.tensor
    assert new_pages_per_request(t(pre, dtype=torch.int64), t(seq, dtype=torch.int64),
                                 ps).tolist() == want
    assert new_pages_per_request(np.array(pre, dtype=np.int64), np.array(seq, dtype=np.int64),
                                 ps, div_floor).tolist() == want


@st.composite
def rows(draw: st.DrawFn) -> tuple[int, list[int], list[tuple[list[int], int]]]:
    """A page size, a row on distinct shuffled pages, and that row cut into touching segments."""
    ps = draw(st.sampled_from([1, 2, 3, 4, 16]))
    num_tokens = draw(st.integers(0, 6 * ps))
    num_logical = -(-num_tokens // ps)
    pages = draw(st.permutations(range(1, num_logical + 1)))
    row = [pages[pos // ps] * ps + pos % ps for pos in range(num_tokens)]
    cuts = sorted(draw(st.lists(st.integers(0, num_tokens), max_size=3)))
    bounds = [0, *cuts, num_tokens]
    segments = [(row[a:b], a) for a, b in itertools.pairwise(bounds)]
    return ps, row, segments


def _impl(ps: int) -> PagedTokenToKVPoolAllocator:
    return PagedTokenToKVPoolAllocator(8 * ps, ps, torch.float16, "cpu", None, False)


@given(rows(), st.data())
def test_segment_pages_vectorised_equals_spec(case: tuple, data: st.DataObject) -> None:  # type: ignore[type-arg]
    ps, row, _ = case
    start = data.draw(st.integers(0, len(row)))
    trim = data.draw(st.integers(0, len(row)))  # the same segment, behind slots it skips
    got = _impl(ps)._segment_pages(torch.tensor(row[start - min(trim, start):], dtype=torch.int64),
                                   min(trim, start), start)
    want = segment_pages(row[start:], start, ps)
    assert (host_list(got) if got is not None else []) == want


@given(rows(), st.data(), st.sampled_from(["int64", "int32", "strided", "2d"]))
def test_every_backend_segment_pages_equals_spec(case: tuple, data: st.DataObject,  # type: ignore[type-arg]
                                                 form: str) -> None:
    """Each backend's ``segment_pages`` (torch, numpy, compiled) gives the spec's pages as a new
    array, for int64, int32, strided (the numpy form) and 2-D slots (positions along the
    flattened slots)."""
    ps, row, _ = case
    start = data.draw(st.integers(0, max(len(row) - 1, 0)))
    if not row:
        return
    skipped = data.draw(st.integers(0, start))  # slots[skipped:] is the segment
    slots = torch.tensor(row[start - skipped:], dtype=torch.int64)
    if form == "int32":
        slots = slots.to(torch.int32)
    elif form == "strided":
        slots = slots.repeat_interleave(2)[::2]
    elif form == "2d":
        slots = slots.reshape(1, -1)
    before = slots.tolist()
    want = segment_pages(row[start:], start, ps)
    for ops in (TorchOps(ps, "cpu"), *(cls(ps, "cpu") for cls in HOST_OPS)):
        got = ops.segment_pages(slots, skipped, start % ps)
        assert host_list(got) == want, type(ops).__name__
        got[:] = -1  # its own memory: the slots are untouched
        assert slots.tolist() == before


@given(rows())
def test_free_segments_releases_what_the_spec_releases(case: tuple) -> None:  # type: ignore[type-arg]
    """The impl's segment loop (``next_trim`` + vectorised pages) frees the spec's pages, in
    the spec's order."""
    ps, _, segments = case
    impl, model = _impl(ps), AllocatorModel(8 * ps, ps, paged=True, need_sort=False)
    assert impl.alloc(6 * ps).tolist() == model.alloc(6 * ps)
    impl.free_segments([(torch.tensor(idx, dtype=torch.int64), start) for idx, start in segments])
    model.free_segments(segments)
    assert impl.get_all_free_pages().tolist() == model.get_all_free_pages()
    released = sorted(set(model.get_all_free_pages()) - {7, 8})
    assert released == sorted(segments_pages(segments, ps))
