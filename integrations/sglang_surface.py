"""Which attributes SGLang's code reads on its KV allocator, found in its sources.

:func:`attributes_read` parses every module under a directory (``sglang/srt``) and collects the
``X`` of ``<alias>.X`` where the alias is ``token_to_kv_pool_allocator`` -- a parameter or local
of that name, any ``<expr>.token_to_kv_pool_allocator``, or a local name assigned from one in the
same function. Nothing is imported. :data:`COMPOSITE_ONLY` lists the names read only on SGLang's
composite pools (SWA, HiSparse, Mamba, DeepSeek-V4, page-interleaved), behind type checks: SGLang's
own single-pool allocators lack them too. :data:`SGLANG_INTERNAL` lists the public attributes of
SGLang's own paged allocator that are its internal state.
"""

from __future__ import annotations

import ast
import os
from typing import Any

__all__ = ["ALLOCATOR_NAME", "COMPOSITE_ONLY", "HYBRID_ALIASES", "SGLANG_INTERNAL",
           "attributes_read", "unserved_attributes", "unserved_hybrid_attributes"]

ALLOCATOR_NAME = "token_to_kv_pool_allocator"

# The names under which SGLang's code holds a hybrid (SWA) allocator: the scheduler's own, the
# prefill budget's and the radix caches' ``allocator``, the draft worker's ``swa_allocator`` and
# the HiSparse wrapper's inner allocator. ``allocator`` also names other allocators, so a scan
# with these aliases is filtered to the names SGLang's hybrid allocator has.
HYBRID_ALIASES: frozenset[str] = frozenset({
    ALLOCATOR_NAME, "allocator", "swa_allocator", "_swa_allocator", "logical_attn_allocator",
})

COMPOSITE_ONLY: frozenset[str] = frozenset({
    "full_available_size", "swa_attn_allocator", "translate_swa_indices_for_transfer",
    "translate_loc_from_full_to_swa", "swa_available_size", "hisparse_attn_allocator",
    "free_hisparse_indices", "logical_attn_allocator", "get_last_loc_compressed",
    "full_to_hisparse_device_index_mapping", "flush_opportunistic",
    "swa_capacity_and_available", "size_swa", "shard_spec", "set_host_transfer_move_gate",
    "set_disagg_move_gate", "prewarm_compaction", "mamba_slot_full_token_cost",
    "mamba_allocator", "hisparse_kvcache", "free_swa_segment", "free_hisparse",
    "ensure_c128_capacity", "configure_spec_scratch", "compress_ratio", "alloc_device_buffer",
    "full_attn_allocator", "c128_num_pages_needed", "aggregate_free_size",
    "alloc_logical_only", "class_free_page_counts", "clear_full_to_swa_mapping",
    "draft_virtual_id_space", "full_to_swa_index_mapping", "full_v2p_page_table",
    "reclaim_for_prealloc", "set_full_to_swa_mapping", "set_inflight_forward",
    "set_latest_forward_done_event", "shard_size", "swa_v2p_page_table", "translate_kv_loc",
    "translate_write_loc", "unified_buffer",
})


# Public attributes of SGLang's own PagedTokenToKVPoolAllocator that are its internal state (its
# staging list and group buffer, its kernel switch): read by no SGLang code outside the class,
# kvpool keeps the same state in its own form.
SGLANG_INTERNAL: frozenset[str] = frozenset({
    "staged_pages", "num_staged_pages", "free_page_ids_group", "use_triton_kernels",
})


def _is_allocator_expr(node: ast.AST, aliases: set[str], names: frozenset[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in aliases
    return isinstance(node, ast.Attribute) and node.attr in names


def _scan_scope(body: ast.AST, found: dict[str, list[str]], where: str,
                names: frozenset[str]) -> None:
    aliases = set(names)
    for node in ast.walk(body):
        if isinstance(node, ast.Assign) and _is_allocator_expr(node.value, aliases, names):
            aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(body):
        if (isinstance(node, ast.Attribute) and _is_allocator_expr(node.value, aliases, names)
                and not node.attr.startswith("__")):
            found.setdefault(node.attr, []).append(f"{where}:{node.lineno}")


def attributes_read(root: str, names: frozenset[str] = frozenset({ALLOCATOR_NAME})
                    ) -> dict[str, list[str]]:
    """``{attribute: ["path:line", ...]}`` for every attribute read under ``root`` on an
    allocator held under one of ``names`` (default: ``token_to_kv_pool_allocator``; pass
    :data:`HYBRID_ALIASES` for the hybrid allocator).

    Unparsable files are skipped. Paths are relative to ``root``.
    """
    found: dict[str, list[str]] = {}
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                if not any(name in text for name in names):
                    continue  # no alias can be bound without a name
                tree = ast.parse(text)
            except (SyntaxError, UnicodeDecodeError):
                continue
            where = os.path.relpath(path, root)
            scopes: list[ast.AST] = [n for n in ast.walk(tree)
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for scope in scopes or [tree]:
                _scan_scope(scope, found, where, names)
    return {k: sorted(set(v)) for k, v in found.items()}


def unserved_attributes(reads: dict[str, list[str]], sglang_allocator: Any,
                        candidate: Any) -> list[str]:
    """What ``candidate`` fails to serve that ``sglang_allocator`` (SGLang's own, same kind)
    serves: every attribute SGLang reads (``reads``, from :func:`attributes_read`) and every
    public attribute of SGLang's allocator less :data:`SGLANG_INTERNAL`, present and of the same
    kind (method or value); and every read name SGLang's allocator lacks must be in
    :data:`COMPOSITE_ONLY`. Empty when ``candidate`` is a drop-in."""
    problems = [f"{name}: read at {where[0]} but not a known composite-only attribute"
                for name, where in sorted(reads.items())
                if not hasattr(sglang_allocator, name) and name not in COMPOSITE_ONLY]
    problems += [f"{name}: SGLang internal state, but read at {reads[name][0]}"
                 for name in sorted(SGLANG_INTERNAL & set(reads))]
    wanted = {n for n in reads if hasattr(sglang_allocator, n)}
    wanted |= {n for n in dir(sglang_allocator) if not n.startswith("_")} - SGLANG_INTERNAL
    for name in sorted(wanted):
        if not hasattr(candidate, name):
            problems.append(f"{name}: missing")
        elif callable(getattr(sglang_allocator, name)) != callable(getattr(candidate, name)):
            problems.append(f"{name}: a method on one side only")
    return problems


def unserved_hybrid_attributes(reads: dict[str, list[str]], sglang_allocator: Any,
                               candidate: Any) -> list[str]:
    """:func:`unserved_attributes` for the hybrid allocator: ``reads`` (a scan with
    :data:`HYBRID_ALIASES`) is restricted to the names SGLang's own hybrid allocator has, since
    those aliases also hold other allocators. Empty when ``candidate`` is a drop-in."""
    mine = {name: where for name, where in reads.items() if hasattr(sglang_allocator, name)}
    return unserved_attributes(mine, sglang_allocator, candidate)
