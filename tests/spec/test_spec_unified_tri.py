"""UNI-14: SGLang 0.5.23's tri-pool (``UnifiedMambaSWATokenToKVPoolAllocator``, built on the CPU
by SGLang's own ``build_tri_pool``) reports every capacity view exactly as
``kvpool.spec.unified_float.capacity_views`` derives it from the float chain's frontiers, under
random token calls and state-slot allocations on its mamba end, eager and lazy, page sizes 1
and 4 (``unified_tri_replay.py``, run in a subprocess like ``test_spec_unified_sglang``).
Skipped when SGLang is missing, unless ``CI`` is set.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from unified_peer import run_replay

pytestmark = pytest.mark.peers
CONFIGS = ["ps1_eager", "ps1_lazy", "ps4_eager", "ps4_lazy"]


@cache
def run() -> dict[str, Any]:
    return run_replay("unified_tri_replay.py", 150)


@pytest.mark.parametrize("config", CONFIGS)
def test_tri_pool_capacity_views_are_the_float_chains_UNI_14(config: str) -> None:
    """UNI-14: after every call all five views equal the spec's and ``can_reserve`` of random
    unequal demands is the spec's fit; the run had a live float,
    live state slots, holes, and refusals, and the state end's bytes changed the views."""
    result = run()[config]
    assert result["problems"] == []
    assert result["float_live"] > 0 and result["state_live"] > 0 and result["holes"] > 0
    assert result["refused"] > 0 and result["state_matters"] > 0
    assert 0 < result["reserve_fits"] < 3 * 150  # can_reserve both fitted and refused
