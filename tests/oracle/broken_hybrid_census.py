"""A deliberately broken hybrid allocator whose own census is wrong (``SWA-19``): its
``verify_byte_accounting()``, read after every call, is not empty on a healthy state.
``test_oracle_broken_rule.py`` runs it (the broken-allocator rule)."""

from __future__ import annotations

from broken_hybrid import BrokenHybrid
from kvpool.impl import SWATokenToKVPoolAllocator


class CensusForgetsDeferredSwa(SWATokenToKVPoolAllocator):  # type: ignore[misc]
    """SWA-19: ``verify_byte_accounting()`` does not count the SWA pages an open free group
    defers: inside such a group it reports them as neither free nor owned (the state is
    right)."""

    def verify_byte_accounting(self) -> list[str]:
        problems = super().verify_byte_accounting()
        lost = self.swa_deferred_pages()
        return [*problems, f"swa: pages {lost} neither free nor owned"] if lost else problems


HYBRID_CENSUS_BROKEN = (BrokenHybrid(CensusForgetsDeferredSwa, (1, 4), ("SWA-19",)),)
