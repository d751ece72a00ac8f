"""kvpool.spec: the executable specification of SGLang's KV-cache allocator contract.

Pure Python, standard library only. Start with :class:`AllocatorModel` (the reference model in
SGLang's exact order), :class:`HybridModel` (the hybrid sliding-window allocator), :class:`UnifiedSWAModel` (the unified memory pools: one byte buffer), :mod:`kvpool.spec.contract` (acceptance of any correct allocator's choice)
and :mod:`kvpool.spec.layout` / :mod:`kvpool.spec.segments` (the index arithmetic). Clause IDs
(``ALLOC-3``, ``SEG-5``, ...) are defined in SPEC.md.
"""

import importlib as _importlib
import pkgutil as _pkgutil
import sys as _sys

if __name__ != "kvpool.spec":  # this folder imported under another name (``import spec``)
    try:
        _real = _importlib.import_module("kvpool.spec")
    except ImportError:  # no kvpool installed: this is the only copy, nothing to share
        pass
    else:  # serve kvpool.spec's modules under this name too: one ContractViolation class
        for _info in _pkgutil.iter_modules(_real.__path__):
            _module = _importlib.import_module(f"kvpool.spec.{_info.name}")
            _sys.modules[f"{__name__}.{_info.name}"] = _module
        _sys.modules[__name__] = _real

from .contract import (
    Divergence,
    accept_alloc,
    accept_decode,
    accept_extend,
    check_census,
)
from .errors import ContractViolation
from .hybrid import HybridModel, HybridResizeConfig, HybridTreeCache
from .layout import (
    ceil_div,
    decode_needs_page,
    extend_parts,
    extend_row,
    last_loc_aligned,
    merge_bound,
    num_new_pages,
    page_slots,
)
from .model import AllocatorModel, ResizeConfig, TreeCache
from .segments import rep_offsets, segment_pages, segments_pages, touched_pages, trim_boundary
from .unified import UnifiedSWAModel

__all__ = [
    "AllocatorModel",
    "ContractViolation",
    "Divergence",
    "HybridModel",
    "HybridResizeConfig",
    "HybridTreeCache",
    "ResizeConfig",
    "TreeCache",
    "UnifiedSWAModel",
    "accept_alloc",
    "accept_decode",
    "accept_extend",
    "ceil_div",
    "check_census",
    "decode_needs_page",
    "extend_parts",
    "extend_row",
    "last_loc_aligned",
    "merge_bound",
    "num_new_pages",
    "page_slots",
    "rep_offsets",
    "segment_pages",
    "segments_pages",
    "touched_pages",
    "trim_boundary",
]
