"""The SGLang integration tests need SGLang 0.5.23 and its CPU runtime dependencies
(``pip install -e ".[sglang]"`` plus ``benchmarks/install_peers.sh``). Without them the tests
skip, except under CI (``CI`` set), where a missing dependency fails them; an installed SGLang
that fails to import (or a bug in kvpool's import shims) fails them everywhere."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch
from kvpool.oracle.peers.peer_import import PeerUnavailable, load_sglang_runtime, may_skip


@pytest.fixture(scope="session")
def sglang_runtime() -> dict[str, types.ModuleType]:
    """SGLang's scheduler-side modules, imported on CPU."""
    try:
        return load_sglang_runtime()
    except PeerUnavailable as err:
        if not may_skip(err):  # under CI, or installed but failing (a shim bug): a failure
            raise
        pytest.skip(f"SGLang's runtime is not installed here ({err}); CI installs it")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run these tests last. Loading SGLang's runtime makes its allocators' capacity hooks
    importable in this process, which removes the oracle's environment-only divergence
    ``SGL-HOOKS-IMPORT`` for every test that runs afterwards in the same process."""
    mine = [item for item in items if "tests/integrations/" in item.nodeid]
    if mine:
        moved = {id(item) for item in mine}
        items[:] = [item for item in items if id(item) not in moved] + mine


@pytest.fixture(scope="session")
def swa_kvcache(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    """A factory of SGLang's own ``SWAKVPool`` (small, on the CPU) for the hybrid allocators."""
    from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

    def make(size: int, size_swa: int, page_size: int) -> Any:
        return SWAKVPool(size=size, size_swa=size_swa, page_size=page_size, dtype=torch.bfloat16,
                         head_num=1, head_dim=8, swa_attention_layer_ids=[1, 2],
                         full_attention_layer_ids=[0], device="cpu", enable_memory_saver=False)
    return make
