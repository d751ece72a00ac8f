"""From a target string and options to what will run: targets, capabilities in force, configs.

One resolution for the command line and the pytest plugin, so both accept the same options and
reject the same mistakes. Everything a user can get wrong before a single call ran is a
:class:`UsageError` (exit status 2): an unknown target, a factory that cannot be built (with its
traceback), a bad declaration, a page size that is invalid or not declared, a ``need_sort``
value not declared, a device this machine does not have, an empty configuration matrix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..engine.declaration import parse_declaration
from ..engine.registry import DEFAULT_FAMILY
from ..engine.target import Config, Target, TargetError, probe_peer

if TYPE_CHECKING:  # the family's module loads with its record, when a plan is made
    from ..engine.capabilities import Capabilities
    from ..engine.families import Family


class UsageError(Exception):
    """A mistake in the target or the options; ``trace`` is the constructor's traceback."""

    def __init__(self, message: str, trace: str = "") -> None:
        super().__init__(message)
        self.trace = trace


@dataclass
class Planned:
    """One target with its capabilities in force and the configurations it runs."""

    target: Target
    configs: list[Config] = field(default_factory=list)
    order: str | None = None

    def in_force(self) -> str:
        return self.target.caps.in_force(self.target.path, self.order)


def check_device(device: str) -> None:
    """Raise :class:`UsageError` unless a tensor can be made on ``device`` here."""
    import torch

    try:
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"device {device!r} is not available on this machine: {first}") from None


def _join(values: Sequence[object]) -> str:
    return "+".join(str(v).lower() for v in values)


def apply_options(
    target: Target,
    *,
    declare: str | None,
    page_sizes: Sequence[int] | None,
    need_sort: Sequence[bool] | None,
    declared: bool | None = None,
) -> None:
    """Options on an undeclared factory declare; on a declared one they only select.

    ``declared``: whether the factory declares its page sizes (default: their source is
    ``declared``). Raises :class:`UsageError` for a bad declaration or a value the
    target does not declare.
    """
    caps = target.caps
    if declared is None:  # a partial declaration that leaves page_sizes out: options declare
        declared = caps.source_of("page_sizes") == "declared"
    if not declared:
        changes: dict[str, object] = {}
        if page_sizes:
            changes["page_sizes"] = tuple(page_sizes)
        if need_sort:
            changes["need_sort"] = tuple(need_sort)
        try:
            caps = caps.with_source("option", **changes) if changes else caps
        except ValueError as err:
            raise UsageError(f"{target.path}: {err}") from None
    try:
        if declare:
            caps = parse_declaration(declare, caps)
    except (ValueError, TypeError) as err:
        raise UsageError(f"{target.path}: --declare: {err}") from None
    target.caps = caps
    for ps in page_sizes or ():
        if ps not in caps.page_sizes:
            raise UsageError(
                f"page size {ps} is not declared by {target.path} (declared: "
                f"{_join(caps.page_sizes)}; to run it: --declare page_sizes="
                f"{_join(sorted({*caps.page_sizes, ps}))})"
            )
    for ns in need_sort or ():
        if ns not in caps.need_sort:
            raise UsageError(
                f"need_sort={str(ns).lower()} is not declared by {target.path} (declared: "
                f"{_join(caps.need_sort)})"
            )


@dataclass(frozen=True)
class Options:
    """The options a plan applies to every target (as :func:`plan` takes them)."""

    order: str | None = None  # exact / contract; None: what the target declares
    page_sizes: Sequence[int] | None = None  # None: the declared ones
    need_sort: Sequence[bool] | None = None  # None: the declared ones
    declare: str | None = None  # ``--declare KEY=VALUE,...``
    device: str = "cpu"
    # the capabilities in force for every target, in place of its declaration (the options
    # then only select among them); None: each target's declaration
    caps: Capabilities | None = None


def plan_family(
    family: str, spec: str | Callable[..., Any] | None, options: Options
) -> list[Planned]:
    """``plan`` for a family without a planner of its own: ``spec`` is a factory object or a
    comma list of the family's aliases (each expanded to its factories) or ``module:factory``
    paths (default: the registry's default target), capabilities ``options.caps`` else the
    family's declaration attribute (undeclared: the family's defaults), every configuration
    compared in the exact order (``options.order`` is not read).

    Raises :class:`UsageError` for an unknown target or option value.
    """
    from ..engine.families import family as family_of

    fam = family_of(family)
    if callable(spec):
        return [_planned(fam, spec, options)]
    out = []
    for name in (spec or fam.default_target).split(","):
        if ":" not in name and name not in fam.aliases:
            raise UsageError(f"{name!r}: not one of {sorted(fam.aliases)} nor module:factory")
        for path in fam.aliases.get(name, (name,)):
            try:
                factory = fam.factory(path)
            except (ImportError, AttributeError, ValueError) as err:
                raise UsageError(f"{name}: {type(err).__name__}: {err}") from None
            out.append(_planned(fam, factory, options))
    return out


def _planned(fam: Family, factory: Callable[..., Any], options: Options) -> Planned:
    """``factory`` as a target of ``fam`` with the options applied and its configurations."""
    page_sizes, need_sort = options.page_sizes, options.need_sort
    try:
        probe_peer(factory, getattr(factory, "__qualname__", repr(factory)))
    except TargetError as err:
        raise UsageError(str(err)) from err
    target = fam.target(factory, options.caps)
    apply_options(target, declare=options.declare, page_sizes=page_sizes, need_sort=need_sort,
                  declared=options.caps is not None or hasattr(factory, fam.caps_attr))
    configs = [
        Config(ps, ns, options.device, "exact")
        for ps in target.caps.page_sizes
        for ns in target.caps.need_sort
        if (not page_sizes or ps in page_sizes) and (not need_sort or ns in need_sort)
    ]
    return Planned(target, configs)


def plan(
    spec: str | Callable[..., Any] | None,
    *,
    order: str | None = None,
    page_sizes: Sequence[int] | None = None,
    need_sort: Sequence[bool] | None = None,
    declare: str | None = None,
    device: str = "cpu",
    family: str = DEFAULT_FAMILY,
    caps: Capabilities | None = None,
) -> list[Planned]:
    """Resolve ``spec`` (``module:factory``, an alias of ``family``, a comma list, a factory
    object; none: the family's default target) and the options, by the family's ``planner``
    (else :func:`plan_family`). ``caps``: the capabilities in force for every target, in place
    of its declaration (:class:`Options`).

    Raises :class:`UsageError` for every mistake listed in the module docstring and for an
    unknown family.
    """
    from ..engine.families import family as family_of

    bad = [ps for ps in page_sizes or () if ps < 1]
    if bad:
        raise UsageError(f"page size {bad[0]} is invalid: page sizes are integers >= 1")
    check_device(device)
    try:
        fam = family_of(family)
    except ValueError as err:
        raise UsageError(str(err)) from None
    options = Options(order, page_sizes, need_sort, declare, device, caps)
    if fam.planner is not None:
        return fam.planner(spec, options)
    return plan_family(family, spec, options)
