"""SGLang 0.5.23's unified SWA composite on the CPU, beside ``kvpool.spec.unified``.

``build(page_size, lazy)`` returns SGLang's ``UnifiedSWATokenToKVPoolAllocator`` from its own
CPU builder (``sglang.test.unified_allocator_fixtures.build_swa_pool``) and a
``UnifiedSWAModel`` of the same geometry. Loading (SGLang's runtime on the CPU, the sub-pools'
extend/decode kernels routed to SGLang's torch fallbacks) is the oracle's
(``kvpool.oracle.families.unified.peer.load_unified``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from kvpool.oracle.families.unified.peer import load_unified as load
from kvpool.spec.unified import UnifiedSWAModel

__all__ = ["build", "load", "load_or_exit", "run_replay"]


def build(page_size: int, lazy: bool, static: bool = False) -> tuple[Any, UnifiedSWAModel]:
    """SGLang's unified SWA composite (100 pages a side, fp16, 1 head of dim 8) and the model
    of its geometry, read from SGLang's own pool."""
    fixtures = load()
    fixtures.setup_allocator_context()
    target = fixtures.build_swa_pool(page_size=page_size, lazy=lazy)
    fa, sa = target.full_attn_allocator, target.swa_attn_allocator
    model = UnifiedSWAModel(fa.unified_buffer.total_bytes, page_size, fa.entry_bytes,
                            sa.entry_bytes, lazy=lazy, full_max_tokens=100 * page_size,
                            swa_max_tokens=100 * page_size)
    return target, model


def load_or_exit() -> None:
    """Load SGLang's unified pools (:func:`load`), or exit with ``availability.MISSING_STATUS``
    when SGLang is not installed (an installed SGLang that fails to load raises)."""
    from kvpool.oracle.peers.availability import exit_if_missing

    try:
        load()
    except Exception as err:
        exit_if_missing(err)
        raise


def run_replay(script: str, steps: int) -> dict[str, Any]:
    """Run the replay ``script`` (next to this module) for ``steps`` steps in a subprocess and
    return the JSON of its last line; raises ``PeerNotInstalled`` when SGLang is not installed
    (the tests' availability rule skips the calling test then, outside CI only)."""
    from kvpool.oracle.peers.availability import raise_if_child_missing, require_installed

    require_installed("sglang")

    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(here / script), str(steps)],
                          capture_output=True, text=True, timeout=600, env=env, check=False)
    raise_if_child_missing(proc.returncode, proc.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
