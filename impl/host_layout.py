"""``alloc_extend``'s slots on the CPU, computed per page instead of per token (``EXTEND-5``).

Why a second vectorised form beside :func:`kvpool.impl.layout.extend_slots` (the torch one,
tied to :func:`kvpool.spec.layout.extend_row` by the tests): on the CPU every numpy call costs
about half a microsecond whatever its size, and the per-token form makes about a dozen passes
over the output. This form does its bookkeeping on *runs* (one per request for the rest of the
prefix's last page, then one per new page) and touches the token axis twice: one
``np.repeat`` of the run values and one in-place add of ``0..n-1``. The tests
(``tests/impl/test_impl_backend.py``) tie it to the torch form and to the spec on random
batches; an irregular batch (a negative extend, a page count that does not match
``new_pages``, a token count that does not match ``extend_num_tokens``) returns None and the
caller falls back to the torch form, so both give the same result or the same error.

Runs of request ``r`` in output order (``S_r`` its first page in ``new_pages``)::

    run (r, cont)   p1_r tokens        slot = last_loc_r + 1 + i
    run (r, j)      ps or fewer        slot = new_pages[S_r + j] * ps + i,  j in [0, n_r)

with ``p1_r = min(e_r, -prefix_r mod ps)`` (part 1) and the last page cut to the tokens left.
Run ``(r, cont)`` has index ``S_r + r``; page ``S_r + j`` has index ``S_r + r + 1 + j``. A run
starting at output index ``t0`` with first slot ``v`` contributes ``v - t0 + t`` at output
``t``: so ``out = repeat(v - t0, run_len) + arange(n)``.

A batch of at most ``FEW_REQUESTS`` requests (a serving step's prefill is often one or two
chunks) costs less as a Python loop over requests with two slice writes each
(:func:`extend_slots_few`): about 25 numpy calls of bookkeeping would cost more than the loop.
At page size 1 the run form is a copy of the new pages after three checks, cheaper than the
loop for any batch, so ``NumpyOps`` takes the loop only for ``page_size > 1``. Both forms are
tied to the spec by the same tests.
"""

from __future__ import annotations

import numpy as np

_add = np.add.accumulate
FEW_REQUESTS = 4  # up to this batch size the per-request loop is cheaper


def div_floor(a: np.ndarray, ps: int) -> np.ndarray:
    """``a // ps`` (floor), a shift when ``ps`` is a power of two (equal for any sign)."""
    return a >> (ps.bit_length() - 1) if ps & (ps - 1) == 0 else a // ps


def mod_floor(a: np.ndarray, ps: int) -> np.ndarray:
    """``a % ps`` (floor modulo), a mask when ``ps`` is a power of two (equal for any sign)."""
    return a & (ps - 1) if ps & (ps - 1) == 0 else a % ps


class Counting:
    """A growing cache of ``arange(n)`` (int64), so that the hot path never builds one."""

    def __init__(self) -> None:
        self._values = self._make(1024)

    @staticmethod
    def _make(n: int) -> np.ndarray:
        values = np.arange(n, dtype=np.int64)
        values.flags.writeable = False
        return values

    def first(self, n: int) -> np.ndarray:
        """A read-only view ``[0, n)``."""
        if n > self._values.size:
            self._values = self._make(max(n, 2 * self._values.size))
        return self._values[:n]


def extend_slots(pre: np.ndarray, seq: np.ndarray, last: np.ndarray, new_pages: np.ndarray,
                 page_size: int, extend_num_tokens: int, counting: Counting,
                 pages_per_request: np.ndarray | None = None) -> np.ndarray | None:
    """Slots of positions ``[pre_r, seq_r)`` of every request, concatenated (a new array).

    ``pre`` / ``seq`` / ``last``: int64 host arrays of one length; ``new_pages``: the batch's
    new pages in order; ``pages_per_request``: ``ceil(seq/ps) - ceil(pre/ps)`` when the caller
    has counted it already (:func:`kvpool.impl.layout.new_pages_per_request`; at page size 1
    it is ``seq - pre``), else computed here. Returns None for an irregular batch (see the
    module docstring); never reads outside ``new_pages``.
    """
    ps = page_size
    e = pages_per_request if ps == 1 and pages_per_request is not None else seq - pre
    if e.size == 0 or e.min() < 0:
        return None
    num_pages = new_pages.size
    if ps == 1:  # every token is a new page, in order
        if num_pages != extend_num_tokens or int(e.sum()) != extend_num_tokens:
            return None
        return new_pages.copy()
    p1 = np.minimum(e, mod_floor(-pre, ps))  # part 1: the rest of the prefix's last page
    m = e - p1  # parts 2-3: tokens on new pages
    # new pages per request: ceil(m / ps), which is the count's ceil(seq/ps) - ceil(pre/ps)
    # once no extend is negative
    n = div_floor(m + (ps - 1), ps) if pages_per_request is None else pages_per_request
    page_end = _add(n)
    if int(page_end[-1]) != num_pages:
        return None
    # run index of (r, cont) = S_r + r; [cont_r, cont_r + n_r] are request r's runs
    cont = page_end - n
    cont += counting.first(n.size)
    num_runs = num_pages + n.size
    run_len = np.empty(num_runs, dtype=np.int64)
    run_len.fill(ps)
    run_len[cont + n] = ps - mod_floor(-m, ps)  # the last page: the tokens left (n_r > 0)
    run_len[cont] = p1  # written second: wins where n_r == 0
    start = _add(run_len)
    if int(start[-1]) != extend_num_tokens:
        return None
    start -= run_len  # [start, start + run_len) of the output
    is_page = np.ones(num_runs, dtype=bool)
    is_page[cont] = False
    first = np.empty(num_runs, dtype=np.int64)
    first[is_page] = new_pages * ps
    first[cont] = last + 1
    first -= start
    out = np.repeat(first, run_len)
    out += counting.first(extend_num_tokens)
    return out


def extend_slots_few(pre: list[int], seq: list[int], last: list[int], new_pages: np.ndarray,
                     page_size: int, extend_num_tokens: int, counting: Counting,
                     offsets: np.ndarray) -> np.ndarray | None:
    """:func:`extend_slots` for a few requests given as host ints (``offsets`` is
    ``arange(page_size)``): per request, part 1 as ``last_loc + 1 + [0, p1)`` and the new pages'
    slots as whole rows ``page * ps + offsets`` written in place. None when irregular.

    The result is the first ``extend_num_tokens`` entries of an array one page longer: a
    request's last row may run past its tokens into the next request's span (which that request
    then overwrites, requests being written in order) or into the spare page at the end.
    """
    ps = page_size
    out = np.empty(extend_num_tokens + ps, dtype=np.int64)
    start = page = 0  # next output index, next new page
    for p, s, loc in zip(pre, seq, last):
        e = s - p
        if e < 0 or start + e > extend_num_tokens:
            return None
        p1 = min(e, -p % ps)  # [start, start + p1): the rest of the prefix's last page
        if p1:
            np.add(counting.first(p1), loc + 1, out=out[start : start + p1])
        m = e - p1  # [start + p1, start + p1 + n * ps): n whole rows, page-major
        if m:
            n = -(-m // ps)
            if page + n > new_pages.size:
                return None
            begin = start + p1
            rows = out[begin : begin + n * ps].reshape(n, ps)
            np.add(offsets, (new_pages[page : page + n] * ps)[:, None], out=rows)
            page += n
        start += e
    if start != extend_num_tokens or page != new_pages.size:
        return None
    return out[:extend_num_tokens]
