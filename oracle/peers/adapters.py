"""Adapters: allocators with other APIs mapped onto the contract, so the oracle can judge them.

vLLM 0.33.0's ``BlockPool`` (``vllm/v1/core/block_pool.py``) hands out ``KVCacheBlock`` objects:
``get_new_blocks(n)`` pops ``n`` blocks from the front of its free queue (``ValueError`` when
fewer are free), ``free_blocks(blocks)`` drops each block's reference count and prepends the
blocks whose count reached zero, ``get_num_free_blocks()`` counts the queue. Block 0 is its
null block, never handed out: exactly the contract's padding page. The adapter maps

- pages = blocks (``BlockPool(num_pages + 1)``, prefix caching off); slot ``s`` lies on block
  ``s // page_size``;
- ``alloc(n)``: None when ``n / ps`` blocks are not free (vLLM's scheduler asks
  ``get_num_free_blocks()`` before it allocates), else ``get_new_blocks`` and the blocks' slots;
- ``alloc_extend`` / ``alloc_decode``: the new pages of each request (``kvpool.spec.layout``, the
  row layout every engine keeps) from one ``get_new_blocks`` per request in batch order, after
  one capacity check for the whole batch (as vLLM's ``KVCacheManager.allocate_slots``);
- ``free(slots)``: the distinct blocks of the slots, in the order given, to ``free_blocks``;
- ``available_size()`` / ``get_all_free_pages()``: ``get_num_free_blocks() * ps`` and the free
  queue's block ids, front first.

What ``BlockPool`` does not have stays undeclared (free groups, segment frees, ``need_sort``,
``clear`` / ``resize``, capacity hooks, checked mode); its order is its own (contract order).
Known differences: ``kvpool.oracle.peers.divergences`` (entries for target ``vllm``).
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.spec.layout import extend_row, num_new_pages, page_slots

from ..engine.capabilities import PAGED
from .peer_import import load_vllm_block_pool


class VllmBlockPoolAllocator:
    """SGLang's allocator API over one vLLM ``BlockPool`` (see the module docstring).

    ``owned`` maps each block id handed out to its ``KVCacheBlock``: ``free`` needs the objects
    back, as vLLM's request-to-blocks map does.
    """

    def __init__(self, size: int, page_size: int, device: str = "cpu") -> None:
        self.page_size, self.device = page_size, device
        self.num_pages = size // page_size
        self.pool = load_vllm_block_pool()(
            self.num_pages + 1, enable_caching=False, hash_block_size=16
        )
        self.owned: dict[int, Any] = {}

    # -- conversion ---------------------------------------------------------------------------
    def _out(self, slots: list[int]) -> torch.Tensor:
        return torch.tensor(slots, dtype=torch.int64, device=self.device)

    def _take(self, num_pages: int) -> list[int]:
        blocks = self.pool.get_new_blocks(num_pages)
        for block in blocks:
            self.owned[block.block_id] = block
        return [block.block_id for block in blocks]

    # -- allocation ---------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        num_pages = need_size // self.page_size
        if num_pages > self.pool.get_num_free_blocks():
            return None
        return self._out(page_slots(self._take(num_pages), self.page_size))

    def _extend(self, prefix: list[int], seq: list[int], last: list[int]) -> torch.Tensor | None:
        ps = self.page_size
        needs = [num_new_pages(p, s, ps) for p, s in zip(prefix, seq)]
        if sum(needs) > self.pool.get_num_free_blocks():
            return None
        out: list[int] = []
        for p, s, loc, n in zip(prefix, seq, last, needs):
            out += extend_row(p, s, loc, self._take(n), ps)
        return self._out(out)

    def alloc_extend(
        self,
        prefix_lens: Any,
        prefix_lens_cpu: Any,
        seq_lens: Any,
        seq_lens_cpu: Any,
        last_loc: Any,
        extend_num_tokens: int,
    ) -> Any:
        return self._extend(prefix_lens_cpu.tolist(), seq_lens_cpu.tolist(), last_loc.tolist())

    def alloc_decode(self, seq_lens: Any, seq_lens_cpu: Any, last_loc: Any) -> Any:
        seq = seq_lens_cpu.tolist()
        return self._extend([s - 1 for s in seq], seq, last_loc.tolist())

    # -- release and queries ------------------------------------------------------------------
    def free(self, free_index: torch.Tensor) -> None:
        """The distinct blocks of the slots, in the order given, to ``free_blocks`` (whatever
        their state: a repeated free is vLLM's to handle)."""
        pages = dict.fromkeys(int(s) // self.page_size for s in free_index.tolist())
        for page in pages:
            self.owned.pop(page, None)
        self.pool.free_blocks([self.pool.blocks[p] for p in pages if 0 <= p <= self.num_pages])

    def available_size(self) -> int:
        return int(self.pool.get_num_free_blocks()) * self.page_size

    def get_all_free_pages(self) -> torch.Tensor:
        ids = [block.block_id for block in self.pool.free_block_queue.get_all_free_blocks()]
        return self._out(ids)

    def check_invariants(self) -> None:
        """Blocks handed out and blocks free partition ``1..num_pages``."""
        free = self.get_all_free_pages().tolist()
        assert sorted([*free, *self.owned]) == list(range(1, self.num_pages + 1)), (
            f"vLLM pool: free {sorted(free)}, handed out {sorted(self.owned)}"
        )


# What BlockPool has: alloc / free / counts and a free-queue census, any block size.
VLLM_BASE = PAGED.replace(
    page_sizes=(1, 4, 16),
    need_sort=(False,),
    groups=False,
    segments="none",
    page_ids=False,
    base_api=False,
    clear=False,
    resize=False,
    merge=False,
    capacity_hooks=False,
    capacity_context=False,
)
