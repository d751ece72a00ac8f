"""A printed repro is run before it is printed: it must fail on the target and pass on a correct
allocator of the same shape.

:func:`check_repro` executes the repro's source in this process (``exec`` of the function, then
a call of it) twice: on the failing target, as printed, where it must fail with an assert (a
``Divergence`` is one), a ``pytest.raises`` that did not raise, the reported clause's
``ContractViolation`` or what the target raised on the failing valid call; and with the factory
import swapped for kvpool's own allocator of the same shape, where it must pass:

| family | judged as | correct allocator |
|---|---|---|
| single | token (page size 1) | ``kvpool.impl.TokenToKVPoolAllocator`` |
| single | paged (any page size) | ``kvpool.impl.PagedTokenToKVPoolAllocator`` at that page size |
| hybrid | | ``kvpool.impl.SWATokenToKVPoolAllocator`` |

each with the trace's ``need_sort`` and checked setting (checked when the trace records error
types). The unified family has no such allocator (its repro is run on the target only) and
a target whose factory module does not import here no check at all; :attr:`ReproCheck.line` says
so in one line. Nothing here raises: an error of the check itself is its outcome.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from .trace import Trace

# (family, paged) -> the factory in ``kvpool.oracle.families.<family>.targets`` (checked; its
# ``_unchecked`` twin otherwise) and the kvpool.impl class it builds
CORRECT = {
    ("single", False): ("kvpool_token", "TokenToKVPoolAllocator"),
    ("single", True): ("kvpool_paged", "PagedTokenToKVPoolAllocator"),
    ("hybrid", True): ("kvpool_swa", "SWATokenToKVPoolAllocator"),
}
NAME = "test_kvpool_repro"


@dataclass(frozen=True)
class ReproCheck:
    """The outcome: ``status`` is ``confirmed`` (fails on the target, passes on the correct
    allocator), ``unconfirmed`` (one of the two did not hold) or ``unchecked`` (no check ran);
    ``line`` says which in one line."""

    status: str
    line: str  # a Python comment, so that the printed function pastes with it


def correct_factory(trace: Trace) -> tuple[str, str] | None:
    """``(factory path, description)`` of kvpool's correct allocator of ``trace``'s shape, or
    None when there is none here (the unified family)."""
    paged = trace.paged if trace.paged is not None else trace.page_size > 1
    found = CORRECT.get((trace.family, paged or trace.family == "hybrid"))
    if found is None:
        return None
    name, cls = found
    mode = "checked" if trace.error_types else "unchecked"
    path = f"kvpool.oracle.families.{trace.family}.targets:{name}"
    return path + ("" if trace.error_types else "_unchecked"), (
        f"kvpool.impl's {cls} (page_size={trace.page_size}, need_sort={trace.need_sort}, {mode})")


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
    allocator (the unified family) only the target half runs; the outcome is ``unchecked``
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
