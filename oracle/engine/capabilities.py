"""What a target allocator supports: the oracle runs only the rules a target supports.

A target is a factory ``factory(size=..., page_size=..., need_sort=..., device=...)`` returning an
object with SGLang's allocator methods. Its :class:`Capabilities` come from three places, each
recorded per field in ``Capabilities.sources``:

- *declared*: the attribute ``factory.kvpool_capabilities`` (a :class:`Capabilities`);
- *inferred*: for a factory that declares nothing, the methods of one instance decide which
  rules run (:mod:`kvpool.oracle.inference`); what no method tells is *default*: unchecked (no
  bad input is sent), contract order, page sizes 1 and 4;
- *option*: ``--declare KEY=VALUE,...`` / ``--page-sizes`` / ``--need-sort`` (CLI) or the pytest
  plugin's ``--kvpool-declare`` / ``--kvpool-page-sizes`` / ``--kvpool-need-sort``.

:meth:`Capabilities.in_force` is the one line every run starts with.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

SEGMENT_MODES = ("shared", "disjoint", "none")
ERROR_FIELDS = ("checked", "shortage_raises")  # fields holding exception types
ErrorTypes = tuple[type[BaseException], ...]


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


@dataclass(frozen=True)
class Capabilities:
    """The rules a target supports (docs/writing-a-target.md lists every field).

    Attributes:
        paged: a paged allocator (``free`` releases whole pages); ``False`` for a token
            allocator (page size 1, no ``alloc_extend`` / ``alloc_decode``).
        page_sizes: page sizes the factory accepts (a token allocator: ``(1,)``).
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
            Always stored as a tuple of classes.
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
        divergences: ids of ``kvpool.oracle.divergences.REGISTRY`` entries that explain what is
            switched off.
        sources: where a field's value came from (``inferred``, ``default``, ``option``);
            a field not named here was declared. Not compared.
    """

    paged: bool = True
    page_sizes: tuple[int, ...] = (1, 4)
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
    divergences: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # fields a family's targets do not use: not printed (HybridCapabilities names some)
    UNUSED: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "checked", error_types(self.checked))
        object.__setattr__(self, "shortage_raises", error_types(self.shortage_raises))
        if self.segments not in SEGMENT_MODES:
            raise ValueError(f"segments must be one of {SEGMENT_MODES}, got {self.segments!r}")
        if not self.page_sizes or any(ps < 1 for ps in self.page_sizes):
            raise ValueError(f"page_sizes must be positive, got {self.page_sizes!r}")
        if not self.paged and self.page_sizes != (1,):
            raise ValueError("a token allocator supports page size 1 only")

    @property
    def error_types(self) -> ErrorTypes:
        """The exception classes accepted as a rejection of a bad call (empty: unchecked)."""
        return self.checked  # type: ignore[no-any-return]

    def replace(self, **changes: object) -> Capabilities:
        """A copy with some fields changed (their sources kept)."""
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
        if name in ERROR_FIELDS:
            if not value:
                return "false"
            if value == (_contract_violation(),):
                return "true"
            return "+".join(_class_name(t) for t in value)
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
            if f.name not in ("sources", "divergences", *self.UNUSED)
        ]
        items = [f"{n}={self.value_text(n)} ({self.source_of(n)})" for n in fields]
        if self.divergences:
            items.append(f"divergences={'+'.join(self.divergences)} (declared)")
        return f"capabilities in force for {path}: order={mode} ({src}), " + ", ".join(items)

    def describe(self) -> str:
        """One line naming what is switched off relative to a full paged allocator."""
        off = [
            f.name
            for f in dataclasses.fields(self)
            if f.name not in ("paged", "sources")
            and (isinstance(getattr(self, f.name), bool) or f.name == "checked")
            and not getattr(self, f.name)
        ]
        kind = "paged" if self.paged else "token"
        seg = "" if self.segments == "shared" else f" segments={self.segments}"
        return f"{kind} ps={list(self.page_sizes)}{seg}" + (f" off={off}" if off else "")


def _class_name(cls: type) -> str:
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def exception_class(name: str) -> type[BaseException]:
    """A builtin exception by name (``ValueError``) or a class by dotted path
    (``mypkg.errors.AllocError``). Raises ValueError naming what is wrong."""
    if "." not in name:
        found = getattr(builtins, name, None)
    else:
        module_name, _, attr = name.rpartition(".")
        try:
            found = getattr(importlib.import_module(module_name), attr, None)
        except ImportError as err:
            raise ValueError(f"checked: cannot import {module_name!r} ({err})") from None
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise ValueError(f"checked: {name!r} is not an exception class")
    return found


def _parse_bool(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0"):
        raise ValueError(f"{key} takes true or false, got {value!r}")
    return value.lower() in ("true", "1")


def parse_declaration(text: str, base: Capabilities, source: str = "option") -> Capabilities:
    """``base`` changed by ``"checked=ValueError,segments=disjoint,page_sizes=4+16"``.

    Booleans take true/false; ``page_sizes`` and ``need_sort`` take ``+``-separated values;
    ``checked`` takes true/false or ``+``-separated exception classes (a builtin name or a dotted
    path). The changed fields are recorded as coming from ``source``. Raises ValueError naming
    the bad item.
    """
    changes: dict[str, object] = {}
    names = [f.name for f in dataclasses.fields(Capabilities) if f.name != "sources"]
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in names or key == "divergences":
            raise ValueError(f"unknown capability {item!r} (fields: {', '.join(names[:-1])})")
        if key in ERROR_FIELDS:
            low = value.lower()
            changes[key] = (
                _parse_bool(key, value)
                if low in ("true", "false", "1", "0")
                else tuple(exception_class(v) for v in value.split("+"))
            )
        elif key == "page_sizes":
            try:
                changes[key] = tuple(int(v) for v in value.split("+"))
            except ValueError:
                raise ValueError(f"page_sizes takes integers like 1+16, got {value!r}") from None
        elif key == "need_sort":
            changes[key] = tuple(_parse_bool(key, v) for v in value.split("+"))
        elif isinstance(getattr(base, key), bool):
            changes[key] = _parse_bool(key, value)
        else:
            changes[key] = value
    return base.with_source(source, **changes)


TOKEN = Capabilities(paged=False, page_sizes=(1,), extend=False)
PAGED = Capabilities()
# What an undeclared factory is assumed to be before its methods are looked at.
UNDECLARED = Capabilities(checked=False, reference_order=False).with_source(
    "default", page_sizes=(1, 4), checked=False, reference_order=False, capacity_context=True
)


def declared_capabilities(factory: object) -> Capabilities | None:
    """``factory.kvpool_capabilities``, or None when the factory declares nothing."""
    caps = getattr(factory, "kvpool_capabilities", None)
    if caps is not None and not isinstance(caps, Capabilities):
        raise TypeError(f"{factory!r}.kvpool_capabilities is not a Capabilities")
    return caps


def capabilities_of(factory: object) -> Capabilities:
    """The capabilities a factory declares, else ``UNDECLARED`` (before inference)."""
    return declared_capabilities(factory) or UNDECLARED
