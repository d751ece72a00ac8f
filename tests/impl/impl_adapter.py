"""Adapter: spec-level calls (plain ints and lists) on the torch allocators of kvpool.impl.

``make_impl`` builds the allocator that matches a spec configuration; ``call_impl`` converts a
spec-signature call into the SGLang signature (tensors on ``device``, ``*_cpu`` copies,
``extend_num_tokens``) and the result back to plain Python, so the shared case table and the
differential property compare like with like.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
from kvpool.oracle.families.single.calls import CALLS, bind_args

Allocator = TokenToKVPoolAllocator | PagedTokenToKVPoolAllocator


def make_impl(*, paged: bool, size: int, page_size: int, need_sort: bool, checked: bool = False,
              device: str = "cpu") -> Allocator:
    """A fresh torch allocator for a spec configuration."""
    if paged:
        return PagedTokenToKVPoolAllocator(size, page_size, torch.float16, device, None,
                                           need_sort, checked=checked)
    assert page_size == 1
    return TokenToKVPoolAllocator(size, torch.float16, device, None, need_sort, checked=checked)


def to_plain(value: Any) -> Any:
    """Tensors as lists of ints; everything else unchanged."""
    if isinstance(value, torch.Tensor):
        return [int(v) for v in value.tolist()]
    return value


def call_impl(alloc: Allocator, name: str, args: Sequence[Any] = (),
              kwargs: dict[str, Any] | None = None, device: str = "cpu") -> Any:
    """Perform the spec-signature call ``name(*args, **kwargs)`` on ``alloc``; plain result.

    The conversion is the oracle's call table (``kvpool.oracle.families.single.calls.CALLS``).
    """
    result, _ = CALLS[name].target(alloc, bind_args(name, args, kwargs), device)
    return to_plain(result)


def free_list(alloc: Allocator) -> list[int]:
    """``get_all_free_pages()`` as a list."""
    result: list[int] = to_plain(alloc.get_all_free_pages())
    return result
