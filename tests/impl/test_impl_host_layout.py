"""The CPU forms of ``alloc_extend`` (``kvpool.impl.host_layout``) against the spec.

``host_layout.extend_slots`` (per run) and ``extend_slots_few`` (per request) must give, for
every valid batch, the concatenation of :func:`kvpool.spec.layout.extend_row` over the
requests (``EXTEND-5``), with each request's new pages taken in order from the batch's
``new_pages`` (``EXTEND-7``); an irregular batch returns None, and ``NumpyOps`` then gives the
torch form's result or raises its error. The decode count's openings are reused only for the
same tensor.
ci profile: about 2 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from kvpool.impl import host_layout
from kvpool.impl.backend import TorchOps
from kvpool.impl.numpy_ops import NumpyOps
from kvpool.spec.errors import ContractViolation
from kvpool.spec.layout import extend_row, num_new_pages

PAGE_SIZES = st.sampled_from([1, 2, 3, 4, 16])


def _batch(data: Any, ps: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Random valid batch: prefixes, seq lengths, aligned last_loc, distinct new pages."""
    pre = data.draw(st.lists(st.integers(0, 5 * ps), min_size=1, max_size=10))
    ext = data.draw(st.lists(st.integers(0, 4 * ps), min_size=len(pre), max_size=len(pre)))
    seq = [p + e for p, e in zip(pre, ext, strict=True)]
    # request i's prefix ends on page 10_000 + i (never a new page): aligned last_loc
    last = [-1 if p == 0 else (10_000 + i) * ps + (p - 1) % ps for i, p in enumerate(pre)]
    total = sum(num_new_pages(p, s, ps) for p, s in zip(pre, seq, strict=True))
    pages = data.draw(st.permutations(list(range(1, total + 1))))
    return pre, seq, last, pages


@given(ps=PAGE_SIZES, data=st.data())
def test_runs_equal_spec_extend_row_EXTEND_5(ps: int, data: Any) -> None:
    """EXTEND-5/7: the run form equals the spec's row layout, request after request."""
    pre, seq, last, pages = _batch(data, ps)
    want: list[int] = []
    start = 0
    for p, s, loc in zip(pre, seq, last, strict=True):
        k = num_new_pages(p, s, ps)
        want += extend_row(p, s, loc, pages[start:start + k], ps)
        start += k
    arrays = (np.array(v, dtype=np.int64) for v in (pre, seq, last))
    page_array, tokens = np.array(pages, dtype=np.int64), sum(seq) - sum(pre)
    got = host_layout.extend_slots(*arrays, page_array, ps, tokens, host_layout.Counting())
    assert got is not None
    assert got.tolist() == want
    few = host_layout.extend_slots_few(pre, seq, last, page_array, ps, tokens,
                                       host_layout.Counting(), np.arange(ps))
    assert few is not None
    assert few.tolist() == want


