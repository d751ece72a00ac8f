"""Where the hot-path arithmetic runs: four backends over the same buffers, one per allocator.

- :class:`TorchOps` (any device): pure torch. On CUDA every torch op is an asynchronous kernel
  launch, so it keeps the hot paths sync-free.
- :class:`~kvpool.impl.triton_ops.TritonOps` (CUDA, the ``triton`` extra): :class:`TorchOps`
  with the ``alloc_extend`` / ``alloc_decode`` layouts as one Triton kernel each.
- :class:`~kvpool.impl.numpy_ops.NumpyOps` (CPU): on CPU each torch op costs microseconds of
  dispatch while numpy on a few hundred int64s costs well under one, so it runs the same
  arithmetic on numpy views of the same buffers (``Tensor.numpy()`` shares memory) and hands
  every result back with ``torch.from_numpy`` of a fresh array that nothing here touches again
  (``ALIAS-1``).
- :class:`~kvpool.impl.native_ops.NativeOps` (CPU, the compiled extension
  ``kvpool.impl._native``): ``NumpyOps`` with the hot paths as compiled loops, one pass per
  call.

:func:`~kvpool.impl.backend_choice.ops_for` picks one per allocator at construction. All four
give the same numbers (the torch ones come from :mod:`kvpool.impl.layout`); results are int64,
inputs may be int32 and strided.

Each method's contract:

- ``view(buf)``: the buffer in the backend's form (the tensor, or its numpy view); slices of it
  are the "pages" that the free lists' ``take`` / ``front`` return.
- ``cat(parts)``: concatenation of backend-form pages (a new array).
- ``write(view, start, pages)``: ``view[start : start + len(pages)] = pages`` (a 1-D tensor,
  or backend-form pages).
- ``slots_of_pages(pages)``: every slot of backend-form ``pages``, page-major, a new int64
  tensor.
- ``page_ids(slots)``: ``slots // page_size``, a new 1-D int64 array in backend form.
- ``copy(slots)``: a new 1-D int64 copy in backend form.
- ``defer(slots)``: what a free group keeps of a ``free()`` input: its page ids (page size 1:
  a copy of the slots) in an object that nothing else holds (backend form here; the compiled
  backend's own bytes).
- ``undefer(parts)``: a group's deferred parts end to end as backend-form pages that
  ``distinct`` may take without changing any part (torch: the one part itself when there is
  one, since ``distinct`` makes a new tensor; numpy: always a new array).
- ``release(source, dedup, view, at, backwards, room, owners)``: a release in one pass, where
  the backend has one (:class:`~kvpool.impl.native_ops.NativeOps`): the pages of ``source`` (a
  ``free()`` input tensor, or a group's deferred parts), sorted distinct when ``dedup``, written
  to ``view[at, at + k)`` (``backwards``: ``[at - k, at)``) modulo its length, their bits in
  ``owners`` (:attr:`kvpool.impl.ownership.Ownership.raw`) cleared; ``k``, or ``-1 - k`` with
  nothing written when ``k > room``; None (nothing written, no bit changed) for the caller's
  two-step path, also when a page is not handed out or named twice (the two-step path's guard
  raises). Here: always None.
- ``distinct(pages)``: the sorted distinct values of ``pages`` (backend form, owned by the
  caller: it may be sorted in place), in backend form.
- ``distinct_pages(slots)``: ``distinct(page_ids(slots))``.
- ``segment_pages(slots, start, offset)``: the pages of the segment ``slots[start:]``
  (non-empty) whose first slot sits at in-page offset ``offset`` (``0 <= offset <
  page_size``): its slots at index 0 and then every ``page_size`` from ``page_size - offset``,
  divided by the page size, in row order; a new 1-D int64 array in backend form.
- ``extend_new_pages`` / ``decode_new_pages``: host counts from the ``*_cpu`` lengths.
- ``extend_slots`` / ``decode_slots``: as :func:`kvpool.impl.layout.extend_slots` /
  :func:`~kvpool.impl.layout.decode_slots`.
- ``take_slots(view, start, num_pages, owners)``: ``alloc``'s slots in one pass, where the
  backend has one: every slot of the pages ``view[start, start + num_pages)`` (modulo its
  length), page-major, as a new int64 tensor, the pages marked handed out in ``owners``; None
  for the two-step path of the free list's ``take`` and ``slots_of_pages``. Here: always None.
- ``take_extend`` / ``take_decode``: a call's ``last_loc`` guard, merge test, count, shortage
  check and layout in one pass (:class:`~kvpool.impl.native_ops.NativeOps`), the pages handed
  out marked in ``owners``, or None for the two-step path above.
- ``merge_sorted(front, staged, front_sorted=...)``: for the free list and the staged pages in
  backend form (non-empty staged), ``(k, merged)`` such that replacing the first ``k`` free
  pages by ``merged`` (a new array) leaves ``sort(front ∪ staged)``; ``k`` is ``len(front)``
  unless ``front_sorted`` lets the CPU move only the pages below the largest staged one.
- ``merge_front(view, top, base, count, runs)``: the same merge in place, where the backend has
  one (:class:`~kvpool.impl.native_ops.NativeOps`), for a stack whose list ``view[top:]``
  ascends and whose ``count`` staged pages lie at ``view[base, base + count)`` (``base + count
  <= top``; ``runs``: :attr:`~kvpool.impl.staging.Staging.runs`, the offsets of the runs
  known to ascend, or None): True when ``sort(list ∪ staged)`` now fills ``view[top -
  count:]``; False, nothing moved, for the caller's ``merge_sorted``. Here: always False.
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from . import layout

INT64 = torch.int64
# a one-pass take's answer: (slots, or None when short, or False for the two-step path; the
# list's top and the staged count after the call), False to merge first, None for the
# two-step path
OnePass = tuple[torch.Tensor | Literal[False] | None, int, int] | Literal[False] | None
# alloc_decode's (a decode batch is never irregular)
DecodePass = tuple[torch.Tensor | None, int, int] | Literal[False] | None


def joined(ops: TorchOps, parts: list[Any]) -> Any:
    """Backend-form ``parts`` end to end (the only one itself when there is one)."""
    return parts[0] if len(parts) == 1 else ops.cat(parts)


class TorchOps:
    """Pure torch, no host-device sync except ``distinct_pages`` (``torch.unique``) on CUDA."""

    def __init__(self, page_size: int, device: Any) -> None:
        self.page_size = page_size
        self._offsets = torch.arange(page_size, dtype=INT64, device=device)

    def view(self, buf: torch.Tensor) -> Any:
        return buf

    def cat(self, parts: list[Any]) -> Any:
        return torch.cat(parts)

    def fresh_tensor(self, parts: list[Any]) -> torch.Tensor:
        """Backend-form ``parts`` end to end as a new tensor the caller owns."""
        fresh: torch.Tensor = torch.cat(parts)
        return fresh

    def write(self, view: Any, start: int, pages: Any) -> None:
        view[start : start + len(pages)].copy_(pages)

    def slots_of_pages(self, pages: Any) -> torch.Tensor:
        if self.page_size == 1:
            copied: torch.Tensor = pages.clone()
            return copied
        # row p of the result: [pages[p] * ps, pages[p] * ps + ps), one fused add
        return torch.add(self._offsets, pages[:, None], alpha=self.page_size).reshape(-1)

    def page_ids(self, slots: torch.Tensor) -> Any:
        pages: torch.Tensor = slots.reshape(-1).to(INT64) // self.page_size
        return pages

    def copy(self, slots: torch.Tensor) -> Any:
        copied: torch.Tensor = slots.reshape(-1).to(INT64, copy=True)
        return copied

    def defer(self, slots: torch.Tensor) -> Any:
        return self.page_ids(slots)  # a new array (page size 1: slots // 1)

    def undefer(self, parts: list[Any]) -> Any:
        return joined(self, parts)

    def release(self, source: Any, dedup: bool, view: Any, at: int, backwards: bool,
                room: int, owners: Any) -> int | None:
        return None

    def ascends_across(self, view: Any, index: int) -> bool:
        """Whether ``view[index - 1] < view[index]`` (True outside ``(0, len(view))``), where the
        backend has a one-pass release (it follows one). Here: False (never called)."""
        return False

    def distinct(self, pages: Any) -> Any:
        distinct: torch.Tensor = torch.unique(pages)
        return distinct

    def distinct_pages(self, slots: torch.Tensor) -> Any:
        return self.distinct(self.page_ids(slots))

    def segment_pages(self, slots: torch.Tensor, start: int, offset: int) -> Any:
        ps = self.page_size
        if slots.dim() != 1:  # positions count along the flattened slots, as on the host
            slots = slots.reshape(-1)
        if start:
            slots = slots[start:]
        # representatives: index 0, then [ps - offset, n) step ps (aligned start: [0, n) step ps)
        if offset == 0:
            reps = slots[::ps]
        elif ps - offset >= slots.numel():
            reps = slots[:1]
        else:
            reps = torch.cat((slots[:1], slots[ps - offset :: ps]))
        pages: torch.Tensor = reps.to(INT64) // ps  # a new tensor
        return pages

    def extend_new_pages(self, prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor) -> int:
        return layout.extend_new_pages(prefix_lens_cpu, seq_lens_cpu, self.page_size)

    def merge_sorted(self, front: Any, staged: Any, *,
                     front_sorted: bool) -> tuple[int, Any]:
        # on the device a host read of the largest staged page would sync: sort everything
        merged: torch.Tensor = torch.sort(torch.cat((front, staged))).values
        return front.numel(), merged

    def merge_front(self, view: Any, top: int, base: int, count: int,
                    runs: list[int] | None) -> bool:
        return False

    def decode_new_pages(self, seq_lens_cpu: torch.Tensor) -> int:
        return layout.decode_new_pages(seq_lens_cpu, self.page_size)

    def take_slots(self, view: Any, start: int, num_pages: int,
                   owners: Any) -> torch.Tensor | None:
        """``alloc``'s slots in one pass, where the backend has one (module docstring). Here:
        always None."""
        return None

    def take_extend(self, free: Any, top: int, num_staged: int, base: int,
                    runs: list[int] | None, prefix_lens: torch.Tensor,
                    prefix_lens_cpu: torch.Tensor, seq_lens: torch.Tensor,
                    seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                    extend_num_tokens: int, owners: Any) -> OnePass:
        """``alloc_extend`` in one pass, where the backend has one, on the stack ``free``
        (backend form; the list is ``free[top:]``, the ``num_staged`` staged pages at
        ``free[base, base + num_staged)``, ``runs`` as ``merge_front``'s). The merge test
        (``SORT-2``: the batch's ``merge_bound`` exceeds the list): with ``base >= 0`` (the list
        ascends) the merge of ``merge_front`` in place, else False, nothing moved: the caller
        merges and calls again.
        Then the count, the shortage check and the layout on the list's first pages:
        ``(slots, top, staged)``, the counters after the call, with ``None`` for slots when
        short (nothing laid out) and ``False`` when the batch needs the two-step form (a merge
        stays done). None, nothing moved, when this backend (or this batch) takes the two-step
        path of ``extend_new_pages`` and ``extend_slots``. Here: always None."""
        return None

    def take_decode(self, free: Any, top: int, num_staged: int, base: int,
                    runs: list[int] | None, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                    last_loc: torch.Tensor, owners: Any) -> DecodePass:
        """``alloc_decode``'s one pass, as :meth:`take_extend` (the merge test: the batch
        outnumbers the free list). Here: always None."""
        return None

    def extend_slots(self, prefix_lens: torch.Tensor, seq_lens: torch.Tensor,
                     last_loc: torch.Tensor, new_pages: Any,
                     extend_num_tokens: int) -> torch.Tensor:
        return layout.extend_slots(prefix_lens, seq_lens, last_loc, new_pages, self.page_size,
                                   extend_num_tokens)

    def decode_slots(self, seq_lens: torch.Tensor, last_loc: torch.Tensor,
                     new_pages: Any) -> torch.Tensor:
        return layout.decode_slots(seq_lens, last_loc, new_pages, self.page_size)
