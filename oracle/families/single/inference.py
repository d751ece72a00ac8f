"""Capabilities a factory does not declare, read off one instance's methods.

The oracle builds one instance (``size`` of 16 pages at page size 4, or at the largest declared
page size; if the factory rejects it, at page size 1, and then it is a token allocator) and
switches off the rules whose methods are missing (``METHOD_RULES``). Everything no method tells
keeps the ``UNDECLARED`` default: unchecked (no bad input is sent), contract order, page sizes
1, 4 and 16 (an instance is built at each; a size the factory rejects is left out). A partial
declaration (``Capabilities(checked=X)``) keeps its declared fields and takes the rest from here
(``merge_declared``). A factory whose instance lacks one of the ``REQUIRED`` methods, or that
cannot be built at all, is a usage error (:class:`FactoryError`, with the constructor's
traceback). :func:`lacking` lists declared capabilities whose methods are missing.

Inference is per page size where the instances differ in kind: a paged factory whose page-size-1
instance is a token allocator (no ``alloc_extend``, or one raising ``NotImplementedError`` as
``EXTEND-9`` says; SGLang's construction site: ``TokenToKVPoolAllocator`` at page size 1, a
paged allocator above) is judged as a token allocator at page size 1, with that instance's
methods, and as paged above (``Capabilities.page_overrides``, one note).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from ...engine.capabilities import METHOD_RULES, UNDECLARED, Capabilities, merge_declared

PROBE_PAGES = 16
# Without these the oracle cannot compare anything.
REQUIRED = ("alloc", "free", "available_size", "get_all_free_pages")


class FactoryError(Exception):
    """The factory cannot be built or lacks a required method (a usage error).

    ``trace`` holds the constructor's formatted traceback when it raised."""

    def __init__(self, message: str, trace: str = "") -> None:
        super().__init__(message)
        self.trace = trace


def build(factory: Callable[..., Any], *, page_size: int, device: str = "cpu") -> Any:
    """One instance of ``PROBE_PAGES`` pages; raises :class:`FactoryError` with the traceback."""
    try:
        return factory(
            size=PROBE_PAGES * page_size, page_size=page_size, need_sort=False, device=device
        )
    except Exception as err:
        raise FactoryError(
            f"the factory raised {type(err).__name__}: {err} when built with "
            f"size={PROBE_PAGES * page_size}, page_size={page_size}, need_sort=False, "
            f"device={device!r}",
            traceback.format_exc(),
        ) from err


def missing_methods(instance: object, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if not callable(getattr(instance, n, None))]


def infer(
    factory: Callable[..., Any], *, device: str = "cpu", declared: Capabilities | None = None
) -> tuple[Capabilities, list[str]]:
    """The capabilities of a factory and one note per inference made: ``declared``'s fields
    where it declares them (``Capabilities.declared_fields``), inferred or default elsewhere.

    Raises :class:`FactoryError` when no instance can be built or a ``REQUIRED`` method is
    missing.
    """
    notes: list[str] = []
    caps = UNDECLARED
    named = (declared.declared_fields or frozenset()) if declared is not None else frozenset()
    probe_ps = max(declared.page_sizes) if declared is not None and "page_sizes" in named else 4
    probe_ps = probe_ps if probe_ps > 1 else 4  # page size 1 cannot tell a token allocator
    try:
        instance = build(factory, page_size=probe_ps, device=device)
    except FactoryError as paged_err:
        try:
            instance = build(factory, page_size=1, device=device)
        except FactoryError:
            raise paged_err from None
        caps = caps.with_source("inferred", paged=False, page_sizes=(1,), extend=False)
        notes.append(f"a token allocator: page size {probe_ps} is rejected ({paged_err})")
    else:
        caps = caps.with_source("inferred", paged=True)
        if "page_sizes" not in named:
            caps = _accepted_page_sizes(factory, caps, probe_ps, device, notes)
    lacking_required = missing_methods(instance, REQUIRED)
    if lacking_required:
        raise FactoryError(
            f"the allocator lacks {', '.join(lacking_required)} (needed for every comparison; "
            "docs/writing-a-target.md lists the methods each capability needs)"
        )
    for name, off_value, methods in METHOD_RULES:
        absent = missing_methods(instance, methods)
        if name in named:
            continue
        if absent and getattr(caps, name) != off_value:
            caps = caps.with_source("inferred", **{name: off_value})
            notes.append(f"{name}={caps.value_text(name)}: no {', '.join(absent)}")
        elif not absent:
            caps = caps.with_source("inferred", **{name: getattr(caps, name)})
    overrides = _token_at_page_size_1(factory, caps, instance, named, device, notes)
    if declared is not None:
        caps = merge_declared(declared, caps)
        caps = caps.replace(lacking=lacking(caps, instance))
    if overrides:
        caps = caps.replace(page_overrides=((1, overrides),))
    return caps, notes