@pytest.mark.parametrize(("pre", "seq", "extra_pages", "extra_tokens"), [
    ([0, 4], [2, 3], 0, 0),    # a negative extend
    ([0, 5], [9, 9], -1, 0),   # one page too few for the batch
    ([0, 5], [9, 9], 1, 0),    # one page too many
    ([0, 5], [9, 9], 0, -1),   # extend_num_tokens != Σ(seq - prefix)
    ([0, 5], [9, 40], 0, -20),  # a later request runs pages past extend_num_tokens
])
@pytest.mark.parametrize("ps", [1, 4])
def test_irregular_batches_fall_back_to_torch_form(pre: list[int], seq: list[int],
                                                   extra_pages: int, extra_tokens: int,
                                                   ps: int) -> None:
    """Unchecked misuse: None from the run form. A batch whose extends are negative or do not
    sum to ``extend_num_tokens`` is refused on the host (``EXTEND-2`` / ``EXTEND-1``: the torch
    form would take the token count as its output size); for a page count that disagrees,
    NumpyOps agrees with TorchOps, result or exception type alike (nothing is read outside the
    pages handed in)."""
    last = [-1 if p == 0 else 40 * ps + (p - 1) % ps for p in pre]
    needed = sum(max(0, num_new_pages(p, s, ps)) for p, s in zip(pre, seq, strict=True)
                 if s >= p)
    pages = np.arange(1, needed + extra_pages + 1, dtype=np.int64)
    num_tokens = sum(s - p for p, s in zip(pre, seq, strict=True)) + extra_tokens
    arrays = [np.array(v, dtype=np.int64) for v in (pre, seq, last)]
    assert host_layout.extend_slots(*arrays, pages, ps, num_tokens,
                                    host_layout.Counting()) is None
    assert host_layout.extend_slots_few(pre, seq, last, pages, ps, num_tokens,
                                        host_layout.Counting(), np.arange(ps)) is None
    tensors = [torch.tensor(v) for v in (pre, seq, last)]
    extends = [s - p for p, s in zip(pre, seq, strict=True)]
    if min(extends) < 0 or sum(extends) != num_tokens:
        clause = "EXTEND-2" if min(extends) < 0 else "EXTEND-1"
        with pytest.raises(ContractViolation, match=clause):
            NumpyOps(ps, "cpu").extend_slots(*tensors, pages, num_tokens)
        return
    outcomes = []
    for ops, given_pages in ((NumpyOps(ps, "cpu"), pages), (TorchOps(ps, "cpu"),
                                                            torch.from_numpy(pages))):
        try:
            outcomes.append(ops.extend_slots(*tensors, given_pages, num_tokens).tolist())
        except (RuntimeError, ValueError, IndexError) as exc:
            outcomes.append(type(exc).__name__)
    assert outcomes[0] == outcomes[1]


def test_counting_grows_and_stays_read_only() -> None:
    """``Counting.first(n)`` is ``0..n-1`` for any n (the cache grows and is read-only); a
    result never aliases it."""
    counting = host_layout.Counting()
    assert counting.first(3).tolist() == [0, 1, 2]
    big = counting.first(5000)
    assert big.size == 5000 and int(big[-1]) == 4999
    out = host_layout.extend_slots(np.array([0]), np.array([8]), np.array([-1]),
                                   np.array([7, 9]), 4, 8, counting)
    assert out is not None and out.tolist() == [28, 29, 30, 31, 36, 37, 38, 39]
    out.fill(-1)  # the result is a fresh array: the cache is untouched
    assert counting.first(4).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="read-only"):
        counting.first(2)[0] = 5


def test_decode_reuses_openings_only_for_the_same_tensor_DECODE_5() -> None:
    """The openings counted from ``seq_lens_cpu`` serve ``decode_slots`` only when it gets that
    very tensor; another tensor (other values) is read afresh."""
    ops = NumpyOps(4, "cpu")
    counted = torch.tensor([5, 6, 9])  # requests 0 and 2 open a page
    assert ops.decode_new_pages(counted) == 2
    other = torch.tensor([6, 5, 7])  # only request 1 opens one
    pages = np.array([30, 31], dtype=np.int64)
    last = torch.tensor([10, 20, 40])
    assert ops.decode_slots(other, last, pages).tolist() == [11, 120, 41]
    assert ops.decode_new_pages(counted) == 2
    assert ops.decode_slots(counted, last, pages).tolist() == [120, 21, 124]


def test_extend_reuses_host_lengths_only_for_the_same_tensors_EXTEND_5() -> None:
    """A small batch's host lengths read for the page count serve ``extend_slots`` only when
    it gets those very tensors; other tensors (other values) are read afresh."""
    ops = NumpyOps(4, "cpu")
    pre, seq = torch.tensor([2]), torch.tensor([9])
    assert ops.extend_new_pages(pre, seq) == 2
    other_pre, other_seq = torch.tensor([0]), torch.tensor([7])  # also 2 new pages
    pages = np.array([5, 8], dtype=np.int64)
    got = ops.extend_slots(other_pre, other_seq, torch.tensor([-1]), pages, 7)
    assert got.tolist() == [20, 21, 22, 23, 32, 33, 34]
    assert ops.extend_new_pages(pre, seq) == 2
    got = ops.extend_slots(pre, seq, torch.tensor([41]), pages, 7)
    assert got.tolist() == [42, 43, 20, 21, 22, 23, 32]
