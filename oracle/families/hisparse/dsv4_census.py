"""What the oracle compares on a DeepSeek V4 HiSparse target (``HSP-12..16``) after every
call, the spec's side of it, and the sizes a DSV4 pair is built with."""

from __future__ import annotations

from typing import Any

from kvpool.spec.hisparse_dsv4 import HiSparseDSV4Model

# the census fields, each with the clause that a difference in it breaks (None: the clause
# that decided the call, ``model.rule``)
FIELDS = ("logical full free pages", "logical SWA free pages", "device free pages",
          "compressed mapping", "available_size()", "full_available_size()",
          "swa_available_size()")
CLAUSES: tuple[str | None, ...] = (None, None, None, None, "HSP-13", "HSP-13", "HSP-13")


def census(x: Any) -> tuple[Any, ...]:
    """What the oracle compares after every call, read from a DSV4 target."""
    logical = x.logical_attn_allocator
    return (logical.full_attn_allocator.get_all_free_pages().tolist(),
            logical.swa_attn_allocator.get_all_free_pages().tolist(),
            x.hisparse_attn_allocator.get_all_free_pages().tolist(),
            x.full_to_hisparse_device_index_mapping.tolist(), int(x.available_size()),
            int(x.full_available_size()), int(x.swa_available_size()))


def spec_census(m: HiSparseDSV4Model) -> tuple[Any, ...]:
    """The spec's side of :func:`census`."""
    return (m.logical.full.get_all_free_pages(), m.logical.swa.get_all_free_pages(),
            m.device.get_all_free_pages(), m.mapping_list(), m.available_size(),
            m.full_available_size(), m.swa_available_size())


def dsv4_sizes(page_size: int, hps: int, pages: int, swa_pages: int, device_pages: int
               ) -> dict[str, int]:
    """A DSV4 pair's factory sizes: ``pages`` full and ``swa_pages`` SWA logical pages,
    ``device_pages`` C4 device pages of ``hps``, and a compressed mapping long enough for every
    full slot (``c4_logical_size = (size + page_size) // 4``)."""
    size = page_size * pages
    return {"size": size, "size_swa": page_size * swa_pages, "size_hisparse": hps * device_pages,
            "hisparse_page_size": hps, "c4_logical_size": (size + page_size) // 4}


def census_asserts(m: HiSparseDSV4Model, clause: str) -> list[str]:
    """The spec's census as repro asserts on the target ``a``."""
    reads = ("a.logical_attn_allocator.full_attn_allocator.get_all_free_pages().tolist()",
             "a.logical_attn_allocator.swa_attn_allocator.get_all_free_pages().tolist()",
             "a.hisparse_attn_allocator.get_all_free_pages().tolist()",
             "a.full_to_hisparse_device_index_mapping.tolist()", "a.available_size()",
             "a.full_available_size()", "a.swa_available_size()")
    return [f"assert {read} == {want!r}  # [{clause}]"
            for read, want in zip(reads, spec_census(m))]
