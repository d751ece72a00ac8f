"""A contract-order repro's other side: the spec model run beside the allocator in the repro.

In contract order a correct allocator may hand out other pages than the recorded run's, so a
repro must not pin them. The repro (``engine.repro.to_pytest``) keeps ``spec``, a
:class:`kvpool.spec.AllocatorModel` that adopts the allocator's choices, and ``S``, the map from
each slot of the recorded run to the slot this allocator chose (``m(slots)``, ``mp(page_ids)``
translate the recorded arguments). After every call it asserts the contract's property through
:mod:`kvpool.spec.contract`: an allocation is accepted (``accept_alloc`` / ``accept_extend`` /
``accept_decode``: distinct pages that were free, the row layout, None iff short) and the free
census equals the spec's (``check_census``: pages freed once, as many as the spec's). Each raises
``Divergence`` naming the clause broken.
"""

from __future__ import annotations

from typing import Any

from ...engine.trace import Trace, TraceStep

PRELUDE = [
    "from kvpool.spec import AllocatorModel",
    "from kvpool.spec.census import decode_capacity_ok",
    "from kvpool.spec.contract import accept_alloc, accept_decode, accept_extend, check_census",
]

HELPERS = [
    "S = {}  # a slot of the recorded run -> the slot this allocator chose (contract order)",
    "",
    "def m(slots):  # a slot no call handed out maps by its page (a row shrunk under it)",
    "    out = []",
    "    for s in slots:",
    "        k = s if s in S else next((k for k in S if k // PAGE_SIZE == s // PAGE_SIZE), s)",
    "        out.append(S.get(k, k) - k + s)",
    "    return out",
    "",
    "def mp(page_ids):",
    "    return [S.get(p * PAGE_SIZE, p * PAGE_SIZE) // PAGE_SIZE for p in page_ids]",
    "",
    "def got(result):",
    "    return None if result is None else [int(s) for s in result.tolist()]",
    "",
    "def census():  # INV-1/2/4: the free census is the spec's (each page free once)",
    "    free = a.get_all_free_pages()",
    "    check_census(spec, [int(p) for p in free.tolist()], a.available_size())",
    "",
]

# calls whose spec side this module writes; a trace with another call keeps the exact form.
# A capacity hook's cache on the spec side (``c``) evicts the shortfall; the allocator's may
# evict more (CAP-1 allows it), and then ``c`` evicts as many (the spec adopts the choice).
SUPPORTED = frozenset({
    "alloc", "alloc_extend", "alloc_decode", "free", "free_full", "free_page_ids",
    "free_segment", "free_segments", "free_group_begin", "free_group_end",
    "merge_and_sort_free", "clear", "resize", "translate_kv_indices_for_transfer",
    "evict_to_free_tokens", "check_decode_capacity",
})


def supported(trace: Trace) -> bool:
    """Whether every step of ``trace`` has a spec side here (capacity hooks have none)."""
    return trace.family == "single" and all(
        s.call == "create" or s.call in SUPPORTED for s in trace.steps
    )


def create_lines(step: TraceStep, paged: bool | None = None) -> list[str]:
    """The spec side of the constructor: the model of the allocator the target was judged as
    (``paged``, from the trace; ``None``: paged when the page size is above 1)."""
    a = step.args
    kind = "" if paged is None else f", paged={paged}"
    return [
        f"PAGE_SIZE = {a['page_size']}",
        f"spec = AllocatorModel({a['size']}, {a['page_size']}{kind}, need_sort={a['need_sort']})",
    ]


def spec_lines(step: TraceStep, var: str, mapped: dict[str, Any]) -> list[str]:
    """The spec side of valid ``step`` whose result is bound to ``var``; ``mapped``: its
    arguments as repro source (slot lists already wrapped in ``m(...)`` / ``mp(...)``)."""
    a, name = mapped, step.call
    if name == "alloc":
        return [f"accept_alloc(spec, {a['need_size']}, got({var}))", *_learn(step, var)]
    if name == "alloc_extend":
        return [
            f"accept_extend(spec, {a['prefix_lens']!r}, {a['seq_lens']!r}, {a['last_loc']!r}, "
            f"got({var}))",
            *_learn(step, var),
        ]
    if name == "alloc_decode":
        return [
            f"accept_decode(spec, {a['seq_lens']!r}, {a['last_loc']!r}, got({var}))",
            *_learn(step, var),
        ]
    if name in ("free", "free_full"):
        return [f"spec.{name}({a['free_index']!r})"]
    if name == "free_page_ids":
        return [f"spec.free_page_ids({a['page_ids']!r})"]
    if name == "free_segment":
        return [f"spec.free_segment({a['free_index']!r}, start_pos={a['start_pos']})"]
    if name == "free_segments":
        segs = ", ".join(f"({s!r}, {p})" for s, p in a["segments"])
        return [f"spec.free_segments([{segs}])"]
    if name == "resize":
        return [f"spec.resize(ResizeConfig({a['max_total_num_tokens']}))"]
    if name in ("evict_to_free_tokens", "check_decode_capacity"):
        return _cache_lines(step, var, a)
    if name == "translate_kv_indices_for_transfer":
        return [f"assert got({var}) == spec.translate_kv_indices_for_transfer("
                f"{a['kv_indices']!r})  # LIFE-3"]
    return [f"spec.{name}()"]


def _learn(step: TraceStep, var: str) -> list[str]:
    """The line that maps the recorded run's slots of this allocation to this allocator's
    (none when the recorded allocation returned None)."""
    return [f"S.update(zip({step.expect!r}, got({var}) or []))"] if step.expect else []


def _cache_lines(step: TraceStep, var: str, a: dict[str, Any]) -> list[str]:
    """The spec side of a capacity hook: its own cache of the same entries, the shortfall
    evicted (``CAP-1``: the allocator evicts at least that many), the answer compared."""
    entries = "[" + ", ".join(repr(e) for e in a["entries"]) + "]"
    lines = [f"c = TinyTreeCache(spec.free, {entries})"]
    if step.call == "evict_to_free_tokens":
        lines.append(f"spec.evict_to_free_tokens(c, {a['num_tokens']})")
    else:
        lines.append(f"spec.check_decode_capacity(num_tokens={a['num_tokens']}, tree_cache=c)")
    lines += [
        "assert len(cache.entries) <= len(c.entries)  # CAP-1: at least the shortfall",
        "c.evict_entries(len(c.entries) - len(cache.entries))",
    ]
    if step.call == "check_decode_capacity":
        lines.append(f"assert bool({var}) == decode_capacity_ok({a['num_tokens']}, "
                     "spec.available_size())  # CAP-2")
    return lines
