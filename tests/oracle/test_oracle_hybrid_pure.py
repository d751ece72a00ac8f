"""The hybrid family's pure sliding-window variant (SWA-21..25): kvpool's pure allocator
conforms in checked and production mode and reaches every pure event; SGLang 0.5.23's
``PureSWATokenToKVPoolAllocator`` conforms to the rules its registry entries keep and breaks
each excluded one; the scheduler model sends the pure variant nothing that needs two pools."""

from __future__ import annotations

from typing import Any

import pytest
from kvpool.oracle.families.hybrid.coverage import HYBRID
from kvpool.oracle.families.hybrid.runner import run_hybrid
from kvpool.oracle.families.hybrid.targets import HYBRID_TARGETS, PURE, kvpool_swa_unchecked
from kvpool.oracle.peers.divergences import divergences_for
from kvpool.oracle.peers.peer_import import PeerUnavailable, may_skip

EXAMPLES = 10
PURE_EVENTS = ("pure.one_pool", "pure.identity", "pure.alloc", "pure.short", "pure.slide",
               "pure.reuse", "pure.resize")


def test_kvpool_pure_swa_conforms_and_reaches_every_pure_event_SWA_21_SWA_25() -> None:
    result = run_hybrid("kvpool-pure-swa", max_examples=EXAMPLES)
    assert result.ok, result.failure.report() if result.failure else result.summary()
    assert result.configs == [(1, False), (1, True)]
    events = result.events
    for event in (*PURE_EVENTS, "finish-free", "finish-segments", "group", "rejected:SWA-11",
                  "rejected:SWA-16", "rejected:SWA-25"):
        assert events.get(event, 0) > 0, (event, result.summary())
    for event in ("prealloc", "alloc_extend.ok", "alloc_decode.ok", "bad.free_full_live"):
        assert not events.get(event), (event, result.summary())  # two pools only


def test_kvpool_pure_swa_unchecked_conforms() -> None:
    def factory(**kwargs: Any) -> Any:
        return kvpool_swa_unchecked(**{**kwargs, "pure_swa": True})

    factory.kvpool_hybrid_capabilities = PURE.replace(checked=False)  # type: ignore[attr-defined]
    result = run_hybrid(factory, max_examples=6)
    assert result.ok, result.failure.report() if result.failure else result.summary()


def test_pure_events_apply_to_the_pure_variant_only() -> None:
    """The two-pool targets cannot reach a pure event (the coverage gate does not ask them)."""
    full = HYBRID_TARGETS["kvpool-swa"].kvpool_hybrid_capabilities  # type: ignore[attr-defined]
    for event in PURE_EVENTS:
        needs = HYBRID.events[event].needs
        assert needs(PURE, 1, False) and not needs(full, 1, False), event


def _sglang_or_skip() -> None:
    try:
        HYBRID_TARGETS["sglang-pure-swa"](size=8, size_swa=8, page_size=1, need_sort=False)
    except PeerUnavailable as err:
        if not may_skip(err):  # installed but broken, or under CI: a failure
            raise
        pytest.skip(f"SGLang 0.5.23 is not installed here ({err}); CI installs it")


@pytest.mark.peers
def test_sglang_pure_swa_conforms_to_declared_rules() -> None:
    _sglang_or_skip()
    caps = HYBRID_TARGETS["sglang-pure-swa"].kvpool_hybrid_capabilities  # type: ignore[attr-defined]
    assert set(caps.divergences) == {d.id for d in divergences_for("sglang-pure-swa")}
    result = run_hybrid("sglang-pure-swa", max_examples=EXAMPLES)
    assert result.ok, result.failure.report() if result.failure else result.summary()


REENABLE = [d for d in divergences_for("sglang-pure-swa") if d.target == "sglang-pure-swa"]


@pytest.mark.peers
@pytest.mark.parametrize("div", REENABLE, ids=[d.id for d in REENABLE])
def test_sglang_pure_swa_registry_entry_is_a_real_divergence(div: Any) -> None:
    """Re-enabling one excluded rule makes the hybrid oracle find it with a registered clause."""
    _sglang_or_skip()
    field, _ = div.excludes
    caps = HYBRID_TARGETS["sglang-pure-swa"].kvpool_hybrid_capabilities  # type: ignore[attr-defined]
    caps = caps.replace(**{field: getattr(PURE, field)}, need_sort=(False,))
    result = run_hybrid("sglang-pure-swa", caps=caps, max_examples=200)
    assert result.failure is not None, f"{div.id}: no divergence found ({result.summary()})"
    if div.id.endswith("-UNCHECKED"):  # any caller error: accepted instead of refused
        assert "accepted the call" in result.failure.detail, result.failure.report()
    else:
        assert result.failure.clause in div.reported_clauses(), result.failure.report()
