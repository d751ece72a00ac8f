"""The CPU backend with its hot paths compiled (``kvpool.impl._native``, an optional extension).

:class:`NativeOps` is :class:`~kvpool.impl.numpy_ops.NumpyOps` with the per-call arithmetic done
by compiled loops that read the caller's tensors in place (the tensors themselves are passed,
checked through torch's own accessors; never an address) instead of a dozen numpy calls of
about half a microsecond each: ``alloc_extend`` and ``alloc_decode`` in one pass
each (merge test, count, shortage check, layout: ``take_extend``, ``take_decode``), ``free``
and a free group's end in one pass each (page ids, sorted distinct pages, room check and the
write into the free list: ``release``), ``alloc``'s slots (``take_slots``), the strided page
ids of segment frees, the copies into the free lists, and the ``need_sort`` merge (a radix sort
of the staged pages, then a galloping merge; for the paged free list in its own buffer,
:meth:`NativeOps.merge_front`). A free group keeps its copies as bytearrays of int64 page ids
(:meth:`NativeOps.defer`): building a numpy array costs more than the copy, the more so when
the caches are cold, as between a server's scheduler steps. It gives the same numbers as
``NumpyOps`` for every input: an input the loops do not take (not int64, not contiguous,
lengths that disagree) or a batch they find irregular goes to the ``NumpyOps`` form, which
gives the result or raises the error that backend gives. Results are fresh int64 tensors that
nothing here keeps (``ALIAS-1``); the one-pass ones, ``alloc``'s and the two-step layouts'
(``extend_slots``, ``decode_slots``) own a new buffer the loop filled (``torch.frombuffer``),
the others a new numpy array (``torch.from_numpy``): neither storage is resizable, as
numpy-backed tensors.

Every compiled function checks its own arguments (a page size below 1, a buffer that is not
int64, a position or length outside the buffer it indexes: ValueError or TypeError; a tensor it
does not read: None, for the numpy form here), so that no call of ``_native`` can crash the
process whatever it is passed.

The four calls made once per allocator call, ``take_extend``, ``take_decode``, ``take_slots``
and ``release``, are the compiled functions themselves with the page size bound
(``functools.partial``): they read the tensors through torch's own accessors (not attribute
lookups) and build the result tensor, with no Python frame in between.

:func:`kvpool.impl.backend_choice.ops_for` picks it on the CPU when the extension was built (``pip
install`` compiles it where a C compiler is present; without one the install still succeeds and
``NumpyOps`` is used) and ``KVPOOL_NATIVE`` is not ``0``. ``native_available()`` says which.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch

from .numpy_ops import NP_INT64, NumpyOps, run_starts

try:
    from . import _native  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: NumpyOps serves
    _native = None


def native_available() -> bool:
    """True when the compiled extension imports (then ``ops_for`` may pick :class:`NativeOps`)."""
    return _native is not None


def native_enabled() -> bool:
    """True when the extension imports and ``KVPOOL_NATIVE`` is not ``0``: what a CPU
    allocator built now runs its compiled loops on."""
    return os.environ.get("KVPOOL_NATIVE", "1") != "0" and _native is not None


def compiled_pages(free_index: Any, page_size: int) -> tuple[np.ndarray, bool] | None:
    """The pages of ``free_index`` (``id // page_size``) by the compiled loops (read in place:
    one pass for the page ids, one that compresses runs of equal pages), as a new array and
    whether it is sorted and distinct: ``(pages, True)``; ``(runs, False)`` when the runs do
    not ascend and are too many for the loops' small sort (the caller sorts and dedups them).
    None where the loops do not read ``free_index`` (not an exact int64, contiguous CPU
    tensor) or the extension is not built: the caller's numpy form serves."""
    if _native is None or type(free_index) is not torch.Tensor:
        return None
    out = np.empty(free_index.numel(), dtype=np.int64)
    if not _native.page_ids(free_index, page_size, out):
        return None
    num_runs: int = _native.distinct_runs(out)  # in place; -k: k unsorted runs
    return (out[:num_runs], True) if num_runs >= 0 else (out[:-num_runs], False)


