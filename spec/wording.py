"""How a message counts things: a number and the noun (or noun and verb) that agree with it.

Every message of the specification, the allocators and the oracle that prints a count with a
noun writes it with :func:`counted` (``1 page was needed``, ``3 pages were needed``).
"""

from __future__ import annotations


def noun(count: int, singular: str, plural: str | None = None) -> str:
    """``singular`` when ``count`` is 1, else ``plural`` (by default ``singular + "s"``)."""
    return singular if count == 1 else plural if plural is not None else singular + "s"


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``count`` followed by the words that agree with it: ``counted(1, "page")`` is
    ``"1 page"``, ``counted(3, "page was", "pages were")`` is ``"3 pages were"``."""
    return f"{count} {noun(count, singular, plural)}"
