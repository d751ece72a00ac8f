"""The tri-pool's eviction hook and decode gate, judged by their bounds (``UNI-14``, ``UNI-15``).

A tri-pool's ``evict_to_free_tokens(cache, num_tokens)`` asks its cache to evict until a
predicate of its own float chain holds (``allocation_reclaim_satisfied``): how much the cache
frees depends on where the float sits, placement the spec leaves free, so the model cannot say
which rows go. The target leads instead. It runs the hook with a
:class:`~.cache.TriCache` (which stops when the predicate holds and records every release);
the model then replays those releases (``free`` of a whole row, ``free_swa`` of its window
tail: valid calls on rows the cache holds), and the call is judged by what must hold whatever
was evicted, with ``n = ceil(num_tokens / page_size)`` pages:

- the pages fit before (free virtual ids for them and ``n * page_size`` within the
  ``available_size()`` the float chain's frontiers give): True, and nothing asked of the cache;
- they exceed the free virtual ids plus the cache's evictable full tokens, or the SWA index
  room plus its evictable SWA tokens: False, nothing asked;
- else True exactly when they fit after (the gate's answer is the result).

``check_decode_capacity(num_tokens=n, tree_cache=cache)`` runs the same hook (the same rules
on what it asks) and answers ``available_size() >= num_tokens`` after it (``UNI-15``). What the
cache released is then checked as every call's effect is: live pages against the model's,
the float chain's views, the census.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvpool.spec.contract import Divergence
from kvpool.spec.unified import UnifiedSWAModel

from ...engine.trace import TraceStep
from .cache import TriCache
from .float_views import float_available
from .peer_state import state_of

__all__ = ["judge_hook"]

Guard = Callable[[Callable[[], Any]], Any]


def _fits(target: Any, model: UnifiedSWAModel, num_pages: int) -> bool:
    """Whether ``num_pages`` new pages on both sides fit ``target`` now: free virtual ids for
    them and their tokens within the float chain's ``available_size()``."""
    return bool(num_pages <= len(model.free_virtual)
                and num_pages * model.page_size <= float_available(target))


def _hopeless(target: Any, model: UnifiedSWAModel, num_pages: int, cache: TriCache) -> bool:
    """Whether even every evictable token leaves too few virtual ids or SWA page ids."""
    ps, swa = model.page_size, state_of(target).sides["swa"]
    swa_room = int(swa.num_pages) - int(swa.min_page) - len(model.swa.v2p)
    return bool(num_pages > len(model.free_virtual) + cache.full_evictable_size() // ps
            or num_pages > swa_room + cache.swa_evictable_size() // ps)


def judge_hook(model: UnifiedSWAModel, target: Any, step: TraceStep, guard: Guard) -> Any:
    """Run ``step`` (``evict_to_free_tokens`` or ``check_decode_capacity`` with the rows
    ``cached``) on the tri-pool ``target`` through ``guard`` (a raise breaks the call's
    clause), replay the cache's releases on ``model`` and return the expected result
    ``(answer, eviction requests)`` (module docstring). The requests are the target's own
    where the rules above leave them open.

    Raises:
        Divergence: ``UNI-14`` (the hook's answer or requests), ``UNI-15`` (the decode gate's).
    """
    num_tokens = int(step.args["num_tokens"])
    num_pages = max(0, -(-num_tokens // model.page_size))
    cache = TriCache(target, step.args.get("cached", ()))
    before = _fits(target, model, num_pages)
    hopeless = not before and _hopeless(target, model, num_pages, cache)
    gate = step.call == "check_decode_capacity"
    answer = guard(lambda: bool(target.check_decode_capacity(
        num_tokens=num_tokens, tree_cache=cache)) if gate
        else target.evict_to_free_tokens(cache, num_tokens))
    for name, ids in cache.released:
        getattr(model, name)(ids)
    got = (answer, cache.requests)
    rule = ("the pages fit before" if before else
            "even every evictable token leaves too few virtual or SWA page ids" if hopeless
            else None)  # where nothing may be asked of the cache
    if gate:
        want_answer, why = float_available(target) >= num_tokens, "available_size() after it"
    elif rule is not None:
        want_answer, why = before, rule
    else:
        want_answer = _fits(target, model, num_pages)
        why = f"the pages {'fit' if want_answer else 'do not fit'} after the evictions"
    want = (want_answer, [] if rule else cache.requests)
    step.expect = want
    if got != want:
        wrong_answer = bool(got[0] != want_answer)
        raise Divergence("UNI-15" if gate and wrong_answer else "UNI-14",
                         f"{step.call}({num_tokens}) returned {got!r}, the spec says {want!r} "
                         f"({why if wrong_answer else f'nothing may be asked: {rule}'})")
    return want
