"""Which declarations a unified target would pass under: probes on fresh instances, for a
failure's hint.

A unified factory that declares nothing is judged by every rule (each capability's default).
When it fails, :func:`fitting` finds the capabilities to switch off by probing the factory
(every page size and compaction mode its capabilities name):

- the census probes (``census_tables``, ``census_frontiers``; :mod:`.probes`), whatever their
  source: the probe the census missed names the capability governing it, which is switched off
  until every probe left is reported (the constructor-time check then passes);
- each undeclared capability that governs what the scheduler model sends (its source is
  ``default``), by a short sequence run through a fresh executor twice: in the form the
  capability allows and in the form the scheduler model uses without it. The capability does
  not fit when only the first diverges (``decode_ps1``: ``alloc_decode`` at page size 1 after
  an ``alloc``, against an ``alloc`` of one token; ``free_any_order``: a ``free`` of a row's
  first pages last position first, against the same ``free`` ascending, each followed by
  ``alloc`` until the freed ids are handed out again).

A sequence that diverges in both forms (or crashes) says nothing about the capability: it is
not named. The results are kept per factory, capabilities and device (one probe per run, however
many failures the shrinker records).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...engine.report import OracleFailure, aside
from ...engine.target import Config, Target
from .probes import PROBES, census_probe

PAGES = 16  # the probes' buffer, in pages a side
MAX_ROUNDS = 256  # allocations a free-order probe makes before the freed ids come back

Sequence = Callable[[Any, bool], None]  # (executor, the capability's form) -> None


def _decode(ex: Any, allowed: bool) -> None:
    row = ex.call("alloc", need_size=3)
    if allowed:
        ex.call("alloc_decode", seq_lens=[4], last_loc=[row[-1]])
    else:
        ex.call("alloc", need_size=1)


def _free_order(ex: Any, allowed: bool) -> None:
    ps = ex.page_size
    row = ex.call("alloc", need_size=ex.model.available_size())
    freed = row[:3 * ps] if row else []
    if not freed:
        return
    ex.call("free", free_index=freed[::-1] if allowed else sorted(freed))
    for _ in range(MAX_ROUNDS):  # the free list is a queue: cycle until the freed ids return
        out = ex.call("alloc", need_size=len(freed))
        if not out or set(out) & set(freed):
            return
        ex.call("free", free_index=out)


# capability -> (the page sizes it governs, or None for all; its sequence)
BEHAVIOUR: dict[str, tuple[tuple[int, ...] | None, Sequence]] = {
    "decode_ps1": ((1,), _decode),
    "free_any_order": (None, _free_order),
}


_busy = [False]  # a probe's own failures get no hint (no probing inside a probe)
_found: dict[tuple[Any, ...], tuple[str, ...]] = {}  # per factory, capabilities and device


def fitting(executor: type[Any], factory: Callable[..., Any], caps: Any,
            device: str = "cpu") -> list[str]:
    """The ``--declare`` items (``name=false``) under which ``factory`` would pass the probes,
    in the order found; empty when every probe passes as declared (or inside a probe)."""
    if _busy[0]:
        return []
    undeclared = tuple(n for n in BEHAVIOUR if caps.source_of(n) == "default")
    key: tuple[Any, ...] | None = (executor, factory, caps, device, undeclared)
    try:
        found = _found.get(key)  # type: ignore[arg-type]
    except TypeError:  # an unhashable factory: probed every time
        key, found = None, None
    if found is None:
        _busy[0] = True
        try:
            found = _probe(executor, factory, caps, device, undeclared)
        finally:
            _busy[0] = False
        if key is not None:
            _found[key] = found
    return list(found)


def hint(found: list[str]) -> str:
    """The hint line's text for the declarations :func:`fitting` found."""
    return ("probes of fresh instances find rules the target does not follow; if it is not "
            f"meant to: --declare {','.join(found)}")


def _probe(executor: type[Any], factory: Callable[..., Any], caps: Any, device: str,
           undeclared: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`fitting`'s probes, run (the failures they record are set aside)."""
    off: list[str] = []
    modes = tuple(m == "lazy" for m in caps.compaction)
    entry = caps.entry_bytes[0]
    with aside():
        for ps in caps.page_sizes:
            def build(lazy: bool, ps: int = ps) -> Any:
                return factory(total_bytes=PAGES * ps * entry, page_size=ps, lazy=lazy,
                               device=device)

            try:
                while (missed := census_probe(build, caps, ps, modes)) is not None:
                    field = PROBES[missed[0]][0]
                    off.append(field)
                    caps = caps.replace(**{field: False})
            except Exception:  # the factory or a probe crashed: nothing learnt here
                continue
        for name in undeclared:
            sizes, sequence = BEHAVIOUR[name]
            if getattr(caps, name) and any(
                _diverges_only_allowed(executor, factory, caps, ps, lazy, device, sequence)
                for ps in caps.page_sizes if sizes is None or ps in sizes for lazy in modes
            ):
                off.append(name)
    return tuple(f"{name}=false" for name in dict.fromkeys(off))


def _diverges_only_allowed(executor: type[Any], factory: Callable[..., Any], caps: Any,
                           ps: int, lazy: bool, device: str, sequence: Sequence) -> bool:
    """Whether ``sequence`` diverges in the capability's form and not in the other."""
    def diverges(allowed: bool) -> bool | None:
        target = Target(factory, caps, "probe", family="unified")
        ex = executor(target, Config(ps, False, device, "exact"))
        try:
            ex.create(PAGES * ps * caps.entry_bytes[0], lazy)
            sequence(ex, allowed)
        except OracleFailure:
            return True
        except Exception:  # crashed, or invalid under the spec (OracleError): no answer
            return None
        return False

    return diverges(True) is True and diverges(False) is False
