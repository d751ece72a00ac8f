"""The names of the allocator families and the module that defines each (``FAMILY``).

Kept apart from :mod:`kvpool.oracle.engine.families` so that naming a family (the command
line's ``--family`` check) loads nothing else."""

from __future__ import annotations

FAMILY_MODULES: dict[str, str] = {
    "single": "kvpool.oracle.families.single.family",
    "hybrid": "kvpool.oracle.families.hybrid.family",
    "unified": "kvpool.oracle.families.unified.family",
}
