"""Deliberately broken HiSparse allocators: one bug each, on kvpool's
``HiSparseTokenToKVPoolAllocator``, each with the one ``HSP-*`` clause the HiSparse family
reports it under at its default budget (``BROKEN_HISPARSE``; ``test_oracle_hisparse.py`` runs
them). Each has a module-level factory (its name in lower case) that a printed repro imports."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from kvpool.impl.hisparse import HiSparseTokenToKVPoolAllocator
from kvpool.oracle.engine.families import family
from kvpool.oracle.engine.runner import Result, run_config
from kvpool.oracle.engine.target import Config
from kvpool.oracle.families.hisparse.targets import FULL


class SizeIsDevice(HiSparseTokenToKVPoolAllocator):
    """``size`` reports the device side's slots, not ``size * ratio`` (HSP-1)."""

    @property
    def size(self) -> int:
        return int(self.hisparse_attn_allocator.size)


class CapacityLogicalOnly(HiSparseTokenToKVPoolAllocator):
    """``available_size()`` is the logical side's alone (HSP-2)."""

    def available_size(self) -> int:
        return int(self.logical_attn_allocator.available_size())


class FreeKeepsBinding(HiSparseTokenToKVPoolAllocator):
    """``free`` releases both sides but leaves the freed slots bound (HSP-3)."""

    def free(self, free_index: torch.Tensor) -> None:
        mapping = self.full_to_hisparse_device_index_mapping
        kept = mapping[free_index].clone()
        super().free(free_index)
        mapping[free_index] = kept


class AllocNoRollback(HiSparseTokenToKVPoolAllocator):
    """``alloc`` keeps the logical slots when the device side is short (HSP-4)."""

    def alloc(self, need_size: int) -> torch.Tensor | None:
        if 0 < need_size <= self.logical_attn_allocator.available_size() and \
                need_size > self.hisparse_attn_allocator.available_size():
            self.logical_attn_allocator.alloc(need_size)
            return None
        return super().alloc(need_size)


class ExtendChecksLogicalOnly(HiSparseTokenToKVPoolAllocator):
    """``alloc_extend`` checks the logical side's room only; a short device side fails after
    the logical slots are taken (HSP-5)."""

    def alloc_extend(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                     seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor, last_loc: torch.Tensor,
                     extend_num_tokens: int) -> torch.Tensor | None:
        device = self.hisparse_attn_allocator
        saved = device.available_size
        device.available_size = lambda: 1 << 30  # type: ignore[method-assign]
        try:
            return super().alloc_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                        last_loc, extend_num_tokens)
        finally:
            device.available_size = saved  # type: ignore[method-assign]


class LogicalOnlyBinds(HiSparseTokenToKVPoolAllocator):
    """``alloc_logical_only`` takes device slots too, as a prefill does (HSP-6)."""

    def alloc_logical_only(self, prefix_lens: torch.Tensor, prefix_lens_cpu: torch.Tensor,
                           seq_lens: torch.Tensor, seq_lens_cpu: torch.Tensor,
                           last_loc: torch.Tensor, extend_num_tokens: int) -> torch.Tensor | None:
        if int((prefix_lens_cpu % self.page_size).sum()) == 0:
            return super().alloc_extend(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                        last_loc, extend_num_tokens)
        return super().alloc_logical_only(prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                                          last_loc, extend_num_tokens)


class BufferKeepsSurplus(HiSparseTokenToKVPoolAllocator):
    """``alloc_device_buffer`` does not give the surplus device pages back (HSP-7)."""

    def free_hisparse_indices(self, buffer_indices: torch.Tensor, *,
                              _internal: bool = False) -> None:
        if not _internal:
            super().free_hisparse_indices(buffer_indices)


class FreeLogicalOnly(HiSparseTokenToKVPoolAllocator):
    """``free`` unbinds the slots but frees their logical pages only (HSP-8)."""

    def free(self, free_index: torch.Tensor) -> None:
        if free_index.numel():
            self._check_free(free_index)
            self.logical_attn_allocator.free(free_index)
            self.full_to_hisparse_device_index_mapping[free_index] = 0


class SinkFreed(HiSparseTokenToKVPoolAllocator):
    """``free_hisparse_indices`` does not skip the padding page's slots (HSP-9)."""

    def free_hisparse_indices(self, buffer_indices: torch.Tensor, *,
                              _internal: bool = False) -> None:
        if not _internal and bool((buffer_indices < self.page_size).any()):
            self.hisparse_attn_allocator.free(buffer_indices)
            return
        super().free_hisparse_indices(buffer_indices, _internal=_internal)


