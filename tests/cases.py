"""One table of hand-computed cases, run against the spec and against every implementation.

A case is a fresh allocator plus a list of steps; each step is a call in the spec's signature
(plain ints and lists) with its expected result, or the clause ID of the ContractViolation it
must raise. ``tests/spec`` runs the table on ``AllocatorModel``; ``tests/impl`` runs the same
table on the torch allocators through an adapter that converts arguments and results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ANY: Any = object()  # expected value that is not checked


@dataclass(frozen=True)
class Step:
    """One call: ``call`` names a method of the spec model (``alloc``, ``alloc_extend``, ...).

    ``args`` are plain ints / lists (``free_segments`` takes a list of ``(slots, start_pos)``).
    ``expect`` is the return value as plain Python (``ANY`` to skip); ``raises`` the clause ID
    of the expected ContractViolation; ``free_after`` the expected ``get_all_free_pages()`` and
    ``available_after`` the expected ``available_size()`` after the step (None to skip).
    """

    call: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    expect: Any = ANY
    raises: str | None = None
    free_after: list[int] | None = None
    available_after: int | None = None


@dataclass(frozen=True)
class Case:
    """A fresh allocator (``size`` tokens) and the steps to run on it."""

    name: str
    paged: bool
    size: int
    page_size: int
    need_sort: bool
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return self.name


CASES: list[Case] = []  # filled by the table below / by case factories


def run_case(case: Case, make: Callable[[Case], Any], call: Callable[[Any, Step], Any],
             free_pages: Callable[[Any], list[int]], error_type: type[BaseException]) -> None:
    """Run ``case`` on the allocator ``make(case)`` and assert every expectation.

    ``call(allocator, step)`` performs the step and returns its result as plain Python;
    ``free_pages(allocator)`` returns ``get_all_free_pages()`` as a list. A step with ``raises``
    must raise ``error_type`` whose ``clause`` equals it and leave the free census unchanged.
    """
    alloc = make(case)
    for i, step in enumerate(case.steps):
        where = f"{case.name} step {i} {step.call}{step.args}"
        if step.raises is not None:
            before = (free_pages(alloc), alloc.available_size())
            try:
                call(alloc, step)
            except error_type as err:
                assert getattr(err, "clause", None) == step.raises, f"{where}: {err}"
            else:
                raise AssertionError(f"{where}: expected {step.raises}")
            assert (free_pages(alloc), alloc.available_size()) == before, f"{where}: state changed"
            continue
        result = call(alloc, step)
        if step.expect is not ANY:
            assert result == step.expect, f"{where}: got {result}, expected {step.expect}"
        if step.free_after is not None:
            assert free_pages(alloc) == step.free_after, f"{where}: free {free_pages(alloc)}"
        if step.available_after is not None:
            assert alloc.available_size() == step.available_after, where
