"""The broken-allocator rule (CONTRIBUTING): every clause the oracle can report has a
deliberately broken allocator whose bug breaks that clause and that the oracle reports under
exactly it, or is listed with the specific reason it has none yet (``NO_BROKEN_ALLOCATOR``; a
clause reported only for allocators whose bug breaks another one: ``SYMPTOM_ONLY``).

Each broken allocator names the clause it is reported under (``clauses``, a 1-tuple) and the
clause its bug breaks (``cause``); where the two differ ``broken_causes.SYMPTOM_OF`` says why.
The rule does not trust ``clauses``: ``test_broken_allocator_is_reported_under_its_pin`` runs
every allocator it counts (a fixed budget, derandomized: the same run every time) and checks the
reported clause; the unified family's allocators need SGLang and take minutes, so theirs is
``slow`` (``test_oracle_unified.py`` asserts the same clauses in the default run).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
from broken_allocators import Broken
from broken_causes import SYMPTOM_OF, label, symptom_note
from kvpool.oracle.engine.capabilities import capabilities_of
from kvpool.oracle.engine.families import all_mapped
from kvpool.oracle.engine.registry import FAMILY_MODULES
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config, Target

SPEC_MD = Path(__file__).resolve().parents[2] / "SPEC.md"

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
    ("broken_hybrid_census", "HYBRID_CENSUS_BROKEN", False),
    ("broken_mamba_slot", "BROKEN_MAMBA_SLOT", False),
    ("broken_page_interleave", "BROKEN_PAGE_INTERLEAVE", False),
    ("broken_hisparse", "BROKEN_HISPARSE", False),
    ("broken_hisparse_dsv4", "BROKEN_HISPARSE_DSV4", False),
    ("broken_unified", "BROKEN_UNIFIED", False),
    ("broken_unified_mamba", "BROKEN_UNIFIED_MAMBA", False),
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
    "DATA-2": "broken_hybrid:TranslateMemoNotInvalidated breaks it, but a default run with the "
    "data plane on meets its stale translation first as SWA-16 (its SYMPTOM_OF entry); only a "
    "fixed sequence shows DATA-2 at the hand-out (test_oracle_dataplane.py)",
    "SWA-3": "no hybrid check names it: the oracle compares the target's fields after every "
    "call, so a slot mapped twice or a full page split over SWA pages differs first in a side's "
    "free census (INV-1) or the mapping pairs (SWA-2); kvpool's verify_byte_accounting() "
    "reports it under SWA-19",
    "SWA-4": "no hybrid check names it: a side's conservation breach differs first in that "
    "side's free census (INV-1); an SWA page leaked under intact censuses is what the target's "
    "verify_byte_accounting() reports (SWA-19), e.g. a segment free that trims each segment "
    "alone and releases their shared SWA page twice",
    "SWA-15": "broken_hybrid:GroupDoubleRelease breaks it and is reported under SWA-19 (its "
    "target's own census sees the page queued twice); a group is seen only through its "
    "releases: a wrong release order differs in the "
    "SWA free census (INV-1); every free inside a group has its inputs overwritten by the "
    "caller, so a raise at the group's end is reported as its cause (GROUP-3); begin is drawn "
    "only with live rows, and a clear() that keeps the group open passes the default budget",
}
# Clauses reported only for broken allocators whose bug breaks another clause (their
# ``broken_causes.SYMPTOM_OF`` entries), and why none breaks them and is reported under them.
SYMPTOM_ONLY: dict[str, str] = {}
# the unified family's, while it is registered (kvpool.oracle.engine.registry)
UNIFIED_NO_BROKEN_ALLOCATOR: dict[str, str] = {
    "UNI-15": "broken_unified_kvpool:DecodeGateReadsFullView breaks it and is reported under it "
    "(tests/oracle/test_oracle_unified_kvpool_broken.py); kvpool's broken unified subclasses "
    "are not among the lists this rule runs",
    "DATA-4": "broken_unified_kvpool:HoleReusedUnzeroed breaks it and is reported under it "
    "(tests/oracle/test_oracle_unified_kvpool_broken.py); kvpool's broken unified subclasses "
    "are not among the lists this rule runs",
    "UNI-16": "broken_unified_tri_kvpool:StateOverrunsFloat breaks it and is reported under it "
    "(tests/oracle/test_oracle_unified_tri_kvpool_broken.py); kvpool's broken tri-pools are not "
    "among the lists this rule runs",
}
if "unified" in FAMILY_MODULES:
    NO_BROKEN_ALLOCATOR |= UNIFIED_NO_BROKEN_ALLOCATOR
    SYMPTOM_ONLY["UNI-3"] = (
        "reported for broken_unified:transfer_identity, UNI-11's bug (virtual ids sent as "
        "physical rows), when the data plane finds a full page's bytes in the SWA band; an "
        "allocator whose frontiers cross is still to write"
    )


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
    return label(broken)


def pinned() -> dict[str, list[str]]:
    """Clause -> the broken allocators reported under exactly it."""
    out: dict[str, list[str]] = {}
    for module, broken in _all_broken():
        if len(broken.clauses) == 1:
            out.setdefault(broken.clauses[0], []).append(_label(module, broken))
    return out


def covered() -> dict[str, list[str]]:
    """Clause -> the broken allocators reported under exactly it whose bug breaks it."""
    out: dict[str, list[str]] = {}
    for module, broken in _all_broken():
        if broken.clauses == (broken.cause,):
            out.setdefault(broken.cause, []).append(_label(module, broken))
    return out


def test_every_broken_allocator_pins_exactly_one_clause() -> None:
    wide = [
        f"{_label(m, b)} {b.clauses}"
        for m, b in _all_broken()
        if m not in NOT_YET_PINNED and len(b.clauses) != 1
    ]
    assert not wide, wide


def test_every_reportable_clause_has_a_broken_allocator_or_a_reason() -> None:
    have, debts = covered(), NO_BROKEN_ALLOCATOR | SYMPTOM_ONLY
    missing = sorted(c for c in all_mapped() if c not in have and c not in debts)
    assert not missing, f"no broken allocator whose bug breaks and is reported under: {missing}"


def test_listed_reasons_are_specific_and_not_stale() -> None:
    have, reported, mapped = covered(), pinned(), all_mapped()
    stale = sorted(c for c in NO_BROKEN_ALLOCATOR if c in have or c not in mapped)
    assert not stale, f"listed but covered by a broken allocator, or not mapped: {stale}"
    symptom = sorted(c for c in SYMPTOM_ONLY if c in have or c not in reported or c in
                     NO_BROKEN_ALLOCATOR)
    assert not symptom, f"SYMPTOM_ONLY but covered, never reported, or listed twice: {symptom}"
    vague = [c for c, why in (NO_BROKEN_ALLOCATOR | SYMPTOM_ONLY).items() if len(why) < 40]
    assert not vague, vague


def test_causes_are_spec_clauses_and_symptoms_are_explained() -> None:
    """Every ``cause`` is a clause of SPEC.md; an allocator whose cause is not its reported
    clause has its ``SYMPTOM_OF`` entry (the same two clauses), and every entry is such an
    allocator."""
    spec = set(re.findall(r'<a id="([A-Z]+-[0-9]+)">', SPEC_MD.read_text()))
    every = {_label(m, b): b for m, b in _all_broken()}
    unknown = sorted(f"{name}: {b.cause}" for name, b in every.items() if b.cause not in spec)
    assert not unknown, unknown
    unexplained = sorted(
        name for name, b in every.items()
        if (b.cause,) != b.clauses and SYMPTOM_OF.get(name, ())[:2] != (b.cause, b.clauses[0])
    )
    assert not unexplained, f"reported under a symptom, no SYMPTOM_OF entry: {unexplained}"
    for name, (cause, reported, why) in SYMPTOM_OF.items():
        assert name in every, f"SYMPTOM_OF names no broken allocator: {name}"
        assert cause != reported and len(why) >= 40, (name, cause, reported, why)


def _single_kind(broken: Any) -> bool:
    return isinstance(broken, Broken)


RUN_BUDGET = 200  # single pool: the examples of test_oracle_broken.py (derandomized)
HYBRID_BUDGET = 60  # hybrid: the examples of test_oracle_hybrid.py
# Shrinking decides the clause a failure is reported under (a census symptom becomes its call's
# rule; with 3 shrinks DecodeNoMergeWhenShort shows as DECODE-6 and ShortageTakesThenRaises as
# ALLOC-3): 8 of Hypothesis's shrinks reach every pinned clause (the default run makes 20); the
# minimizer's replays (default 400) only shorten the trace. About 30 s of one core in all.
SHRINKS, REPLAYS = 8, 20
RUNNABLE = [(m, b) for m, b in _all_broken() if not hasattr(b, "patch")]
UNIFIED = [(m, b) for m, b in _all_broken() if hasattr(b, "patch")]


def _reported(module: str, broken: Any, monkeypatch: pytest.MonkeyPatch,
              full: bool = False) -> str | None:
    """The clause one run of ``broken`` reports (None: it passed), in the configuration its
    own test uses: the first failing configuration's, in its order. ``full``: with the default
    run's shrinking (20 shrinks, 400 replays) instead of ``SHRINKS`` / ``REPLAYS``."""
    shrink = {} if full else {"shrinks": SHRINKS, "max_replays": REPLAYS}
    if hasattr(broken, "reported"):  # a family's own run (broken_mamba_slot)
        return broken.reported(**shrink)  # type: ignore[no-any-return]
    if _single_kind(broken):
        target = Target(broken.factory, capabilities_of(broken.factory), broken.path)
        config = Config(broken.page_size, broken.need_sort, "cpu", broken.order)
        result = run_config(target, config, max_examples=RUN_BUDGET, **shrink)
        assert result.error is None, result.error
        return result.failure.clause if result.failure is not None else None
    from kvpool.oracle.engine.dataplane import ENV
    from kvpool.oracle.families.hybrid.runner import hybrid_target

    if broken in _entries("broken_hybrid", "BROKEN_HYBRID_DATA", False):
        monkeypatch.setenv(ENV, "1")  # only the data plane sees these (test_oracle_dataplane)
    hybrid = hybrid_target(broken.factory())
    for page_size in hybrid.caps.page_sizes:  # as run_hybrid: stop at the first failure
        for need_sort in hybrid.caps.need_sort:
            result = run_config(hybrid, Config(page_size, need_sort),
                                max_examples=HYBRID_BUDGET, step_count=30, **shrink)
            assert result.error is None, result.error
            if result.failure is not None:
                clause: str = result.failure.clause
                return clause
    return None


