"""Module paths of ``kvpool.oracle`` from before its subpackages, kept importable.

The oracle's modules live in subpackages (``engine``, ``families``, ``reporting``, ``entry``,
``peers``; CONTRIBUTING.md has the map). Code outside the oracle, the docs and recorded traces
(``"target": "kvpool.oracle.targets:kvpool_paged"``) name the older flat paths; this finder
resolves ``kvpool.oracle.<old>`` to the module that now holds it (the same module object, so
both names see the same state). New code imports the new paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

PACKAGE = "kvpool.oracle"
MOVED: dict[str, str] = {
    "adapters": "peers.adapters",
    "api": "entry.api",
    "attribution": "families.single.attribution",
    "badcalls": "families.single.badcalls",
    "callforms": "engine.callforms",
    "calls": "families.single.calls",
    "calltables": "engine.calltables",
    "capabilities": "engine.capabilities",
    "clausemap": "engine.clausemap",
    "clauses": "reporting.clauses",
    "cli": "entry.cli",
    "coverage": "families.single.coverage",
    "divergences": "peers.divergences",
    "executor": "families.single.executor",
    "hints": "reporting.hints",
    "hybrid_calls": "families.hybrid.calls",
    "hybrid_coverage": "families.hybrid.coverage",
    "hybrid_executor": "families.hybrid.executor",
    "hybrid_family": "families.hybrid.machine",
    "hybrid_machine": "families.hybrid.machine",
    "hybrid_runner": "families.hybrid.runner",
    "hybrid_targets": "families.hybrid.targets",
    "inference": "families.single.inference",
    "kvcached_import": "peers.kvcached_import",
    "machine": "families.single.machine",
    "minimize": "engine.minimize",
    "pagemap": "reporting.pagemap",
    "peer_import": "peers.peer_import",
    "peer_swa": "peers.peer_swa",
    "plan": "entry.plan",
    "replay": "engine.replay",
    "report": "engine.report",
    "repro": "engine.repro",
    "runner": "engine.runner",
    "scheduler": "families.single.scheduler",
    "single_family": "families.single.machine",
    "targets": "families.single.targets",
    "trace": "engine.trace",
    "treecache": "families.single.treecache",
    "unexercised": "reporting.unexercised",
}


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``kvpool.oracle.<old>`` for each entry of ``MOVED`` and loads the new module."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, old = fullname.rpartition(".")
        if package != PACKAGE or old not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(f"{PACKAGE}.{MOVED[spec.name.rpartition('.')[2]]}")
        spec.loader_state = module.__spec__  # the import system overwrites it: kept here
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module is loaded); give it back its own spec, so that its
        relative imports resolve from where it lives."""
        alias = module.__spec__
        if alias is not None and alias.loader_state is not None:
            module.__spec__ = alias.loader_state


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
