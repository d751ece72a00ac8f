"""What a generated pytest repro asserts at its failing step and around a rejected call.

The repro (``engine.repro.to_pytest``) replays the steps and ends with the asserts chosen here, so
that it fails on the broken target and passes on a fixed one, for every kind of failing call:

- the target raised on a valid call: the call itself fails the repro; in exact order the
  spec's result is asserted after it (it is known before the target runs), in contract order
  nothing more (another correct allocator may return other slots);
- an allocation that returned the wrong slots (exact) or an invalid choice (contract), the
  wrong None, a capacity hook's wrong answer or eviction count: the call's own checks
  (``Call.checks``) or the None rule; never a variable the call does not bind;
- a result changed later (ALIAS-1), a byte-accounting report (CAP-3);
- every other call: the census asserts that follow the step (``available_after``, ...).

A rejected call (``raises``) runs under ``pytest.raises`` of the target's declared error types;
only a ``ContractViolation`` must name the spec's clause.
"""

from __future__ import annotations

from ...engine.trace import Trace
from .calls import ALLOC_CALLS, CALLS

# The None rule of each allocation: its result is None iff free + staged cannot cover it.
NONE_CLAUSES = frozenset(CALLS[c].raise_clause for c in ALLOC_CALLS)


def failure_asserts(trace: Trace, index: int, *, alias_step: int | None = None) -> list[str]:
    """The asserts after failing step ``index`` (see the module docstring).

    Clears the step's census expectations where they are not the spec's (a contract-order
    allocation the spec could not adopt).
    """
    step = trace.steps[index]
    call = CALLS[step.call]
    clause, detail, var = trace.clause or "", trace.detail or "", f"r{index}"
    if clause == "CAP-3":
        return ["assert not a.verify_byte_accounting()  # CAP-3"]
    if clause == "ALIAS-1":
        k = index if alias_step is None else alias_step
        return [f"assert r{k}.tolist() == {trace.steps[k].expect!r}  # ALIAS-1"]
    if step.raises is not None or call.checks is None:
        return []
    exact = trace.order == "exact"
    if step.raised is not None:  # the call raises on the broken target
        return call.checks(step.args, step.expect, var) if exact else []
    if call.kind == "cache":
        if call.name == "evict_to_free_tokens" and not exact:  # at least the spec's evictions
            return [f"assert len(cache.entries) <= {len(step.args['entries']) - step.expect}"]
        lines = call.checks(step.args, step.expect, var)
        if clause == "CAP-1" and step.evicted is not None and call.name != "evict_to_free_tokens":
            lines.append(f"assert len(cache.entries) == {len(step.args['entries']) - step.evicted}")
        return lines
    if exact or call.kind != "alloc":  # only an allocation's slots are the target's choice
        return call.checks(step.args, step.expect, var)
    step.available_after = step.census_after = step.free_after = None
    if clause in NONE_CLAUSES:  # the target's None-ness was wrong: the spec's is the other one
        return [f"assert ({var} is None) == {step.expect is not None}  # [{clause}]"]
    return [f"assert {var} is None or {var}.tolist() != {step.expect!r}  # [{clause}] {detail}"]
