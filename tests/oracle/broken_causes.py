"""Broken allocators whose report names a symptom, not the rule their bug breaks.

Every broken allocator records two clauses: ``clauses`` (a 1-tuple), the clause the oracle
reports it under, and ``cause``, the clause of SPEC.md its bug breaks. They agree for most; where
they differ the entry here says why the run reports the other one. ``test_oracle_broken_rule.py``
checks each entry against the allocator's fields and runs every broken allocator to see the
reported clause, and counts a clause as covered only by an allocator whose cause it is.
"""

from __future__ import annotations

from typing import Any

# label ("module:Name") -> (cause, reported, why the run reports the other clause)
SYMPTOM_OF: dict[str, tuple[str, str, str]] = {
    "broken_allocators:DecodeNewPageWrong": (
        "DECODE-4", "DECODE-5",
        "the default run first meets a request that should open a page and continues instead: "
        "its slot (last_loc + 1) is also the first slot of a free page, so the slot reads as a "
        "new page too, and the result differs from the reference (DECODE-5); where it opens a "
        "page it should continue (a slot no continuation gives) the report is DECODE-4",
    ),
    "broken_hybrid:SlideFreesFull": (
        "SWA-10", "INV-1",
        "no hybrid check names the full side of free_swa: the full side's free census differs "
        "right after the slide",
    ),
    "broken_hybrid:SwaTailWholeRow": (
        "SWA-20", "INV-1",
        "the result is right; the extra SWA pages show only in the SWA side's free census after "
        "the call",
    ),
    "broken_hybrid:DecodeLeaksFullSide": (
        "SWA-9", "INV-1",
        "the decode returns None as it should; the full pages it took show in the full side's "
        "free census after the call",
    ),
    "broken_hybrid:GroupDoubleRelease": (
        "SWA-15", "SWA-19",
        "the page queued twice is in the group's deferred list before the end: the target's own "
        "verify_byte_accounting() reports it first (SWA-19)",
    ),
    "broken_hybrid:TranslateMemoNotInvalidated": (
        "DATA-2", "SWA-16",
        "with the data plane on, the default run meets the stale memo first where the scheduler "
        "model asks for a translation (SWA-16); a fixed sequence shows DATA-2 at the hand-out "
        "(test_oracle_dataplane.py)",
    ),
    "broken_unified:transfer_identity": (
        "UNI-11", "UNI-3",
        "virtual ids sent as physical rows put a full page's bytes in the SWA side's band: the "
        "data plane finds bytes that belong to both sides (bands overlapping, UNI-3) first",
    ),
    "broken_unified:decode_binds_full_only": (
        "UNI-8", "UNI-9",
        "without the SWA page the gap keeps more bytes: seen first as a larger "
        "full_available_size() (UNI-9)",
    ),
    "broken_unified:swa_tail_binds_all": (
        "UNI-8", "UNI-7",
        "the extra SWA pages are seen first as a smaller available_size() (UNI-7)",
    ),
}


def label(broken: Any) -> str:
    """``module:Name`` of a broken allocator of any family (``Broken``, ``BrokenHybrid``,
    ``BrokenUnified``)."""
    if hasattr(broken, "patch"):
        return f"broken_unified:{broken.name}"
    module = getattr(broken, "module", None) or broken.cls.__module__
    return f"{module}:{broken.cls.__name__}"


def symptom_note(broken: Any) -> str:
    """For an assertion message: where ``broken`` is reported under a symptom, its cause and
    why (empty where the two agree)."""
    if broken.cause == broken.clauses[0]:
        return ""
    _, _, why = SYMPTOM_OF.get(label(broken), ("", "", "no SYMPTOM_OF entry"))
    return (f"[{label(broken)} is reported under {broken.clauses[0]}, a symptom of its cause "
            f"{broken.cause}: {why}] ")
