"""kvpool: a specification, an implementation and a conformance harness for KV-cache allocators.

Subpackages:

- ``kvpool.spec``: the executable specification (pure Python, stdlib only).
- ``kvpool.impl``: the torch allocators, drop-in for SGLang's.
- ``kvpool.oracle``: the differential conformance harness.
"""

__version__ = "0.1.0"
