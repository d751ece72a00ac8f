"""The one exception type of the specification: a caller broke a rule of the contract.

Every rule has a stable clause ID (``FREE-3``, ``EXTEND-3``, ...; SPEC.md lists them all).
A rejected call raises :class:`ContractViolation` naming the clause, and leaves the allocator
exactly as it was (clause ``ERR-1``).
"""

from __future__ import annotations


class ContractViolation(ValueError):
    """A call that breaks a caller-side rule of the allocator contract (``ERR-1``).

    Raised before anything changes: a rejected call leaves the allocator as it was.

    Attributes:
        clause: the stable clause ID of the violated rule, e.g. ``"FREE-3"``.
        detail: what exactly was wrong, in words.

    The message reads ``"[FREE-3] double free: page 5 is already free"``. It subclasses
    ``ValueError`` so that generic callers that catch bad arguments still catch it.
    """

    def __init__(self, clause: str, detail: str) -> None:
        super().__init__(f"[{clause}] {detail}")
        self.clause = clause
        self.detail = detail

