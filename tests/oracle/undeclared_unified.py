"""A unified factory that declares no capabilities: SGLang 0.5.23's composite
``UnifiedSWATokenToKVPoolAllocator`` wrapped as a user would wrap it (no
``kvpool_unified_capabilities``), so the oracle judges it by every rule's default."""

from __future__ import annotations

from typing import Any

from kvpool.oracle.families.unified.peer import build_unified_swa


def make(*, total_bytes: int, page_size: int, lazy: bool, device: str = "cpu",
         need_sort: bool = False) -> Any:
    return build_unified_swa(total_bytes=total_bytes, page_size=page_size, lazy=lazy)
