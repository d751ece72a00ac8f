"""The allocator families: each one's name, the module that declares its ``FAMILY`` (its
scheduler model's module), its default budget and what it runs.

Kept apart from :mod:`kvpool.oracle.engine.families` so that naming a family (the command
line's ``--family`` check, its ``--help``, the pytest plugin's options) loads nothing else. A
:class:`~kvpool.oracle.engine.families.Family` record reads its default budget from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Registered:
    """One family as the registry holds it."""

    module: str  # the module whose ``FAMILY`` is the family's record
    examples: int  # default Hypothesis examples per configuration
    steps: int  # default calls per example (rules; a rule may make several calls)
    about: str  # what the family runs, for ``--help``


DEFAULT_FAMILY = "single"

FAMILIES: dict[str, Registered] = {
    "single": Registered("kvpool.oracle.families.single.machine", 150, 20,
                         "single-pool token and paged allocators (SGLang's, vLLM's, kvcached)"),
    "hybrid": Registered("kvpool.oracle.families.hybrid.machine", 60, 30,
                         "sliding-window allocators (SWATokenToKVPoolAllocator)"),
    "unified": Registered("kvpool.oracle.families.unified.machine", 30, 30,
                          "unified memory pools: full + SWA in one byte buffer "
                          "(UnifiedSWATokenToKVPoolAllocator)"),
}

FAMILY_MODULES: dict[str, str] = {name: r.module for name, r in FAMILIES.items()}


def budget_text(name: str) -> str:
    """``name``'s default budget in words: ``30 examples, 30 steps``."""
    r = FAMILIES[name]
    return f"{r.examples} examples, {r.steps} steps"


def family_help(*, one_line: bool = False) -> str:
    """Every registered family with its default budget and what it runs, for ``--help``: one
    line a family under a heading, or (``one_line``) all of them in one line."""
    if one_line:
        return f"allocator family (default {DEFAULT_FAMILY}); " + "; ".join(
            f"{name}: {budget_text(name)} by default" for name in FAMILIES)
    width = max(map(len, FAMILIES))
    rows = [f"  {name:{width}s} {budget_text(name)}: {r.about}" for name, r in FAMILIES.items()]
    return "\n".join([f"allocator family (default {DEFAULT_FAMILY}):", *rows])
