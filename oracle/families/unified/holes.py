"""A unified target's holes and spans, read from each sub-pool's own state (``UNI-5``).

A sub-pool's span is the run of physical pages between its end and its frontier (a float
pool's: between its two frontiers); each page of the span is live or a hole (a freed page kept
for reuse: SGLang's ``_free_phys_pages``, plus the pages ``_pending_reuse`` still holds back).
``UNI-5`` states span = live + holes; live is counted as the virtual pages bound (``v2p``), so
that a table breach stays ``UNI-4``'s or ``UNI-6``'s. :func:`hole_problems` reads that
bookkeeping from the target alone (holes distinct, inside the span, not live; the span equal to
live + holes); :func:`span_and_holes` is what the executor compares with the spec model's
``EndPool.span_pages()`` and its number of holes after every call (the holes' positions are
placement, which lazy compaction leaves free). Both take a sub-pool object with SGLang 0.5.23's
``MultiEndedAllocator`` fields and are importable by a repro.
"""

from __future__ import annotations

from typing import Any

from kvpool.spec.wording import counted

__all__ = ["hole_problems", "span_and_holes", "span_pages"]


def span_pages(sub: Any) -> range:
    """The physical pages of ``sub``'s span: ``[min_page, watermark)`` growing up,
    ``(watermark, num_pages)`` growing down, ``[low, high)`` for a float pool."""
    if sub.grow_direction == "float":
        return range(int(sub.low_wm_page), int(sub.high_wm_page))
    if sub.grow_direction == "up":
        return range(int(sub.min_page_index), int(sub.watermark_physical))
    return range(int(sub.watermark_physical) + 1, int(sub.num_pages))


def _holes(sub: Any) -> list[int]:
    held_back = sorted(int(p) for p in getattr(sub, "_pending_reuse_pages_cpu", ()))
    return [int(p) for p in sub._free_phys_pages.tolist()] + held_back


def _live(sub: Any) -> list[int]:
    """The physical page of each live virtual page (``v2p``, the sink and the trailing
    sentinel aside; a page two virtual ids share is ``UNI-4``'s, counted twice here)."""
    v2p = sub.virtual_to_physical.tolist()
    return [p for p in v2p[1:-1] if p >= 0]


def span_and_holes(sub: Any) -> tuple[int, int]:
    """``(pages in the span, holes)`` of one sub-pool."""
    return len(span_pages(sub)), len(_holes(sub))


def hole_problems(sub: Any) -> list[str]:
    """``UNI-5`` breaches in ``sub``'s own bookkeeping: a hole named twice, a hole outside the
    span or on a live page, a span that is not live + holes. Empty when healthy."""
    name = getattr(sub, "sub_pool_name", "?")
    span, holes, live = span_pages(sub), _holes(sub), _live(sub)
    out: list[str] = []
    twice = sorted({p for p in holes if holes.count(p) > 1})
    if twice:
        out.append(f"[{name}] holes counted twice: {twice}")
    outside = sorted({p for p in holes if p not in span})
    if outside:
        out.append(f"[{name}] holes outside the span {span.start}..{span.stop - 1}: {outside}")
    on_live = sorted(set(holes) & set(live))
    if on_live:
        out.append(f"[{name}] holes on live pages: {on_live}")
    if len(span) != len(live) + len(holes):
        out.append(f"[{name}] span {counted(len(span), 'page')} != live {len(live)} + holes "
                   f"{len(holes)}")
    return out


SIDES = (("full", "full_attn_allocator"), ("swa", "swa_attn_allocator"))
_IMPORT = "from kvpool.oracle.families.unified.holes import hole_problems, span_and_holes"


def own_breach(target: Any) -> tuple[str, list[str]] | None:
    """The first ``UNI-5`` breach in the target's own bookkeeping, as ``(detail, repro
    lines)``; None when both sub-pools are healthy."""
    for _, attr in SIDES:
        problems = hole_problems(getattr(target, attr))
        if problems:
            return problems[0], [_IMPORT, f"assert not hole_problems(a.{attr})  # UNI-5"]
    return None


def model_breach(target: Any, model: Any) -> tuple[str, list[str]] | None:
    """The first sub-pool whose ``(span, holes)`` differ from the spec model's ``EndPool``
    (``UNI-5``), as ``(detail, repro lines)``; None when both agree."""
    for (name, attr), pool in zip(SIDES, (model.full, model.swa)):
        got, want = span_and_holes(getattr(target, attr)), (pool.span_pages(), len(pool.holes))
        if got != want:
            return (f"{name} sub-pool: span {counted(got[0], 'page')} with "
                    f"{counted(got[1], 'hole')}, the spec says {want[0]} with {want[1]}",
                    [_IMPORT, f"assert span_and_holes(a.{attr}) == {want!r}  # UNI-5"])
    return None
