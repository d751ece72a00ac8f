"""A unified target's holes and spans, read from its introspection snapshot (``UNI-5``).

A sub-pool's span is the run of physical pages between its end and its frontier (a float
pool's: between its two frontiers); each page of the span is live or a hole (a freed page kept
for reuse, including pages held back from reuse for a while). ``UNI-5`` states span = live +
holes; live is counted as the virtual pages bound (the snapshot's ``bindings``), so that a
table breach stays ``UNI-4``'s or ``UNI-6``'s. :func:`hole_problems` reads that bookkeeping from
one :class:`~kvpool.spec.unified_state.SubPoolState` alone (holes distinct, inside the span, not
live; the span equal to live + holes); :func:`span_and_holes` is what the executor compares with
the spec model's ``EndPool.span_pages()`` and its number of holes after every call (the holes'
positions are placement, which lazy compaction leaves free). A repro reads the snapshot with
``state_of(a)`` (:mod:`.peer_state`) and imports these.
"""

from __future__ import annotations

from kvpool.spec.unified import UnifiedSWAModel
from kvpool.spec.unified_state import SubPoolState, UnifiedState
from kvpool.spec.wording import counted

__all__ = ["group_end_breach", "hole_problems", "model_breach", "own_breach", "span_and_holes",
           "span_pages"]


def span_pages(sub: SubPoolState) -> range:
    """The physical pages of ``sub``'s span."""
    return range(sub.span_low, sub.span_high)


def span_and_holes(sub: SubPoolState) -> tuple[int, int]:
    """``(pages in the span, holes)`` of one sub-pool."""
    return len(sub.span_pages), len(sub.holes)


def hole_problems(sub: SubPoolState) -> list[str]:
    """``UNI-5`` breaches in ``sub``'s own bookkeeping: a hole named twice, a hole outside the
    span or on a live page, a span that is not live + holes (a physical page two virtual pages
    share is ``UNI-4``'s, counted twice here). Empty when healthy."""
    span, holes = sub.span_pages, list(sub.holes)
    live = list(sub.bindings.values())
    out: list[str] = []
    twice = sorted({p for p in holes if holes.count(p) > 1})
    if twice:
        out.append(f"[{sub.name}] holes counted twice: {twice}")
    outside = sorted({p for p in holes if p not in span})
    if outside:
        out.append(f"[{sub.name}] holes outside the span {span.start}..{span.stop - 1}: "
                   f"{outside}")
    on_live = sorted(set(holes) & set(live))
    if on_live:
        out.append(f"[{sub.name}] holes on live pages: {on_live}")
    if len(span) != len(live) + len(holes):
        out.append(f"[{sub.name}] span {counted(len(span), 'page')} != live {len(live)} + holes "
                   f"{len(holes)}")
    return out


IMPORTS = ("from kvpool.oracle.families.unified.holes import hole_problems, span_and_holes",
           "from kvpool.oracle.families.unified.peer_state import state_of")


def own_breach(state: UnifiedState) -> tuple[str, list[str]] | None:
    """The first ``UNI-5`` breach in the bookkeeping of a sub-pool of ``state`` (every one it
    names), as ``(detail, repro lines)``; None when all are healthy."""
    for name, sub in state.sides.items():
        problems = hole_problems(sub)
        if problems:
            return problems[0], [*IMPORTS,
                                 f"assert not hole_problems(state_of(a).sides[{name!r}])  # UNI-5"]
    return None


def model_breach(state: UnifiedState, model: UnifiedSWAModel) -> tuple[str, list[str]] | None:
    """The first of the full and SWA sub-pools whose ``(span, holes)`` differ from the spec
    model's ``EndPool`` (``UNI-5``), as ``(detail, repro lines)``; None when both agree."""
    for name, pool in (("full", model.full), ("swa", model.swa)):
        got, want = span_and_holes(state.sides[name]), (pool.span_pages(), len(pool.holes))
        if got != want:
            return (f"{name} sub-pool: span {counted(got[0], 'page')} with "
                    f"{counted(got[1], 'hole')}, the spec says {want[0]} with {want[1]}",
                    [*IMPORTS,
                     f"assert span_and_holes(state_of(a).sides[{name!r}]) == {want!r}  # UNI-5"])
    return None


def group_end_breach(state: UnifiedState, model: UnifiedSWAModel) -> tuple[str, list[str]] | None:
    """``UNI-10`` after a free (the executor's ``FREES``; at ``free_group_end`` the group's
    deferred frees ran, :class:`~.calls.Group`): each side binds exactly the virtual pages the
    model still holds there. None when they agree; else what differs and the repro's
    assertion on the target's snapshot."""
    for name, pool in (("full", model.full), ("swa", model.swa)):
        got, want = set(state.sides[name].bindings), set(pool.v2p)
        if got != want:
            kept, lost = sorted(got - want), sorted(want - got)
            detail = (f"the {name} side still binds virtual pages {kept} the spec released"
                      if kept else f"the {name} side released virtual pages {lost} the "
                                   "spec keeps")
            return detail, [
                "from kvpool.oracle.families.unified.peer_state import state_of",
                f"assert sorted(state_of(a).sides[{name!r}].bindings) == {sorted(want)!r}"
                "  # [UNI-10]"]
    return None
