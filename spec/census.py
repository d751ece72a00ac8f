"""The free census: recount an allocator's pages and report what does not add up (``INV-*``).

Shared by the reference model's ``check_invariants`` / ``verify_byte_accounting`` and by
``kvpool.impl``'s ``verify_byte_accounting``: both describe their state as plain lists and get the
same violation strings back. Also the capacity arithmetic of the hooks (``CAP-1``, ``CAP-2``),
shared the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from .wording import counted


def census(
    free: Sequence[int],
    staged: Sequence[int],
    *,
    num_pages: int,
    page_size: int,
    available_size: int,
    deferred: Iterable[int] = (),
) -> list[str]:
    """Violation strings for a free census; empty when healthy.

    Checks: every free, staged or deferred page is a real page ``1..num_pages`` (``INV-3``: page 0
    is never free); no page is listed twice across free, staged and deferred (``INV-2``);
    ``available_size == (len(free) + len(staged)) * page_size`` (``INV-4``); at most ``num_pages``
    pages are free or staged (``INV-1``: the rest are owned, so conservation holds by count).

    pre: len(free) <= 6 and len(staged) <= 4 and 0 <= num_pages <= 8 and 1 <= page_size <= 4
    post: (__return__ == []) == (len(set([*free, *staged, *deferred])) == len([*free, *staged, *deferred]) and all(1 <= p <= num_pages for p in [*free, *staged, *deferred]) and available_size == (len(free) + len(staged)) * page_size and len(free) + len(staged) <= num_pages)
    post: all(line[:5] in ("INV-1", "INV-2", "INV-3", "INV-4") for line in __return__)
    """
    problems: list[str] = []
    every = [*free, *staged, *deferred]
    # the healthy case in O(n): distinct pages, all inside 1..num_pages; else the recount below
    distinct = len(set(every)) == len(every)
    inside = not every or (min(every) >= 1 and max(every) <= num_pages)
    listed = Counter() if distinct and inside else Counter(every)
    for page, count in sorted(listed.items()):
        if not 1 <= page <= num_pages:
            problems.append(f"INV-3: page {page} is listed free but is not a page of 1..{num_pages}")
        if count > 1:
            problems.append(f"INV-2: page {page} is listed {counted(count, 'time')} (double free)")
    expected = (len(free) + len(staged)) * page_size
    if available_size != expected:
        problems.append(
            f"INV-4: available_size() is {available_size}, but (free {len(free)} + staged "
            f"{len(staged)}) * page_size {page_size} = {expected}"
        )
    if len(free) + len(staged) > num_pages:
        problems.append(
            f"INV-1: {counted(len(free) + len(staged), 'page')} free or staged, more than the "
            f"{num_pages} that exist"
        )
    return problems


def describe_pages(pages: Sequence[int]) -> str:
    """``[1 2 3 7 9 10]`` as ``1-3 7 9-10``: a compact, order-keeping run-length form.

    pre: len(pages) <= 8
    post: (__return__ == "-") == (len(pages) == 0)
    post: len(__return__.split()) <= max(1, len(pages))
    """
    parts: list[str] = []
    i = 0
    while i < len(pages):
        j = i
        while j + 1 < len(pages) and pages[j + 1] == pages[j] + 1:
            j += 1
        parts.append(str(pages[i]) if i == j else f"{pages[i]}-{pages[j]}")
        i = j + 1
    return " ".join(parts) if parts else "-"


def eviction_shortfall(num_tokens: int, available_size: int) -> int:
    """Tokens ``evict_to_free_tokens(tree_cache, num_tokens)`` asks the cache for (``CAP-1``).

    The shortfall ``num_tokens - available_size`` when positive; 0 means the cache is not asked.

    pre: -1024 <= num_tokens <= 1024 and 0 <= available_size <= 1024
    post: __return__ >= 0
    post: __return__ == 0 or available_size + __return__ == num_tokens
    """
    return max(0, num_tokens - available_size)


def decode_capacity_ok(num_tokens: int, available_size: int) -> bool:
    """``check_decode_capacity``'s answer after the eviction (``CAP-2``): the tokens fit.

    pre: -1024 <= num_tokens <= 1024 and 0 <= available_size <= 1024
    post: __return__ == (eviction_shortfall(num_tokens, available_size) == 0)
    """
    return available_size >= num_tokens
