"""``conformance_test`` for every family of the registry, not the single pool only.

The returned test is called here case by case (its ``parametrize`` mark holds the cases), so
that what it runs and how it fails is checked without a pytest subprocess: kvpool's hybrid
allocator (alias ``kvpool-swa``) passes, a broken hybrid allocator fails with the oracle's
report, SGLang's unified pools pass where SGLang is installed, and an unknown family or alias
gives a test that fails with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from broken_hybrid import BROKEN_HYBRID
from kvpool.oracle import conformance_test
from kvpool.oracle.engine.capabilities import PAGED
from kvpool.oracle.engine.registry import FAMILIES
from kvpool.oracle.families.hybrid.targets import kvpool_swa
from kvpool.oracle.peers.availability import PeerNotInstalled, require_installed


def cases_of(test: Callable[..., None]) -> tuple[list[Any], list[str]]:
    """The cases a test made by ``conformance_test`` is parametrized over, and their ids."""
    (mark,) = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
    return list(mark.args[1]), list(mark.kwargs["ids"])


def run_all(test: Callable[..., None]) -> list[str]:
    """Run every case of ``test``; the report of each that failed."""
    failed = []
    for case in cases_of(test)[0]:
        try:
            test(case)
        except pytest.fail.Exception as err:
            failed.append(str(err))
    return failed


def test_hybrid_alias_runs_kvpool_swa_and_passes() -> None:
    """``family="hybrid"`` resolves the family's alias to kvpool's SWA allocator, runs one
    case per selected configuration with the family's capabilities, and passes."""
    test = conformance_test("kvpool-swa", family="hybrid", page_sizes=[1, 4], examples=4,
                            steps=8)
    cases, ids = cases_of(test)
    assert ids == ["ps1-unsorted-exact", "ps1-sorted-exact", "ps4-unsorted-exact",
                   "ps4-sorted-exact"]
    assert {target.factory for target, _ in cases} == {kvpool_swa}
    assert {target.family for target, _ in cases} == {"hybrid"}
    assert type(cases[0][0].caps).__name__ == "HybridCapabilities"
    assert run_all(test) == []


def test_hybrid_broken_allocator_fails_with_the_oracle_report() -> None:
    """A broken hybrid factory (an object, not a path: ``MappingNotCleared`` leaves stale pairs
    and frees a live pair's full slot) fails its configuration with the oracle's report: a
    hybrid clause and the shrunk trace as a pytest function."""
    broken = next(b for b in BROKEN_HYBRID if b.cls.__name__ == "MappingNotCleared")
    test = conformance_test(broken.factory(), family="hybrid", page_sizes=[4], examples=60)
    assert cases_of(test)[1] == ["ps4-unsorted-exact"]
    (report,) = run_all(test)
    assert re.search(r"\[SWA-(2|12)\]", report) and "def test_" in report, report


def test_single_family_stays_the_default() -> None:
    """Without ``family`` the target is a single-pool one, its order what it declares."""
    test = conformance_test("kvpool.oracle.families.single.targets:kvpool_paged",
                            page_sizes=[4], need_sort=[False], examples=3, steps=6)
    cases, ids = cases_of(test)
    assert ids == ["ps4-unsorted-exact"] and cases[0][0].family == "single"
    assert run_all(test) == []


@pytest.mark.parametrize(("target", "family", "reason"), [
    ("kvpool-swa", "no-such-family", "unknown allocator family"),
    ("no-such-alias", "hybrid", "no-such-alias"),
    ("kvpool-swa", "single", "module:factory"),  # an alias of another family
])
def test_unresolved_target_gives_a_failing_test(target: str, family: str, reason: str) -> None:
    """An unknown family or target is not skipped: the test fails and says why."""
    test = conformance_test(target, family=family)
    assert not hasattr(test, "pytestmark")
    with pytest.raises(pytest.fail.Exception, match=reason):
        test()


def test_unified_sglang_pools_pass_where_sglang_is_installed() -> None:
    """``family="unified"`` runs SGLang 0.5.23's unified SWA pools (eager and lazy); skipped
    through the availability rule where SGLang is not installed (never under CI)."""
    require_installed("sglang")
    test = conformance_test("sglang-unified-swa", family="unified", page_sizes=[4],
                            examples=3, steps=8)
    cases, ids = cases_of(test)
    assert ids and all(i.startswith("ps4-") for i in ids), ids
    paths = set(FAMILIES["unified"].aliases["sglang-unified-swa"])
    assert {target.path for target, _ in cases} == paths
    assert {target.family for target, _ in cases} == {"unified"}
    assert run_all(test) == []  # each case made calls (else it fails: "no call ran")


def _absent_peer_factory(**_: Any) -> Any:
    raise AssertionError("never built: its peer is not installed")


def _no_peer() -> None:
    raise PeerNotInstalled("examplepeer is not installed")


_absent_peer_factory.kvpool_probe = _no_peer  # type: ignore[attr-defined]


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("ci", ["", "1"])
def test_missing_peer_skips_outside_ci_only(
    monkeypatch: pytest.MonkeyPatch, ci: str, family: str
) -> None:
    """A target of any family whose peer is not installed gives a test that skips by the
    availability rule: outside CI it skips, under ``CI`` it fails."""
    monkeypatch.setenv("CI", ci)
    test = conformance_test(_absent_peer_factory, family=family,
                            caps=PAGED if family == "single" else None)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match="examplepeer is not installed"):
        test()



def test_every_peer_alias_probes_its_library() -> None:
    """Each factory a family's ``sglang-*`` / ``vllm-*`` / ``kvcached-*`` alias names carries a
    ``kvpool_probe``, so a conformance test of it skips (outside CI) where the peer is absent
    instead of failing in the factory."""
    from kvpool.oracle.engine.families import family as family_of

    lacking = [
        (name, alias, path)
        for name, record in FAMILIES.items()
        for alias, paths in record.aliases.items()
        if alias.split("-")[0] in ("sglang", "vllm", "kvcached")
        for path in paths
        if not hasattr(family_of(name).factory(path), "kvpool_probe")
    ]
    assert not lacking, lacking
