"""kvpool.integrations: kvpool's allocators inside serving engines.

- :mod:`kvpool.integrations.sglang` -- allocators built on the installed SGLang's own
  ``BaseTokenToKVPoolAllocator`` (every scheduler-facing hook inherited, kvpool's free lists,
  layouts, checked mode and census underneath) and ``install()`` to make SGLang construct them.
  Importing it imports SGLang.
- :mod:`kvpool.integrations.sglang_surface` -- which attributes SGLang's code reads on its
  allocator, found by parsing the installed SGLang's sources (no SGLang import).

Importing this package imports neither SGLang nor torch.
"""

__all__: list[str] = []
