"""Which call each bad-input kind (``badcalls.BAD_CALLS``) is sent to.

A target checked for some calls only (``Capabilities(checked={("alloc", "free"): E})``) is sent
the kinds of those calls, and only their rejections are required; the coverage gate requires
the ``bad.<kind>`` events of those kinds only.
"""

from __future__ import annotations

from ...engine.capabilities import Capabilities

BAD_KIND_CALLS: dict[str, str] = {
    "double_free": "free",
    "double_free_in_call": "free",
    "free_deferred_segment": "free_segments",  # "free" for a token allocator
    "page_zero": "free",
    "out_of_range": "free",
    "unaligned_alloc": "alloc",
    "negative_alloc": "alloc",
    "broken_last_loc": "alloc_extend",
    "broken_decode_last_loc": "alloc_decode",
    "nested_group": "free_group_begin",
    "overlapping_segments": "free_segments",
    "mismatched_lengths": "alloc_extend",
    "wrong_extend_num_tokens": "alloc_extend",
    "prefix_after_seq": "alloc_extend",
    "decode_empty_seq": "alloc_decode",
    "decode_mismatched_lengths": "alloc_decode",
    "shared_partial_page": "alloc_extend",
    "decode_shared_partial_page": "alloc_decode",
    "segment_layout": "free_segments",
    "page_ids_twice": "free",  # free_page_ids: checked with free()
}


def bad_call_name(kind: str, caps: Capabilities) -> str:
    """The method a bad call of ``kind`` calls on a target with ``caps``."""
    if kind == "free_deferred_segment" and not caps.paged:
        return "free"
    return BAD_KIND_CALLS[kind]


def kind_checked(kind: str, caps: Capabilities) -> bool:
    """Whether a target with ``caps`` is sent bad calls of ``kind`` (its call is checked)."""
    return caps.checks(bad_call_name(kind, caps))
