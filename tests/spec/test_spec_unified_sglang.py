"""SGLang 0.5.23's real unified SWA composite (``UnifiedSWATokenToKVPoolAllocator``, built on
the CPU by SGLang's own ``build_swa_pool``) agrees with ``kvpool.spec.unified`` where the
contract fixes the answer: ``available_size``, ``full/swa_available_size``, an empty
``verify_byte_accounting()`` exactly when the census is empty, and
``translate_kv_indices_for_transfer`` (eager: exactly; lazy: placement judged by what must
hold). Extend and decode run on SGLang's torch fallbacks (``alloc_extend_naive`` /
``alloc_decode_naive``), not Triton (``kvpool.oracle.families.unified.peer.load_unified``).

The replay runs in a subprocess: importing SGLang's runtime changes what later tests of the
same process see. Skipped when SGLang is missing, unless ``CI`` is set.
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


@cache
def run() -> dict[str, Any]:
    return run_replay("unified_replay.py", 120)


@pytest.mark.parametrize("config", ["ps1_eager", "ps1_lazy", "ps4_eager", "ps4_lazy"])
def test_sglang_unified_swa_agrees_with_the_model_UNI_7_UNI_8_UNI_11_UNI_13(config: str) -> None:
    """UNI-7, UNI-8, UNI-9, UNI-11, UNI-13: no disagreement on any call of the replay, which
    exercises every call kind and, for the model, compaction moves."""
    result = run()[config]
    assert result["mismatches"] == []
    assert set(result["calls"]) == {"alloc", "extend", "grow", "decode", "free", "free_swa"}
    assert result["model_moves"] > 0


def test_divergences_of_sglang_0_5_23_UNI_8_UNI_11_UNI_13() -> None:
    """What SGLang does where the contract says otherwise (to be registered in the oracle):

    - UNI-8: ``alloc_decode`` at page_size 1 counts no new page (``seq % 1 == 1`` is never
      true), so it hands out the next free virtual id without binding or removing it;
    - UNI-11: translating a freed id returns the sink row 0 instead of refusing;
    - UNI-13 (lazy): a double free is accepted, leaves the id twice in the free list and the
      physical page -1 among the holes, while ``verify_byte_accounting()`` stays empty;
    - UNI-13: ``verify_byte_accounting()`` checks frontiers, spans and memos only, so two live
      virtual pages bound to one physical page (a stale v2p) leave it empty.
    """
    seen = run()["divergences"]
    assert seen["decode_ps1"] == {"returned": [4], "bound": False, "still_free": True}
    assert seen["translate_freed_lazy_False"] == [0] == seen["translate_freed_lazy_True"]
    lazy = seen["lazy_double_free"]
    assert lazy["verify_byte_accounting"] == [] and lazy["free_ids_tail"] == [1, 1]
    assert -1 in lazy["holes"] and lazy["live_page_count"] == 0   # page 2 is still live
    assert seen["eager_double_free"] == "AssertionError"   # refused, but not a typed error
    assert seen["stale_v2p_verify"] == []


@pytest.mark.parametrize("config", ["ps1_eager", "ps1_lazy", "ps4_eager", "ps4_lazy"])
def test_tri_pool_chain_agrees_with_bands_ordered_UNI_2_UNI_3(config: str) -> None:
    """UNI-2, UNI-3: on SGLang's tri-pool (mamba up, SWA float, full down) the spec's chain
    order agrees with SGLang's chain check after every call, no live band reaches into the
    sink, the float pool is in use, and a float pushed into the full band fails both."""
    result = run()["tri_pool"][config]
    assert result["problems"] == [] and result["float_used_steps"] > 0
    assert result["planted_overlap"] == {"bands_ordered": False, "sglang_chain_ok": False}
