"""Where the hot-path arithmetic runs: torch ops (any device) or numpy on the same CPU memory.

On CUDA every torch op is an asynchronous kernel launch, so :class:`TorchOps` keeps the hot
paths sync-free in pure torch. On CPU each torch op costs microseconds of dispatch while numpy
on a few hundred int64s costs well under one, so :class:`NumpyOps` runs the same arithmetic on
numpy views of the same buffers (``Tensor.numpy()`` shares memory) and hands every result back
with ``torch.from_numpy`` of a fresh array that nothing here touches again (``ALIAS-1``).
:func:`ops_for` picks one per allocator at construction. Both give the same numbers (the torch
ones come from :mod:`kvpool.impl.layout`); results are int64, inputs may be int32 and strided.

Each method's contract:

- ``view(buf)``: the buffer in the backend's form (the tensor, or its numpy view); slices of it
  are the "pages" that the free lists' ``take`` / ``front`` return.
- ``cat(parts)``: concatenation of backend-form pages (a new array).
- ``write(view, start, pages)``: ``view[start : start + len(pages)] = pages`` (a 1-D tensor,
  or backend-form pages).
- ``slots_of_pages(pages)``: every slot of backend-form ``pages``, page-major, a new int64
  tensor.
- ``distinct_pages(slots)``: the sorted distinct pages of ``slots``, new, in backend form.
- ``extend_new_pages`` / ``decode_new_pages``: host counts from the ``*_cpu`` lengths.
- ``extend_slots`` / ``decode_slots``: as :func:`kvpool.impl.layout.extend_slots` /
  :func:`~kvpool.impl.layout.decode_slots`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import layout

INT64 = torch.int64


class TorchOps:
    """Pure torch, no host-device sync except ``distinct_pages`` (``torch.unique``) on CUDA."""

    def __init__(self, page_size: int, device: Any) -> None:
        self.page_size = page_size
        self._offsets = torch.arange(page_size, dtype=INT64, device=device)

    def view(self, buf: torch.Tensor) -> Any:
        return buf

    def cat(self, parts: list[Any]) -> Any:
        return torch.cat(parts)

    def write(self, view: Any, start: int, pages: Any) -> None:
        view[start : start + len(pages)].copy_(pages)

    def slots_of_pages(self, pages: Any) -> torch.Tensor:
        if self.page_size == 1:
            copied: torch.Tensor = pages.clone()
            return copied
        # row p of the result: [pages[p] * ps, pages[p] * ps + ps), one fused add
        return torch.add(self._offsets, pages[:, None], alpha=self.page_size).reshape(-1)

    def distinct_pages(self, slots: torch.Tensor) -> Any:
        pages: torch.Tensor = torch.unique(slots.reshape(-1).to(INT64) // self.page_size)
        return pages

    def extend_new_pages(self, prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor) -> int:
        return layout.extend_new_pages(prefix_lens_cpu, seq_lens_cpu, self.page_size)

    def decode_new_pages(self, seq_lens_cpu: torch.Tensor) -> int:
        return layout.decode_new_pages(seq_lens_cpu, self.page_size)

    def extend_slots(self, prefix_lens: torch.Tensor, seq_lens: torch.Tensor,
                     last_loc: torch.Tensor, new_pages: Any,
                     extend_num_tokens: int) -> torch.Tensor:
        return layout.extend_slots(prefix_lens, seq_lens, last_loc, new_pages, self.page_size,
                                   extend_num_tokens)

    def decode_slots(self, seq_lens: torch.Tensor, last_loc: torch.Tensor,
                     new_pages: Any) -> torch.Tensor:
        return layout.decode_slots(seq_lens, last_loc, new_pages, self.page_size)


def _host(t: torch.Tensor) -> np.ndarray:
    """A 1-D int64 numpy array of a CPU tensor's values (a view when already int64; read-only
    use: callers never write into it)."""
    host = np.asarray(t.numpy(), dtype=np.int64)
    return host if host.ndim == 1 else host.reshape(-1)


def _div(a: np.ndarray, ps: int) -> np.ndarray:
    """``a // ps`` (floor), a shift when ``ps`` is a power of two (equal for any sign)."""
    return a >> (ps.bit_length() - 1) if ps & (ps - 1) == 0 else a // ps


def _mod(a: np.ndarray, ps: int) -> np.ndarray:
    """``a % ps`` (floor modulo), a mask when ``ps`` is a power of two (equal for any sign)."""
    return a & (ps - 1) if ps & (ps - 1) == 0 else a % ps


def _out(a: np.ndarray) -> torch.Tensor:
    """Hand a fresh array to the caller as a tensor (no copy; nothing here keeps ``a``)."""
    return torch.from_numpy(a)