class LastLocShifted(HiSparseTokenToKVPoolAllocator):
    """``get_last_loc_hisparse_device`` reads the mapping entry before each location (HSP-10)."""

    def get_last_loc_hisparse_device(self, last_locs: torch.Tensor) -> torch.Tensor:
        return self.full_to_hisparse_device_index_mapping[last_locs - 1]


class ClearKeepsDevice(HiSparseTokenToKVPoolAllocator):
    """``clear`` makes the logical side whole but not the device side (HSP-11)."""

    def clear(self) -> None:
        device = getattr(self, "hisparse_attn_allocator", None)
        saved = device.clear if device is not None and self._cleared_once else None
        if device is not None and saved is not None:
            device.clear = lambda: None  # type: ignore[method-assign]
        try:
            super().clear()
        finally:
            if device is not None and saved is not None:
                device.clear = saved  # type: ignore[method-assign]
        self._cleared_once = True

    _cleared_once = False


@dataclass(frozen=True)
class BrokenHiSparse:
    """A broken HiSparse allocator, the clause the family reports it under (``clauses``, a
    1-tuple) and the clause its bug breaks (``cause``; the same for every one here)."""

    cls: type[Any]  # HiSparseTokenToKVPoolAllocator, or the DSV4 allocator
    clauses: tuple[str, ...]
    module: str = "broken_hisparse"
    cause: str = ""

    def __post_init__(self) -> None:
        if not self.cause:
            object.__setattr__(self, "cause", self.clauses[0])

    @property
    def name(self) -> str:
        return self.cls.__name__.lower()

    @property
    def factory(self) -> Callable[..., Any]:
        """The module-level factory ``<module>:<name>`` (importable for repro code)."""
        return getattr(importlib.import_module(self.module), self.name)  # type: ignore[no-any-return]

    @property
    def path(self) -> str:
        return f"{self.module}:{self.name}"

    def run(self, **budget: Any) -> Result:
        """The HiSparse family's run on this allocator, configuration by configuration as the
        command line runs them (its page sizes in order; need_sort off, then on), up to the first
        failure, at the family's default budget unless ``budget`` (``run_config``'s keywords)
        says otherwise. Returns that failing run, else the last one."""
        fam = family("hisparse")
        budget = {"max_examples": fam.default_examples, "step_count": fam.default_steps,
                  **budget}
        target = fam.target(self.factory)
        result: Result | None = None
        caps = getattr(self.factory, "kvpool_hisparse_capabilities", FULL)
        for page_size in caps.page_sizes:
            for need_sort in caps.need_sort:
                result = run_config(target, Config(page_size, need_sort), **budget)
                if result.failure is not None or result.error is not None:
                    return result
        assert result is not None
        return result

    def reported(self, **budget: Any) -> str | None:
        """The clause the run reports (None: it passed)."""
        result = self.run(**budget)
        assert result.error is None, result.error
        return result.failure.clause if result.failure is not None else None


BROKEN_HISPARSE = (
    BrokenHiSparse(SizeIsDevice, ("HSP-1",)),
    BrokenHiSparse(CapacityLogicalOnly, ("HSP-2",)),
    BrokenHiSparse(FreeKeepsBinding, ("HSP-3",)),
    BrokenHiSparse(AllocNoRollback, ("HSP-4",)),
    BrokenHiSparse(ExtendChecksLogicalOnly, ("HSP-5",)),
    BrokenHiSparse(LogicalOnlyBinds, ("HSP-6",)),
    BrokenHiSparse(BufferKeepsSurplus, ("HSP-7",)),
    BrokenHiSparse(FreeLogicalOnly, ("HSP-8",)),
    BrokenHiSparse(SinkFreed, ("HSP-9",)),
    BrokenHiSparse(LastLocShifted, ("HSP-10",)),
    BrokenHiSparse(ClearKeepsDevice, ("HSP-11",)),
)


def _factory(cls: type[HiSparseTokenToKVPoolAllocator]) -> Callable[..., Any]:
    def factory(*, size: int, page_size: int, need_sort: bool, ratio: int = 2,
                device: str = "cpu") -> Any:
        return cls(size, page_size, torch.float16, device, None, need_sort, ratio)

    factory.__name__ = factory.__qualname__ = cls.__name__.lower()
    factory.kvpool_hisparse_capabilities = FULL  # type: ignore[attr-defined]
    return factory


for _broken in BROKEN_HISPARSE:
    globals()[_broken.name] = _factory(_broken.cls)
