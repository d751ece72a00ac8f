"""Contract acceptance (spec/contract.py): another allocator's valid choice is adopted, every
broken result is named by its clause."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kvpool.spec import (
    AllocatorModel,
    Divergence,
    accept_alloc,
    accept_decode,
    accept_extend,
    check_census,
)


def model_ps4() -> AllocatorModel:
    """8 pages of 4; page 1 holds a request with prefix 2 (last_loc 5); free pages 2..8."""
    model = AllocatorModel(32, 4)
    assert model.alloc(4) == [4, 5, 6, 7]
    return model


def test_accept_alloc_adopts_another_valid_choice_ALLOC_4() -> None:
    model = model_ps4()
    accept_alloc(model, 8, [32, 33, 34, 35, 12, 13, 14, 15])  # pages 8 and 3: not SGLang's order
    assert model.owned_pages() == [1, 3, 8]
    check_census(model, [7, 6, 5, 4, 2], 20)
    model.check_invariants()


@pytest.mark.parametrize(("need_size", "result", "clause"), [
    (8, None, "ALLOC-3"),                                 # None although 7 pages are free
    (28, None, "ALLOC-3"),                                # None although exactly 7 are needed
    (32, [0] * 32, "ALLOC-3"),                            # slots although only 7 pages are free
    (8, [8, 9, 10, 11], "ALLOC-4"),                       # too short
    (8, [8, 9, 10, 11, 13, 12, 14, 15], "ALLOC-4"),       # not page-major
    (8, [8, 9, 10, 11, 8, 9, 10, 11], "ALLOC-4"),         # one page twice
    (4, [4, 5, 6, 7], "ALLOC-4"),                         # page 1 is owned
    (4, [0, 1, 2, 3], "ALLOC-4"),                         # the padding page
    (4, [36, 37, 38, 39], "ALLOC-4"),                     # page 9 does not exist
])
def test_accept_alloc_rejects(need_size: int, result: list[int] | None, clause: str) -> None:
    model = model_ps4()
    with pytest.raises(Divergence) as err:
        accept_alloc(model, need_size, result)
    assert err.value.clause == clause


def test_divergence_names_clause_and_detail() -> None:
    err = Divergence("ALLOC-4", "slot 9 at index 0 breaks the whole-page layout")
    assert str(err) == "[ALLOC-4] slot 9 at index 0 breaks the whole-page layout"
    assert (err.clause, err.detail) == ("ALLOC-4", "slot 9 at index 0 breaks the whole-page layout")


def test_accept_alloc_names_the_pages_handed_out_twice_ALLOC_4() -> None:
    with pytest.raises(Divergence) as err:
        accept_alloc(model_ps4(), 12, [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11])
    assert err.value.detail == "pages [2] handed out twice in one result"


def test_accept_alloc_none_when_short_ALLOC_3() -> None:
    model = model_ps4()
    accept_alloc(model, 32, None)
    assert model.available_size() == 28


def test_accept_extend_adopts_EXTEND_4() -> None:
    model = model_ps4()
    accept_extend(model, [2, 0], [11, 3], [5, -1], [6, 7, 28, 29, 30, 31, 8, 9, 10, 16, 17, 18])
    assert model.owned_pages() == [1, 2, 4, 7]


@pytest.mark.parametrize(("result", "clause"), [
    ([7, 8, 12, 13, 14, 15, 16, 17, 18], "EXTEND-5"),     # part 1 does not continue last_loc
    ([6, 7, 13, 14, 15, 16, 20, 21, 22], "EXTEND-5"),     # offsets broken
    ([6, 7, 12, 13, 18, 19, 20, 21, 22], "EXTEND-5"),     # logical page 1 split over 3 and 4
    ([6, 7, 12, 13, 14, 15, 12, 13, 14], "EXTEND-4"),     # page 3 for two logical pages
    ([6, 7, 4, 5, 6, 7, 16, 17, 18], "EXTEND-4"),         # page 1 is owned
    ([6, 7, 12, 13], "EXTEND-5"),                         # too short
    (None, "EXTEND-6"),
])
def test_accept_extend_rejects(result: list[int] | None, clause: str) -> None:
    with pytest.raises(Divergence) as err:
        accept_extend(model_ps4(), [2], [11], [5], result)
    assert err.value.clause == clause


@pytest.mark.parametrize(("accept", "clause"), [
    (lambda m: accept_decode(m, [3, 5], [5, 7], [6, 4]), "DECODE-4"),     # page 1 is owned
    (lambda m: accept_decode(m, [3], [5], [7]), "DECODE-5"),              # not last_loc + 1
    (lambda m: accept_decode(m, [1], [-1], [13]), "DECODE-5"),            # a new page's offset 1
    (lambda m: accept_decode(m, [1] * 8, [-1] * 8, list(range(8, 40, 4))), "DECODE-6"),
    (lambda m: accept_decode(m, [1], [-1], None), "DECODE-6"),
])
def test_accept_decode_names_decode_clauses(accept: Callable[[AllocatorModel], None],
                                            clause: str) -> None:
    with pytest.raises(Divergence) as err:
        accept(model_ps4())
    assert err.value.clause == clause


def test_accept_decode_adopts_DECODE_4() -> None:
    model = model_ps4()
    accept_decode(model, [3, 1], [5, -1], [6, 20])
    assert model.owned_pages() == [1, 5]


def test_check_census_INV_1_INV_2_INV_4() -> None:
    model = model_ps4()
    check_census(model, [8, 2, 3, 4, 5, 6, 7], 28)
    with pytest.raises(Divergence) as err:
        check_census(model, [2, 3, 4, 5, 6, 7, 7], 28)
    assert err.value.clause == "INV-2" and "[7]" in err.value.detail and "[8]" in err.value.detail
    with pytest.raises(Divergence) as err:
        check_census(model, [2, 3, 4, 5, 6, 7, 9], 28)
    assert err.value.clause == "INV-1" and "[9]" in err.value.detail and "[8]" in err.value.detail
    with pytest.raises(Divergence) as err:
        check_census(model, [2, 3, 4, 5, 6, 7, 8], 24)
    assert err.value.clause == "INV-4"
