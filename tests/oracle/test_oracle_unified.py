"""The unified oracle (UNI-*): SGLang 0.5.23's ``UnifiedSWATokenToKVPoolAllocator`` conforms,
eager and lazy, at page sizes 1 and 4, with the data plane on, to every rule its registry
entries keep; re-enabling each entry's rule makes the oracle find it with a registered clause;
every deliberately broken unified allocator (``broken_unified.py``) is caught, minimized, under
exactly the one clause it pins.

Everything runs in one subprocess (``python broken_unified.py``): importing SGLang's runtime
changes what later tests of a process see. Skipped when SGLang is missing, unless ``CI`` is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from broken_causes import symptom_note
from broken_unified import BROKEN_UNIFIED, BrokenUnified
from kvpool.oracle.families.unified.targets import registered_for
from kvpool.oracle.peers.availability import raise_if_child_missing, require_installed
from kvpool.oracle.peers.divergences import KnownDivergence

pytestmark = pytest.mark.peers
HERE = Path(__file__).parent
EXAMPLES = 30  # per configuration of the conformance run


@cache
def _child() -> subprocess.CompletedProcess[str]:
    """One run of ``broken_unified.py`` per session, whatever it ended with."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get(
        "PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(HERE / "broken_unified.py"), str(EXAMPLES)],
                          capture_output=True, text=True, timeout=900, env=env, check=False)


def run() -> dict[str, Any]:
    """The JSON ``broken_unified.py`` printed; ``PeerNotInstalled`` without SGLang."""
    require_installed("sglang")
    proc = _child()
    raise_if_child_missing(proc.returncode, proc.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_sglang_unified_swa_conforms_to_declared_rules_UNI_1_to_UNI_13() -> None:
    """No divergence, no error; compaction moved pages, lazy pools kept holes, the capacity hook
    both fitted and refused and asked its cache to evict, decode nodes preallocated SWA tails, a
    move gate closed, and the data plane read every live token back."""
    result = run()["conforms"]
    assert result["clause"] is None and result["error"] is None, result
    for event in ("arrive", "short", "fill", "extend", "decode", "slide", "finish-free",
                  "finish-full", "finish-segments", "slide-segment", "translate",
                  "capacity.fit", "capacity.short", "capacity.evict", "life.clear", "group",
                  "compaction.move", "lazy.holes", "probe.census", "data.check",
                  "prealloc-tail", "gate-closed"):
        assert result["events"].get(event, 0) > 0, (event, result["events"])


def test_sglang_unified_tri_conforms_UNI_14() -> None:
    """The tri-pool (mamba + SWA float + full): its full + SWA part under the model's tables,
    refusals as a bound, its five capacity views exactly on its float chain (UNI-14) while
    state slots on its mamba end come and go, placement, census and K/V bytes."""
    result = run()["tri"]
    assert result["clause"] is None and result["error"] is None, result
    for event in ("arrive", "slide", "finish-segments", "placement", "data.check",
                  "cap.float_chain", "state-slots"):
        assert result["events"].get(event, 0) > 0, (event, result["events"])


REENABLE = registered_for("sglang-unified")


def test_every_unified_entry_is_reenabled() -> None:
    assert {d.id for d in REENABLE} == set(run()["reenabled"])
    assert len(REENABLE) >= 4


@pytest.mark.parametrize("div", REENABLE, ids=[d.id for d in REENABLE])
def test_sglang_unified_registry_entry_is_a_real_divergence(div: KnownDivergence) -> None:
    """Re-enabling one excluded rule makes the unified oracle find it with a registered clause,
    on a minimized trace (the free-order entry needs the free list to wrap first)."""
    found = run()["reenabled"][div.id]
    assert found["clause"] in div.reported_clauses(), found
    assert found["num_calls"] <= 16, found["repro"]


@pytest.mark.parametrize("broken", BROKEN_UNIFIED, ids=[b.name for b in BROKEN_UNIFIED])
def test_broken_unified_allocators_are_caught(broken: BrokenUnified) -> None:
    """Each planted bug fails within the budget, under exactly its one clause, minimized."""
    found = run()["broken"][broken.name]
    assert found["error"] is None, found["error"]
    assert len(broken.clauses) == 1, broken.clauses
    assert found["clause"] == broken.clauses[0], f"{symptom_note(broken)}{found}"
    # its printed repro imports the broken factory and fails on the bug
    assert found["repro_fails"] in ("AssertionError", "ContractViolation", "Failed"), found
    assert found["num_calls"] <= 8, found["repro"]


def test_at_least_ten_broken_unified_allocators() -> None:
    assert len({b.name for b in BROKEN_UNIFIED}) >= 10
