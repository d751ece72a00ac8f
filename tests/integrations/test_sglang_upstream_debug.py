# Adapted from SGLang's test/registered/unit/mem_cache/test_allocator_cpu.py
# (TestPagedAllocatorDebugModeCPU) and test/registered/unit/mem_cache/test_allocator_gpu.py
# (TestPagedAllocatorDebugModeGPU) (sgl-project/sglang, Copyright the SGLang Team, Apache
# License 2.0, http://www.apache.org/licenses/LICENSE-2.0). Assertions are SGLang's, unchanged.
# Adaptations, only to run on the CPU and against both allocators: each class runs on SGLang
# 0.5.23's PagedTokenToKVPoolAllocator and on kvpool's (``PAGED`` class attribute); the GPU
# class's tensors are made on "cpu" instead of "cuda" (its skipUnless(CUDA) dropped);
# unittest.TestCase instead of CustomTestCase; the CI registration calls are dropped.
"""SGLang's own debug-mode tests of its paged allocator (SGLANG_DEBUG_MEMORY_POOL=1), on SGLang
0.5.23 and on kvpool: kvpool passes every one, unchanged. (Three of them pass a ``last_loc`` on
page 0 of a fresh allocator, a page nobody was handed; kvpool's default path reads a
``last_loc`` only where the layout continues from it -- an extend's partial prefix page, a
decode that opens no page -- and none of the three does, so EXTEND-3 / DECODE-3 do not apply.
``checked=True`` still refuses them: test_sglang_debug.py.)"""

from __future__ import annotations

import os
from typing import Any
from unittest.mock import MagicMock, patch

import pytest
import torch
from sglang_upstream import load_runtime, variants

pytestmark = pytest.mark.peers


def _load() -> dict[str, dict[str, Any]]:
    """Load SGLang's runtime; each implementation's paged allocator class."""
    load_runtime()
    from kvpool.integrations.sglang import PagedTokenToKVPoolAllocator as KvpoolPaged
    from sglang.srt.mem_cache.allocator import PagedTokenToKVPoolAllocator as SglangPaged
    return {"sglang": {"PAGED": SglangPaged}, "kvpool": {"PAGED": KvpoolPaged}}


class _TestPagedAllocatorDebugModeCPU:
    PAGED: Any
    assertRaises: Any
    assertIsNotNone: Any

    def _debug_alloc(self, size: int = 64, page_size: int = 4, device: str = "cpu") -> Any:
        return self.PAGED(size=size, page_size=page_size, dtype=torch.int64, device=device,
                          kvcache=MagicMock(), need_sort=False)

    @patch.dict(os.environ, {"SGLANG_DEBUG_MEMORY_POOL": "1"})
    def test_alloc_unaligned_size_raises(self) -> None:
        a = self._debug_alloc()
        with self.assertRaises(AssertionError):
            a.alloc(3)

    @patch.dict(os.environ, {"SGLANG_DEBUG_MEMORY_POOL": "1"})
    def test_alloc_aligned_size_passes(self) -> None:
        a = self._debug_alloc()
        out = a.alloc(4)
        self.assertIsNotNone(out)

    @patch.dict(os.environ, {"SGLANG_DEBUG_MEMORY_POOL": "1"})
    def test_free_duplicate_pages_raises(self) -> None:
        a = self._debug_alloc()
        out = a.alloc(4)
        a.free(out)
        with self.assertRaises(AssertionError):
            a.free(out)


class _TestPagedAllocatorDebugModeGPU:
    PAGED: Any
    assertIsNotNone: Any
    assertEqual: Any

    def _debug_alloc(self, size: int = 256, page_size: int = 4, device: str = "cpu") -> Any:
        return self.PAGED(size=size, page_size=page_size, dtype=torch.int64, device=device,
                          kvcache=MagicMock(), need_sort=False)

    @patch.dict(os.environ, {"SGLANG_DEBUG_MEMORY_POOL": "1"})
    def test_alloc_extend_debug_unique_assert(self) -> None:
        a = self._debug_alloc()
        pre = torch.tensor([0], dtype=torch.int64, device="cpu")
        seq = torch.tensor([8], dtype=torch.int64, device="cpu")
        ll = torch.tensor([-1], dtype=torch.int64, device="cpu")
        out = a.alloc_extend(pre, pre.cpu(), seq, seq.cpu(), ll, 8)
        self.assertIsNotNone(out)
        self.assertEqual(len(torch.unique(out)), len(out))

    @patch.dict(os.environ, {"SGLANG_DEBUG_MEMORY_POOL": "1"})
    def test_alloc_extend_debug_mode_succeeds_when_last_loc_aligned_with_prefix(self) -> None:
        a = self._debug_alloc()
        pre = torch.tensor([4], dtype=torch.int64, device="cpu")
        seq = torch.tensor([8], dtype=torch.int64, device="cpu")
        ll = torch.tensor([3], dtype=torch.int64, device="cpu")
        out = a.alloc_extend(pre, pre.cpu(), seq, seq.cpu(), ll, 4)
        self.assertIsNotNone(out)

    @patch.dict(os.environ, {"SGLANG_DEBUG_MEMORY_POOL": "1"})
    def test_alloc_decode_debug_unique_assert(self) -> None:
        a = self._debug_alloc()
        seq = torch.tensor([5, 9], dtype=torch.int64, device="cpu")
        ll = torch.tensor([3, 7], dtype=torch.int64, device="cpu")
        out = a.alloc_decode(seq, seq.cpu(), ll)
        self.assertIsNotNone(out)
        self.assertEqual(len(torch.unique(out)), len(out))

    @patch.dict(os.environ, {"SGLANG_DEBUG_MEMORY_POOL": "1"})
    def test_alloc_decode_debug_mode_succeeds_when_last_loc_aligned_with_seq_len(self) -> None:
        a = self._debug_alloc()
        seq = torch.tensor([5], dtype=torch.int64, device="cpu")
        ll = torch.tensor([3], dtype=torch.int64, device="cpu")
        out = a.alloc_decode(seq, seq.cpu(), ll)
        self.assertIsNotNone(out)


globals().update(variants(
    __name__, (_TestPagedAllocatorDebugModeCPU, _TestPagedAllocatorDebugModeGPU), _load,
    {"sglang": {}, "kvpool": {}}))
