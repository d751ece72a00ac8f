"""The HiSparse family (``--family hisparse``): SGLang's ``HiSparseTokenToKVPoolAllocator``
and kvpool's own judged against :class:`kvpool.spec.hisparse.HiSparseModel` (``HSP-*``)."""
