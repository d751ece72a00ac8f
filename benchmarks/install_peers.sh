#!/usr/bin/env bash
# Install the peer allocators that `python -m benchmarks` compares kvpool with, into the current
# Python environment, without their dependency trees (the pins and what each peer imports):
#   SGLang 0.5.23 allocators: sglang + numpy msgspec (the other imports get placeholder modules)
#   vLLM 0.33.0 BlockPool:    vllm + packaging psutil pyzmq urllib3 regex numpy msgspec cbor2
# torch must already be installed (a CPU or CUDA build); --no-deps keeps pip from replacing it.
# Usage: benchmarks/install_peers.sh [python]   (default: python3 on PATH)
set -euo pipefail
PY="${1:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$PY" -c "import torch" || { echo "install torch first" >&2; exit 1; }
"$PY" -m pip install --no-deps \
  sglang==0.5.23 vllm==0.33.0 \
  numpy msgspec packaging psutil pyzmq urllib3 regex cbor2
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" - <<'PYEOF'
from kvpool.oracle.peers.peer_import import load_sglang_allocators
from benchmarks.peers import load_vllm_block_pool
load_vllm_block_pool()
load_sglang_allocators()
print("peers importable: sglang allocators, vllm BlockPool")
PYEOF
