"""HybridModel's PEP 316 contracts (SWA-5..9, SWA-16, SWA-19, SWA-20), evaluated at run time on
random call sequences: the class invariants after every call, each postcondition with ``__old__`` a
deep copy taken before the call, and for a declared exception that nothing changed (ERR-1)."""

from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kvpool.spec import ContractViolation, HybridModel
from kvpool.spec.window import slide_end
from test_formal_model_contracts import contract

NAMESPACE = vars(sys.modules[HybridModel.__module__])
CLASS_INV = contract(HybridModel)["inv"]
# the model's own methods and its mixin's (kvpool.spec.hybrid_segments)
METHODS = {name: contract(fn)
           for cls in reversed(HybridModel.__mro__) if cls.__module__.startswith("kvpool.spec")
           for name, fn in vars(cls).items()
           if callable(fn) and not name.startswith("_") and contract(fn)["post"]}
evaluated: set[str] = set()


def call(model: HybridModel, name: str, *args: Any) -> Any:
    """``model.name(*args)`` with its contract checked; None after a declared error."""
    spec = METHODS.get(name, {"post": [], "raises": []})
    bound = inspect.signature(getattr(HybridModel, name)).bind(model, *args)
    env = dict(bound.arguments)
    old = model.copy()
    env["__old__"] = SimpleNamespace(self=old)
    try:
        result = getattr(model, name)(*args)
    except (ContractViolation, NotImplementedError):
        assert spec["raises"] or name not in METHODS, f"{name} raised undeclared"
        assert model.snapshot() == old.snapshot(), f"{name} changed the state before raising"
        return None
    env["__return__"] = result
    for expr in spec["post"]:
        ok = eval(expr, {**NAMESPACE, **env})
        assert ok, f"{name}: post broken: {expr}\n{model.debug_print()}"
        evaluated.add(name)
    for expr in CLASS_INV:
        assert eval(expr, {**NAMESPACE, "self": model}), f"inv broken: {expr}"
    return result


@settings(max_examples=25, deadline=None)
@given(ps=st.sampled_from([1, 2, 4]), need_sort=st.booleans(),
       steps=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40), st.integers(1, 9)),
                      min_size=5, max_size=40))
def test_hybrid_contracts_hold_at_run_time_SWA_5_SWA_19(
        ps: int, need_sort: bool, steps: list[tuple[int, int, int]]) -> None:
    """SWA-5..9, SWA-16, SWA-19: every contract line holds around every call."""
    h = HybridModel(48, 24, ps, need_sort=need_sort)
    rows: list[tuple[list[int], int]] = []
    for op, pick, n in steps:
        row, front = rows[pick % len(rows)] if rows else ([], 0)
        if op == 0 or not rows:
            got = call(h, "alloc", n) if ps == 1 else call(h, "alloc_extend", [0], [n], [-1], n)
            if got is not None:
                rows.append((got, 0))
        elif op == 1:
            got = call(h, "alloc_decode", [len(row) + 1], [row[-1]])
            if got is not None:
                rows[pick % len(rows)] = (row + got, front)
        elif op == 2:
            end = slide_end(len(row), n, ps)
            if end > front:
                h.free_swa(row[front:end])
                rows[pick % len(rows)] = (row, end)
        elif op == 3:
            call(h, "translate_loc_from_full_to_swa", [*row[:3], -1, n])
        elif op == 4:
            h.free_full(row[:front])
            h.free(row[front:])
            rows.pop(pick % len(rows))
        elif op == 6:  # SWA-20: the SWA side only for a tail that starts on a page boundary
            tail = n - ps * (pick % (n // ps + 1))
            got = call(h, "alloc_extend_swa_tail", [0], [n], [-1], n, tail)
            if got is not None:
                rows.append((got, n - tail))
        call(h, "available_size")


def test_every_contracted_method_was_evaluated() -> None:
    """The run above reached each method that carries a postcondition."""
    test_hybrid_contracts_hold_at_run_time_SWA_5_SWA_19()
    assert set(METHODS) <= evaluated, sorted(set(METHODS) - evaluated)
