"""The ownership guard: which pages are handed out, one bit per page, on the host.

Why it exists: the unchecked fast path (``checked=False``) does not validate the caller's
rules, but it must never let a bad id into a free list, where the next allocation would hand
it to another request. SGLang's and vLLM's allocators accept such ids silently. One bit per
page (set while the page is handed out; page 0's, the padding page, never set) lets every
release and every ``last_loc`` be checked in the passes that already touch those pages:

- a release (``free``, ``free_page_ids``, segment frees, a free group's end) refuses a page
  outside ``1..num_pages`` (``FREE-1``; page 0: ``FREE-2``), a page that is not handed out, or
  one named twice among the pages it releases (``FREE-3``: a double free);
- ``alloc_extend`` / ``alloc_decode`` refuse a ``last_loc`` whose page is not handed out for a
  request that continues a prefix (``EXTEND-3`` / ``DECODE-3``).

Each refusal raises :class:`~kvpool.spec.errors.ContractViolation` before anything changes
(``ERR-1``). The compiled backend (``kvpool.impl._native``) reads and writes the same bitmap
(:attr:`Ownership.raw`) in its one-pass calls and declines (nothing moved) where this class
then raises; this class is the numpy form of those passes and the one that reports. Device
backends (CUDA) keep no bitmap: a host check there would cost a device sync per call.

Cost: ``num_pages / 8`` bytes, and O(pages moved) bit operations per call.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation

_INT64 = np.dtype(np.int64)


def host_pages(pages: Any) -> np.ndarray:
    """``pages`` (a tensor, a numpy array or a sequence of ints) as a 1-D int64 host array."""
    if isinstance(pages, torch.Tensor):
        pages = pages.detach().reshape(-1).to("cpu", torch.int64).numpy()
    host: np.ndarray = np.asarray(pages).reshape(-1)
    return host if host.dtype == _INT64 else host.astype(np.int64)


def continued_extend(prefix_lens: Any, seq_lens: Any, page_size: int) -> np.ndarray:
    """Which requests of an extend write ``last_loc + 1, ...``: those with new tokens whose
    prefix ends inside a page (the layout's part 1, ``EXTEND-5``)."""
    pre, seq = host_pages(prefix_lens), host_pages(seq_lens)
    if pre.size != seq.size:
        return np.zeros(0, dtype=bool)
    continued: np.ndarray = (pre < seq) & ((-pre) % page_size > 0)
    return continued


def continued_decode(seq_lens: Any, page_size: int) -> np.ndarray:
    """Which requests of a decode write ``last_loc + 1``: those that open no page
    (``DECODE-4``)."""
    continued: np.ndarray = host_pages(seq_lens) % page_size != 1 % page_size
    return continued


class Ownership:
    """One bit per page of a pool of ``num_pages`` pages: set while the page is handed out.

    Representation: ``raw``, a bytearray of ``num_pages // 8 + 1`` bytes (``bits``: a numpy
    view of it); page ``p`` is bit ``p & 7`` of byte ``p >> 3``. Every page starts free (all
    bits clear, :meth:`reset`).
    Invariant (:meth:`disagreements`): the set bits are exactly the pages that are neither free
    nor staged.
    """

    def __init__(self, num_pages: int) -> None:
        self.num_pages = num_pages
        # a bytearray (the compiled calls take its buffer, much cheaper to export than a numpy
        # array's) seen as a writable numpy array here
        self.raw = bytearray(num_pages // 8 + 1)
        self.bits = np.frombuffer(self.raw, dtype=np.uint8)

    def reset(self) -> None:
        """Every page free (``clear``)."""
        self.bits.fill(0)

    def _is_set(self, pages: np.ndarray) -> np.ndarray:
        """A mask: which of ``pages`` (each in ``0..num_pages``) are handed out."""
        masks: np.ndarray = (self.bits[pages >> 3] >> (pages & 7).astype(np.uint8)) & 1
        return masks.astype(bool)

    def _flip(self, pages: np.ndarray, on: bool) -> None:
        """Set (``on``) or clear the bits of ``pages`` (distinct, each in ``1..num_pages``)."""
        masks = np.left_shift(1, pages & 7).astype(np.uint8)
        if on:
            np.bitwise_or.at(self.bits, pages >> 3, masks)
        else:
            np.bitwise_and.at(self.bits, pages >> 3, ~masks)

    def taken(self, pages: Any) -> None:
        """Mark ``pages`` (distinct pages just taken from the free list) handed out."""
        host = host_pages(pages)
        if host.size:
            self._flip(host, True)

    def check_release(self, pages: Any, *, page_size: int) -> np.ndarray:
        """The pages as a host array, after checking that each lies in ``1..num_pages``
        (``FREE-1``; page 0: ``FREE-2``), is handed out and is named once (``FREE-3``).

        Raises ContractViolation naming the first offending page and its slots; changes
        nothing.
        """
        host = host_pages(pages)
        if host.size == 0:
            return host
        outside = (host < 1) | (host > self.num_pages)
        if outside.any():
            page = int(host[outside.argmax()])
            clause = "FREE-2" if page == 0 else "FREE-1"
            what = "the padding page 0" if page == 0 else f"outside pages 1..{self.num_pages}"
            raise ContractViolation(clause, f"page {page} (slots {page * page_size}.."
                                    f"{page * page_size + page_size - 1}) is {what}")
        held = self._is_set(host)
        if not held.all():
            page = int(host[(~held).argmax()])
            raise ContractViolation("FREE-3", f"double free: page {page} (slots "
                                    f"{page * page_size}..{page * page_size + page_size - 1}) "
                                    "is not handed out")
        if host.size > 1:
            ordered = np.sort(host)
            repeated = ordered[1:] == ordered[:-1]
            if repeated.any():
                page = int(ordered[1:][repeated][0])
                raise ContractViolation("FREE-3", f"double free: page {page} is named twice "
                                        "in one release")
        return host

    def release(self, pages: Any, *, page_size: int) -> None:
        """:meth:`check_release`, then mark the pages free."""
        self.mark_free(self.check_release(pages, page_size=page_size))

    def mark_free(self, host: np.ndarray) -> None:
        """Mark ``host`` (pages :meth:`check_release` returned) free."""
        if host.size:
            self._flip(host, False)

    def check_last_loc(self, continues: Any, last_loc: Any, *, page_size: int,
                       clause: str) -> None:
        """For every request whose ``continues`` entry is true (its slots continue from its
        ``last_loc``: :func:`continued_extend` / :func:`continued_decode`), that ``last_loc``
        must lie on a page handed out (``EXTEND-3`` / ``DECODE-3``, named by ``clause``); raises
        ContractViolation naming the first request that breaks it. Lengths that disagree are
        left to the layout, which raises its own error."""
        going_on = np.asarray(continues, dtype=bool).reshape(-1)
        lasts = host_pages(last_loc)
        if going_on.size != lasts.size or not going_on.any():
            return
        pages = lasts[going_on] // page_size
        inside = (pages >= 1) & (pages <= self.num_pages)
        held = np.zeros(pages.size, dtype=bool)
        held[inside] = self._is_set(pages[inside])
        if not held.all():
            bad = int((~held).argmax())
            request = int(going_on.nonzero()[0][bad])
            raise ContractViolation(clause, f"request {request}: last_loc {int(lasts[request])} "
                                    f"is on page {int(pages[bad])}, which is not handed out")

    def handed_out(self) -> list[int]:
        """The pages whose bits are set, ascending."""
        pages = np.arange(1, self.num_pages + 1, dtype=np.int64)
        return pages[self._is_set(pages)].tolist() if pages.size else []

    def disagreements(self, free: list[int], staged: list[int]) -> list[str]:
        """Empty when the set bits are exactly the pages neither ``free`` nor ``staged``."""
        expected = sorted(set(range(1, self.num_pages + 1)) - set(free) - set(staged))
        got = self.handed_out()
        if got == expected:
            return []
        return [f"ownership bits disagree with the free lists: handed out {got[:20]}, "
                f"expected {expected[:20]}"]

    def check_invariants(self, free: list[int], staged: list[int]) -> None:
        """Assert :meth:`disagreements` is empty."""
        problems = self.disagreements(free, staged)
        assert not problems, "\n".join(problems)
