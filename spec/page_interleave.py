"""Page interleave across ranks: the arithmetic (``PINTER-*``, SPEC.md section 19).

SGLang's ``PageInterleavePoolAllocator`` shards the KV cache by logical page over a group of
``N`` ranks: logical page ``l`` is owned by rank ``l % N`` (its *class*) and is that rank's
physical page ``l // N``. A chain (one request's pages in position order) with rotation base
``b`` puts its position-page ``P`` on class ``(b + P) % N``: the owners cycle, so the per-rank
page counts of one chain differ by at most one (the balance bound, ``PINTER-7``). The functions
here are pure and standard library only; :mod:`kvpool.spec.page_interleave_model` keeps the
state. Their PEP 316 contracts are evaluated at run time by the spec tests and searched by
CrossHair (``.ci/crosshair``); ``tests/formal/test_formal_z3_page_interleave.py`` proves the
class, floor and phase lemmas for every size with Z3.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import ContractViolation


def page_class(page: int, shard_size: int) -> int:
    """The class (owner rank) of logical page ``page``: ``page % shard_size`` (``PINTER-1``).

    pre: 0 <= page <= 4096 and 2 <= shard_size <= 16
    post: 0 <= __return__ < shard_size
    post: (page - __return__) % shard_size == 0
    """
    return page % shard_size


def physical_page(page: int, shard_size: int) -> int:
    """The owner rank's local (physical) page of logical page ``page``: ``page // shard_size``
    (``PINTER-1``).

    pre: 0 <= page <= 4096 and 2 <= shard_size <= 16
    post: __return__ * shard_size + page_class(page, shard_size) == page
    """
    return page // shard_size


def logical_page(rank: int, local_page: int, shard_size: int) -> int:
    """The logical page that is rank ``rank``'s physical page ``local_page`` (the inverse of
    :func:`page_class` and :func:`physical_page`).

    pre: 2 <= shard_size <= 16 and 0 <= rank < shard_size and 0 <= local_page <= 256
    post: page_class(__return__, shard_size) == rank
    post: physical_page(__return__, shard_size) == local_page
    """
    return local_page * shard_size + rank


def chain_classes(start_class: int, num_pages: int, shard_size: int) -> list[int]:
    """The classes of a cyclic run of ``num_pages`` pages from ``start_class``: position-page
    ``j`` draws class ``(start_class + j) % shard_size`` (``PINTER-5``).

    pre: 2 <= shard_size <= 8 and 0 <= start_class < shard_size and 0 <= num_pages <= 24
    post: len(__return__) == num_pages
    post: all(0 <= c < shard_size for c in __return__)
    """
    return [(start_class + j) % shard_size for j in range(num_pages)]


def class_counts(start_class: int, num_pages: int, shard_size: int) -> list[int]:
    """Pages drawn from each class by a cyclic run of ``num_pages`` pages from ``start_class``
    (SGLang's closed form): ``num_pages // N`` each, plus one for the ``num_pages % N`` classes
    that follow ``start_class`` cyclically. Their spread is at most one (``PINTER-7``).

    pre: 2 <= shard_size <= 8 and 0 <= start_class < shard_size and 0 <= num_pages <= 64
    post: sum(__return__) == num_pages
    post: max(__return__) - min(__return__) <= 1
    post: len(__return__) == shard_size
    """
    return [num_pages // shard_size
            + (1 if (c - start_class) % shard_size < num_pages % shard_size else 0)
            for c in range(shard_size)]


def start_class(rotation_base: int, prefix_pages: int, shard_size: int) -> int:
    """The class of a chain's first new page: ``(rotation_base + prefix_pages) % N``, the phase
    an extension continues from (``PINTER-5``).

    pre: 2 <= shard_size <= 16 and -64 <= rotation_base <= 64 and 0 <= prefix_pages <= 256
    post: 0 <= __return__ < shard_size
    post: __return__ == (rotation_base % shard_size + prefix_pages) % shard_size
    """
    return (rotation_base + prefix_pages) % shard_size


def least_full_class(counts: Sequence[int]) -> int:
    """The rotation base of a new chain: the class with the most free pages, ties broken by
    the lowest class id (``PINTER-4``).

    pre: 2 <= len(counts) <= 8
    post: counts[__return__] == max(counts)
    post: all(counts[r] < max(counts) for r in range(__return__))
    """
    best = 0
    for r in range(1, len(counts)):
        if counts[r] > counts[best]:
            best = r
    return best


def min_class_floor(counts: Sequence[int], page_size: int) -> int:
    """``available_size()``: ``N * page_size * min(counts)``, the min-class capacity floor
    (``PINTER-3``); never above the aggregate ``page_size * sum(counts)``.

    pre: 2 <= len(counts) <= 8 and min(counts) >= 0 and 1 <= page_size <= 64
    post: 0 <= __return__ <= page_size * sum(counts)
    post: __return__ % (len(counts) * page_size) == 0
    """
    return len(counts) * page_size * min(counts)


def new_pages_of(prefix_len: int, seq_len: int, page_size: int) -> int:
    """The pages an extension from ``prefix_len`` to ``seq_len`` tokens opens:
    ``ceil(seq_len / ps) - prefix_len / ps``. Raises ContractViolation (``PINTER-11``) for a
    prefix that is not page-aligned or an extension that opens no page.

    pre: 0 <= prefix_len <= 256 and 0 <= seq_len <= 256 and 1 <= page_size <= 16
    post: __return__ >= 1
    raises: ContractViolation
    """
    if prefix_len % page_size:
        raise ContractViolation("PINTER-11", f"prefix_len {prefix_len} is not page-aligned "
                                             f"(page size {page_size})")
    opened = -(-seq_len // page_size) - prefix_len // page_size
    if opened <= 0:
        raise ContractViolation("PINTER-11", f"an extension from {prefix_len} to {seq_len} "
                                             "tokens opens no page")
    return opened
