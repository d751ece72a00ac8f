"""The names of the allocator families and the module that declares each one's ``FAMILY`` (its
scheduler model's module).

Kept apart from :mod:`kvpool.oracle.engine.families` so that naming a family (the command
line's ``--family`` check) loads nothing else."""

from __future__ import annotations

FAMILY_MODULES: dict[str, str] = {
    "single": "kvpool.oracle.families.single.machine",
    "hybrid": "kvpool.oracle.families.hybrid.machine",
    "unified": "kvpool.oracle.families.unified.machine",
}
