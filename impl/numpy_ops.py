"""The host backend: :class:`NumpyOps`, the arithmetic of :class:`~kvpool.impl.backend.TorchOps`
in numpy on numpy views of the same CPU buffers.

On the CPU each torch op costs microseconds of dispatch while numpy on a few hundred int64s
costs well under one; ``Tensor.numpy()`` shares memory, and every result goes back with
``torch.from_numpy`` of a fresh array that nothing here touches again (``ALIAS-1``). Also the
host checks both host backends run before anything moves (:func:`check_host_batch`) and the
helpers the compiled backend (:mod:`kvpool.impl.native_ops`) shares: :data:`NP_INT64`,
:func:`run_starts`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from kvpool.spec.errors import ContractViolation

from . import host_layout, layout
from .backend import INT64, TorchOps
from .host_layout import div_floor as _div

NP_INT64 = np.dtype(np.int64)


def _host(t: torch.Tensor) -> np.ndarray:
    """A 1-D int64 numpy array of a CPU tensor's values (a view when already int64; read-only
    use: callers never write into it)."""
    host = t.numpy()
    if host.dtype is not NP_INT64:  # the builtin dtype is one object; anything else converts
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


def run_starts(a: np.ndarray) -> np.ndarray:
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
            pages = pages[run_starts(pages)]  # so that the sort sees one per page
        elif np.count_nonzero(np.greater(pages[1:], pages[:-1])) == pages.size - 1:
            return pages  # ascending once each (a decode's slots, one per page): done
        pages.sort()  # the caller's own array (or the new one above)
        return pages[run_starts(pages)]

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
