"""Where a run writes its files: failing traces and Hypothesis's own files, never the cwd unasked.

``kvpool_home()`` is ``$KVPOOL_HOME`` if set, else ``$XDG_CACHE_HOME/kvpool``, else
``~/.cache/kvpool``. Traces go to ``<home>/traces`` (``--trace-dir DIR``, ``--trace-dir .`` for
the cwd); whatever Hypothesis writes goes to ``<home>/hypothesis`` (``--hypothesis-dir DIR``,
or Hypothesis's own ``HYPOTHESIS_STORAGE_DIRECTORY``). An oracle run itself gives Hypothesis
nothing to write: no example database (no earlier failure is replayed into a seeded run) and
no constants collected from local modules (``engine.runner.no_local_constants``).
"""

from __future__ import annotations

import os
from pathlib import Path

HYPOTHESIS_ENV = "HYPOTHESIS_STORAGE_DIRECTORY"


def kvpool_home() -> Path:
    """The folder kvpool's run files go to (see the module docstring)."""
    if os.environ.get("KVPOOL_HOME"):
        return Path(os.environ["KVPOOL_HOME"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "kvpool"


def default_trace_dir() -> Path:
    return kvpool_home() / "traces"


def hypothesis_dir(chosen: str | None) -> Path:
    """Hypothesis's folder for a run: ``chosen``, else ``$HYPOTHESIS_STORAGE_DIRECTORY``, else
    ``<home>/hypothesis``."""
    if chosen:
        return Path(chosen)
    if os.environ.get(HYPOTHESIS_ENV):
        return Path(os.environ[HYPOTHESIS_ENV])
    return kvpool_home() / "hypothesis"


def use_hypothesis_dir(path: Path) -> None:
    """Point Hypothesis (this process and the workers it starts) at ``path``."""
    from hypothesis.configuration import set_hypothesis_home_dir

    os.environ[HYPOTHESIS_ENV] = str(path)
    set_hypothesis_home_dir(path)
