"""From a target string and options to what will run: targets, capabilities in force, configs.

One resolution for the command line and the pytest plugin, so both accept the same options and
reject the same mistakes. Everything a user can get wrong before a single call ran is a
:class:`UsageError` (exit status 2): an unknown target, a factory that cannot be built (with its
traceback), a bad declaration, a page size that is invalid or not declared, a ``need_sort``
value not declared, a device this machine does not have, an empty configuration matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..engine.declaration import parse_declaration
from ..engine.target import Config, Target
from ..families.single.inference import FactoryError, build, lacking
from ..families.single.targets import configs_for


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


def plan_family(
    family: str,
    spec: str | None,
    *,
    page_sizes: Sequence[int] | None = None,
    need_sort: Sequence[bool] | None = None,
    declare: str | None = None,
    device: str = "cpu",
) -> list[Planned]:
    """``plan`` for a family other than the single pool: ``spec`` is a comma list of the
    family's aliases or ``module:factory`` paths (default: its first alias), capabilities from
    the family's declaration attribute (undeclared: the family's defaults).

    Raises :class:`UsageError` for an unknown target or option value.
    """
    import importlib

    from ..engine.families import family as family_of

    fam = family_of(family)
    out = []
    for name in (spec or next(iter(fam.aliases))).split(","):
        factory = fam.aliases.get(name)
        if factory is None:
            module, sep, attr = name.partition(":")
            if not sep:
                raise UsageError(f"{name!r}: not one of {sorted(fam.aliases)} nor module:factory")
            try:
                factory = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError) as err:
                raise UsageError(f"{name}: {type(err).__name__}: {err}") from None
        target = family_of(family).target(factory)
        apply_options(
            target,
            declare=declare,
            page_sizes=page_sizes,
            need_sort=need_sort,
            declared=hasattr(factory, fam.caps_attr),
        )
        configs = [
            Config(ps, ns, device, "exact")
            for ps in target.caps.page_sizes
            for ns in target.caps.need_sort
            if (not page_sizes or ps in page_sizes) and (not need_sort or ns in need_sort)
        ]
        out.append(Planned(target, configs))
    return out


def plan(
    spec: str | None,
    *,
    order: str | None = None,
    page_sizes: Sequence[int] | None = None,
    need_sort: Sequence[bool] | None = None,
    declare: str | None = None,
    device: str = "cpu",
    family: str = "single",
) -> list[Planned]:
    """Resolve ``spec`` (``module:factory``, an alias, a comma list) and the options.

    Raises :class:`UsageError` for every mistake listed in the module docstring.
    """
    from ..engine.target import TargetError
    from ..families.single.targets import expand, load_target, probe

    bad = [ps for ps in page_sizes or () if ps < 1]
    if bad:
        raise UsageError(f"page size {bad[0]} is invalid: page sizes are integers >= 1")
    check_device(device)
    if family != "single":
        return plan_family(
            family, spec, page_sizes=page_sizes, need_sort=need_sort, declare=declare, device=device
        )
    out = []
    for path in expand(spec):
        try:
            target = load_target(path, device=device)
            probe(target)
        except TargetError as err:
            raise UsageError(str(err)) from None
        except FactoryError as err:
            raise UsageError(f"{path}: {err}", err.trace) from None
        apply_options(target, declare=declare, page_sizes=page_sizes, need_sort=need_sort)
        caps = target.caps
        configs = list(
            configs_for(
                caps,
                order=order,
                page_sizes=list(page_sizes) if page_sizes else None,
                need_sort=list(need_sort) if need_sort else None,
                device=device,
            )
        )
        if not configs:
            raise UsageError(f"no configuration matches the options ({path}: {caps.describe()})")
        for ps in sorted({c.page_size for c in configs}):
            try:
                instance = build(target.factory, page_size=ps, device=device)
            except FactoryError as err:
                raise UsageError(f"{path}: {err}", err.trace) from None
            missing = lacking(target.caps, instance)
            if missing and not target.caps.lacking:
                target.caps = target.caps.replace(lacking=missing)
                target.notes.append(
                    f"declared but its methods are missing: {', '.join(missing)}"
                )
        out.append(Planned(target, configs, order))
    return out
