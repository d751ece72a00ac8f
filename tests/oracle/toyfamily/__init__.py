"""A toy allocator family registered from the tests alone: a request-slot pool shaped like
SGLang's ``ReqToTokenPool`` / ``MambaSlotAllocator`` (slots ``0..size-1``, ``alloc(n)`` from the
front of a free list, ``free`` appends at the back), its spec model (clauses ``SLOT-1..4``), the
family's call table, scheduler model, executor, clause map and targets, and its registry record
(``record.TOY``). ``tests/oracle/test_oracle_toy_family.py`` runs the whole oracle on it."""
