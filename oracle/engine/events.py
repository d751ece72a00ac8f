"""Coverage events: a named situation a family's run can reach, and when a target can reach it.

A family's event table maps names to :class:`Event` rows; its clause map
(:class:`~kvpool.oracle.engine.clausemap.ClauseMap`) says which clause each event exercises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .capabilities import Capabilities

Needs = Callable[[Capabilities, int, bool], bool]  # (caps, page_size, need_sort) -> reachable
Row = tuple[str, str, Needs, str]  # (name, clause, needs, doc): one line of an event table
ALLOCATIONS = ("alloc", "alloc_extend", "alloc_decode")


@dataclass(frozen=True)
class Event:
    """One named situation: the clause family it exercises and when a target can reach it."""

    name: str
    clause: str
    needs: Needs
    doc: str


def always(c: Capabilities, ps: int, ns: bool) -> bool:
    return True


def cap(name: str) -> Needs:
    return lambda c, ps, ns: bool(getattr(c, name))


def paged(c: Any, ps: int, ns: bool) -> bool:
    """Reachable above page size 1 (the hybrid and unified families: every target pages)."""
    return ps > 1


def ps1(c: Any, ps: int, ns: bool) -> bool:
    """Reachable at page size 1 only."""
    return ps == 1


def both(*preds: Needs) -> Needs:
    """Reachable where every one of ``preds`` is."""
    return lambda c, ps, ns: all(p(c, ps, ns) for p in preds)


def form(name: str) -> Needs:
    """Reachable where the target accepts slot tensors in the form ``name`` (``slot_forms``)."""
    return lambda c, ps, ns: name in c.slot_forms


def _needs_of(word: str, named: Mapping[str, Needs]) -> Needs:
    """One term of a table's ``needs`` column: a name of ``named`` (``always``, ``paged`` and
    ``ps1`` are known everywhere), ``cap:<field>`` or ``form:<slot form>``."""
    kind, _, arg = word.partition(":")
    if kind == "cap" and arg:
        return cap(arg)
    if kind == "form" and arg:
        return form(arg)
    known = {"always": always, "paged": paged, "ps1": ps1, **named}
    if word not in known:
        raise ValueError(f"event table: unknown needs {word!r}; known: {sorted(known)}")
    return known[word]


def event_rows(table: str, named: Mapping[str, Needs] = {}) -> list[Row]:
    """The rows of an event table written as text, one event per line:
    ``name  clause  needs  what it means``, columns split on whitespace, the last one the rest of
    the line. ``needs`` is one term or several joined by ``+`` (all must hold; see
    :func:`_needs_of`). A line that starts with whitespace continues the doc of the row above;
    blank lines are skipped. Raises ValueError for a short line, a clause that is not
    ``<SECTION>-<n>`` or an unknown needs term."""
    rows: list[Row] = []
    for line in table.splitlines():
        if not line.strip():
            continue
        if line[0].isspace() and rows:
            name, clause, needs_of, doc = rows[-1]
            rows[-1] = (name, clause, needs_of, f"{doc} {line.strip()}")
            continue
        parts = line.split(None, 3)
        if len(parts) < 4:
            raise ValueError(f"event table: expected name, clause, needs, doc in {line!r}")
        name, clause, needs, doc = parts
        section, _, number = clause.rpartition("-")
        if not section.isupper() or not number.isdigit():
            raise ValueError(f"event table: {clause!r} is not a clause ID in {line!r}")
        terms = [_needs_of(word, named) for word in needs.split("+")]
        rows.append((name, clause, terms[0] if len(terms) == 1 else both(*terms), doc))
    return rows


def event_table(rows: Iterable[Row], bad: Mapping[str, Needs] = {}) -> dict[str, Event]:
    """A family's events by name: ``rows``, then ``bad.<kind>`` (clause ERR-1) for each
    bad-input kind of ``bad``, reachable where its ``Needs`` says. Raises ValueError for an
    event named twice."""
    out: dict[str, Event] = {}
    every = [*rows, *((f"bad.{kind}", "ERR-1", needs, f"bad input: {kind}")
                      for kind, needs in bad.items())]
    for name, clause, needs, doc in every:
        if name in out:
            raise ValueError(f"coverage event {name!r} is declared twice")
        out[name] = Event(name, clause, needs, doc)
    return out


def form_events(args: Mapping[str, Any]) -> list[str]:
    """``input.int32`` / ``input.strided``: the forms a call passed its slot tensors in
    (``args["form"]``, :func:`~.callforms.choose_form`); none for int64 contiguous ones."""
    form = args.get("form")
    return [f"input.{part}" for part in form.split("+")] if form else []


def call_events(call: str, result: Any, simple: Mapping[str, str]) -> list[str]:
    """The events a call reaches by its kind alone: ``<call>.ok`` / ``<call>.short`` (a None
    result) for an allocation, else ``simple[call]`` where named."""
    if call in ALLOCATIONS:
        return [f"{call}.{'short' if result is None else 'ok'}"]
    return [simple[call]] if call in simple else []
