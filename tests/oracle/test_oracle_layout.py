"""The oracle's module paths from before its subpackages still import.

The oracle's size and import rules (no module over 400 lines, no import cycle, no private name
imported across modules) are the whole package's: ``tests/test_layout.py``.
"""

from __future__ import annotations

PACKAGE = "kvpool.oracle"


def test_module_paths_from_before_the_subpackages_still_import() -> None:
    """``kvpool.oracle.<old>`` is the module that now holds it (the same object), so code
    outside the oracle and recorded traces' target paths keep working."""
    import importlib

    from kvpool.oracle.moved import MOVED

    for old, new in MOVED.items():
        assert importlib.import_module(f"{PACKAGE}.{old}") is importlib.import_module(
            f"{PACKAGE}.{new}"
        ), old
    from kvpool.oracle.families.single.targets import kvpool_paged
    from kvpool.oracle.targets import kvpool_paged as old_path

    assert old_path is kvpool_paged
