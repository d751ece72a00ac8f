"""A correct allocator in another order, for proving that contract-order repros do not pin pages.

:class:`HighestFirst` is the spec-backed adapter (``spec_torch.py``) whose free list starts (and
restarts after ``clear`` / ``resize``) from the highest page: a fresh pool hands out its last
pages first. Every choice keeps the contract, none is the reference order's.
"""

from __future__ import annotations

from typing import Any

from kvpool.oracle.engine.capabilities import PAGED, TOKEN
from spec_torch import SpecTorchAllocator


class HighestFirst(SpecTorchAllocator):
    """CORRECT, other order: the free list runs from the highest page down."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model.free_pages.reverse()

    def clear(self) -> None:
        super().clear()
        self.model.free_pages.reverse()

    def resize(self, config: Any) -> None:
        super().resize(config)
        self.model.free_pages.reverse()


def highest_first(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """A paged :class:`HighestFirst`."""
    return HighestFirst(size, page_size, need_sort, device, paged=True)


def highest_first_token(
    *, size: int, page_size: int = 1, need_sort: bool, device: str = "cpu"
) -> Any:
    """A token :class:`HighestFirst` (page size 1)."""
    return HighestFirst(size, 1, need_sort, device, paged=False)


highest_first.kvpool_capabilities = PAGED.with_source(  # type: ignore[attr-defined]
    "factory", reference_order=False
)
highest_first_token.kvpool_capabilities = TOKEN.with_source(  # type: ignore[attr-defined]
    "factory", reference_order=False
)
