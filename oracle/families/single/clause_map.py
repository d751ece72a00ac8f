"""The single-pool family's clause map: which coverage events and bad-input kinds exercise
which clause (see :mod:`kvpool.oracle.engine.clausemap` and :mod:`kvpool.oracle.reporting.clauses`).

A clause is *exercised* in a configuration when a check citing it ran on a case that could
violate it: a valid call of a named situation (``CLAUSE_EVENTS``: clause -> the coverage events
of :mod:`kvpool.oracle.families.single.coverage` that are such cases; e.g. ``ALLOC-3`` counts the
shortages, both kinds, because that is where "None iff short" can fail), or a rejected bad call
(``BAD_CLAUSES`` names the clause each bad-input kind is built to break). Order clauses
(``ORDER_CLAUSES``: SGLang's exact order) are checked only in an ``exact`` comparison.
"""

from __future__ import annotations

from ...engine.clausemap import ClauseMap
from .coverage import EVENTS

# clause -> events whose occurrence is a case that could violate it
CLAUSE_EVENTS: dict[str, tuple[str, ...]] = {
    "MODEL-1": ("life.ragged",),
    "MODEL-2": ("extend.part1", "extend.part3", "decode.page_continue"),
    "MODEL-3": ("free.staged", "group.page_in_pieces", "group.segments", "group.page_ids"),
    "MODEL-4": ("extend.part1", "decode.page_continue", "seg.mid_span"),
    "INV-1": ("alloc.ok", "free.many_pages", "extend.ok"),
    "INV-2": ("group.page_in_pieces", "seg.trim", "group.end_many"),
    "INV-3": ("life.ragged", "free.many_pages"),
    "INV-4": ("free.staged", "group.alloc_inside", "alloc.short_partial"),
    "ALLOC-2": ("alloc.zero",),
    "ALLOC-3": ("alloc.short_empty", "alloc.short_partial"),
    "ALLOC-4": ("alloc.ok", "size.pow2_single"),
    "ALLOC-5": ("merge.alloc",),
    "EXTEND-4": (
        "extend.ok",
        "extend.many_pages",
        "extend.bs_9_32",
        "extend.bs_33_64",
        "size.pow2_batch",
    ),
    "EXTEND-5": ("extend.part1", "extend.part3"),
    "EXTEND-6": ("extend.short_empty", "extend.short_partial"),
    "EXTEND-7": ("merge.extend",),
    "DECODE-4": ("decode.page_open",),
    "DECODE-5": ("decode.page_continue", "decode.ok"),
    "DECODE-6": ("decode.short_empty", "decode.short_partial"),
    "DECODE-7": ("merge.decode",),
    "FREE-4": ("free.many_pages", "free.repeat_slot"),
    "FREE-5": ("free.many_pages", "free.unordered"),
    "FREE-6": ("free.empty",),
    "FREE-7": ("free.full",),
    "FREE-8": ("free.page_ids",),
    "SEG-2": (
        "seg.single",
        "seg.mid_span",
        "seg.unaligned_1",
        "seg.unaligned_2",
        "seg.unaligned_3",
        "seg.single_wrap",
    ),
    "SEG-3": ("seg.many",),
    "SEG-5": ("seg.trim", "seg.inside"),
    "SEG-6": ("seg.empty",),
    "GROUP-2": ("group.end_idle",),
    "GROUP-3": ("group.input_reused",),
    "GROUP-4": ("group.end_many", "group.segments", "group.page_ids"),
    "GROUP-5": ("group.alloc_inside",),
    "GROUP-6": ("group.page_in_pieces", "group.repeat_slot"),
    "SORT-1": ("free.staged",),
    "SORT-2": ("merge.alloc", "merge.extend", "merge.decode"),
    "SORT-3": ("merge.explicit",),
    "CAP-1": ("cap.evict",),
    "CAP-2": ("cap.check_false",),
    "CAP-3": ("cap.byte_accounting",),
    "LIFE-1": ("life.clear", "life.clear_staged"),
    "LIFE-2": ("life.resize",),
    "LIFE-3": ("life.translate",),
    "LIFE-4": ("free.staged",),
    "ALIAS-1": ("alias.held",),
    "ALIAS-2": ("alias.inputs",),
    "ALIAS-3": ("alias.results",),
}
# bad-input kind (kvpool.oracle.families.single.badcalls) -> the clause the spec rejects it with
BAD_CLAUSES: dict[str, str] = {
    "double_free": "FREE-3",
    "double_free_in_call": "FREE-3",
    "page_ids_twice": "FREE-3",
    "free_deferred_segment": "FREE-3",
    "page_zero": "FREE-2",
    "out_of_range": "FREE-1",
    "unaligned_alloc": "ALLOC-1",
    "negative_alloc": "ALLOC-2",
    "broken_last_loc": "EXTEND-3",
    "broken_decode_last_loc": "DECODE-3",
    "nested_group": "GROUP-1",
    "overlapping_segments": "SEG-4",
    "segment_layout": "SEG-1",
    "mismatched_lengths": "EXTEND-1",
    "wrong_extend_num_tokens": "EXTEND-1",
    "prefix_after_seq": "EXTEND-2",
    "shared_partial_page": "EXTEND-8",
    "decode_empty_seq": "DECODE-2",
    "decode_mismatched_lengths": "DECODE-1",
    "decode_shared_partial_page": "DECODE-8",
}
# checked only when the comparison is SGLang's exact order
ORDER_CLAUSES = frozenset(
    ("ALLOC-5", "EXTEND-7", "DECODE-7", "FREE-5", "SEG-3", "SORT-2", "SORT-3", "LIFE-4")
)

SINGLE = ClauseMap(EVENTS, CLAUSE_EVENTS, BAD_CLAUSES, ORDER_CLAUSES)
