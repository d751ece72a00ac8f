"""Which other declaration would explain a failure: one line appended to the report.

A failure is a real divergence under the capabilities in force; it may also mean that the
target was judged by a rule it never meant to support. :func:`hint_for` names the declaration
(or option) under which the same behaviour would be legal, so a user can tell a bug from a
missing declaration. The capability that a missing method switches off comes from the one
table ``kvpool.oracle.engine.capabilities.METHOD_RULES``; a target resolved with
``Capabilities.lacking`` set (declared capabilities whose methods its instance lacks) gets all
of them in one hint.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..engine.capabilities import METHOD_RULES, Capabilities
from ..engine.trace import Trace

# A valid call raised because the target does not implement it.
_NOT_IMPLEMENTED = ("raised AttributeError", "raised NotImplementedError")


def _declaration_for_call(call: str) -> str | None:
    for name, off_value, methods in METHOD_RULES:
        if call in methods and name not in ("decode_ps1", "need_sort"):
            value = off_value if isinstance(off_value, str) else str(off_value).lower()
            return f"--declare {name}={value}"
    return None


# single-pool calls bad input goes to only when a capability is on
_CALL_NEEDS: dict[str, Callable[[Capabilities], bool]] = {
    "alloc_extend": lambda c: c.extend,
    "alloc_decode": lambda c: c.extend,
    "free_segments": lambda c: c.segments != "none",
    "free_group_begin": lambda c: c.groups,
}


def _always(caps: Capabilities) -> bool:
    return True


def _checked_except(caps: Capabilities, call: str) -> str:
    """The per-call ``checked`` declaration of every checked call but ``call`` (empty: none)."""
    calls = [
        name
        for name in caps.CHECKABLE_CALLS
        if name != call and caps.checks(name) and _CALL_NEEDS.get(name, _always)(caps)
    ]
    if not calls:
        return ""
    types = caps.replace(checked=caps.error_types)
    return f"{'+'.join(calls)}:{types.value_text('checked')}"


def hint_for(clause: str, detail: str, trace: Trace, caps: Capabilities) -> str | None:
    """The declaration under which this failure would not be one, or None."""
    step = trace.steps[trace.failing_step] if trace.failing_step is not None else None
    call = step.call if step is not None else ""
    if step is not None and step.raises is not None:  # a bad call (checked mode)
        if "accepted the call" in detail:
            others = _checked_except(caps, call)
            partial = (
                f"if it validates only some calls: --declare checked={others} (bad input is "
                "sent to those only); "
                if others
                else ""
            )
            return (
                f"{partial}a target that does not reject caller errors is unchecked: --declare "
                "checked=false (no bad input is sent then)"
            )
        raised = re.match(r"raised (\w+(?:\.\w+)*):", detail)
        if raised and raised.group(1) not in ("AttributeError", "NotImplementedError"):
            return (
                f"if {raised.group(1)} is how the target rejects caller errors: --declare "
                f"checked={raised.group(1)}"
            )
    if call == "check_decode_capacity" and re.search(r"requests|spec_algorithm", detail):
        return (
            "SGLang 0.5.23's scheduler passes requests= and spec_algorithm=; if the target is "
            "not used with it: --declare capacity_context=false"
        )
    if any(text in detail for text in _NOT_IMPLEMENTED):
        if caps.lacking:  # every declared capability whose methods the instance lacks
            return (
                "the target lacks the methods of capabilities switched on: --declare "
                f"{','.join(caps.lacking)} (or declare only what it has: "
                "Capabilities(checked=...) infers the rest)"
            )
        declaration = _declaration_for_call(call)
        if declaration:
            return f"if the target does not implement {call}: {declaration}"
    if call.startswith("free_segment") and "raised AssertionError" in detail:
        return (
            "if the target accepts only page-aligned, page-disjoint segments (SGLang >= 0.5.2x): "
            "--declare segments=disjoint"
        )
    evicted_more = clause == "CAP-1" and "fewer than the shortfall" not in detail
    if trace.order == "exact" and ("reference order" in detail or evicted_more):
        return (
            "if the target may choose other pages (or evict more) than SGLang's order: "
            "--order contract (or --declare reference_order=false)"
        )
    if clause.startswith("DECODE-") and trace.page_size == 1 and caps.decode_ps1:
        return "if alloc_decode is not meant for page size 1: --declare decode_ps1=false"
    return None
