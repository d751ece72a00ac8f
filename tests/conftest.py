"""Shared pytest setup: Hypothesis profiles chosen by KVPOOL_PROFILE (dev, ci, thorough), and
the project's availability rule for tests that need a peer (SGLang, vLLM, kvcached).

A test that needs a peer just loads it (``load_sglang_allocators()``, a peer target's factory,
...). When that raises :class:`~kvpool.oracle.peers.availability.PeerNotInstalled` (or an
error raised from one), in the test or in a fixture, the test is skipped, outside CI only
(``availability.may_skip``); an installed peer that fails to import, or any peer error under
``CI``, fails it. A script run in a child process that finds its peer missing exits with
``availability.MISSING_STATUS`` (``exit_if_missing``), and its test raises ``PeerNotInstalled``
for it (``raise_if_child_missing``).
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest
from hypothesis import HealthCheck, settings
from kvpool.oracle.peers.availability import PeerNotInstalled, may_skip

settings.register_profile(
    "dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(  # KVPOOL_PROFILE=soak: also makes python -m kvpool.oracle soak
    "soak", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("KVPOOL_PROFILE", "dev"))


def _skip_missing_peer() -> Generator[None, object, object]:
    try:
        return (yield)
    except Exception as err:
        if may_skip(err):
            cause: BaseException = err
            while not isinstance(cause, PeerNotInstalled) and cause.__cause__ is not None:
                cause = cause.__cause__
            pytest.skip(f"a peer is not installed here ({cause}); CI installs it")
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    """A fixture that needs a missing peer skips its test (outside CI only)."""
    return (yield from _skip_missing_peer())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """A test that needs a missing peer skips (outside CI only)."""
    return (yield from _skip_missing_peer())
