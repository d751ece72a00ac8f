"""The unified family's tri-pool checks catch bugs in a tri-pool that is not SGLang's: each broken
subclass of kvpool's ``UnifiedMambaSWAAllocator`` (``broken_unified_tri_kvpool.py``) fails the run
``kvpool-unified-tri`` passes (its capabilities, page sizes 1, 4 and 16, both compaction modes)
under exactly its one clause, minimized, with a printed repro that fails on the bug; the unbroken
tri-pool passes the same run; and no SGLang module is imported on the way."""

from __future__ import annotations

from typing import Any

import pytest
from broken_unified_tri_kvpool import BROKEN_TRI_KVPOOL, BrokenTriKvpool
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.unified.kvpool_target import kvpool_unified_tri
from test_oracle_unified_kvpool_broken import _repro_fails, _sglang_modules

CAPS = getattr(kvpool_unified_tri, "kvpool_unified_capabilities")  # noqa: B009
EXAMPLES = 40  # per page size


def run(factory: Any, examples: int = EXAMPLES) -> dict[str, Any]:
    """The family on ``factory`` at each page size, stopping at the first failure."""
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


def test_the_unbroken_tri_pool_passes_the_same_run() -> None:
    found = run(kvpool_unified_tri, 8)
    assert found["clause"] is None and found["error"] is None, found
    assert found["calls"] > 0 and found["sglang_imported"] == [], found


@pytest.mark.parametrize("broken", BROKEN_TRI_KVPOOL, ids=[b.name for b in BROKEN_TRI_KVPOOL])
def test_broken_kvpool_tri_pools_are_caught(broken: BrokenTriKvpool) -> None:
    found = run(broken.factory())
    assert found["error"] is None, found["error"]
    assert found["clause"] == broken.clause, found
    assert found["repro_fails"] in ("AssertionError", "ContractViolation", "Failed"), found
    assert found["num_calls"] <= 10, found["repro"]
    # the same repro passes on kvpool's correct allocator of the target's shape
    assert found["check"].startswith("# repro checked: fails on"), found["check"]
    assert found["sglang_imported"] == [], found["sglang_imported"]
