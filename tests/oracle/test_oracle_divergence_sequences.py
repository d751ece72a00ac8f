"""Every known divergence's minimal sequence (``KnownDivergence.sequence``) still shows it on
the real allocator: the lines run on the peer and their asserts hold. A peer that is not
installed skips outside CI; under ``CI`` every peer CI installs must build."""

from __future__ import annotations

import pytest
from kvpool.oracle.peers.divergences import REGISTRY, KnownDivergence
from kvpool.oracle.peers.sequences import factory_of, run_sequence, shows_here

pytestmark = pytest.mark.peers


def test_oracle_every_divergence_has_a_sequence() -> None:
    """No entry without its minimal sequence, and each names a target some family builds."""
    for entry in REGISTRY:
        assert entry.sequence.strip(), f"{entry.id} has no minimal sequence"
        assert 'make("' in entry.sequence, entry.id
        built = entry.sequence.split('make("', 1)[1].split('"', 1)[0]
        factory_of(built)  # KeyError for a target no family knows
        assert built == entry.target or built.startswith(f"{entry.target}-"), entry.id


@pytest.mark.parametrize("entry", REGISTRY, ids=[d.id for d in REGISTRY])
def test_oracle_divergence_sequence_shows_it(entry: KnownDivergence) -> None:
    # a peer that is not installed raises PeerNotInstalled: skipped outside CI (tests/conftest.py)
    if not shows_here(entry.id):  # the premise is absent here: the sequence must fail
        with pytest.raises(AssertionError):
            run_sequence(entry.sequence, entry.id)
        return
    run_sequence(entry.sequence, entry.id)


def test_oracle_sequence_fails_when_the_divergence_is_gone() -> None:
    """The replay is not vacuous: a sequence whose assert no longer holds fails."""
    entry = next(d for d in REGISTRY if d.id == "SGL-DECODE-PS1")
    healed = entry.sequence.replace("== 15", "== 14")
    with pytest.raises(AssertionError):
        run_sequence(healed, entry.id)
