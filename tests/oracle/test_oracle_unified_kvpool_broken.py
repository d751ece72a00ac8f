"""The unified family's checks catch bugs in an allocator that is not SGLang's: each broken
subclass of kvpool's ``UnifiedSWAAllocator`` (``broken_unified_kvpool.py``) fails the default run
(its capabilities as declared, page sizes 1, 4 and 16, both compaction modes) under exactly its
one clause, minimized, with a printed repro that fails on the bug; the unbroken allocator passes
the same run; and no SGLang module is imported on the way (the family reads these targets
through ``unified_state()`` and the public API alone)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from broken_unified_kvpool import BROKEN_KVPOOL, BrokenKvpool
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.unified.kvpool_target import kvpool_unified

CAPS = getattr(kvpool_unified, "kvpool_unified_capabilities")  # noqa: B009
EXAMPLES = 40  # per page size; each bug shows within a few examples


def _sglang_modules() -> set[str]:
    return {name for name in sys.modules if name == "sglang" or name.startswith("sglang.")}


def run(factory: Any, examples: int = EXAMPLES) -> dict[str, Any]:
    """The family on ``factory`` at each page size of its capabilities, stopping at the first
    failure; what it found, and the SGLang modules the run imported."""
    before = _sglang_modules()
    target = family("unified").target(factory, CAPS)
    out: dict[str, Any] = {"clause": None, "error": None, "calls": 0}
    for ps in CAPS.page_sizes:
        r = run_config(target, Config(ps, False), max_examples=examples, shrink_seconds=4.0)
        out["calls"] += r.calls
        if r.error is not None:
            out["error"] = r.error
            break
        if r.failure is not None:
            f = r.failure
            out.update(clause=f.clause, detail=f.detail, num_calls=f.trace.num_calls(),
                       repro=f.report()[-3000:], repro_fails=_repro_fails(f.pytest_source()),
                       check=f.repro_check().line)
            break
    out["sglang_imported"] = sorted(_sglang_modules() - before)
    return out


def _repro_fails(source: str) -> str | None:
    """Run a printed pytest repro here: the exception type it raises, None when it passes."""
    scope: dict[str, Any] = {"__name__": "kvpool_repro"}
    try:
        exec(compile(source, "<repro>", "exec"), scope)
        scope["test_kvpool_repro"]()
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # AssertionError, ContractViolation, pytest.raises' Failed
        return type(err).__name__
    return None


def test_the_unbroken_allocator_passes_the_same_run() -> None:
    found = run(kvpool_unified, 8)
    assert found["clause"] is None and found["error"] is None, found
    assert found["calls"] > 0 and found["sglang_imported"] == [], found


@pytest.mark.parametrize("broken", BROKEN_KVPOOL, ids=[b.name for b in BROKEN_KVPOOL])
def test_broken_kvpool_unified_allocators_are_caught(broken: BrokenKvpool) -> None:
    found = run(broken.factory())
    assert found["error"] is None, found["error"]
    assert found["clause"] == broken.clause, found
    assert found["repro_fails"] in ("AssertionError", "ContractViolation", "Failed"), found
    assert found["num_calls"] <= 8, found["repro"]
    # the same repro passes on kvpool's correct allocator of the target's shape
    assert found["check"].startswith("# repro checked: fails on"), found["check"]
    assert found["sglang_imported"] == [], found["sglang_imported"]


def test_every_check_of_the_family_has_a_broken_kvpool_allocator() -> None:
    clauses = {b.clause for b in BROKEN_KVPOOL}
    assert {"UNI-5", "UNI-6", "DATA-1"} <= clauses  # holes, page copies, bytes
    assert clauses & {"UNI-1", "UNI-2", "UNI-3", "UNI-4", "UNI-10", "UNI-11"}  # placement
    assert clauses & {"UNI-7", "UNI-8", "UNI-9"}  # capacity views
