"""The page-interleave family (``--family page_interleave``): SGLang's
``PageInterleavePoolAllocator`` and kvpool's own judged against
:class:`kvpool.spec.page_interleave_model.PageInterleaveModel` (``PINTER-*``), and the
multi-rank mirroring run (:mod:`.ranks`)."""
