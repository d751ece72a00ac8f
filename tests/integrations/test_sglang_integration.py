"""kvpool.integrations.sglang: built on SGLang's base class, switched in where SGLang constructs
its allocators, debug-mode parity, the version gate, and every allocator attribute SGLang reads."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch
from kvpool.spec.errors import ContractViolation

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def ks(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    import kvpool.integrations.sglang as module

    return module


def test_hooks_are_sglangs_and_state_is_kvpools(ks: Any) -> None:
    from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as Base

    alloc = ks.PagedTokenToKVPoolAllocator(64, 4, torch.int64, "cpu", None, False)
    assert isinstance(alloc, Base)
    for name in ("create_prefill_budget", "request_slot_reserve", "max_new_tokens_for_memory",
                 "get_extend_allocation_demand", "prealloc_fits", "mamba_full_cache_donor",
                 "evict_to_free_tokens", "check_decode_capacity", "free_full_segments",
                 "set_hicache_transfer_done_event"):
        assert getattr(type(alloc), name) is vars(Base)[name], name
    assert alloc.max_new_tokens_for_memory(10, 100, token_capacity=64, sliding_window_size=None,
                                           chunk_size=None) == 64 - 12 - 4 - 1
    out = alloc.alloc(8)
    assert out is not None and out.tolist() == list(range(4, 12))
    alloc.free_full_segments([(out, 0)])
    assert alloc.available_size() == 64 and alloc.verify_byte_accounting() == []


def test_install_switches_sglangs_construction_site(ks: Any) -> None:
    import sglang.srt.mem_cache.kv_cache_configurator as site

    original = site.PagedTokenToKVPoolAllocator
    with ks.using_kvpool():
        assert ks.installed()
        assert site.PagedTokenToKVPoolAllocator is ks.PagedTokenToKVPoolAllocator
        assert site.TokenToKVPoolAllocator is ks.TokenToKVPoolAllocator
    assert not ks.installed() and site.PagedTokenToKVPoolAllocator is original


@pytest.mark.parametrize("paged", [False, True])
def test_debug_mode_parity(ks: Any, monkeypatch: pytest.MonkeyPatch, paged: bool) -> None:
    """SGLANG_DEBUG_MEMORY_POOL=1: SGLang's debug checks (not kvpool's checked mode), and caller
    errors are AssertionErrors that stay ContractViolations with their clause."""
    monkeypatch.setenv("SGLANG_DEBUG_MEMORY_POOL", "1")
    alloc = (ks.PagedTokenToKVPoolAllocator(64, 4, torch.int64, "cpu", None, False) if paged
             else ks.TokenToKVPoolAllocator(64, torch.int64, "cpu", None, False))
    assert alloc.debug_mode and not alloc.checked
    if paged:
        with pytest.raises(AssertionError) as unaligned:  # SGLang asserts on alloc(3)
            alloc.alloc(3)
        assert isinstance(unaligned.value, ContractViolation)
        assert unaligned.value.clause == "ALLOC-1"
    out = alloc.alloc(4)
    alloc.free(out)
    try:
        alloc.free(out)
    except AssertionError as err:  # how SGLang's debug-mode callers catch it
        assert isinstance(err, ks.ContractAssertionError) and err.clause == "FREE-3"
    else:
        pytest.fail("double free not rejected")
    assert alloc.available_size() == 64  # the rejected call changed nothing
    monkeypatch.setenv("SGLANG_DEBUG_MEMORY_POOL", "0")
    assert not ks.TokenToKVPoolAllocator(8, torch.int64, "cpu", None, False).debug_mode


def test_version_gate(ks: Any) -> None:
    from sglang.srt.mem_cache.allocator.base import BaseTokenToKVPoolAllocator as Base

    assert ks.incompatibilities(Base) == []

    class Changed(Base):  # type: ignore[misc, valid-type]
        def alloc(self, need_size: int, *, stream: Any = None) -> Any: ...

        def reserve(self) -> None: ...

    Changed.__abstractmethods__ = frozenset({"reserve", "clear"})
    problems = ks.incompatibilities(Changed)
    assert any("'reserve'" in p for p in problems)
    assert any("alloc() takes 'stream'" in p for p in problems)
    with pytest.raises(ks.UnsupportedSGLangVersion, match=r"0\.9\.0 changed"):
        ks.check_sglang("0.9.0", Changed)
    ks.check_sglang("0.5.23", Changed)  # the tested version is trusted
    with pytest.warns(UserWarning, match=r"not 0\.9\.0"):
        ks.check_sglang("0.9.0", Base)


def test_every_attribute_sglang_reads_is_served(ks: Any) -> None:
    """Parses the installed SGLang now: a name its code reads on the allocator, and every public
    attribute of SGLang's own allocator, must be served by kvpool's (same kind); a read name
    SGLang's single pools lack must be a known composite-only one, so a new name fails here."""
    from kvpool.integrations.sglang_surface import attributes_read, unserved_attributes
    from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator as SP
    from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator as ST

    reads = attributes_read(_sglang_srt_dir())
    assert {"create_prefill_budget", "check_decode_capacity", "page_size"} <= set(reads)
    pairs = [(SP(64, 4, torch.int64, "cpu", None, False),
              ks.PagedTokenToKVPoolAllocator(64, 4, torch.int64, "cpu", None, False)),
             (ST(64, torch.int64, "cpu", None, False),
              ks.TokenToKVPoolAllocator(64, torch.int64, "cpu", None, False))]
    for theirs, ours in pairs:
        assert unserved_attributes(reads, theirs, ours) == []
    # the check bites: an allocator without one hook, one with a value for a method, a new name
    bare = pairs[0][1]
    for name, value in (("create_prefill_budget", _Missing()), ("size_full", lambda: 64)):
        hole = type("Hole", (type(bare),), {name: value})(64, 4, torch.int64, "cpu", None, False)
        assert any(p.startswith(name) for p in unserved_attributes(reads, pairs[0][0], hole))
    new = {**reads, "reserve_for_speculation": ["managers/x.py:1"]}
    assert unserved_attributes(new, *pairs[0]) == [
        "reserve_for_speculation: read at managers/x.py:1 but not a known composite-only "
        "attribute"]


class _Missing:
    """A descriptor that hides an attribute (AttributeError on access)."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        raise AttributeError("hidden")


def _sglang_srt_dir() -> str:
    import sglang.srt

    return str(next(iter(sglang.srt.__path__)))