class NativeOps(NumpyOps):
    """CPU only: ``NumpyOps`` with compiled loops on its hot paths (same results, same errors).

    Raises ImportError at construction when the extension is not built.
    """

    def __init__(self, page_size: int, device: Any) -> None:
        if _native is None:
            raise ImportError("kvpool.impl._native is not built (no C compiler at install)")
        super().__init__(page_size, device)
        # the one-pass calls are the compiled functions themselves, the page size bound (no
        # Python frame in between: these run once per scheduler call)
        self.take_extend = partial(_native.extend_take, page_size)  # type: ignore[method-assign]
        self.take_decode = partial(_native.decode_take, page_size)  # type: ignore[method-assign]
        self.release = partial(_native.release, page_size)  # type: ignore[method-assign]
        self.take_slots = partial(_native.slots_at, page_size)  # type: ignore[method-assign]
        self.ascends_across = _native.ascends_across  # type: ignore[method-assign]

    def write(self, view: Any, start: int, pages: Any) -> None:
        if isinstance(pages, torch.Tensor):
            if _native.write_at(view, start, pages):  # None: a tensor the loop does not read
                return
        elif pages.dtype is NP_INT64 and pages.flags.c_contiguous:  # backend-form pages
            _native.copy_into(view, start, pages)
            return
        super().write(view, start, pages)  # int32, strided: numpy converts

    @staticmethod
    def _divided(slots: torch.Tensor, divisor: int, numpy_form: Callable[[Any], Any]) -> Any:
        """``slots // divisor`` as a new 1-D int64 array (divisor 1: a copy); ``numpy_form``
        for inputs the loop does not read (only an exact ``torch.Tensor`` is sized here: a
        subclass's ``numel`` is its own answer)."""
        if type(slots) is not torch.Tensor:
            return numpy_form(slots)
        out = np.empty(slots.numel(), dtype=np.int64)
        return out if _native.page_ids(slots, divisor, out) else numpy_form(slots)

    def page_ids(self, slots: torch.Tensor) -> Any:
        return self._divided(slots, self.page_size, super().page_ids)

    def copy(self, slots: torch.Tensor) -> Any:
        return self._divided(slots, 1, super().copy)

    def distinct_pages(self, slots: torch.Tensor) -> Any:
        return self.distinct(self.page_ids(slots))

    def segment_pages(self, slots: torch.Tensor, start: int, offset: int) -> Any:
        if type(slots) is not torch.Tensor:  # sized below only when exact (as _divided)
            return super().segment_pages(slots, start, offset)
        # index 0, then one every page size from ps - offset: 1 + ceil((n - ps + offset) / ps)
        n, ps = slots.numel() - start, self.page_size
        out = np.empty(1 + max(0, (n + offset - 1) // ps), dtype=np.int64)
        if _native.segment_page_ids(slots, start, ps, offset, out):  # from slots[start]
            return out
        return super().segment_pages(slots, start, offset)

    def defer(self, slots: torch.Tensor) -> Any:
        # a bytearray of int64 page ids: no numpy array to build per free() in a group
        deferred = _native.defer(slots, self.page_size)
        return deferred if deferred is not None else bytearray(super().defer(slots))

    def undefer(self, parts: list[Any]) -> Any:
        return np.frombuffer(bytearray().join(parts), dtype=np.int64)  # a new, writable array

    def distinct(self, pages: Any) -> Any:
        if pages.size < 2:
            return pages
        # in place: one entry per run of equal pages (a row's slots: one per page), sorted
        # there too when few; many unsorted runs come back for numpy's sort
        num_runs = _native.distinct_runs(pages)
        if num_runs > 0:
            return pages[:num_runs]
        head = pages[:-num_runs]
        head.sort()
        return head[run_starts(head)]

    def merge_sorted(self, front: Any, staged: Any, *,
                     front_sorted: bool) -> tuple[int, Any]:
        if not front_sorted or staged.size == 0:
            return super().merge_sorted(front, staged, front_sorted=front_sorted)
        free, new = front, staged
        merged = np.empty(free.size + new.size, dtype=np.int64)
        below = _native.merge_below(free, new, merged)
        if below < 0:  # staged in several sorted runs (one per free): sort a copy first
            new = new.copy()  # radix sort (linear); numpy's timsort for a range over 2^33
            if not _native.sort_values(new):
                new.sort(kind="stable")
            below = _native.merge_below(free, new, merged)
        return below, merged[: below + new.size]

    def merge_front(self, view: Any, top: int, base: int, count: int,
                    runs: list[int] | None) -> bool:
        merged: bool = _native.merge_front(view, top, base, count, runs)
        return merged

    def extend_new_pages(self, prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor) -> int:
        count: int | None = _native.extend_count(prefix_lens_cpu, seq_lens_cpu, self.page_size)
        if count is None:  # tensors the loop does not read, or of two lengths
            return super().extend_new_pages(prefix_lens_cpu, seq_lens_cpu)
        self._lists_of = self._arrays_of = None  # nothing read here for a later numpy layout
        return count

    def extend_slots(self, prefix_lens: torch.Tensor, seq_lens: torch.Tensor,
                     last_loc: torch.Tensor, new_pages: Any,
                     extend_num_tokens: int) -> torch.Tensor:
        out = _native.extend_layout(prefix_lens, seq_lens, last_loc, new_pages, self.page_size,
                                    extend_num_tokens)
        if out is None or out is False:
            # an irregular batch or other inputs: the numpy form's result or error
            return super().extend_slots(prefix_lens, seq_lens, last_loc, new_pages,
                                        extend_num_tokens)
        slots: torch.Tensor = out
        return slots

    def decode_new_pages(self, seq_lens_cpu: torch.Tensor) -> int:
        count: int | None = (None if self.page_size == 1 else
                             _native.decode_count(seq_lens_cpu, self.page_size))
        if count is None:
            return super().decode_new_pages(seq_lens_cpu)
        self._opening_of = None  # nothing read here for a later numpy layout
        return count

    def decode_slots(self, seq_lens: torch.Tensor, last_loc: torch.Tensor,
                     new_pages: Any) -> torch.Tensor:
        out: torch.Tensor | None = _native.decode_layout(seq_lens, last_loc, new_pages,
                                                         self.page_size)
        return out if out is not None else super().decode_slots(seq_lens, last_loc, new_pages)
