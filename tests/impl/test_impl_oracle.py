"""The oracle on kvpool.impl at the page sizes of the impl's own tests (2, 3 and 64).

``python -m kvpool.oracle`` runs kvpool.impl at page sizes 1, 4 and 16; the impl's step-by-step
property (``test_impl_differential.py``) also uses 2, 3 and 64. Here the oracle's state machine,
comparison and bad calls (``kvpool.oracle.families.single.badcalls``) cover those page sizes for
the paged allocator, checked (bad input sent, ``ERR-1``) and unchecked, ``need_sort`` on and off.
"""

from __future__ import annotations

import pytest
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.families.single.targets import Config, load_target

EXAMPLES = 40
TARGETS = ("kvpool.oracle.families.single.targets:kvpool_paged",
           "kvpool.oracle.families.single.targets:kvpool_paged_unchecked")


@pytest.mark.parametrize("path", TARGETS, ids=["checked", "unchecked"])
@pytest.mark.parametrize("need_sort", [False, True], ids=["unsorted", "sorted"])
@pytest.mark.parametrize("page_size", [2, 3, 64])
def test_oracle_conformance_at_more_page_sizes(path: str, need_sort: bool, page_size: int) -> None:
    target = load_target(path)
    target.caps = target.caps.replace(page_sizes=(page_size,))
    result = run_config(target, Config(page_size, need_sort), max_examples=EXAMPLES)
    assert result.error is None, result.error
    assert result.failure is None, result.failure.report()
    assert result.calls > EXAMPLES * 5  # the run did work
