"""Running SGLang's own unit-test classes on both allocators (imported by the adapted upstream
test modules ``test_sglang_upstream_*.py``).

SGLang's runtime is loaded when the first such test runs, not at collection: loading it changes
what the oracle's tests see in the same process (``conftest.py`` runs these tests last)."""

from __future__ import annotations

import types
import unittest
from collections.abc import Callable, Iterable
from typing import Any


def load_runtime() -> None:
    """SGLang's scheduler-side modules on the CPU; SkipTest without them (not under CI)."""
    from kvpool.oracle.peers.availability import may_skip
    from kvpool.oracle.peers.peer_import import PeerUnavailable, load_sglang_runtime

    try:
        load_sglang_runtime()
    except PeerUnavailable as err:
        if not may_skip(err):  # under CI, or installed but failing: a failure
            raise
        raise unittest.SkipTest(f"SGLang's runtime is not importable here ({err})") from None


def variants(module: str, bases: Iterable[type], load: Callable[[], dict[str, dict[str, Any]]],
             replaced: dict[str, dict[str, Any]]) -> dict[str, type]:
    """One ``unittest.TestCase`` per base class and implementation, named ``<Base>_<impl>``:
    the base with that implementation's class attributes (``load()[impl]``, e.g. its allocator
    class, set by ``setUpClass``) and its replacements of the base's tests (``replaced[impl]``,
    set where the base has the test)."""
    out: dict[str, type] = {}
    for base in bases:
        for impl, tests in replaced.items():
            mine: dict[str, Any] = {name: value for name, value in tests.items()
                                    if hasattr(base, name)}
            mine["__module__"] = module

            def set_up_class(cls: type, impl: str = impl) -> None:
                for name, value in load()[impl].items():
                    setattr(cls, name, value)

            mine["setUpClass"] = classmethod(set_up_class)
            name = f"{base.__name__.lstrip('_')}_{impl}"
            out[name] = types.new_class(name, (base, unittest.TestCase),
                                        exec_body=lambda ns, m=mine: ns.update(m))
    return out
