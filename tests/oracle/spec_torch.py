"""A torch adapter around the spec model: a correct allocator with SGLang's API.

Used as a target to test the oracle itself and as the base of the deliberately broken
allocators (``broken_allocators.py``). Every call converts tensors to lists, runs
``kvpool.spec.AllocatorModel`` and converts the result back to a fresh tensor, so it is correct by
construction, raises ``ContractViolation`` on caller errors (checked) and never aliases.
"""

from __future__ import annotations

from typing import Any

import torch
from kvpool.oracle.engine.capabilities import PAGED, TOKEN
from kvpool.spec import AllocatorModel, ResizeConfig


class SpecTorchAllocator:
    """SGLang's allocator API on top of the reference model (see the module docstring)."""

    def __init__(
        self, size: int, page_size: int, need_sort: bool, device: str = "cpu", *, paged: bool = True
    ) -> None:
        self.device = device
        self.page_size = page_size
        self.model = AllocatorModel(size, page_size, paged=paged, need_sort=need_sort)

    # -- conversion ------------------------------------------------------------------------
    def _out(self, slots: list[int] | None) -> torch.Tensor | None:
        return None if slots is None else torch.tensor(slots, dtype=torch.int64, device=self.device)

    @staticmethod
    def _in(t: Any) -> list[int]:
        return [int(v) for v in t.tolist()] if isinstance(t, torch.Tensor) else list(t)

    # -- allocation ------------------------------------------------------------------------
    def alloc(self, need_size: int) -> torch.Tensor | None:
        return self._out(self.model.alloc(need_size))

    def alloc_extend(
        self,
        prefix_lens: torch.Tensor,
        prefix_lens_cpu: torch.Tensor,
        seq_lens: torch.Tensor,
        seq_lens_cpu: torch.Tensor,
        last_loc: torch.Tensor,
        extend_num_tokens: int,
    ) -> torch.Tensor | None:
        return self._out(
            self.model.alloc_extend(
                self._in(prefix_lens_cpu),
                self._in(seq_lens_cpu),
                self._in(last_loc),
                extend_num_tokens,
            )
        )

    def alloc_decode(
        self, seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor
    ) -> torch.Tensor | None:
        return self._out(self.model.alloc_decode(self._in(seq_lens_cpu), self._in(last_loc)))

    # -- release ---------------------------------------------------------------------------
    def free(self, free_index: torch.Tensor) -> None:
        self.model.free(self._in(free_index))

    def free_full(self, free_index: torch.Tensor) -> None:
        self.free(free_index)

    def free_page_ids(self, page_ids: torch.Tensor) -> None:
        self.model.free_page_ids(self._in(page_ids))

    def free_segment(self, free_index: torch.Tensor, *, start_pos: int) -> None:
        self.free_segments([(free_index, start_pos)])

    def free_segments(self, segments: Any) -> None:
        self.model.free_segments([(self._in(idx), start) for idx, start in segments])

    def free_group_begin(self) -> None:
        self.model.free_group_begin()

    def free_group_end(self) -> None:
        self.model.free_group_end()

    def merge_and_sort_free(self) -> None:
        self.model.merge_and_sort_free()

    # -- lifecycle and queries ---------------------------------------------------------------
    def clear(self) -> None:
        self.model.clear()

    def resize(self, config: Any) -> None:
        self.model.resize(ResizeConfig(config.max_total_num_tokens))

    def translate_kv_indices_for_transfer(self, kv_indices: torch.Tensor) -> torch.Tensor:
        out = self._out(self.model.translate_kv_indices_for_transfer(self._in(kv_indices)))
        assert out is not None
        return out.to(kv_indices.dtype)  # SGLang's identity keeps the input's dtype

    def available_size(self) -> int:
        return int(self.model.available_size())

    def get_all_free_pages(self) -> torch.Tensor:
        out = self._out(self.model.get_all_free_pages())
        assert out is not None
        return out

    def evict_to_free_tokens(self, tree_cache: Any, num_tokens: int) -> None:
        self.model.evict_to_free_tokens(tree_cache, num_tokens)

    def check_decode_capacity(
        self, *, num_tokens: int, tree_cache: Any, requests: Any = None, spec_algorithm: Any = None
    ) -> bool:
        return bool(self.model.check_decode_capacity(num_tokens=num_tokens, tree_cache=tree_cache))

    def verify_byte_accounting(self) -> list[str]:
        return list(self.model.verify_byte_accounting())

    def debug_print(self) -> str:
        return str(self.model.debug_print())

    def check_invariants(self) -> None:
        self.model.check_invariants()


def spec_paged(
    *, size: int, page_size: int, need_sort: bool, device: str = "cpu"
) -> SpecTorchAllocator:
    """A paged allocator backed by the spec model (any page size)."""
    return SpecTorchAllocator(size, page_size, need_sort, device, paged=True)


def spec_token(
    *, size: int, page_size: int = 1, need_sort: bool, device: str = "cpu"
) -> SpecTorchAllocator:
    """A token allocator backed by the spec model (page size 1)."""
    return SpecTorchAllocator(size, 1, need_sort, device, paged=False)


spec_paged.kvpool_capabilities = PAGED  # type: ignore[attr-defined]
spec_token.kvpool_capabilities = TOKEN  # type: ignore[attr-defined]


def make_allocator(*, size: int, page_size: int, need_sort: bool, device: str = "cpu") -> Any:
    """A factory that declares no capabilities (as a user's own allocator would)."""
    return SpecTorchAllocator(size, page_size, need_sort, device, paged=True)
