"""Token ids of a paged allocation in a unified pool's virtual id space (``UNI-8``, ``UMB-2``).

The id-owning end hands out whole virtual pages; a token id ``t`` lies on virtual page
``t // page_size``. ``alloc_extend`` and ``alloc_decode`` continue each request's last page
(``last_loc + 1``, ...) before they open new pages, as SGLang's ``alloc_extend_kernel`` /
``alloc_decode_kernel`` do. Pure functions on lists; shared by the full + SWA model
(:mod:`kvpool.spec.unified`) and the full + Mamba model (:mod:`kvpool.spec.unified_mamba`).
"""

from __future__ import annotations

from collections.abc import Sequence


def extend_page_counts(prefix_lens: Sequence[int], seq_lens: Sequence[int],
                       page_size: int) -> list[int]:
    """New pages each request of an ``alloc_extend`` opens: ``ceil(seq / ps) - ceil(prefix / ps)``.

    Raises:
        ValueError: the two lists differ in length.
    """
    return [-(-s // page_size) - -(-p // page_size)
            for p, s in zip(prefix_lens, seq_lens, strict=True)]


def extend_token_ids(prefix_lens: Sequence[int], seq_lens: Sequence[int],
                     last_locs: Sequence[int], pages: Sequence[int],
                     page_size: int) -> list[int]:
    """The token ids of an ``alloc_extend`` given its new virtual ``pages`` in request order:
    positions ``prefix .. seq - 1`` of each request; those on the prefix's last (partial) page
    continue ``last_loc`` (``last_loc + 1 + pos - prefix``), the rest lie on the request's new
    pages (``page * ps + pos % ps``)."""
    ps = page_size
    out: list[int] = []
    rest = list(pages)
    counts = extend_page_counts(prefix_lens, seq_lens, ps)
    for prefix, seq, last, count in zip(prefix_lens, seq_lens, last_locs, counts, strict=True):
        mine, rest = rest[:count], rest[count:]
        first_new = -(-prefix // ps)
        for pos in range(prefix, seq):
            if pos < first_new * ps:
                out.append(last + 1 + pos - prefix)
            else:
                out.append(mine[pos // ps - first_new] * ps + pos % ps)
    return out


def decode_page_starts(seq_lens: Sequence[int], page_size: int) -> list[bool]:
    """Whether each request's decoded token (position ``seq_len - 1``) opens a new page."""
    return [(s - 1) % page_size == 0 for s in seq_lens]


def decode_token_ids(seq_lens: Sequence[int], last_locs: Sequence[int], pages: Sequence[int],
                     page_size: int) -> list[int]:
    """The token ids of an ``alloc_decode`` given its new virtual ``pages`` in request order:
    the first row of the next new page where the token opens one, else ``last_loc + 1``."""
    rest = list(pages)
    out = []
    for start, last in zip(decode_page_starts(seq_lens, page_size), last_locs, strict=True):
        if start:
            out.append(rest.pop(0) * page_size)
        else:
            out.append(last + 1)
    return out
