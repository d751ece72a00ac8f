"""UNI-8, UMB-2: the token ids of a unified pool's paged allocations
(``kvpool.spec.unified_tokens``), worked by hand: new pages per request, the prefix's last page
continued from ``last_loc``, new pages taken in request order, decode's page openings."""

from __future__ import annotations

import pytest
from kvpool.spec.unified_tokens import (
    decode_page_starts,
    decode_token_ids,
    extend_page_counts,
    extend_token_ids,
)


@pytest.mark.parametrize(("prefix_lens", "seq_lens", "page_size", "counts"), [
    ([0, 3, 4, 5], [5, 6, 4, 10], 4, [2, 1, 0, 1]),  # ceil(seq / 4) - ceil(prefix / 4)
    ([0, 2, 7], [1, 9, 7], 1, [1, 7, 0]),  # page size 1: one page a token
    ([8], [9], 8, [1]),  # a full last page: the next token opens one
])
def test_extend_opens_the_pages_past_the_prefixs_last_UNI_8(
        prefix_lens: list[int], seq_lens: list[int], page_size: int, counts: list[int]) -> None:
    assert extend_page_counts(prefix_lens, seq_lens, page_size) == counts


def test_extend_page_counts_need_one_length_per_request() -> None:
    with pytest.raises(ValueError):
        extend_page_counts([0, 1], [4], 4)


def test_extend_continues_the_prefixs_page_then_takes_new_pages_in_order_UNI_8() -> None:
    # page size 4; request 0: a fresh 5-token request, pages 10 and 11 (rows 40..43, 44);
    # request 1: 3 tokens on page 5 (last_loc 22), grows to 6: row 23, then page 12 (48, 49);
    # request 2: nothing new; request 3: 5 tokens (page 9, last_loc 36) grows to 10: rows
    # 37..39, then page 13 (52, 53)
    ids = extend_token_ids([0, 3, 4, 5], [5, 6, 4, 10], [-1, 22, 7, 36], [10, 11, 12, 13], 4)
    assert ids == [40, 41, 42, 43, 44, 23, 48, 49, 37, 38, 39, 52, 53]


def test_extend_needs_one_last_loc_per_request() -> None:
    with pytest.raises(ValueError):
        extend_token_ids([0, 4], [4, 8], [-1], [3, 5], 4)


def test_extend_on_page_size_one_is_the_pages_in_order_UNI_8() -> None:
    assert extend_token_ids([0, 2], [2, 3], [-1, 5], [7, 3, 9], 1) == [7, 3, 9]


@pytest.mark.parametrize(("seq_lens", "page_size", "starts"), [
    ([1, 2, 5, 8, 9], 4, [True, False, True, False, True]),  # position seq - 1 on a page start
    ([1, 2, 3], 1, [True, True, True]),
    ([3, 4], 3, [False, True]),
])
def test_decode_opens_a_page_where_the_new_position_starts_one_UNI_8(
        seq_lens: list[int], page_size: int, starts: list[bool]) -> None:
    assert decode_page_starts(seq_lens, page_size) == starts


def test_decode_takes_new_pages_in_request_order_else_continues_UNI_8() -> None:
    # page size 4: position 0 opens page 7 (row 28), position 1 continues 40, position 4
    # opens page 9 (row 36), position 6 continues 57
    assert decode_token_ids([1, 2, 5, 7], [-1, 40, 19, 56], [7, 9], 4) == [28, 41, 36, 57]
    assert decode_token_ids([3, 1], [8, 2], [6, 4], 1) == [6, 4]


def test_decode_needs_one_last_loc_per_request() -> None:
    with pytest.raises(ValueError):
        decode_token_ids([1, 2], [-1], [7], 4)
