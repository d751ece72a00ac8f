"""What a target allocator supports: the oracle runs only the rules a target declares.

A target is a factory ``factory(size=..., page_size=..., need_sort=..., device=...)`` returning an
object with SGLang's allocator methods. Its :class:`Capabilities` come from the attribute
``factory.kvpool_capabilities`` (or from CLI flags); an undeclared factory is assumed to be a
checked, reference-order paged allocator like ``kvpool.impl``'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

SEGMENT_MODES = ("shared", "disjoint", "none")


@dataclass(frozen=True)
class Capabilities:
    """The rules a target supports.

    Attributes:
        paged: a paged allocator (``free`` releases whole pages, prepends); ``False`` for a token
            allocator (page size 1, ``free`` appends, no ``alloc_extend`` / ``alloc_decode``).
        page_sizes: page sizes the factory accepts (a token allocator: ``(1,)``).
        need_sort: the ``need_sort`` values the factory accepts.
        extend: ``alloc_extend`` / ``alloc_decode`` are implemented (paged only).
        decode_ps1: ``alloc_decode`` is correct at page size 1 (``DECODE-4``).
        groups: ``free_group_begin`` / ``free_group_end``.
        segments: ``"shared"`` = seed semantics (any start, touching segments share a boundary
            page, ``SEG-5``); ``"disjoint"`` = page-aligned starts and page-disjoint segments only
            (SGLang >= 0.5.2x); ``"none"`` = no segment frees.
        reference_order: follows SGLang's exact order (``*-5`` / ``*-7`` clauses).
        checked: raises ``kvpool.spec.ContractViolation`` on caller errors and stays unchanged.
        resize: ``resize(config)``; ``clear``: ``clear()``; ``merge``: ``merge_and_sort_free()``.
        capacity_hooks: ``evict_to_free_tokens`` / ``check_decode_capacity``.
        divergences: ids of ``kvpool.oracle.divergences.REGISTRY`` entries that explain what is
            switched off.
    """

    paged: bool = True
    page_sizes: tuple[int, ...] = (1, 4)
    need_sort: tuple[bool, ...] = (False, True)
    extend: bool = True
    decode_ps1: bool = True
    groups: bool = True
    segments: str = "shared"
    reference_order: bool = True
    checked: bool = True
    resize: bool = True
    clear: bool = True
    merge: bool = True
    capacity_hooks: bool = True
    divergences: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.segments not in SEGMENT_MODES:
            raise ValueError(f"segments must be one of {SEGMENT_MODES}, got {self.segments!r}")
        if not self.page_sizes or any(ps < 1 for ps in self.page_sizes):
            raise ValueError(f"page_sizes must be positive, got {self.page_sizes!r}")
        if not self.paged and self.page_sizes != (1,):
            raise ValueError("a token allocator supports page size 1 only")

    def replace(self, **changes: object) -> Capabilities:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def describe(self) -> str:
        """One line naming what is switched off relative to a full paged allocator."""
        off = [
            f.name
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), bool)
            and f.name != "paged"
            and not getattr(self, f.name)
        ]
        kind = "paged" if self.paged else "token"
        seg = "" if self.segments == "shared" else f" segments={self.segments}"
        return f"{kind} ps={list(self.page_sizes)}{seg}" + (f" off={off}" if off else "")


def parse_declaration(text: str, base: Capabilities) -> Capabilities:
    """``base`` changed by ``"checked=false,segments=disjoint,page_sizes=4+16"`` (CLI form).

    Booleans take true/false, ``page_sizes`` and ``need_sort`` take ``+``-separated values.
    Raises ValueError naming the bad item.
    """
    changes: dict[str, object] = {}
    names = {f.name: f for f in dataclasses.fields(Capabilities)}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in names or key == "divergences":
            raise ValueError(f"unknown capability {item!r} (fields: {', '.join(names)})")
        current = getattr(base, key)
        if isinstance(current, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"{key} takes true or false, got {value!r}")
            changes[key] = value.lower() in ("true", "1")
        elif key == "page_sizes":
            changes[key] = tuple(int(v) for v in value.split("+"))
        elif key == "need_sort":
            changes[key] = tuple(v.lower() in ("true", "1") for v in value.split("+"))
        else:
            changes[key] = value
    return base.replace(**changes)


TOKEN = Capabilities(paged=False, page_sizes=(1,), extend=False)
PAGED = Capabilities()


def capabilities_of(factory: object) -> Capabilities:
    """The capabilities a factory declares (``factory.kvpool_capabilities``), else ``PAGED``."""
    caps = getattr(factory, "kvpool_capabilities", None)
    if caps is None:
        return PAGED
    if not isinstance(caps, Capabilities):
        raise TypeError(f"{factory!r}.kvpool_capabilities is not a Capabilities")
    return caps