class NumpyOps(TorchOps):
    """CPU only: the same arithmetic in numpy on shared memory (no torch dispatch)."""

    def __init__(self, page_size: int, device: Any) -> None:
        super().__init__(page_size, device)
        self._host_offsets = np.arange(page_size, dtype=np.int64)

    def view(self, buf: torch.Tensor) -> Any:
        return buf.numpy()

    def cat(self, parts: list[Any]) -> Any:
        return np.concatenate(parts)

    def write(self, view: Any, start: int, pages: Any) -> None:
        src = pages.numpy() if isinstance(pages, torch.Tensor) else pages
        view[start : start + len(src)] = src

    def slots_of_pages(self, pages: Any) -> torch.Tensor:
        ps = self.page_size
        if ps == 1:
            return _out(pages.copy())
        # row p of the result: [pages[p] * ps, pages[p] * ps + ps)
        return _out(((pages * ps)[:, None] + self._host_offsets).reshape(-1))

    def distinct_pages(self, slots: torch.Tensor) -> Any:
        pages = _div(_host(slots), self.page_size)  # a new array
        pages.sort()
        if pages.size > 1:  # keep the first of each run of equal pages
            keep = np.empty(pages.size, dtype=bool)
            keep[0] = True
            np.not_equal(pages[1:], pages[:-1], out=keep[1:])
            pages = pages[keep]
        return pages

    def extend_new_pages(self, prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor) -> int:
        ps = self.page_size
        seq, pre = _host(seq_lens_cpu), _host(prefix_lens_cpu)
        return int((_div(seq + (ps - 1), ps) - _div(pre + (ps - 1), ps)).sum())

    def decode_new_pages(self, seq_lens_cpu: torch.Tensor) -> int:
        if self.page_size == 1:
            return seq_lens_cpu.numel()
        ps = self.page_size
        return int(np.count_nonzero(_mod(_host(seq_lens_cpu), ps) == 1 % ps))  # (seq-1) % ps == 0

    def extend_slots(self, prefix_lens: torch.Tensor, seq_lens: torch.Tensor,
                     last_loc: torch.Tensor, new_pages: Any,
                     extend_num_tokens: int) -> torch.Tensor:
        # the numbers of layout.extend_slots (see its docstring), gathered per token by owner
        if extend_num_tokens == 0:
            return torch.empty(0, dtype=INT64)
        ps = self.page_size
        pre, seq = _host(prefix_lens), _host(seq_lens)
        extend_lens = seq - pre
        first_new = _div(pre + (ps - 1), ps)
        out_start = np.cumsum(extend_lens) - extend_lens
        pages_needed = _div(seq + (ps - 1), ps) - first_new
        page_start = np.cumsum(pages_needed) - pages_needed
        owner = np.repeat(np.arange(seq.size), extend_lens)
        if owner.size != extend_num_tokens:
            raise RuntimeError(f"extend_num_tokens {extend_num_tokens} != Σ(seq - prefix) "
                               f"{owner.size}")
        t = np.arange(extend_num_tokens)
        continued = (_host(last_loc) + 1 - out_start)[owner] + t
        num_pages = len(new_pages)
        if num_pages == 0:
            return _out(continued)
        pos = (pre - out_start)[owner] + t
        logical = _div(pos, ps)
        index = (page_start - first_new)[owner] + logical
        np.minimum(np.maximum(index, 0, out=index), num_pages - 1, out=index)  # part-1 lanes
        fresh = new_pages[index] * ps + _mod(pos, ps)
        return _out(np.where(logical < first_new[owner], continued, fresh))

    def decode_slots(self, seq_lens: torch.Tensor, last_loc: torch.Tensor,
                     new_pages: Any) -> torch.Tensor:
        slots = _host(last_loc) + 1  # a new array: the continued slot of every request
        num_pages = len(new_pages)
        if num_pages == 0:
            return _out(slots)
        ps = self.page_size
        # (seq - 1) % ps == 0  <=>  seq % ps == 1 % ps (floor modulo, any sign)
        opening = np.flatnonzero(_mod(_host(seq_lens), ps) == 1 % ps)
        # the r-th opening request takes new_pages[r] (clamped like layout.decode_slots)
        if len(opening) <= num_pages:
            slots[opening] = new_pages[: len(opening)] * ps
        else:
            rank = np.minimum(np.arange(len(opening)), num_pages - 1)
            slots[opening] = new_pages[rank] * ps
        return _out(slots)


def ops_for(page_size: int, device: Any) -> TorchOps:
    """:class:`NumpyOps` for a CPU device, else :class:`TorchOps` (chosen once per allocator)."""
    if torch.device(device).type == "cpu":
        return NumpyOps(page_size, device)
    return TorchOps(page_size, device)
