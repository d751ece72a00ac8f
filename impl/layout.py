"""Vectorised ``alloc_extend`` / ``alloc_decode`` index arithmetic (``EXTEND-5``, ``DECODE-5``).

Pure torch ops on the device tensors, no Python loop over requests and no host-device sync:
every shape comes from host ints the caller already knows (``extend_num_tokens``, the batch
size, the number of new pages counted from the ``*_cpu`` lengths). The free pages are given as
``new_pages``, the first ``num_new_pages`` entries of the free list; request ``i`` uses
``new_pages[S_i : S_i + n_i]`` with ``S_i`` the exclusive prefix sum of ``n_j``
(``EXTEND-7``). Same numbers as :func:`kvpool.spec.layout.extend_row`.

Host counts (:func:`extend_new_pages`, :func:`decode_new_pages`) run on the ``*_cpu`` tensors.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

INT64 = torch.int64


def new_pages_per_request(prefix_lens: Any, seq_lens: Any, page_size: int,
                          div: Callable[[Any, int], Any] = operator.floordiv) -> Any:
    """``ceil(seq/ps) - ceil(prefix/ps)`` per request (``EXTEND-4``), a new tensor or array.

    :func:`kvpool.spec.layout.num_new_pages` over a whole batch at once: one expression on
    int64 torch tensors or numpy arrays (a Python loop per request is what this avoids).
    ``div`` is the floor division to use (numpy passes its shift form). Tied to the spec by
    ``tests/impl/test_impl_spec_forms.py``.
    """
    ps = page_size
    return div(seq_lens + (ps - 1), ps) - div(prefix_lens + (ps - 1), ps)


def extend_new_pages(prefix_lens_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor,
                     page_size: int) -> int:
    """``Σ ceil(seq/ps) - ceil(prefix/ps)`` from host tensors (``EXTEND-4``); no device access."""
    seq = seq_lens_cpu.to(INT64)
    pre = prefix_lens_cpu.to(INT64)
    if page_size == 1:
        return int((seq - pre).sum())
    return int(new_pages_per_request(pre, seq, page_size).sum())


def decode_new_pages(seq_lens_cpu: torch.Tensor, page_size: int) -> int:
    """Requests whose new token opens a page, ``(seq - 1) % ps == 0`` (``DECODE-4``, any ps)."""
    if page_size == 1:
        return seq_lens_cpu.numel()
    return int(((seq_lens_cpu.to(INT64) - 1) % page_size == 0).sum())


def extend_slots(
    prefix_lens: torch.Tensor,
    seq_lens: torch.Tensor,
    last_loc: torch.Tensor,
    new_pages: torch.Tensor,
    page_size: int,
    extend_num_tokens: int,
) -> torch.Tensor:
    """Slots of positions ``[prefix_i, seq_i)`` of every request, concatenated (a new tensor).

    ``new_pages`` must hold exactly the batch's new pages (its numel is a host int). For output
    token ``t`` of request ``r`` at position ``pos = prefix_r + (t - out_start_r)``::

        [prefix_r, ceil_page(prefix_r))  part 1:    last_loc_r + 1 + (pos - prefix_r)
        [ceil_page(prefix_r), seq_r)     parts 2-3: new_pages[S_r + pos // ps - ceil(prefix_r / ps)]
                                                    * ps + pos % ps

    Part-1 lanes compute a clamped (unused) page index, so nothing is read out of bounds.
    """
    device = seq_lens.device
    num_pages = new_pages.numel()
    if extend_num_tokens == 0:
        return torch.empty(0, dtype=INT64, device=device)
    ps = page_size
    pre = prefix_lens.to(INT64)
    seq = seq_lens.to(INT64)
    extend_lens = seq - pre
    first_new = (pre + (ps - 1)) // ps  # logical index of each request's first new page
    out_start = torch.cumsum(extend_lens, 0) - extend_lens  # exclusive prefix sums
    pages_needed = new_pages_per_request(pre, seq, ps)
    page_start = torch.cumsum(pages_needed, 0) - pages_needed
    # per request, gathered once per token t: pos = t + (pre - out_start),
    # continued slot = t + (last_loc + 1 - out_start), page index = logical + (S - first_new)
    per_request = torch.stack(
        (pre - out_start, last_loc.to(INT64) + 1 - out_start, page_start - first_new, first_new), 1)
    owner = torch.repeat_interleave(
        torch.arange(seq.numel(), device=device), extend_lens, output_size=extend_num_tokens
    )
    row = per_request[owner]
    t = torch.arange(extend_num_tokens, device=device)
    continued = row[:, 1] + t
    if num_pages == 0:
        return continued
    pos = row[:, 0] + t
    logical = pos // ps
    index = (row[:, 2] + logical).clamp_(0, num_pages - 1)
    fresh = new_pages[index] * ps + pos % ps
    return torch.where(logical < row[:, 3], continued, fresh)


def decode_slots(
    seq_lens: torch.Tensor, last_loc: torch.Tensor, new_pages: torch.Tensor, page_size: int
) -> torch.Tensor:
    """One slot per request for position ``seq - 1`` (a new tensor).

    A request opens a page iff ``(seq - 1) % ps == 0`` and then takes ``new_pages[rank] * ps``,
    ``rank`` = how many earlier requests open one; otherwise ``last_loc + 1``.
    """
    continued = last_loc.to(INT64) + 1
    num_pages = new_pages.numel()
    if num_pages == 0:
        return continued
    opens = (seq_lens.to(INT64) - 1) % page_size == 0
    opens_i = opens.to(INT64)
    rank = (torch.cumsum(opens_i, 0) - opens_i).clamp_(0, num_pages - 1)
    return torch.where(opens, new_pages[rank] * page_size, continued)
