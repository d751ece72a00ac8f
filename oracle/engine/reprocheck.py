"""A printed repro is run before it is printed: it must fail on the target and pass on a correct
allocator of the same shape.

:func:`check_repro` executes the repro's source in this process (``exec`` of the function, then
a call of it) twice: on the failing target, as printed, where it must fail with an assert (a
``Divergence`` is one), a ``pytest.raises`` that did not raise, the reported clause's
``ContractViolation`` or what the target raised on the failing valid call; and with the factory
import swapped for kvpool's own allocator of the same shape, where it must pass: the one its
family's record names for the shape the target was judged as (token or paged;
:attr:`~kvpool.oracle.engine.registry.Registered.correct`: for the single family
``kvpool.impl.TokenToKVPoolAllocator`` and ``PagedTokenToKVPoolAllocator`` at the trace's page
size, for the hybrid family ``SWATokenToKVPoolAllocator``), with the trace's ``need_sort`` and
checked setting (checked when the trace records error types). A family whose record names none
(the unified family) has its repro run on the target only, and
a target whose factory module does not import here no check at all; :attr:`ReproCheck.line` says
so in one line. Nothing here raises: an error of the check itself is its outcome.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from .registry import registered
from .trace import Trace

NAME = "test_kvpool_repro"


@dataclass(frozen=True)
class ReproCheck:
    """The outcome: ``status`` is ``confirmed`` (fails on the target, passes on the correct
    allocator), ``unconfirmed`` (one of the two did not hold) or ``unchecked`` (no check ran);
    ``line`` says which in one line."""

    status: str
    line: str  # a Python comment, so that the printed function pastes with it


def correct_factory(trace: Trace) -> tuple[str, str] | None:
    """``(factory path, description)`` of kvpool's correct allocator of ``trace``'s shape (its
    family's record, :attr:`~.registry.Registered.correct`: the trace's ``shape``, else token
    or paged as the target was judged), checked when the trace records error types; None when
    the family has none."""
    try:
        record = registered(trace.family)
    except ValueError:
        return None
    paged = trace.paged if trace.paged is not None else trace.page_size > 1
    found = record.correct.get(trace.shape or ("paged" if paged else "token"))
    if found is None:
        return None
    mode = "checked" if trace.error_types else "unchecked"
    return (found.checked if trace.error_types else found.unchecked), (
        f"{found.name} (page_size={trace.page_size}, need_sort={trace.need_sort}, {mode})")


def run_source(source: str) -> BaseException | None:
    """Run the repro function defined by ``source``: what it raised, or None when it passed."""
    import pytest

    namespace: dict[str, object] = {}
    try:
        exec(compile(source, "<repro>", "exec"), namespace)
        namespace[NAME]()  # type: ignore[operator]
    except (Exception, pytest.fail.Exception) as err:
        return err
    return None


def _is_the_failure(err: BaseException, trace: Trace) -> bool:
    """Whether ``err`` is the failure the report names (not a repro that cannot run)."""
    import pytest

    if isinstance(err, (AssertionError, pytest.fail.Exception)):
        return True
    if getattr(err, "clause", None) == trace.clause:
        return True
    end = trace.failing_step if trace.failing_step is not None else len(trace.steps) - 1
    raised = trace.steps[end].raised if 0 <= end < len(trace.steps) else None
    return raised is not None and raised.split(":")[0] == type(err).__name__


def _said(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:160]


def _importable(path: str) -> str | None:
    """None when ``path`` (``module:attr``) imports here, else why not."""
    module, _, attr = path.partition(":")
    try:
        getattr(importlib.import_module(module), attr)
    except Exception as err:  # the repro's import would fail the same way
        return f"{path} does not import here ({_said(err)})"
    return None


def check_repro(trace: Trace, source_for: Callable[[str], str]) -> ReproCheck:
    """Run the repro of ``trace`` (``source_for(factory_path)``: its source importing that
    factory) on the target and on kvpool's correct allocator of the same shape. Without such an
    allocator (a family added without one) only the target half runs; the outcome is ``unchecked``
    when it fails as it should, ``unconfirmed`` when it does not."""
    why = _importable(trace.target)
    if why is not None:
        return ReproCheck("unchecked", f"# repro not checked: the factory {why}")
    err = run_source(source_for(trace.target))
    if err is None:
        return ReproCheck("unconfirmed", f"# repro NOT confirmed: it passes on {trace.target}, "
                                         "which the oracle found failing")
    if not _is_the_failure(err, trace):
        return ReproCheck("unconfirmed", f"# repro NOT confirmed: on {trace.target} it stops "
                                         f"with {_said(err)}, not the reported failure")
    correct = correct_factory(trace)
    if correct is None:
        return ReproCheck("unchecked", f"# repro checked on {trace.target} only (it fails): "
                                       f"kvpool has no correct {trace.family} allocator to pass")
    path, what = correct
    err = run_source(source_for(path))
    if err is not None:
        return ReproCheck("unconfirmed", f"# repro NOT confirmed: it fails on {what} too: "
                                         f"{_said(err)}")
    return ReproCheck("confirmed", f"# repro checked: fails on {trace.target}, passes on {what}")
