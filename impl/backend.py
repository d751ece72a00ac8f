"""Where the hot-path arithmetic runs: four backends over the same buffers, one per allocator.

- :class:`TorchOps` (any device): pure torch. On CUDA every torch op is an asynchronous kernel
  launch, so it keeps the hot paths sync-free.
- :class:`~kvpool.impl.triton_ops.TritonOps` (CUDA, the ``triton`` extra): :class:`TorchOps`
  with the ``alloc_extend`` / ``alloc_decode`` layouts as one Triton kernel each.
- :class:`NumpyOps` (CPU): on CPU each torch op costs microseconds of dispatch while numpy on a
  few hundred int64s costs well under one, so it runs the same arithmetic on numpy views of the
  same buffers (``Tensor.numpy()`` shares memory) and hands every result back with
  ``torch.from_numpy`` of a fresh array that nothing here touches again (``ALIAS-1``).
- :class:`~kvpool.impl.native_ops.NativeOps` (CPU, the compiled extension
  ``kvpool.impl._native``): :class:`NumpyOps` with the hot paths as compiled loops, one pass per
  call.

:func:`ops_for` picks one per allocator at construction. All four give the same numbers (the
torch ones come from :mod:`kvpool.impl.layout`); results are int64, inputs may be int32 and
strided.

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
  <= top``; ``runs``: :attr:`~kvpool.impl.freelist.Staging.runs`, the offsets of the runs
  known to ascend, or None): True when ``sort(list ∪ staged)`` now fills ``view[top -
  count:]``; False, nothing moved, for the caller's ``merge_sorted``. Here: always False.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation

from . import host_layout, layout
from .host_layout import div_floor as _div

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


_INT64 = np.dtype(np.int64)


def _host(t: torch.Tensor) -> np.ndarray:
    """A 1-D int64 numpy array of a CPU tensor's values (a view when already int64; read-only
    use: callers never write into it)."""
    host = t.numpy()
    if host.dtype is not _INT64:  # the builtin dtype is one object; anything else converts
        host = host.astype(np.int64)
    return host if host.ndim == 1 else host.reshape(-1)


def check_host_batch(prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor | None,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     last_loc: torch.Tensor, extend_num_tokens: int | None) -> None:
    """Before anything moves on the host backends' two-step path: the ``*_cpu`` lengths hold
    the values of the others (``EXTEND-1`` / ``DECODE-1``: the counts come from them, the layout
    from the others), and an extend batch is regular (:func:`_check_regular`; a decode,
    ``extend_num_tokens`` None: ``seq_lens`` and ``last_loc`` of one length). Raises
    ContractViolation; reads host tensors only."""
    clause = "DECODE-1" if extend_num_tokens is None else "EXTEND-1"
    pairs = [(seq_lens, seq_lens_cpu, "seq_lens")]
    if prefix_lens_cpu is not None:
        pairs.append((prefix_lens, prefix_lens_cpu, "prefix_lens"))
    for given, host, name in pairs:
        if given is not host and not np.array_equal(_host(given), _host(host)):
            raise ContractViolation(clause, f"{name}_cpu does not hold the values of {name}")
    if extend_num_tokens is not None:
        _check_regular(prefix_lens, seq_lens, last_loc, extend_num_tokens)
    elif seq_lens.numel() != last_loc.numel():
        raise ContractViolation(clause, f"seq_lens has {seq_lens.numel()} values, last_loc "
                                f"{last_loc.numel()}")


def _check_regular(prefix_lens: torch.Tensor, seq_lens: torch.Tensor, last_loc: torch.Tensor,
                   extend_num_tokens: int) -> None:
    """Refuse, before any layout, a batch whose slots no layout can give: lengths of different
    sizes or a token count other than ``Σ(seq - prefix)`` (``EXTEND-1``), a negative extend
    (``EXTEND-2``). The torch form would trust ``extend_num_tokens`` as its output size and hand
    out values it never computed. Host reads only (the host backends' inputs are on the CPU)."""
    sizes = (prefix_lens.numel(), seq_lens.numel(), last_loc.numel())
    if len(set(sizes)) != 1:
        raise ContractViolation("EXTEND-1", f"prefix_lens, seq_lens and last_loc have lengths "
                                f"{sizes}")
    # Python ints: no wrap-around (this is the error path)
    extend = [s - p for s, p in zip(_host(seq_lens).tolist(), _host(prefix_lens).tolist())]
    for request, e in enumerate(extend):
        if e < 0:
            raise ContractViolation("EXTEND-2", f"request {request}: seq_len < prefix_len")
    total = sum(extend)
    if total != extend_num_tokens:
        raise ContractViolation("EXTEND-1", f"extend_num_tokens {extend_num_tokens} != "
                                f"Σ(seq - prefix) {total}")


def _run_starts(a: np.ndarray) -> np.ndarray:
    """A mask of the first entry of every run of equal values of ``a`` (``a.size >= 1``)."""
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return keep


def _out(a: np.ndarray) -> torch.Tensor:
    """Hand a fresh array to the caller as a tensor (no copy; nothing here keeps ``a``)."""
    return torch.from_numpy(a)


class NumpyOps(TorchOps):
    """CPU only: the same arithmetic in numpy on shared memory (no torch dispatch)."""

    def __init__(self, page_size: int, device: Any) -> None:
        # no torch offsets tensor: every torch-offset user is overridden here
        self.page_size = page_size
        self._host_offsets = np.arange(page_size, dtype=np.int64)
        self._counting = host_layout.Counting()
        # batches up to this size take the per-request loop (ps 1: never, the run form copies)
        self._few_requests = host_layout.FEW_REQUESTS if page_size > 1 else 0
        # seq % ps == 1 % ps as one mask when ps is a power of two (None: floor modulo)
        self._offset_mask = page_size - 1 if page_size & (page_size - 1) == 0 else None
        self._opening_of: tuple[torch.Tensor, np.ndarray] | None = None
        self._lists_of: tuple[torch.Tensor, torch.Tensor, list[int], list[int]] | None = None
        self._arrays_of: tuple[torch.Tensor, torch.Tensor, np.ndarray, np.ndarray,
                               np.ndarray] | None = None

    def view(self, buf: torch.Tensor) -> Any:
        return buf.numpy()

    def cat(self, parts: list[Any]) -> Any:
        return np.concatenate(parts)

    def fresh_tensor(self, parts: list[Any]) -> torch.Tensor:
        return _out(np.concatenate(parts))  # concatenate copies, even of one part

    def undefer(self, parts: list[Any]) -> Any:
        return np.concatenate(parts)  # a new array even of one part: distinct sorts in place

    def write(self, view: Any, start: int, pages: Any) -> None:
        src = pages.numpy() if isinstance(pages, torch.Tensor) else pages
        view[start : start + len(src)] = src

    def slots_of_pages(self, pages: Any) -> torch.Tensor:
        ps = self.page_size
        if ps == 1:
            return _out(pages.copy())
        # row p of the result: [pages[p] * ps, pages[p] * ps + ps)
        return _out(((pages * ps)[:, None] + self._host_offsets).reshape(-1))

    def page_ids(self, slots: torch.Tensor) -> Any:
        return _div(_host(slots), self.page_size)  # a new array (a shift makes one too)

    def copy(self, slots: torch.Tensor) -> Any:
        return _host(slots).copy()

    def distinct_pages(self, slots: torch.Tensor) -> Any:
        return self.distinct(_div(_host(slots), self.page_size))  # page_ids, one call less

    def segment_pages(self, slots: torch.Tensor, start: int, offset: int) -> Any:
        ps, host = self.page_size, _host(slots)[start:]
        reps = host[::ps] if offset == 0 else np.concatenate((host[:1], host[ps - offset :: ps]))
        return _div(reps, ps)  # a new array

    def distinct(self, pages: Any) -> Any:
        if pages.size < 2:
            return pages
        if pages[0] == pages[1]:  # page-major runs (a row's slots): one entry per run first,
            pages = pages[_run_starts(pages)]  # so that the sort sees one per page
        elif np.count_nonzero(np.greater(pages[1:], pages[:-1])) == pages.size - 1:
            return pages  # ascending once each (a decode's slots, one per page): done
        pages.sort()  # the caller's own array (or the new one above)
        return pages[_run_starts(pages)]

    def merge_sorted(self, front: Any, staged: Any, *,
                     front_sorted: bool) -> tuple[int, Any]:
        free, new = front, staged
        if not front_sorted:  # the whole list moves
            everything = np.concatenate((free, new))
            everything.sort(kind="stable")
            return free.size, everything
        # free pages below the largest staged one: [0, below) of the free list moves
        below = int(np.searchsorted(free, new.max()))
        merged = np.concatenate((free[:below], new))
        merged.sort(kind="stable")  # timsort: linear on sorted runs (each free() gives one)
        return below, merged

    def extend_new_pages(self, prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor) -> int:
        ps = self.page_size
        if seq_lens_cpu.numel() <= self._few_requests:  # host ints beat numpy calls
            pre_list, seq_list = _host(prefix_lens_cpu).tolist(), _host(seq_lens_cpu).tolist()
            # kept for the extend_slots call that follows when it gets these very tensors
            self._lists_of = (prefix_lens_cpu, seq_lens_cpu, pre_list, seq_list)
            return sum(-(-s // ps) + p // -ps for p, s in zip(pre_list, seq_list))
        seq, pre = _host(seq_lens_cpu), _host(prefix_lens_cpu)
        # ps 1: one page per token; seq - pre is also the layout's extend per request
        per_request = seq - pre if ps == 1 else layout.new_pages_per_request(pre, seq, ps, _div)
        # kept for the extend_slots call that follows when it gets these very tensors
        self._arrays_of = (prefix_lens_cpu, seq_lens_cpu, pre, seq, per_request)
        return int(per_request.sum())

    def decode_new_pages(self, seq_lens_cpu: torch.Tensor) -> int:
        if self.page_size == 1:
            return seq_lens_cpu.numel()
        opening = self._opening(seq_lens_cpu)
        # alloc_decode passes the same tensor as seq_lens when it lives on the CPU: keep the
        # answer for the decode_slots call that follows (used once, then dropped)
        self._opening_of = (seq_lens_cpu, opening)
        return len(opening)

    def _opening(self, seq_lens: torch.Tensor) -> np.ndarray:
        """Indices of the requests whose new token opens a page: (seq - 1) % ps == 0, i.e.
        seq % ps == 1 % ps (floor modulo, any sign)."""
        ps = self.page_size
        seq = _host(seq_lens)
        mask = self._offset_mask
        opens: np.ndarray = np.equal(seq & mask if mask is not None else seq % ps, 1 % ps)
        indices: np.ndarray = opens.nonzero()[0]  # 1-D: flatnonzero without its ravel call
        return indices

    def extend_slots(self, prefix_lens: torch.Tensor, seq_lens: torch.Tensor,
                     last_loc: torch.Tensor, new_pages: Any,
                     extend_num_tokens: int) -> torch.Tensor:
        # per run, not per token (kvpool.impl.host_layout); an irregular batch takes the
        # torch form, so that both backends give the same result or raise the same error
        if extend_num_tokens == 0:
            return torch.empty(0, dtype=INT64)
        if seq_lens.numel() <= self._few_requests:
            known, self._lists_of = self._lists_of, None
            if known is not None and known[0] is prefix_lens and known[1] is seq_lens:
                pre, seq = known[2], known[3]
            else:  # other tensors than the count read: their own values
                pre, seq = _host(prefix_lens).tolist(), _host(seq_lens).tolist()
            out = host_layout.extend_slots_few(
                pre, seq, _host(last_loc).tolist(), new_pages, self.page_size, extend_num_tokens,
                self._counting, self._host_offsets)
        else:
            counted, self._arrays_of = self._arrays_of, None
            if counted is not None and counted[0] is prefix_lens and counted[1] is seq_lens:
                pre_host, seq_host, per_request = counted[2], counted[3], counted[4]
            else:  # other tensors than the count read: their own values
                pre_host, seq_host, per_request = _host(prefix_lens), _host(seq_lens), None
            out = host_layout.extend_slots(pre_host, seq_host, _host(last_loc), new_pages,
                                           self.page_size, extend_num_tokens, self._counting,
                                           per_request)
        if out is not None:
            return _out(out)
        _check_regular(prefix_lens, seq_lens, last_loc, extend_num_tokens)
        # the page count disagrees with the lengths (num_new_pages given, or *_cpu lengths
        # that differ from the others): the torch form, whose page indices are clamped
        return layout.extend_slots(prefix_lens, seq_lens, last_loc, torch.from_numpy(new_pages),
                                   self.page_size, extend_num_tokens)

    def decode_slots(self, seq_lens: torch.Tensor, last_loc: torch.Tensor,
                     new_pages: Any) -> torch.Tensor:
        num_pages, batch_size = len(new_pages), last_loc.numel()
        known, self._opening_of = self._opening_of, None
        if num_pages == 0:
            return _out(_host(last_loc) + 1)  # a new array: every request continues
        ps = self.page_size
        if ps == 1 and num_pages == batch_size:  # every request opens a page
            return _out(new_pages.copy())
        opening = known[1] if known is not None and known[0] is seq_lens else self._opening(
            seq_lens)
        if len(opening) == batch_size == num_pages:  # every request opens one, in order
            return torch.from_numpy(new_pages * ps)  # _out, inlined on the decode path
        slots = _host(last_loc) + 1  # a new array: the continued slot of every request
        # the r-th opening request takes new_pages[r] (clamped like layout.decode_slots)
        if len(opening) <= num_pages:
            slots[opening] = new_pages[: len(opening)] * ps
        else:
            rank = np.minimum(np.arange(len(opening)), num_pages - 1)
            slots[opening] = new_pages[rank] * ps
        return _out(slots)


def ops_for(page_size: int, device: Any) -> TorchOps:
    """The backend of one allocator (chosen once, at construction).

    CPU: :class:`~kvpool.impl.native_ops.NativeOps` when the compiled extension is built and
    ``KVPOOL_NATIVE`` is not ``0``, else :class:`NumpyOps`. CUDA:
    :class:`~kvpool.impl.triton_ops.TritonOps` when ``triton`` imports and ``KVPOOL_TRITON`` is
    not ``0``, else :class:`TorchOps`. Any other device: :class:`TorchOps`.
    """
    kind = torch.device(device).type
    if kind == "cpu":
        if os.environ.get("KVPOOL_NATIVE", "1") != "0":
            from .native_ops import NativeOps, native_available
            if native_available():
                return NativeOps(page_size, device)
        return NumpyOps(page_size, device)
    if kind == "cuda" and os.environ.get("KVPOOL_TRITON", "1") != "0":
        try:
            from .triton_ops import TritonOps
        except ImportError:  # the optional ``triton`` extra is not installed
            return TorchOps(page_size, device)
        return TritonOps(page_size, device)
    return TorchOps(page_size, device)
