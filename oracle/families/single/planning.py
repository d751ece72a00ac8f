"""How a target string of the single family becomes what runs (its ``Family.planner``).

``spec`` is a factory object, or a comma list of the family's aliases (its registry record's,
each expanded to its factories) and ``module:factory`` paths; none: the record's default
target. A factory's capabilities are ``Options.caps`` where given, else its declaration, with
what it leaves out inferred from one instance (:mod:`.inference`); the configurations are its
page sizes x ``need_sort`` values, filtered by the options (:func:`.targets.configs_for`).
Declared capabilities whose methods an instance lacks are recorded (``Capabilities.lacking``)
with a note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...engine.target import TargetError
from ...entry.plan import Options, Planned, UsageError, apply_options
from .inference import FactoryError, build, lacking
from .targets import configs_for, expand, load_target, probe


def plan_targets(spec: str | Callable[..., Any] | None, options: Options) -> list[Planned]:
    """One :class:`Planned` per factory ``spec`` names (see the module docstring). Raises
    :class:`UsageError` for a target that does not import or build, a peer that is not
    installed (raised from the peer's ``PeerNotInstalled``, for the availability rule), a bad
    declaration, or options no configuration matches."""
    order, page_sizes, need_sort = options.order, options.page_sizes, options.need_sort
    declare, device = options.declare, options.device
    out = []
    for path in [spec] if callable(spec) else expand(spec):
        try:
            target = load_target(path, options.caps, device=device)
            probe(target)
        except TargetError as err:
            raise UsageError(str(err)) from err
        except FactoryError as err:
            raise UsageError(f"{path}: {err}", err.trace) from None
        apply_options(target, declare=declare, page_sizes=page_sizes, need_sort=need_sort,
                      declared=True if options.caps is not None else None)
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
            missing = lacking(target.caps.at(ps), instance)
            if missing and not target.caps.lacking:
                target.caps = target.caps.replace(lacking=missing)
                target.notes.append(
                    f"declared but its methods are missing: {', '.join(missing)}"
                )
        out.append(Planned(target, configs, order))
    return out
