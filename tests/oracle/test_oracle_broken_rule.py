"""The broken-allocator rule (CONTRIBUTING): every clause the oracle can report has a
deliberately broken allocator that the oracle reports under exactly that clause, or is listed in
``NO_BROKEN_ALLOCATOR`` with the specific reason it has none yet.

Each broken allocator names one clause (``Broken.clauses`` of length 1); the tests that run them
(``test_oracle_broken.py``, ``test_oracle_broken_events.py``, ``test_oracle_reach.py``,
``test_oracle_shortage_raises.py``, ``test_oracle_census_cause.py``, ``test_oracle_hybrid.py``,
``test_oracle_unified.py``, ``test_oracle_dataplane.py`` for ``BROKEN_HYBRID_DATA``, and below
for ``broken_rule.py``) assert the reported clause is in that 1-tuple, i.e. exactly it.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from broken_allocators import Broken
from broken_rule import BROKEN_RULE
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.families import all_mapped
from kvpool.oracle.engine.registry import FAMILY_MODULES
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target

# (module, list name, whether its entries are (event, broken) pairs)
BROKEN_LISTS = (
    ("broken_allocators", "BROKEN", False),
    ("broken_impl", "BROKEN_IMPL", False),
    ("broken_clauses", "BROKEN_CLAUSES", False),
    ("broken_events", "OWNERSHIP_BROKEN", False),
    ("broken_events", "EVENT_BROKEN", True),
    ("broken_shortage", "SHORTAGE_BROKEN", False),
    ("broken_rule", "BROKEN_RULE", False),
    ("broken_reach", "REACH_BROKEN", True),
    ("broken_census", "CENSUS_BROKEN", False),
    ("broken_hybrid", "BROKEN_HYBRID", False),
    ("broken_hybrid", "BROKEN_HYBRID_DATA", False),
    ("broken_unified", "BROKEN_UNIFIED", False),
    ("broken_mamba_slot", "BROKEN_MAMBA_SLOT", False),
)
# Lists whose entries may still accept several clauses: only their one-clause entries count.
NOT_YET_PINNED: dict[str, str] = {}

# Clauses without a broken allocator reported under exactly them, and why (each one a debt).
NO_BROKEN_ALLOCATOR: dict[str, str] = {
    # single pool: rules no check names, their breaches show as another clause
    "MODEL-2": "slot s on page s // ps is the layout every check computes with; a breach shows "
    "as the call's result clause (ALLOC-4, EXTEND-5, DECODE-5)",
    "MODEL-3": "one status per page is the spec model's own invariant (check_invariants); a "
    "target's breach shows as its census clause (INV-1, INV-2) or a deferred free's rule",
    "MODEL-4": "the row layout is a caller rule the oracle keeps when it builds rows; a target "
    "that breaks it by its results is reported under EXTEND-5 / DECODE-5",
    "LIFE-4": "get_all_free_pages() order (free list, then staged) is compared after every call; "
    "a wrong order shows first after the free that staged, as that call's order clause (FREE-5)",
    "SORT-1": "staging is seen through get_all_free_pages() only; a free that does not stage "
    "shows as its order clause (FREE-5) in exact order and passes in contract order",
    # hybrid family
    "SWA-3": "no hybrid check names it: the oracle compares the target's fields after every "
    "call, so a slot mapped twice or a full page split over SWA pages differs first in a side's "
    "free census (INV-1) or the mapping pairs (SWA-2); kvpool's verify_byte_accounting() "
    "reports it under SWA-19",
    "SWA-4": "no hybrid check names it: a side's conservation breach differs first in that "
    "side's free census (INV-1); an SWA page leaked under intact censuses is what the target's "
    "verify_byte_accounting() reports (SWA-19), e.g. a segment free that trims each segment "
    "alone and releases their shared SWA page twice",
    "SWA-15": "a group is seen only through its releases: a wrong release order differs in the "
    "SWA free census (INV-1); every free inside a group has its inputs overwritten by the "
    "caller, so a raise at the group's end is reported as its cause (GROUP-3); begin is drawn "
    "only with live rows, and a clear() that keeps the group open passes the default budget",
}
# the unified family's, while it is registered (kvpool.oracle.engine.registry)
UNIFIED_NO_BROKEN_ALLOCATOR: dict[str, str] = {}
if "unified" in FAMILY_MODULES:
    NO_BROKEN_ALLOCATOR |= UNIFIED_NO_BROKEN_ALLOCATOR


def _entries(module: str, name: str, paired: bool) -> list[Any]:
    try:
        found = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        return []  # a list another change adds
    return [b for _, b in found] if paired else list(found)


def _all_broken() -> list[tuple[str, Any]]:
    out = [(m, b) for m, n, paired in BROKEN_LISTS for b in _entries(m, n, paired)]
    out += [(m, b) for m, n in NOT_YET_PINNED.items() for b in _entries(m, n, False)]
    return out


def _label(module: str, broken: Any) -> str:
    cls = getattr(broken, "cls", None)
    return f"{module}:{cls.__name__ if cls is not None else broken.name}"


def pinned() -> dict[str, list[str]]:
    """Clause -> the broken allocators reported under exactly it."""
    out: dict[str, list[str]] = {}
    for module, broken in _all_broken():
        if len(broken.clauses) == 1:
            out.setdefault(broken.clauses[0], []).append(_label(module, broken))
    return out


def test_every_broken_allocator_pins_exactly_one_clause() -> None:
    wide = [
        f"{_label(m, b)} {b.clauses}"
        for m, b in _all_broken()
        if m not in NOT_YET_PINNED and len(b.clauses) != 1
    ]
    assert not wide, wide


def test_every_reportable_clause_has_a_broken_allocator_or_a_reason() -> None:
    have = pinned()
    missing = sorted(c for c in all_mapped() if c not in have and c not in NO_BROKEN_ALLOCATOR)
    assert not missing, f"no broken allocator reported under exactly: {missing}"


def test_listed_reasons_are_specific_and_not_stale() -> None:
    have, mapped = pinned(), all_mapped()
    stale = sorted(c for c in NO_BROKEN_ALLOCATOR if c in have or c not in mapped)
    assert not stale, f"listed but pinned by a broken allocator, or not mapped: {stale}"
    vague = [c for c, why in NO_BROKEN_ALLOCATOR.items() if len(why) < 40]
    assert not vague, vague


@pytest.mark.parametrize("broken", BROKEN_RULE, ids=[b.cls.__name__ for b in BROKEN_RULE])
def test_oracle_reports_rule_broken_allocator_under_its_clause(broken: Broken) -> None:
    """Each ``broken_rule.py`` allocator, in the configuration that shows its bug, is reported
    under exactly its clause within a small budget."""
    target = Target(broken.factory, capabilities_of(broken.factory), broken.path)
    config = Config(broken.page_size, broken.need_sort, "cpu", broken.order)
    result = run_config(target, config, max_examples=200)
    assert result.error is None, result.error
    failure = result.failure
    assert failure is not None, f"{broken.cls.__name__} not caught"
    assert failure.clause == broken.clauses[0], failure.report()
