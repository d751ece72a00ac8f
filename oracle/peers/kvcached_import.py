"""Import kvcached 0.1.6's SGLang allocators on a CPU-only machine, from its unpacked sdist.

PyPI has only an sdist for kvcached 0.1.6, whose build needs a CUDA/HIP toolchain. Its Python
layer (``kvcached.kv_cache_manager.KVCacheManager`` and the SGLang-facing
``ElasticTokenToKVPoolAllocator`` / ``ElasticPagedTokenToKVPoolAllocator`` of
``kvcached/integration/sglang/patches.py``) runs on a CPU when the native module is replaced,
as kvcached's own CPU test suite does. :func:`load_kvcached_allocators`:

1. finds the source: ``$KVPOOL_KVCACHED_SRC`` (the unpacked ``kvcached-0.1.6`` folder, the one
   holding ``kvcached/``), else ``~/.cache/kvpool/kvcached-0.1.6``; raises
   :class:`~kvpool.oracle.peers.peer_import.PeerUnavailable` when neither exists;
2. loads SGLang 0.5.23's allocator module through :mod:`kvpool.oracle.peers.peer_import`;
3. puts the placeholder ``kvcached.vmm_ops`` into ``sys.modules``
   (:class:`PlaceholderPageAllocator`, :class:`PlaceholderInternalPage`). What it does: the
   page bookkeeping of ``csrc/page_allocator.cpp`` is kept (a FIFO list of free physical page
   ids: ``alloc_page`` takes the front, ``free_pages`` appends, ``reset_free_page_order``
   sorts; a page's blocks are ``get_block_range`` of its id, handed out from the front of its
   free list and returned to the back, as ``InternalPage``); mapping does nothing (no KV
   tensors exist: ``kv_tensors_created`` answers True, map/unmap are no-ops); the physical page
   count is constant (``get_avail_physical_pages`` is the virtual count, no
   ``cudaMemGetInfo``); no prealloc thread, no resize target (``resize`` refuses), no IPC, no
   shared-memory segment; one block per physical page (see ``BLOCKS_PER_PHYSICAL_PAGE``);
4. relaxes the device check (``patches._is_supported_gpu_device`` accepts any device) and
   injects the two Elastic classes into the allocator module with ``ElasticAllocatorPatch``.

:func:`new_manager` builds the ``KVCacheManager`` that an Elastic allocator reads through
``kvcache.kvcached_allocator``, sized as SGLang's integration does (``size // page_size + 1``
blocks, block 0 reserved as the null block), after its post-init thread has reserved the null
block (``available_size()`` does not wait for it). kvcached's log is set to ERROR (it logs every
allocation and every shortage).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import types
from collections import deque
from pathlib import Path
from typing import Any

from .peer_import import PeerNotInstalled, PeerUnavailable, classify, load_sglang_allocators

ENV_VAR = "KVPOOL_KVCACHED_SRC"
CACHE_DIR = Path.home() / ".cache" / "kvpool" / "kvcached-0.1.6"
# One block per physical page: the C++ PageAllocator counts whole physical pages
# (mem_size // page_size), so with several blocks per page a pool of size + 1 blocks that is not a
# multiple of it starts with fewer than size free tokens (up to blocks-per-page - 1 lost); one
# block per page keeps available_size() == size, which the contract's INV-4 requires.
BLOCKS_PER_PHYSICAL_PAGE = 1

_lock = threading.Lock()
_cached: types.SimpleNamespace | None = None


def source_dir() -> Path | None:
    """The unpacked sdist folder (holding ``kvcached/``), or None when there is none."""
    for candidate in (os.environ.get(ENV_VAR), str(CACHE_DIR)):
        if candidate and (Path(candidate) / "kvcached" / "kv_cache_manager.py").is_file():
            return Path(candidate)
    return None


class PlaceholderInternalPage:
    """``InternalPage`` of ``csrc/page_allocator.cpp``: one physical page's block free list."""

    def __init__(self, page_id: int, page_size: int) -> None:
        self.page_id, self.page_size = page_id, page_size
        self.free_list: list[int] = []
        self.num_kv_blocks = 0

    @staticmethod
    def get_block_range(page_id: int, page_size: int, block_mem_size: int) -> tuple[int, int]:
        start = (page_id * page_size + block_mem_size - 1) // block_mem_size
        return start, ((page_id + 1) * page_size) // block_mem_size

    @staticmethod
    def get_num_blocks(page_size: int, block_mem_size: int) -> int:
        return page_size // block_mem_size

    def init(self, block_mem_size: int) -> None:
        start, end = self.get_block_range(self.page_id, self.page_size, block_mem_size)
        self.free_list, self.num_kv_blocks = list(range(start, end)), end - start

    def alloc(self, num_blocks: int) -> list[int]:
        if len(self.free_list) < num_blocks:
            raise RuntimeError("Not enough free blocks in page")
        out, self.free_list = self.free_list[:num_blocks], self.free_list[num_blocks:]
        return out

    def free_batch(self, block_ids: list[int]) -> None:
        self.free_list += block_ids

    def empty(self) -> bool:
        return len(self.free_list) == self.num_kv_blocks

    def full(self) -> bool:
        return not self.free_list

    def num_free_blocks(self) -> int:
        return len(self.free_list)

    def check_invariants(self) -> None:
        """No block twice in the free list, never more than the page holds."""
        assert len(set(self.free_list)) == len(self.free_list) <= self.num_kv_blocks