def _token_at_page_size_1(
    factory: Callable[..., Any],
    caps: Capabilities,
    paged_instance: object,
    named: frozenset[str],
    device: str,
    notes: list[str],
) -> tuple[tuple[str, Any], ...]:
    """The fields that differ at page size 1 when the factory returns a token allocator there
    (:func:`is_token_allocator`) and a paged one at the probed page size: those a token-only factory
    gets, then what its page-size-1 instance's methods switch off (one note); empty when the
    kinds agree, page size 1 is not run, the kind is declared, or it does not build there (the
    plan reports that)."""
    if not caps.paged or 1 not in caps.page_sizes or named & {"paged", "extend"}:
        return ()
    if missing_methods(paged_instance, ("alloc_extend",)):
        return ()
    try:
        token = build(factory, page_size=1, device=device)
    except FactoryError:
        return ()
    if not is_token_allocator(token, device):
        return ()
    changes: dict[str, Any] = {"paged": False, "page_sizes": (1,), "extend": False}
    for name, off_value, methods in METHOD_RULES:
        absent = name not in named and name not in changes and missing_methods(token, methods)
        if absent and getattr(caps, name) != off_value:
            changes[name] = off_value
    paged_at = [ps for ps in caps.page_sizes if ps > 1]
    notes.append(
        f"page size 1: a token allocator ({type(token).__name__}: no alloc_extend but EXTEND-9's), "
        f"judged as one there; paged at page size {', '.join(map(str, paged_at))}"
    )
    return tuple(changes.items())


def _accepted_page_sizes(
    factory: Callable[..., Any], caps: Capabilities, probed: int, device: str, notes: list[str]
) -> Capabilities:
    """``caps`` without the default page sizes (beside 1 and ``probed``, built already) that
    the factory rejects (source ``inferred``, one note each)."""
    kept = list(caps.page_sizes)
    for ps in caps.page_sizes:
        if ps in (1, probed):
            continue
        try:
            build(factory, page_size=ps, device=device)
        except FactoryError as err:
            kept.remove(ps)
            notes.append(f"page size {ps} is rejected ({err})")
    if len(kept) == len(caps.page_sizes):
        return caps
    return caps.with_source("inferred", page_sizes=tuple(kept))


def lacking(caps: Capabilities, instance: object) -> tuple[str, ...]:
    """Every capability ``caps`` switches on whose methods ``instance`` lacks, each as the
    declaration that switches it off (``groups=false``, ``segments=none``); empty when none."""
    out: list[str] = []
    for name, off_value, methods in METHOD_RULES:
        if getattr(caps, name) != off_value and missing_methods(instance, methods):
            if name == "decode_ps1" and "extend=false" in out:
                continue  # implied
            out.append(f"{name}={caps.replace(**{name: off_value}).value_text(name)}")
    return tuple(out)


def is_token_allocator(instance: object, device: str = "cpu") -> bool:
    """Whether ``instance`` is a token allocator: it has no ``alloc_extend``, or its
    ``alloc_extend`` raises ``NotImplementedError`` (``EXTEND-9``) on one request of one new
    token (an instance that takes it is paged; the call may use up one of its slots)."""
    if missing_methods(instance, ("alloc_extend",)):
        return True
    import torch

    one, zero = torch.ones(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64)
    try:
        extend = instance.alloc_extend  # type: ignore[attr-defined]
        extend(zero.to(device), zero, one.to(device), one, (-one).to(device), 1)
    except NotImplementedError:
        return True
    except Exception:  # anything else: not a token allocator's refusal
        return False
    return False
