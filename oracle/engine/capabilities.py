"""What a target allocator supports: the oracle runs only the rules a target supports.

A target is a factory ``factory(size=..., page_size=..., need_sort=..., device=...)`` returning an
object with SGLang's allocator methods. Its :class:`Capabilities` come from three places, each
recorded per field in ``Capabilities.sources``:

- *declared*: the attribute ``factory.kvpool_capabilities`` (a :class:`Capabilities`): the
  fields its constructor call names (``Capabilities(checked=X)`` declares ``checked`` only;
  ``PAGED.replace(...)`` / ``TOKEN.replace(...)`` declare every field);
- *inferred*: every field the factory does not declare comes from the methods of one instance
  (:mod:`kvpool.oracle.families.single.inference`, merged by :func:`merge_declared`); what no
  method tells is *default*: unchecked (no bad input is sent), contract order, page sizes 1, 4
  and 16 (every page size class: token-like, small, and >= 16; a size the factory rejects is
  left out);
- *option*: ``--declare KEY=VALUE,...`` / ``--page-sizes`` / ``--need-sort`` (CLI) or the pytest
  plugin's ``--kvpool-declare`` / ``--kvpool-page-sizes`` / ``--kvpool-need-sort``.

:meth:`Capabilities.in_force` is the one line every run starts with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

SEGMENT_MODES = ("shared", "disjoint", "none")
SLOT_FORMS = ("int32", "strided")  # slot tensor forms beside int64 contiguous (``slot_forms``)
ERROR_FIELDS = ("checked", "shortage_raises")  # fields holding exception types
ErrorTypes = tuple[type[BaseException], ...]
CheckedCalls = tuple[tuple[str, ErrorTypes], ...]  # per call name, its exception types
# Fields that say how the others were given, not what the target supports (never printed).
META_FIELDS = ("sources", "declared_fields", "checked_calls", "lacking", "page_overrides")


def _contract_violation() -> type[BaseException]:
    from kvpool.spec.errors import ContractViolation

    cls: type[BaseException] = ContractViolation
    return cls


def error_types(value: object) -> ErrorTypes:
    """``checked`` in its normal form: ``False`` -> ``()``, ``True`` -> ``(ContractViolation,)``,
    one exception class -> a 1-tuple, a tuple of classes -> itself. Raises TypeError otherwise."""
    if value is False or value is None:
        return ()
    if value is True:
        return (_contract_violation(),)
    items = value if isinstance(value, tuple) else (value,)
    for item in items:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"checked takes True/False or exception classes, got {item!r}")
    return items


def checked_form(value: object, callable_names: tuple[str, ...]) -> tuple[ErrorTypes, CheckedCalls]:
    """``checked`` split into (all its exception types, per-call types).

    A mapping ``{"alloc": E, ("free", "free_segments"): (E, F)}`` checks only the calls named
    (each a name of ``callable_names``), with those types; any other value checks every call
    (per-call part empty). Raises TypeError for a non-exception, ValueError for an unknown call.
    """
    if not isinstance(value, Mapping):
        return error_types(value), ()
    per_call: dict[str, ErrorTypes] = {}
    for calls, types in value.items():
        for name in (calls,) if isinstance(calls, str) else tuple(calls):
            if name not in callable_names:
                raise ValueError(
                    f"checked: {name!r} is not a call bad input is sent to "
                    f"(one of {', '.join(callable_names)})"
                )
            per_call[name] = tuple(dict.fromkeys((*per_call.get(name, ()), *error_types(types))))
    union = tuple(dict.fromkeys(t for types in per_call.values() for t in types))
    return union, tuple(sorted(per_call.items()))


@dataclass(frozen=True)
class Capabilities:
    """The rules a target supports (docs/writing-a-target.md lists every field).

    Attributes:
        paged: a paged allocator (``free`` releases whole pages); ``False`` for a token
            allocator (page size 1, no ``alloc_extend`` / ``alloc_decode``).
        page_sizes: page sizes the factory accepts, each one configuration; by default 1, 4 and
            16 (every page size class: token-like, small, and >= 16); a token allocator:
            ``(1,)``.
        need_sort: the ``need_sort`` values the factory accepts.
        extend: ``alloc_extend`` / ``alloc_decode`` are implemented (paged only).
        decode_ps1: ``alloc_decode`` is correct at page size 1 (``DECODE-4``).
        groups: ``free_group_begin`` / ``free_group_end``.
        segments: ``"shared"`` = the spec's semantics (any start, touching segments share a boundary
            page, ``SEG-5``); ``"disjoint"`` = page-aligned starts and page-disjoint segments only
            (SGLang >= 0.5.2x); ``"none"`` = no segment frees.
        reference_order: follows SGLang's exact order (``*-5`` / ``*-7`` clauses); decides the
            default comparison (``exact`` or ``contract``).
        checked: the exception types the target raises on caller errors, leaving its state
            unchanged (``ERR-1``); ``True`` means ``kvpool.spec.ContractViolation`` (its clause
            must then match the spec's), ``False`` / ``()`` = unchecked, no bad input is sent.
            A mapping from call names (``CHECKABLE_CALLS``) to types checks only those calls:
            ``{("alloc", "free"): MyError}`` sends bad input to ``alloc`` and ``free`` only.
            Stored as the tuple of all its classes, the per-call part in ``checked_calls``.
        shortage_raises: exception types an allocation raises on a shortage instead of
            returning None (``ALLOC-3`` / ``EXTEND-6`` / ``DECODE-6`` relaxed): such a raise is
            taken as the None only where the spec's answer is None, and the oracle still
            requires that nothing was handed out and the state is the spec's; ``()`` (the
            default): a shortage returns None. Stored like ``checked``.
        page_ids: ``free_page_ids(page_ids)`` (SGLang's; ``FREE-8``): the oracle frees whole
            pages of rows by page id, and its ownership probe writes into the tensor passed.
        base_api: the rest of SGLang's base-class API: ``free_full`` (``FREE-7``),
            ``translate_kv_indices_for_transfer`` (``LIFE-3``) and ``verify_byte_accounting``
            (``CAP-3``, read after every call).
        resize: ``resize(config)``; ``clear``: ``clear()``; ``merge``: ``merge_and_sort_free()``.
        capacity_hooks: ``evict_to_free_tokens`` / ``check_decode_capacity``.
        ownership: the allocator keeps no reference to tensors it hands out or is given: after
            every other call the harness writes into the result and into
            ``get_all_free_pages()``'s result (``ALIAS-3``), and after every free into its
            inputs (``ALIAS-2``), and the allocator's answers must not change.
        capacity_context: ``check_decode_capacity`` accepts SGLang 0.5.23's extra keywords
            ``requests=`` / ``spec_algorithm=`` (sent in some calls).
        slot_forms: the forms of slot tensors (slots, page ids, ``last_loc``) the target accepts
            beside int64 contiguous ones, as SGLang's scheduler passes them: ``"int32"`` rows
            and ``"strided"`` views (``SLOT_FORMS``; both together too). ``()`` = int64
            contiguous only (an undeclared target's default). ``--declare`` takes
            ``int32+strided`` (``-`` for none).
        divergences: ids of ``kvpool.oracle.peers.divergences.REGISTRY`` entries that explain
            what is switched off.
        sources: where a field's value came from (``inferred``, ``default``, ``option``);
            a field not named here was declared. Not compared.
        declared_fields: the fields the constructor call named (a :func:`merge_declared`
            fills the others); ``replace`` adds the fields it changes. Not compared.
        checked_calls: ``checked``'s per-call form (empty: every call is checked).
        lacking: declared capabilities whose methods the factory's instance lacks (set when a
            target is resolved; the failure hint lists them all). Not compared.
        page_overrides: per page size, the fields that differ there (:meth:`at`): a factory
            built like SGLang's construction site returns a token allocator at page size 1 and
            a paged one above, and is judged as each where it returns it (inferred).
    """

    paged: bool = True
    page_sizes: tuple[int, ...] = (1, 4, 16)
    need_sort: tuple[bool, ...] = (False, True)
    extend: bool = True
    decode_ps1: bool = True
    groups: bool = True
    segments: str = "shared"
    reference_order: bool = True
    checked: Any = True
    shortage_raises: Any = ()
    page_ids: bool = True
    base_api: bool = True
    resize: bool = True
    clear: bool = True
    merge: bool = True
    capacity_hooks: bool = True
    capacity_context: bool = True
    ownership: bool = True
    slot_forms: tuple[str, ...] = SLOT_FORMS
    divergences: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    declared_fields: frozenset[str] | None = field(default=None, compare=False, repr=False)
    checked_calls: CheckedCalls = ()
    lacking: tuple[str, ...] = field(default=(), compare=False)
    page_overrides: tuple[tuple[int, tuple[tuple[str, Any], ...]], ...] = ()
    # fields a family's targets do not use: not printed (HybridCapabilities names some)
    UNUSED: ClassVar[tuple[str, ...]] = ()
    # the calls bad input is sent to (``checked``'s per-call keys)
    CHECKABLE_CALLS: ClassVar[tuple[str, ...]] = (
        "alloc", "free", "alloc_extend", "alloc_decode", "free_segments", "free_group_begin"
    )
    # a call that bad input also goes through -> the checkable call whose declaration covers
    # it: a page id named twice is sent to free_page_ids, checked with free()
    CHECKED_WITH: ClassVar[Mapping[str, str]] = MappingProxyType({"free_page_ids": "free"})

    def __new__(cls, *args: object, **kwargs: object) -> Capabilities:
        """Record which fields the constructor call names (``declared_fields``)."""
        self = super().__new__(cls)
        names = [f.name for f in dataclasses.fields(cls) if f.init][: len(args)] + list(kwargs)
        object.__setattr__(self, "_named", frozenset(names) - set(META_FIELDS))
        return self

    def __post_init__(self) -> None:
        if self.declared_fields is None:
            object.__setattr__(self, "declared_fields", getattr(self, "_named", frozenset()))
        checked, per_call = checked_form(self.checked, self.CHECKABLE_CALLS)
        object.__setattr__(self, "checked", checked)
        if per_call:
            object.__setattr__(self, "checked_calls", per_call)
        object.__setattr__(self, "shortage_raises", error_types(self.shortage_raises))
        if self.segments not in SEGMENT_MODES:
            raise ValueError(f"segments must be one of {SEGMENT_MODES}, got {self.segments!r}")
        forms = self.slot_forms
        if isinstance(forms, str):  # the --declare form: int32+strided, - for none
            forms = tuple(f for f in forms.split("+") if f not in ("", "-"))
        if any(f not in SLOT_FORMS for f in forms):
            raise ValueError(f"slot_forms takes {'+'.join(SLOT_FORMS)} or -, got {forms!r}")
        object.__setattr__(self, "slot_forms", tuple(forms))
        if not self.page_sizes or any(ps < 1 for ps in self.page_sizes):
            raise ValueError(f"page_sizes must be positive, got {self.page_sizes!r}")
        if not self.paged and self.page_sizes != (1,):
            raise ValueError("a token allocator supports page size 1 only")

    def at(self, page_size: int) -> Capabilities:
        """The capabilities a configuration of ``page_size`` runs under: these with that page
        size's ``page_overrides`` applied (source ``inferred``), or these where it has none."""
        changes = dict(self.page_overrides).get(page_size)
        if not changes:
            return self
        return dataclasses.replace(self, page_overrides=()).with_source("inferred", **dict(changes))

    @property
    def error_types(self) -> ErrorTypes:
        """The exception classes accepted as a rejection of a bad call (empty: unchecked)."""
        return self.checked  # type: ignore[no-any-return]

    def checks(self, call: str) -> bool:
        """Whether bad input is sent to ``call`` (its rejections are then required); a call in
        ``CHECKED_WITH`` is checked with the call it names."""
        call = self.CHECKED_WITH.get(call, call)
        return bool(self.checked) and (
            not self.checked_calls or any(name == call for name, _ in self.checked_calls)
        )

    def error_types_for(self, call: str) -> ErrorTypes:
        """The exception classes accepted as ``call``'s rejection of a bad call (a call in
        ``CHECKED_WITH``: those declared for the call it names)."""
        if not self.checked_calls:
            return self.error_types
        return dict(self.checked_calls).get(self.CHECKED_WITH.get(call, call), ())

    @property
    def complete(self) -> bool:
        """Every field declared (nothing left to infer)."""
        return self.declared_fields is not None and self.declared_fields >= set(field_names(self))

    def replace(self, **changes: object) -> Capabilities:
        """A copy with some fields changed (their sources kept; they count as declared)."""
        if "checked" in changes and "checked_calls" not in changes:
            changes["checked_calls"] = ()  # a new ``checked`` replaces the per-call form
        named = (self.declared_fields or frozenset()) | (set(changes) - set(META_FIELDS))
        changes.setdefault("declared_fields", frozenset(named))
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def with_source(self, source: str, **changes: object) -> Capabilities:
        """A copy with ``changes`` applied and recorded as coming from ``source``."""
        kept = tuple((k, v) for k, v in self.sources if k not in changes)
        return self.replace(**changes, sources=kept + tuple((k, source) for k in changes))

    def source_of(self, name: str) -> str:
        """``declared``, ``inferred``, ``default`` or ``option`` for the field ``name``."""
        return dict(self.sources).get(name, "declared")

    def value_text(self, name: str) -> str:
        """A field's value in the ``--declare`` syntax."""
        value = getattr(self, name)
        if name == "checked" and self.checked_calls:
            groups: dict[ErrorTypes, list[str]] = {}
            for call, types in self.checked_calls:
                groups.setdefault(types, []).append(call)
            return "/".join(f"{'+'.join(c)}:{_types_text(t)}" for t, c in groups.items())
        if name in ERROR_FIELDS:
            return _types_text(value)
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return "+".join(str(v).lower() for v in value) or "-"
        return str(value)

    def in_force(self, path: str, order: str | None = None, order_source: str = "") -> str:
        """The line a run starts with: every capability, its value and where it came from."""
        mode = order or ("exact" if self.reference_order else "contract")
        src = order_source or ("option" if order else self.source_of("reference_order"))
        fields = [
            f.name
            for f in dataclasses.fields(self)
            if f.name not in (*META_FIELDS, "divergences", *self.UNUSED)
        ]
        items = [f"{n}={self.value_text(n)} ({self.source_of(n)})" for n in fields]
        if self.divergences:
            items.append(f"divergences={'+'.join(self.divergences)} (declared)")
        for ps, changes in self.page_overrides:
            at = self.at(ps)
            told = "+".join(f"{n}={at.value_text(n)}" for n, _ in changes)
            items.append(f"at page size {ps}: {told} (inferred)")
        return f"capabilities in force for {path}: order={mode} ({src}), " + ", ".join(items)

    def describe(self) -> str:
        """One line naming what is switched off relative to a full paged allocator."""
        off = [
            f.name
            for f in dataclasses.fields(self)
            if f.name not in ("paged", *META_FIELDS)
            and (isinstance(getattr(self, f.name), bool) or f.name == "checked")
            and not getattr(self, f.name)
        ]
        kind = "paged" if self.paged else "token"
        seg = "" if self.segments == "shared" else f" segments={self.segments}"
        at = "".join(f"; at ps={ps}: {self.at(ps).describe()}" for ps, _ in self.page_overrides)
        return f"{kind} ps={list(self.page_sizes)}{seg}" + (f" off={off}" if off else "") + at


def field_names(caps: Capabilities | type[Capabilities]) -> list[str]:
    """The fields that say what a target supports (``META_FIELDS`` left out)."""
    return [f.name for f in dataclasses.fields(caps) if f.name not in META_FIELDS]


def _types_text(value: ErrorTypes) -> str:
    if not value:
        return "false"
    if value == (_contract_violation(),):
        return "true"
    return "+".join(_class_name(t) for t in value)


def _class_name(cls: type) -> str:
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def merge_declared(declared: Capabilities, base: Capabilities) -> Capabilities:
    """``declared``'s fields where its declaration names them, ``base``'s (with their sources:
    inferred or default) for every other field; the result counts as complete.

    A declared ``paged=False`` without ``page_sizes`` takes page size 1 (a token allocator)."""
    named = declared.declared_fields or frozenset()
    changes: dict[str, Any] = {n: getattr(base, n) for n in field_names(base) if n not in named}
    if "checked" not in named:
        changes["checked_calls"] = base.checked_calls
    if "paged" in named and not declared.paged and "page_sizes" not in named:
        changes.update(page_sizes=(1,), extend=False)
    sources = tuple((k, v) for k, v in base.sources if k not in named and k in changes)
    sources += tuple((k, v) for k, v in declared.sources if k in named)
    everything = frozenset(field_names(base))
    return dataclasses.replace(declared, **changes, sources=sources, declared_fields=everything)


def declare_all(caps: Capabilities) -> Capabilities:
    """``caps`` with every field counted as declared (nothing left to infer)."""
    return dataclasses.replace(caps, declared_fields=frozenset(field_names(caps)))


# A field of :class:`Capabilities`, its value when a method is missing, the methods it needs
# (what inference switches off, and what a failure's hint names for a missing method).
METHOD_RULES: tuple[tuple[str, object, tuple[str, ...]], ...] = (
    ("extend", False, ("alloc_extend", "alloc_decode")),
    ("decode_ps1", False, ("alloc_decode",)),
    ("groups", False, ("free_group_begin", "free_group_end")),
    ("segments", "none", ("free_segment", "free_segments")),
    ("page_ids", False, ("free_page_ids",)),
    ("base_api", False, ("free_full", "translate_kv_indices_for_transfer", "verify_byte_accounting")),  # noqa: E501
    ("merge", False, ("merge_and_sort_free",)),
    ("need_sort", (False,), ("merge_and_sort_free",)),
    ("clear", False, ("clear",)),
    ("resize", False, ("resize",)),
    ("capacity_hooks", False, ("evict_to_free_tokens", "check_decode_capacity")),
)

# Full declarations: every field declared (``.replace(...)`` keeps them complete).
TOKEN = declare_all(Capabilities(paged=False, page_sizes=(1,), extend=False))
PAGED = declare_all(Capabilities())
# What an undeclared factory is assumed to be before its methods are looked at: every field
# the methods cannot tell comes from here (source ``default``).
_ASSUMED = Capabilities(checked=False, reference_order=False, slot_forms=())
UNDECLARED = _ASSUMED.with_source(
    "default", **{n: getattr(_ASSUMED, n) for n in field_names(_ASSUMED)}
)


def declared_capabilities(factory: object) -> Capabilities | None:
    """``factory.kvpool_capabilities``, or None when the factory declares nothing."""
    caps = getattr(factory, "kvpool_capabilities", None)
    if caps is not None and not isinstance(caps, Capabilities):
        raise TypeError(f"{factory!r}.kvpool_capabilities is not a Capabilities")
    return caps


def capabilities_of(factory: object) -> Capabilities:
    """The capabilities a factory declares, else ``UNDECLARED`` (before inference); a partial
    declaration is completed from ``UNDECLARED`` (no inference: see ``load_target``)."""
    declared = declared_capabilities(factory)
    if declared is None:
        return UNDECLARED
    return declared if declared.complete else merge_declared(declared, UNDECLARED)