class PlaceholderPageAllocator:
    """``PageAllocator`` with its page bookkeeping and without CUDA (see the module docstring)."""

    def __init__(self, num_layers: int, mem_size: int, page_size: int, world_size: int, **_: Any):
        self.page_size = page_size
        self.num_pages = mem_size // page_size
        self.free_list: deque[int] = deque(range(self.num_pages))

    def alloc_page(self) -> PlaceholderInternalPage:
        if not self.free_list:
            raise RuntimeError("No free pages left")
        return PlaceholderInternalPage(self.free_list.popleft(), self.page_size)

    def free_pages(self, page_ids: list[int]) -> None:
        self.free_list.extend(page_ids)

    def group_indices_by_page(
        self, indices: list[int], block_mem_size: int
    ) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for idx in indices:
            out.setdefault(idx * block_mem_size // self.page_size, []).append(idx)
        return out

    def get_num_free_pages(self) -> int:
        return len(self.free_list)

    def get_avail_physical_pages(self) -> int:
        return self.num_pages

    def get_num_inuse_pages(self) -> int:
        return self.num_pages - len(self.free_list)

    def get_num_reserved_pages(self) -> int:
        return 0

    def get_resize_target(self) -> int:
        return 0

    def reset_free_page_order(self) -> None:
        self.free_list = deque(sorted(self.free_list))

    def resize(self, new_mem_size: int) -> bool:
        return False

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    set_use_worker_ipc = start_prealloc_thread = stop_prealloc_thread = trim = _nothing
    set_broadcast_map_callback = set_broadcast_unmap_callback = _nothing

    def release_shared_segment(self) -> bool:
        return True

    def check_invariants(self) -> None:
        """Free page ids are distinct and in range."""
        assert len(set(self.free_list)) == len(self.free_list)
        assert all(0 <= p < self.num_pages for p in self.free_list)


def _placeholder_vmm_ops() -> types.ModuleType:
    module = types.ModuleType("kvcached.vmm_ops")
    module.PageAllocator = PlaceholderPageAllocator  # type: ignore[attr-defined]
    module.InternalPage = PlaceholderInternalPage  # type: ignore[attr-defined]
    module.kv_tensors_created = lambda *a, **k: True  # type: ignore[attr-defined]
    for name in ("init_kvcached", "shutdown_kvcached", "create_kv_tensors",
                 "map_to_kv_tensors", "unmap_from_kv_tensors"):
        setattr(module, name, lambda *a, **k: None)
    return module


def free_blocks(manager: Any) -> list[int]:
    """The blocks ``manager`` would hand out: reserved ones, those free in its mapped pages,
    then those of its unmapped physical pages (in the placeholder's free-page order)."""
    out = list(manager.reserved_blocks)
    for page in (*manager.avail_pages.values(), *manager.full_pages.values()):
        out += page.free_list
    for page_id in manager.page_allocator.free_list:
        start, end = PlaceholderInternalPage.get_block_range(
            page_id, manager.page_size, manager.block_mem_size
        )
        out += [b for b in range(start, end) if b < manager.num_blocks]
    return out


def _with_census(cls: type) -> type:
    """``cls`` with a free census: the Elastic classes keep SGLang's (always empty)
    ``free_pages`` tensor and answer ``get_all_free_pages()`` from it, so the oracle reads the
    census from the ``KVCacheManager`` instead (:func:`free_blocks`)."""
    import torch

    def get_all_free_pages(self: Any) -> torch.Tensor:
        ids = free_blocks(self.kvcached_allocator)
        return torch.tensor(ids, dtype=torch.int64, device=self.device)

    def check_invariants(self: Any) -> None:
        """The placeholder's pages are consistent; no block is free twice."""
        manager = self.kvcached_allocator
        manager.page_allocator.check_invariants()
        for page in (*manager.avail_pages.values(), *manager.full_pages.values()):
            page.check_invariants()
        ids = free_blocks(manager)
        assert len(set(ids)) == len(ids), f"kvcached: a block is free twice in {sorted(ids)}"

    body = {"get_all_free_pages": get_all_free_pages, "check_invariants": check_invariants}
    return type(cls.__name__, (cls,), body)


def load_kvcached_allocators() -> types.SimpleNamespace:
    """``token``, ``paged`` (the Elastic classes) and ``manager`` (``KVCacheManager``); cached.

    Raises :class:`PeerUnavailable` when the source or SGLang 0.5.23 is missing.
    """
    global _cached
    with _lock:
        if _cached is not None:
            return _cached
        src = source_dir()
        if src is None:
            raise PeerNotInstalled(
                f"kvcached 0.1.6 source not found: set {ENV_VAR} to the unpacked sdist "
                f"(pip download --no-deps kvcached==0.1.6) or unpack it into {CACHE_DIR}"
            )
        alloc_mod = load_sglang_allocators()
        if str(src) not in sys.path:
            sys.path.insert(0, str(src))
        try:
            sys.modules["kvcached.vmm_ops"] = _placeholder_vmm_ops()
            import kvcached  # noqa: F401
            from kvcached.integration.sglang import patches
            from kvcached.kv_cache_manager import KVCacheManager
        except ImportError as err:
            raise classify(f"kvcached 0.1.6 does not import: {err}", err) from err
        logging.getLogger("kvcached").setLevel(logging.ERROR)
        patches._is_supported_gpu_device = lambda device: True
        patch = patches.ElasticAllocatorPatch()
        if not (patch.inject_elastic_allocator(alloc_mod)
                and patch.inject_elastic_paged_allocator(alloc_mod)):
            raise PeerUnavailable("kvcached 0.1.6: the Elastic allocators were not injected")
        _cached = types.SimpleNamespace(
            token=_with_census(alloc_mod.ElasticTokenToKVPoolAllocator),
            paged=_with_census(alloc_mod.ElasticPagedTokenToKVPoolAllocator),
            manager=KVCacheManager,
        )
        return _cached


def new_manager(size: int, page_size: int) -> Any:
    """A ``KVCacheManager`` for ``size`` tokens in pages of ``page_size`` (null block 0).

    Raises :class:`~kvpool.oracle.peers.peer_import.PeerNotInstalled` (SGLang or kvcached's source
    absent) or :class:`~kvpool.oracle.peers.peer_import.PeerUnavailable` before importing kvcached.
    """
    manager_class = load_kvcached_allocators().manager  # raises PeerNotInstalled first
    from kvcached.utils import PAGE_SIZE

    cell_size = PAGE_SIZE // (BLOCKS_PER_PHYSICAL_PAGE * page_size)
    manager = manager_class(
        size // page_size + 1, page_size, cell_size, 1, reserve_null_block=True
    )
    manager._wait_post_init()  # its thread reserves the null block: finish before any call
    return manager
