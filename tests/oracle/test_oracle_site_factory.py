"""Capability inference per page size: a factory built like SGLang's construction site returns a
token allocator at page size 1 (``TokenToKVPoolAllocator``: its ``alloc_extend`` raises
``NotImplementedError``, EXTEND-9) and a paged one above. The oracle judges it as a token
allocator at page size 1 and as paged at the page sizes where it returns a paged one, and says
so in the capabilities line and a note; a bug of its page-size-1 instance is caught there.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
from kvpool.oracle.engine.runner import run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.entry.api import conformance_test
from kvpool.oracle.families.single.inference import is_token_allocator
from kvpool.oracle.families.single.targets import configs_for, load_target

MODULE = "test_oracle_site_factory"


def site_factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """kvpool's token allocator at page size 1, its paged allocator above (unchecked, as
    SGLang's are; nothing declared)."""
    if page_size == 1:
        return TokenToKVPoolAllocator(size, torch.float16, device, None, need_sort, checked=False)
    return PagedTokenToKVPoolAllocator(
        size, page_size, torch.float16, device, None, need_sort, checked=False
    )


class TokenFreeDropsLast(TokenToKVPoolAllocator):  # type: ignore[misc]
    """A token ``free`` of several slots forgets the last one (a leak)."""

    def free(self, free_index: torch.Tensor) -> None:
        super().free(free_index[:-1] if free_index.numel() > 1 else free_index)


def site_factory_broken_ps1(
    *, size: int, page_size: int, need_sort: bool, device: str = "cpu"
) -> Any:
    """``site_factory`` whose page-size-1 instance leaks a slot per multi-slot free."""
    if page_size == 1:
        return TokenFreeDropsLast(size, torch.float16, device, None, need_sort, checked=False)
    return site_factory(size=size, page_size=page_size, need_sort=need_sort, device=device)


def test_site_factory_is_token_at_page_size_1_and_paged_above() -> None:
    target = load_target(f"{MODULE}:site_factory")
    caps = target.caps
    assert caps.paged and 1 in caps.page_sizes and 4 in caps.page_sizes
    token = caps.at(1)
    assert not token.paged and token.page_sizes == (1,) and not token.extend
    assert token.source_of("paged") == "inferred"
    assert caps.at(4) is caps and caps.at(16) is caps
    assert "at page size 1: paged=false+page_sizes=1+extend=false (inferred)" in caps.in_force(
        target.path
    )
    assert "; at ps=1: token ps=[1]" in caps.describe()
    (note,) = [n for n in target.notes if n.startswith("page size 1: a token allocator")]
    assert "paged at page size 4, 16" in note


def test_kinds_told_apart_by_extend() -> None:
    """A token allocator raises NotImplementedError on a one-token extend; a paged one at page
    size 1 takes it."""
    assert is_token_allocator(site_factory(size=16, page_size=1, need_sort=False))
    paged = PagedTokenToKVPoolAllocator(16, 1, torch.float16, "cpu", None, False)
    assert not is_token_allocator(paged)


def paged_factory(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """kvpool's paged allocator at every page size, 1 included (nothing declared)."""
    return PagedTokenToKVPoolAllocator(
        size, page_size, torch.float16, device, None, need_sort, checked=False
    )


def test_a_paged_factory_stays_paged_at_page_size_1() -> None:
    """A paged allocator at page size 1 takes a one-token extend: inferred paged there too."""
    target = load_target(f"{MODULE}:paged_factory")
    assert 1 in target.caps.page_sizes and target.caps.page_overrides == ()
    assert target.caps.at(1).paged and not any("token" in n for n in target.notes)


# the oracle's pytest API at its defaults: every configuration conformant
test_site_factory_conforms = conformance_test(f"{MODULE}:site_factory")


def test_broken_page_size_1_instance_is_caught_at_page_size_1() -> None:
    target = load_target(f"{MODULE}:site_factory_broken_ps1")
    configs = [c for c in configs_for(target.caps) if c.page_size == 1 and not c.need_sort]
    (config,) = configs
    result = run_config(target, config)
    failure = result.failure
    assert failure is not None, result.summary() if hasattr(result, "summary") else result
    assert failure.trace.page_size == 1 and failure.trace.paged is False, failure.report()
    assert failure.repro_check().status == "confirmed", failure.repro_check().line
    paged = run_config(target, Config(4, False, "cpu", config.order), max_examples=30)
    assert paged.ok, paged.failure.report() if paged.failure else paged.error
