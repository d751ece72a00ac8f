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
    if declared is not None:
        caps = merge_declared(declared, caps)
        caps = caps.replace(lacking=lacking(caps, instance))
    return caps, notes


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
