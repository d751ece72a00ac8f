"""The module paths a recorded trace may name from before the oracle's subpackages.

Traces written while ``kvpool.oracle`` was one flat package record paths such as
``"target": "kvpool.oracle.targets:kvpool_paged"``. Those modules now live in subpackages
(``engine``, ``families``, ``reporting``, ``entry``, ``peers``) and the flat paths no longer
import; the trace reader (:meth:`.trace.Trace.from_json`) rewrites each module path a trace holds
through :func:`current_path`. This table is the only place that names the flat paths: code,
tests and docs use the new ones (``tests/oracle/test_oracle_layout.py`` checks it).
"""

from __future__ import annotations

import importlib.util

PACKAGE = "kvpool.oracle"

# flat module of PACKAGE (before the subpackages) -> the module that holds it now
FLAT_PATHS: dict[str, str] = {
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


def current_path(path: str) -> str:
    """``path`` as it names its object now: a ``module:NAME`` path or a dotted name whose
    module is a flat ``kvpool.oracle.<name>`` of :data:`FLAT_PATHS` gets that module's current
    path (``kvpool.oracle.targets:kvpool_paged`` ->
    ``kvpool.oracle.families.single.targets:kvpool_paged``; ``kvpool.oracle.report.Failure`` ->
    ``kvpool.oracle.engine.report.Failure``). Any other path is returned unchanged, outside
    ``kvpool.oracle`` included.

    Raises ValueError for a path under ``kvpool.oracle`` whose first component is neither a
    flat path of the table nor a module of ``kvpool.oracle`` now (``kvpool.oracle.nosuch:f``):
    such a trace was not written by this oracle, and importing it could only fail later.
    """
    module, sep, name = path.partition(":")
    prefix = PACKAGE + "."
    if not module.startswith(prefix):
        return path
    head, dot, rest = module[len(prefix):].partition(".")
    if head in FLAT_PATHS:
        return f"{prefix}{FLAT_PATHS[head]}{dot}{rest}{sep}{name}"
    if head.isidentifier() and importlib.util.find_spec(prefix + head) is not None:
        return path
    raise ValueError(
        f"{path!r} names {prefix}{head}, which is no module of {PACKAGE}, neither now nor "
        f"before its subpackages (engine, families, reporting, entry, peers)"
    )
