"""``alloc_extend`` / ``alloc_decode`` slots as one Triton kernel each (the device path).

On CUDA each torch operator is a kernel launch; :func:`kvpool.impl.layout.extend_slots` issues
about a dozen, SGLang one Triton kernel per call. :class:`TritonOps` replaces the two layout
methods of :class:`~kvpool.impl.backend.TorchOps` with one launch each (plus the result's
``torch.empty``, which launches nothing) and no host sync: every shape is a host int the caller
already passed. The free-list bookkeeping stays in torch (slices and ``copy_``).

One program per request, as in SGLang's ``alloc_extend_kernel``: program ``r`` loads the whole
batch's lengths (``BATCH`` lanes, the next power of two) to get its output offset
``Σ_{j<r} (seq_j - pre_j)`` and its first page ``Σ_{j<r} n_j``, then writes its slots in
blocks of ``BLOCK`` tokens. The numbers are those of :mod:`kvpool.impl.layout` (the tests
compare the three backends on random batches, under ``TRITON_INTERPRET=1`` on a CPU): page
indices are clamped to the pages handed in, and no store goes past ``extend_num_tokens``, so
an inconsistent unchecked batch reads and writes nothing out of bounds.

The host ints (batch size, page count, token count) are not specialised on: Triton would
otherwise compile a variant per value class (1, a multiple of 16, other) of each, and a serving
engine's changing batches would keep meeting new ones (``python -m benchmarks.device_calls``
counts the variants and their compile time; its results are in ``benchmarks/results/device/``).
What stays compiled in is the page size and the batch's next power
of two (``BATCH``), as in SGLang's kernels, and the pointers' alignment.

Used by :func:`kvpool.impl.backend_choice.ops_for` on CUDA when ``triton`` imports (the optional
``triton`` extra) and ``KVPOOL_TRITON`` is not ``0``.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from .backend import INT64, TorchOps

BLOCK = 256  # tokens per inner step of an extend program


@triton.jit(do_not_specialize=["batch_size", "num_pages", "num_tokens"])
def _extend_kernel(pre_ptr, seq_ptr, last_ptr, pages_ptr, out_ptr, batch_size, num_pages,
                   num_tokens, PS: tl.constexpr, BATCH: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    lanes = tl.arange(0, BATCH)
    earlier = lanes < r
    pre_all = tl.load(pre_ptr + lanes, mask=lanes < batch_size, other=0).to(tl.int64)
    seq_all = tl.load(seq_ptr + lanes, mask=lanes < batch_size, other=0).to(tl.int64)
    pages_all = (seq_all + PS - 1) // PS - (pre_all + PS - 1) // PS
    out_start = tl.sum(tl.where(earlier, seq_all - pre_all, 0))
    page_start = tl.sum(tl.where(earlier, pages_all, 0))
    pre = tl.load(pre_ptr + r).to(tl.int64)
    seq = tl.load(seq_ptr + r).to(tl.int64)
    last = tl.load(last_ptr + r).to(tl.int64)
    first_new = (pre + PS - 1) // PS  # logical index of the request's first new page
    for off in range(0, seq - pre, BLOCK):
        t = off + tl.arange(0, BLOCK)  # output tokens [off, off + BLOCK) of this request
        pos = pre + t
        logical = pos // PS
        index = tl.minimum(tl.maximum(page_start + logical - first_new, 0), num_pages - 1)
        fresh = logical >= first_new
        page = tl.load(pages_ptr + index, mask=fresh & (index >= 0), other=0)  # -1: no pages
        slot = tl.where(fresh, page * PS + pos % PS, last + 1 + t)
        dest = out_start + t
        tl.store(out_ptr + dest, slot, mask=(pos < seq) & (dest < num_tokens))


@triton.jit(do_not_specialize=["batch_size", "num_pages"])
def _decode_kernel(seq_ptr, last_ptr, pages_ptr, out_ptr, batch_size, num_pages,
                   PS: tl.constexpr, BATCH: tl.constexpr):
    r = tl.program_id(0)
    lanes = tl.arange(0, BATCH)
    seq_all = tl.load(seq_ptr + lanes, mask=lanes < batch_size, other=1).to(tl.int64)
    opens_all = (seq_all - 1) % PS == 0  # zero remainder: the same for C and floor modulo
    rank = tl.sum(tl.where((lanes < r) & opens_all, 1, 0))
    seq = tl.load(seq_ptr + r).to(tl.int64)
    last = tl.load(last_ptr + r).to(tl.int64)
    index = tl.minimum(rank, num_pages - 1)  # -1: no pages
    opens = ((seq - 1) % PS == 0) & (index >= 0)
    page = tl.load(pages_ptr + index, mask=opens, other=0)
    tl.store(out_ptr + r, tl.where(opens, page * PS, last + 1))


class TritonOps(TorchOps):
    """Torch free-list operations, Triton layout kernels: one launch per extend / decode."""

    def extend_slots(self, prefix_lens: torch.Tensor, seq_lens: torch.Tensor,
                     last_loc: torch.Tensor, new_pages: Any,
                     extend_num_tokens: int) -> torch.Tensor:
        out = torch.empty(extend_num_tokens, dtype=INT64, device=seq_lens.device)
        batch_size = seq_lens.numel()
        if extend_num_tokens == 0 or batch_size == 0:
            return out
        _extend_kernel[(batch_size,)](
            prefix_lens.contiguous(), seq_lens.contiguous(), last_loc.contiguous(),
            new_pages.contiguous(), out, batch_size, new_pages.numel(),
            extend_num_tokens, PS=self.page_size, BATCH=triton.next_power_of_2(batch_size),
            BLOCK=BLOCK)
        return out

    def decode_slots(self, seq_lens: torch.Tensor, last_loc: torch.Tensor,
                     new_pages: Any) -> torch.Tensor:
        batch_size = seq_lens.numel()
        out = torch.empty(batch_size, dtype=INT64, device=seq_lens.device)
        if batch_size == 0:
            return out
        _decode_kernel[(batch_size,)](
            seq_lens.contiguous(), last_loc.contiguous(), new_pages.contiguous(), out,
            batch_size, new_pages.numel(), PS=self.page_size,
            BATCH=triton.next_power_of_2(batch_size))
        return out
