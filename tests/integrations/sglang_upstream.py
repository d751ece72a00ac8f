"""Running SGLang's own unit-test classes on both allocators (imported by the adapted upstream
test modules ``test_sglang_upstream_*.py``)."""

from __future__ import annotations

import types
import unittest
from collections.abc import Iterable
from typing import Any


def variants(module: str, bases: Iterable[type], attrs_of: dict[str, dict[str, Any]]
             ) -> dict[str, type]:
    """One ``unittest.TestCase`` per base class and implementation, named ``<Base>_<impl>``:
    the base with that implementation's attributes -- its allocator class (UPPER-case names,
    always set) and its replacements of the base's tests (set where the base has the test)."""
    out: dict[str, type] = {}
    for base in bases:
        for impl, attrs in attrs_of.items():
            mine = {name: value for name, value in attrs.items()
                    if name.isupper() or hasattr(base, name)}
            mine["__module__"] = module
            name = f"{base.__name__.lstrip('_')}_{impl}"
            out[name] = types.new_class(name, (base, unittest.TestCase),
                                        exec_body=lambda ns, m=mine: ns.update(m))
    return out
