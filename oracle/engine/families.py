"""The allocator families the one engine serves, as data.

A :class:`Family` is what differs between allocator kinds: the call table (spec form, target
form, repro source, slot-carrying arguments, the clauses each call can fail), the scheduler
model that draws realistic calls (a Hypothesis state machine), the executor (the spec model and
the census comparison on top of :class:`~kvpool.oracle.engine.Engine`), the clause map (coverage
events, clause accounting) and the capability declaration's class and attribute. Running,
shrinking, replay, minimization, repros, coverage, clause accounting, the CLI and the pytest
plugin take a family and are written once.

The registry (:mod:`.registry`) holds the rest of a family's record as data: the module that
defines its ``FAMILY``, its call table, target aliases and default target, a repro's imports,
its default budget and help line; a :class:`Family` reads them from there, and :func:`family`
imports only the one asked for. That keeps a run's
start-up to its own family and keeps the single-pool run's examples independent of the other
families' code (Hypothesis draws integers partly from the constants of the loaded local
modules). A new family is one subpackage and one registry entry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .call import Call
from .capabilities import Capabilities, field_names, merge_declared
from .clausemap import ClauseMap
from .core import Engine
from .registry import FAMILIES, FAMILY_MODULES, Registered, load, registered
from .target import Config, Target


@dataclass(frozen=True)
class Family:
    """One allocator family (see the module docstring)."""

    name: str
    executor: type[Engine]
    machine_for: Callable[[Target, Config], type[Any]]
    clauses: ClauseMap
    caps_class: type[Capabilities]
    caps_attr: str  # the factory attribute that declares its capabilities
    # how a target string (or a factory object) becomes what runs: ``planner(spec,
    # entry.plan.Options)``, a list of ``Planned``; None: ``entry.plan.plan_family`` (aliases,
    # declarations, no inference)
    planner: Callable[[str | Callable[..., Any] | None, Any], list[Any]] | None = None

    @property
    def record(self) -> Registered:
        """The family's registry record (call table, aliases, budgets, help line)."""
        return FAMILIES[self.name]

    @property
    def calls(self) -> Mapping[str, Call]:
        """The call table (the one the registry record names, as :mod:`.calltables` has it)."""
        from .calltables import calls_for

        return calls_for(self.name)

    @property
    def aliases(self) -> Mapping[str, tuple[str, ...]]:
        """Target alias -> the ``module:factory`` paths it runs (the registry's)."""
        return self.record.aliases

    @property
    def default_target(self) -> str:
        """The alias run when no target is named (the registry's)."""
        return self.record.default_target

    @property
    def default_examples(self) -> int:
        """Examples per configuration when none are asked for (the registry's)."""
        return self.record.examples

    @property
    def default_steps(self) -> int:
        """Calls per example when none are asked for (rules; a rule may make several calls;
        the registry's)."""
        return self.record.steps

    def factory(self, name: str) -> Callable[..., Any]:
        """The factory of the alias ``name`` that runs one, or of a ``module:factory`` path.
        Raises ValueError for an alias of several factories or a string that is neither,
        ImportError / AttributeError when the path does not import."""
        paths = self.aliases.get(name, (name,))
        if len(paths) != 1:
            raise ValueError(f"{name!r} runs {len(paths)} factories: {', '.join(paths)}")
        found: Callable[..., Any] = load(paths[0])
        return found

    def target(self, factory: Callable[..., Any], caps: Capabilities | None = None) -> Target:
        """``factory`` as a :class:`Target` of this family: ``caps``, else its declaration
        (``caps_attr``; the fields it does not name as undeclared), else unchecked with the
        class's defaults."""
        if caps is None:
            caps = getattr(factory, self.caps_attr, None)
        assumed = self.caps_class(checked=False)
        default = assumed.with_source(
            "default", **{n: getattr(assumed, n) for n in field_names(assumed)}
        )
        if caps is None:
            caps = default
        elif not caps.complete:  # a partial declaration: the rest is the undeclared default
            caps = merge_declared(caps, default)
        path = f"{factory.__module__}:{factory.__qualname__}"
        return Target(factory, caps, path, family=self.name)


def family(name: str) -> Family:
    """The family called ``name`` (its module imported on first use). Raises ValueError for an
    unknown one."""
    found: Family = importlib.import_module(registered(name).module).FAMILY
    return found


def all_mapped() -> set[str]:
    """Every clause some family's run can exercise."""
    return set().union(*(family(name).clauses.mapped() for name in FAMILY_MODULES))
