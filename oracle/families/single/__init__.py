"""The single-pool family: SGLang's token and paged allocators (``python -m kvpool.oracle``)."""
