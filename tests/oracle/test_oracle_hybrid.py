"""The hybrid oracle (SWA-*): kvpool's SWA allocator conforms, SGLang 0.5.23's conforms to the
rules its registry entries keep and breaks each excluded one, and every deliberately broken
hybrid allocator is caught."""

from __future__ import annotations

import pytest
from broken_causes import symptom_note
from broken_hybrid import BROKEN_HYBRID, BrokenHybrid
from kvpool.oracle.families.hybrid.runner import run_hybrid
from kvpool.oracle.families.hybrid.targets import FULL, HYBRID_TARGETS
from kvpool.oracle.peers.divergences import divergences_for
from kvpool.oracle.peers.peer_import import PeerUnavailable, may_skip

EXAMPLES = 8


def test_kvpool_swa_conforms_and_reaches_every_event_SWA_10_SWA_11() -> None:
    """Checked kvpool: conformant in SGLang's order; slides (aligned and not), decodes,
    shortages, groups, segment finishes and bad input (SWA-8/11/12/16) all happen."""
    result = run_hybrid("kvpool-swa", max_examples=EXAMPLES)
    assert result.ok, result.failure.report() if result.failure else result.summary()
    for event in (
        "arrive",
        "short",
        "decode",
        "extend",
        "slide-aligned",
        "slide-unaligned",
        "finish-free",
        "finish-segments",
        "finish-segments-shared",
        "group",
        "rejected:SWA-11",
        "rejected:SWA-12",
        "rejected:SWA-16",
    ):
        assert result.events.get(event, 0) > 0, (event, result.summary())


def test_kvpool_swa_unchecked_conforms() -> None:
    """Production mode: the same results and states on valid traffic."""
    result = run_hybrid("kvpool-swa-unchecked", max_examples=6)
    assert result.ok, result.failure.report() if result.failure else result.summary()


def _sglang_or_skip() -> None:
    try:
        HYBRID_TARGETS["sglang-swa"](size=16, size_swa=16, page_size=4, need_sort=False)
    except PeerUnavailable as err:
        if not may_skip(err):  # installed but broken, or under CI: a failure
            raise
        pytest.skip(f"SGLang 0.5.23 is not installed here ({err}); CI installs it")


@pytest.mark.peers
def test_sglang_swa_conforms_to_declared_rules() -> None:
    """SGLang 0.5.23's SWATokenToKVPoolAllocator, unmodified: every rule its registry
    entries keep holds, in its exact order, at page sizes 1 and 4, with and without need_sort."""
    _sglang_or_skip()
    caps = HYBRID_TARGETS["sglang-swa"].kvpool_hybrid_capabilities  # type: ignore[attr-defined]
    assert set(caps.divergences) == {d.id for d in divergences_for("sglang-swa")}
    result = run_hybrid("sglang-swa", max_examples=EXAMPLES)
    assert result.ok, result.failure.report() if result.failure else result.summary()


REENABLE = [d for d in divergences_for("sglang-swa") if d.target == "sglang-swa"]


@pytest.mark.peers
@pytest.mark.parametrize("div", REENABLE, ids=[d.id for d in REENABLE])
def test_sglang_swa_registry_entry_is_a_real_divergence(div) -> None:  # type: ignore[no-untyped-def]
    """Re-enabling one excluded rule makes the hybrid oracle find it with a registered clause."""
    _sglang_or_skip()
    field, _ = div.excludes
    caps = HYBRID_TARGETS["sglang-swa"].kvpool_hybrid_capabilities  # type: ignore[attr-defined]
    caps = caps.replace(**{field: getattr(FULL, field)}, page_sizes=(4, 1), need_sort=(False,))
    result = run_hybrid("sglang-swa", caps=caps, max_examples=200)
    assert result.failure is not None, f"{div.id}: no divergence found ({result.summary()})"
    assert result.failure.clause in div.reported_clauses(), result.failure.report()


@pytest.mark.parametrize("broken", BROKEN_HYBRID, ids=[b.cls.__name__ for b in BROKEN_HYBRID])
def test_broken_hybrid_allocators_are_caught(broken: BrokenHybrid) -> None:
    """Each planted bug fails the default run's budget, under one of its clauses."""
    result = run_hybrid(broken.factory(), max_examples=60, shrink_seconds=4)
    assert result.failure is not None, f"{broken.cls.__name__} passed: {result.summary()}"
    assert result.failure.clause in broken.clauses, symptom_note(broken) + result.failure.report()
    assert result.failure.trace.num_calls() <= 8, result.failure.report()  # minimized


def test_hybrid_cli_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m kvpool.oracle hybrid``: 0 when conformant, 1 on a divergence, 2 on usage."""
    from kvpool.oracle.entry.cli import main

    assert main(["hybrid", "kvpool-swa", "--examples", "2"]) == 0
    assert "conformant" in capsys.readouterr().out
    assert main(["hybrid", "broken_hybrid:slide_frees_full", "--examples", "40"]) == 1
    assert "def test_kvpool_repro():" in capsys.readouterr().out
    assert main(["hybrid", "no-such-target"]) == 2
