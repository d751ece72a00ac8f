"""Diagnostics of the hybrid allocator: the census over both pools and the mapping (``SWA-19``),
``check_invariants`` and ``debug_print``."""

from __future__ import annotations

from typing import Any

from kvpool.spec import hybrid_rules as hr
from kvpool.spec.census import describe_pages
from kvpool.spec.rules import FREE, OWNED, STAGED

from .checked import host_list
from .swa_pairs import PairTable


class HybridDiagnostics:
    """Mixin for :class:`~kvpool.impl.swa.SWATokenToKVPoolAllocator` (needs its two sides,
    ``_pairs``, the SWA group lists and ``_kvcache``)."""

    full_attn_allocator: Any
    swa_attn_allocator: Any
    _pairs: PairTable
    _kvcache: Any
    page_size: int
    free_group: Any
    swa_free_group: list[Any]
    swa_page_ids_group: list[Any]

    def swa_deferred_pages(self) -> list[int]:
        """SWA pages the open group releases: page ids as named, then ``free()`` pages once."""
        ps = self.page_size
        page_ids = [p for t in self.swa_page_ids_group for p in host_list(t)]
        peers = [s for t in self.swa_free_group for s in host_list(t)]
        return page_ids + sorted({s // ps for s in peers if s > 0})

    def verify_byte_accounting(self) -> list[str]:
        """Both sides' census (prefixed ``full:`` / ``swa:``) and the mapping invariants
        ``SWA-2..4``; empty when healthy. Reads everything on the host (syncs). O(pool)."""
        full, swa = self.full_attn_allocator, self.swa_attn_allocator
        problems = [f"full: {p}" for p in full.verify_byte_accounting()]
        problems += [f"swa: {p}" for p in swa.verify_byte_accounting()]
        problems += self._pairs.check_invariants()
        problems += hr.mapping_census(
            self._pairs.pairs(), page_size=self.page_size, full_status_of=_status(full),
            swa_status_of=_status(swa), swa_num_pages=swa.num_pages,
            swa_deferred=self.swa_deferred_pages())
        return problems

    def check_invariants(self) -> None:
        """Assert both sides' invariants and the census; dumps the state on failure."""
        self.full_attn_allocator.check_invariants()
        self.swa_attn_allocator.check_invariants()
        problems = self.verify_byte_accounting()
        if self.free_group is None and (self.swa_free_group or self.swa_page_ids_group):
            problems.append("GROUP-2: SWA pages deferred without an open group")
        assert not problems, "\n".join(problems) + "\n" + self.describe()

    def debug_print(self) -> str:
        """SGLang's one-line form."""
        return (f"#swa-available-size: {self.swa_attn_allocator.available_size()}, "
                f"#full-attn-available-size: {self.full_attn_allocator.available_size()}, ")

    def describe(self) -> str:
        """Both sides, the SWA side's deferred pages and the pairs."""
        pairs = " ".join(f"{f}>{s}" for f, s in self._pairs.pairs())
        return (f"full: {self.full_attn_allocator.debug_print()}\n"
                f"swa: {self.swa_attn_allocator.debug_print()}\n"
                f"  swa deferred: {describe_pages(self.swa_deferred_pages())}\n"
                f"  mapping: {pairs or '-'}")


def _status(side: Any) -> Any:
    """A page-status lookup from a side's free and staged lists (held = neither)."""
    status = [OWNED] * (side.num_pages + 1)
    for page in host_list(side.free_pages):
        status[page] = FREE
    for page in host_list(side.release_pages):
        status[page] = STAGED
    return status.__getitem__
