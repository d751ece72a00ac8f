"""The shared case table (tests/cases.py) run on the torch allocators through one adapter.

Same expectations as on the spec model. Cases with rejected steps need checked mode; the others
run both checked and unchecked. A rejected step must leave the whole observable state unchanged
(``ERR-1``): free list order, staged pages, ``available_size`` and the open group. The table
already instantiates every ps in {1, 2, 16, 64} with and without ``need_sort``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from cases import CASES, Case, Step, run_case
from impl_adapter import Allocator, call_impl, free_list, make_impl
from kvpool.spec import ContractViolation

HAS_CUDA = torch.cuda.is_available()


def _state(alloc: Allocator) -> tuple[object, ...]:
    return (free_list(alloc), alloc.free_pages.tolist(), alloc.available_size(),
            alloc.debug_print())


def _runner(device: str, checked: bool) -> tuple[Any, Any]:
    def make(case: Case) -> Allocator:
        return make_impl(paged=case.paged, size=case.size, page_size=case.page_size,
                         need_sort=case.need_sort, checked=checked, device=device)

    def call(alloc: Allocator, step: Step) -> Any:
        before = _state(alloc)
        try:
            return call_impl(alloc, step.call, step.args, step.kwargs, device=device)
        except ContractViolation:
            assert _state(alloc) == before, f"ERR-1: {step} changed the allocator"
            raise
        finally:
            alloc.check_invariants()

    return make, call


def _variants(case: Case) -> list[bool]:
    return [True] if any(s.raises for s in case.steps) else [True, False]


PARAMS = [pytest.param(case, checked, id=f"{case}-{'checked' if checked else 'unchecked'}")
          for case in CASES for checked in _variants(case)]


@pytest.mark.parametrize(("case", "checked"), PARAMS)
def test_impl_case(case: Case, checked: bool) -> None:
    """Every case of the table on the impl (CPU): results, free lists, sizes, clause IDs."""
    make, call = _runner("cpu", checked)
    run_case(case, make, call, free_list, ContractViolation)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize(("case", "checked"), PARAMS)
def test_impl_case_cuda(case: Case, checked: bool) -> None:
    """The same table on ``device="cuda"``."""
    make, call = _runner("cuda", checked)
    run_case(case, make, call, free_list, ContractViolation)
