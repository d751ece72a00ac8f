"""The allocator families the one engine serves, as data.

A :class:`Family` is what differs between allocator kinds: the call table (spec form, target
form, repro source, slot-carrying arguments, the clauses each call can fail), the scheduler
model that draws realistic calls (a Hypothesis state machine), the executor (the spec model and
the census comparison on top of :class:`~kvpool.oracle.engine.Engine`), the clause map (coverage
events, clause accounting) and the capability declaration's class and attribute. Running,
shrinking, replay, minimization, repros, coverage, clause accounting, the CLI and the pytest
plugin take a family and are written once.

The registry (:mod:`.registry`) names the module that defines each family's ``FAMILY`` and
holds its default budget; :func:`family` imports only the one asked for. That keeps a run's
start-up to its own family and keeps the single-pool run's examples independent of the other
families' code (Hypothesis draws integers partly from the constants of the loaded local
modules). A new family is one module and one registry entry.
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
from .registry import FAMILIES, FAMILY_MODULES
from .target import Config, Target


@dataclass(frozen=True)
class Family:
    """One allocator family (see the module docstring)."""

    name: str
    calls: Mapping[str, Call]
    executor: type[Engine]
    machine_for: Callable[[Target, Config], type[Any]]
    clauses: ClauseMap
    caps_class: type[Capabilities]
    caps_attr: str  # the factory attribute that declares its capabilities
    aliases: Mapping[str, Callable[..., Any]]  # target names the CLI accepts

    @property
    def default_examples(self) -> int:
        """Examples per configuration when none are asked for (the registry's)."""
        return FAMILIES[self.name].examples

    @property
    def default_steps(self) -> int:
        """Calls per example when none are asked for (rules; a rule may make several calls;
        the registry's)."""
        return FAMILIES[self.name].steps

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
    if name not in FAMILY_MODULES:
        raise ValueError(f"unknown allocator family {name!r}; known: {sorted(FAMILY_MODULES)}")
    found: Family = importlib.import_module(FAMILY_MODULES[name]).FAMILY
    return found


def all_mapped() -> set[str]:
    """Every clause some family's run can exercise."""
    return set().union(*(family(name).clauses.mapped() for name in FAMILY_MODULES))
