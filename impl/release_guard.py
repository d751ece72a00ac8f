"""The ownership guard's checks before a release or a take (``FREE-1..3``, ``EXTEND-3`` /
``DECODE-3``): each refuses with nothing changed, so a composite checks every side before any
side moves; and the room check that keeps even an unchecked double free inside the buffers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation
from kvpool.spec.wording import counted

from .freelist import PageRing, PageStack
from .ownership import Ownership, host_pages
from .staging import Staging


class ReleaseGuard:
    """Mixin for :class:`~kvpool.impl.base.AllocatorBase` (needs its guard, page size, open
    group, free list, staged pages and the subclass's page forms of ``free()`` inputs)."""

    _owners: Ownership | None
    page_size: int
    num_pages: int
    free_group: list[Any] | None
    _group_segments: list[Any] | None
    _free: PageStack | PageRing
    _staged: Staging
    _pages_of_free: Callable[[torch.Tensor], Any]
    _pages_of_group: Callable[[list[Any]], Any]

    def check_take(self, continued: Any, last_loc: torch.Tensor, clause: str) -> None:
        """The ownership guard's ``last_loc`` check of an extend or decode (``continued``: which
        requests continue from their ``last_loc``) without taking anything; a composite checks
        every side before either takes."""
        if self._owners is not None:
            self._owners.check_last_loc(continued, last_loc, page_size=self.page_size,
                                        clause=clause)

    def check_release_of_pages(self, page_ids: Any) -> None:
        """The ownership guard's check of ``free_page_ids(page_ids)`` (or, several
        ``free()``s' sorted distinct pages with it, end to end) without releasing anything."""
        if self._owners is not None and self.free_group is None:
            self._owners.check_release(page_ids, page_size=self.page_size)

    def check_release_of(self, free_index: torch.Tensor) -> None:
        """The ownership guard's check of ``free(free_index)`` without releasing anything
        (``FREE-1..3``; a composite checks every side before it changes any). No-op on device
        backends and for an empty input."""
        if self._owners is not None and free_index.numel():
            self._owners.check_release(self._pages_of_free(free_index), page_size=self.page_size)

    def check_group_end(self) -> None:
        """The ownership guard's check of what :meth:`free_group_end` would release, without
        releasing anything (``FREE-1..3``, ``GROUP-6``). No-op without an open group."""
        if self._owners is None or self.free_group is None:
            return
        parts = [self._pages_of_group(self.free_group)] if self.free_group else []
        parts += self._group_segments or []
        if parts:
            self._owners.check_release(np.concatenate([host_pages(p) for p in parts]),
                                       page_size=self.page_size)

    def _guard_release(self, parts: list[Any]) -> None:
        """Before a release of the pages of ``parts`` (1-D tensors or backend-form pages) end to
        end: refuse, with nothing changed, a page outside the pool (``FREE-1``), page 0
        (``FREE-2``), or one not handed out or named twice among them (``FREE-3``; the
        ownership guard, on the host backends), or more pages than the pool holds (``FREE-3``);
        then mark them free in the guard's bitmap."""
        owners = self._owners
        host = None
        if owners is not None and parts:
            named = parts[0] if len(parts) == 1 else np.concatenate(
                [host_pages(part) for part in parts])
            host = owners.check_release(named, page_size=self.page_size)
        self._check_room(sum(len(part) for part in parts))
        if owners is not None and host is not None:
            owners.mark_free(host)

    def _check_room(self, num_pages: int) -> None:
        """Refuse (FREE-3, nothing changed) when more pages would be free than exist, so even an
        unchecked double free cannot overrun the buffers. Host counters only."""
        if len(self._free) + len(self._staged) + num_pages > self.num_pages:
            raise ContractViolation(
                "FREE-3", f"releasing {counted(num_pages, 'page')} would exceed the "
                f"{self.num_pages} pages of the pool: double free")
