"""Adapter: spec-level calls (plain ints and lists) on the torch allocators of kvpool.impl.

``make_impl`` builds the allocator that matches a spec configuration; ``call_impl`` converts a
spec-signature call into the SGLang signature (tensors on ``device``, ``*_cpu`` copies,
``extend_num_tokens``) and the result back to plain Python, so the shared case table and the
differential property compare like with like.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.impl import PagedTokenToKVPoolAllocator, TokenToKVPoolAllocator
from kvpool.spec import ResizeConfig

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


def _tensor(values: list[int], device: str) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def call_impl(alloc: Allocator, name: str, args: tuple[Any, ...] = (),
              kwargs: dict[str, Any] | None = None, device: str = "cpu") -> Any:
    """Perform the spec-signature call ``name(*args, **kwargs)`` on ``alloc``; plain result."""
    kwargs = dict(kwargs or {})
    if name == "alloc_extend":
        prefix_lens, seq_lens, last_loc = (list(a) for a in args[:3])
        extend = args[3] if len(args) > 3 else kwargs.pop("extend_num_tokens", None)
        if extend is None:
            extend = sum(seq_lens) - sum(prefix_lens)
        return to_plain(alloc.alloc_extend(
            _tensor(prefix_lens, device), _tensor(prefix_lens, "cpu"),
            _tensor(seq_lens, device), _tensor(seq_lens, "cpu"), _tensor(last_loc, device), extend))
    if name == "alloc_decode":
        seq_lens, last_loc = list(args[0]), list(args[1])
        return to_plain(alloc.alloc_decode(_tensor(seq_lens, device), _tensor(seq_lens, "cpu"),
                                           _tensor(last_loc, device)))
    if name in ("free", "free_full", "translate_kv_indices_for_transfer"):
        return to_plain(getattr(alloc, name)(_tensor(list(args[0]), device)))
    if name == "free_segment":
        start = kwargs.pop("start_pos", args[1] if len(args) > 1 else None)
        return alloc.free_segment(_tensor(list(args[0]), device), start_pos=start)
    if name == "free_segments":
        return alloc.free_segments([(_tensor(list(idx), device), start) for idx, start in args[0]])
    if name == "resize":
        config = args[0] if args else kwargs["config"]
        if isinstance(config, int):
            config = ResizeConfig(config)
        return alloc.resize(config)
    return to_plain(getattr(alloc, name)(*args, **kwargs))


def free_list(alloc: Allocator) -> list[int]:
    """``get_all_free_pages()`` as a list."""
    result: list[int] = to_plain(alloc.get_all_free_pages())
    return result
