"""The fork server shared by the fuzz tests (one per test session, see ``fuzz_server.py``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_server import ForkServer


@pytest.fixture(scope="session")
def fork_server() -> Iterator[ForkServer]:
    """A started fork server; closed at the end of the session."""
    server = ForkServer()
    yield server
    server.close()