@pytest.mark.parametrize(("module", "broken"), RUNNABLE, ids=[label(b) for _, b in RUNNABLE])
def test_broken_allocator_is_reported_under_its_pin(
    module: str, broken: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run reports the pinned clause (and, for an entry of ``SYMPTOM_OF``, so not its
    cause)."""
    reported = _reported(module, broken, monkeypatch)
    if reported != broken.clauses[0]:  # fewer shrinks may stop short: the default run decides
        reported = _reported(module, broken, monkeypatch, full=True)
    assert reported == broken.clauses[0], (
        f"{symptom_note(broken)}{label(broken)} pinned to {broken.clauses[0]}, "
        f"the run reports {reported}"
    )


@pytest.mark.slow
@pytest.mark.peers
@pytest.mark.parametrize(("module", "broken"), UNIFIED, ids=[label(b) for _, b in UNIFIED])
def test_unified_broken_allocator_is_reported_under_its_pin(module: str, broken: Any) -> None:
    """As above, for the unified family (SGLang's composite with one planted bug each), at the
    budget of ``broken_unified.main``."""
    from broken_unified import run
    from kvpool.oracle.peers.availability import require_installed

    require_installed("sglang")
    found = run(broken.factory(), broken.caps(), 60, 4.0)
    assert found["error"] is None, found["error"]
    assert found["clause"] == broken.clauses[0], f"{symptom_note(broken)}{found}"
