"""SGLang tells its allocators apart by class: every class ``install()`` puts in SGLang's place
counts as the SGLang class it replaces (``isinstance``), and SGLang's own index translator,
built over kvpool's unified pools, translates kvpool's virtual ids (``is_translating``) through
kvpool's live page tables to the physical slots kvpool bound, after compaction moved them.

Without the class test holding, SGLang's ``KVIndexTranslator`` and ``SchedulePolicy`` take the
full + Mamba pool for a static one: attention would read virtual ids as physical slots and the
scheduler would not charge state slots their bytes. Where kvpool's unified pools cannot serve
(a device other than the CPU; decode context parallelism for the full + Mamba pool), the
installed class builds SGLang's own composite and warns."""

from __future__ import annotations

import importlib
import types
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def parts(sglang_runtime: dict[str, types.ModuleType]) -> Any:
    import kvpool.integrations.sglang as ks
    from kvpool.oracle.families.unified.peer import load_unified
    from kvpool.oracle.families.unified_mamba import peer as mamba_peer
    from sglang.srt.mem_cache import kv_index_translator

    return types.SimpleNamespace(ks=ks, fixtures=load_unified(), mamba_peer=mamba_peer,
                                 translator=kv_index_translator)


def test_every_installed_class_counts_as_the_sglang_class_it_replaces(parts: Any) -> None:
    replaced = parts.ks._replaced()
    assert len(replaced) == 6
    for (module_name, name), ours in replaced.items():
        theirs = getattr(importlib.import_module(module_name), name)
        assert theirs is not ours and issubclass(ours, theirs), name


def _build(parts: Any, pool: str, page_size: int, lazy: bool) -> Any:
    parts.fixtures.setup_allocator_context()
    with parts.ks.using_kvpool():
        if pool == "mamba":
            bundle = parts.mamba_peer.build_unified_mamba_bundle(
                total_bytes=4096 * page_size, page_size=page_size, lazy=lazy)
            return bundle.token_to_kv_pool_allocator
        if pool == "tri":
            return parts.fixtures.build_tri_pool(page_size=page_size, lazy=lazy)[0] \
                .token_to_kv_pool_allocator
        return parts.fixtures.build_swa_pool(page_size=page_size, lazy=lazy)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize("pool", ["swa", "tri", "mamba"])
def test_sglangs_index_translator_reads_kvpools_live_page_tables(
        parts: Any, pool: str, page_size: int, lazy: bool) -> None:
    alloc = _build(parts, pool, page_size, lazy)
    assert type(alloc).__module__.startswith("kvpool.")
    t = parts.translator
    translator = t.KVIndexTranslator(
        req_to_token=torch.zeros(4, 64, dtype=torch.int64), token_to_kv_pool_allocator=alloc,
        token_to_kv_pool=alloc.get_kvcache(), page_size=page_size, device="cpu")
    assert translator.is_translating
    kinds = [t.IdSpaceKind.FULL] + ([t.IdSpaceKind.SLIDING_WINDOW] if pool != "mamba" else [])
    rows = [alloc.alloc(n * page_size) for n in (3, 2, 4, 1)]
    alloc.free(rows[0])
    alloc.free(rows[2])                       # holes below live rows: compaction moves them
    if lazy:
        alloc.flush_opportunistic()
    kept = torch.cat([rows[1], rows[3]])
    moved = False
    for kind in kinds:
        space = translator.space(kind)
        read = space.read_v2p[kept // page_size] * page_size + kept % page_size
        assert torch.equal(read, space.write(kept)), kind
        moved |= not torch.equal(read, kept)
    assert torch.equal(translator.space(t.IdSpaceKind.FULL).write(kept),
                       alloc.translate_kv_loc(kept))
    assert moved or pool == "tri"             # the tri-pool's SWA float keeps its holes


class _Recorder:
    """Stands in for SGLang's composite: records its constructor's keyword arguments."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


@pytest.mark.parametrize("name", ["UnifiedSWATokenToKVPoolAllocator",
                                  "UnifiedMambaSWATokenToKVPoolAllocator",
                                  "UnifiedMambaTokenToKVPoolAllocator"])
def test_off_the_cpu_sglangs_own_composite_is_built_with_a_warning(
        parts: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """kvpool's page tables live on the host: on another device SGLang's class is built with
    the same arguments (kvpool's ``checked`` dropped), and a warning says why."""
    ours = getattr(parts.ks, name)
    monkeypatch.setattr(ours, "sglang_class", _Recorder)
    with pytest.warns(UserWarning, match="SGLang's own composite is built") as warned:
        built = ours(unified_buffer="buffer", kvcache="pool", device="cuda:1", page_size=16,
                     checked=True)
    assert "cuda:1" in str(warned[0].message)
    assert type(built) is _Recorder
    assert built.kwargs == {"unified_buffer": "buffer", "kvcache": "pool", "device": "cuda:1",
                            "page_size": 16}


def test_decode_context_parallelism_builds_sglangs_full_mamba_composite(
        parts: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import kvpool.integrations.sglang_unified_mamba as km

    monkeypatch.setattr(km.UnifiedMambaTokenToKVPoolAllocator, "sglang_class", _Recorder)
    monkeypatch.setattr(km, "get_parallel", lambda: types.SimpleNamespace(attn_dcp_size=2))
    with pytest.warns(UserWarning, match="decode context parallelism over 2 ranks"):
        built = km.UnifiedMambaTokenToKVPoolAllocator(unified_buffer="b", kvcache="k",
                                                      device="cpu")
    assert type(built) is _Recorder
