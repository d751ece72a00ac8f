"""Replaying a known divergence's minimal call sequence on the real allocator.

Each :class:`~kvpool.oracle.peers.divergences.KnownDivergence` carries ``sequence``: Python
lines in the target's own API that show the divergence and end in asserts that hold exactly
while it does. The lines run with these names bound: ``make(target, **kwargs)`` builds the
named target as the oracle does (``need_sort`` defaults to False), ``t`` is ``torch.tensor``,
``raises`` is ``pytest.raises``-like (a context manager requiring the exception),
``SimpleNamespace`` stands in for SGLang's server config, and ``torch``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

from ..engine.registry import FAMILIES, load


def factory_of(target: str) -> Callable[..., Any]:
    """The oracle's factory for the divergence registry's target name ``target``: the alias of
    that name that runs one factory, in whichever family's record holds it. Raises KeyError for
    a name no family's record has as such an alias."""
    for record in FAMILIES.values():
        paths = record.aliases.get(target, ())
        if len(paths) == 1:
            found: Callable[..., Any] = load(paths[0])
            return found
    raise KeyError(f"no family has a target called {target!r}")


def make(target: str, **kwargs: Any) -> Any:
    """A fresh ``target`` allocator built by its oracle factory."""
    kwargs.setdefault("need_sort", False)
    return factory_of(target)(**kwargs)


@contextlib.contextmanager
def raises(kind: type[BaseException]) -> Iterator[None]:
    """Require the block to raise ``kind`` (AssertionError naming it otherwise)."""
    try:
        yield
    except kind:
        return
    raise AssertionError(f"expected {kind.__name__}")


# entries whose divergence shows only where a module fails to import: (entry id, module)
IMPORT_DEPENDENT = {"SGL-HOOKS-IMPORT": "sglang.srt.mem_cache.base_prefix_cache"}


def shows_here(entry_id: str) -> bool:
    """Whether the divergence ``entry_id`` can show in this process: False for an
    ``IMPORT_DEPENDENT`` entry whose module imports here (e.g. once SGLang's runtime is loaded,
    its capacity hooks work and conform)."""
    module = IMPORT_DEPENDENT.get(entry_id)
    if module is None:
        return True
    try:
        importlib.import_module(module)
    except ImportError:
        return True
    return False


def run_sequence(sequence: str, name: str = "<sequence>") -> None:
    """Execute ``sequence`` (see the module docstring). Raises AssertionError when one of its
    asserts fails (the divergence no longer shows), or what the target raised unexpectedly."""
    import torch

    scope = {
        "make": make,
        "t": torch.tensor,
        "raises": raises,
        "torch": torch,
        "SimpleNamespace": SimpleNamespace,
    }
    exec(compile(sequence, name, "exec"), scope)
