"""The shared case table (tests/cases.py) run on the reference model.

Besides each step's expectations, every rejected step must leave the whole model unchanged
(``ERR-1``): the snapshot and every page's status, not only the free census.
"""

from __future__ import annotations

from typing import Any

import pytest
from cases import CASES, Case, Step, run_case
from kvpool.spec import AllocatorModel, ContractViolation


def make_model(case: Case) -> AllocatorModel:
    return AllocatorModel(case.size, case.page_size, paged=case.paged, need_sort=case.need_sort)


def _state(model: AllocatorModel) -> tuple[object, ...]:
    statuses = tuple(model.status_of(p) for p in range(1, model.num_pages + 1))
    return (model.snapshot(), statuses, model.available_size())


def call_checked(model: AllocatorModel, step: Step) -> Any:
    """Perform ``step``; a ContractViolation must change nothing (ERR-1); invariants hold after."""
    before = _state(model)
    try:
        result = getattr(model, step.call)(*step.args, **step.kwargs)
    except ContractViolation:
        assert _state(model) == before, f"ERR-1: {step} changed the model"
        raise
    finally:
        model.check_invariants()
    return result


def test_case_table_is_large_and_names_are_unique() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    assert len(CASES) >= 60


def test_case_table_covers_every_call_and_kind() -> None:
    calls = {step.call for case in CASES for step in case.steps}
    assert calls >= {"alloc", "alloc_extend", "alloc_decode", "free", "free_full", "free_segment",
                     "free_segments", "free_group_begin", "free_group_end",
                     "merge_and_sort_free", "clear", "translate_kv_indices_for_transfer"}
    kinds = {(case.paged, case.page_size, case.need_sort) for case in CASES}
    assert {(False, 1, False), (False, 1, True)} <= kinds
    assert {(True, ps, ns) for ps in (1, 2, 16, 64) for ns in (False, True)} <= kinds


@pytest.mark.parametrize("case", CASES, ids=str)
def test_case(case: Case) -> None:
    """Every case of the table: results, free lists, available sizes, clause IDs (all clauses
    named in the case name)."""
    run_case(case, make_model, call_checked, lambda m: m.get_all_free_pages(), ContractViolation)
