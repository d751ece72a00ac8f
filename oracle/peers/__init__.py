"""Loaders of the peer allocators on a CPU (SGLang, vLLM, kvcached) and the registry of their
known divergences from the spec."""
