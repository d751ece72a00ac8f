"""What every family's scheduler model is bound to: one target, one configuration.

A family's machine class mixes in :class:`FamilyMachine` and names its executor
(``executor_class``); :func:`bind` makes the class for one configuration, carrying the target,
the configuration and the per-configuration records that
:func:`~kvpool.oracle.engine.examples.record_example` fills (``stats``, ``coverage``,
``digest``).
"""

from __future__ import annotations

from collections import Counter
from hashlib import sha256
from typing import Any, ClassVar, TypeVar, cast

from .target import Config, Target

M = TypeVar("M", bound=type)


class FamilyMachine:
    """Mixin for a family's state machine: on creation it takes the page size (``ps``), a fresh
    executor for the bound target and configuration (``ex``), the target's capabilities
    (``caps``) and an empty request list (``rows``)."""

    target: ClassVar[Target]
    config: ClassVar[Config]
    stats: ClassVar[dict[str, int]]
    coverage: ClassVar[Counter[str]]  # coverage events of every example
    executor_class: ClassVar[type[Any]]
    ex: Any
    caps: Any

    def __init__(self) -> None:
        super().__init__()
        cls = type(self)
        self.ps = cls.config.page_size
        self.ex = cls.executor_class(cls.target, cls.config)
        self.caps = cls.target.caps.at(self.ps)
        self.rows: list[Any] = []


def bind(base: M, name: str, target: Target, config: Config) -> M:
    """A subclass of ``base`` named ``name`` bound to ``target`` and ``config``, with fresh
    ``stats`` (examples, calls, failed), ``coverage`` and step ``digest``."""
    attrs = {"target": target, "config": config, "coverage": Counter(), "digest": sha256(),
             "stats": {"examples": 0, "calls": 0, "failed": 0}}
    return cast(M, type(name, (base,), attrs))
