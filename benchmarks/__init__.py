"""Side-by-side benchmarks of kvpool's allocators, SGLang 0.5.23's and vLLM 0.33.0's BlockPool.

Run from the repository root: ``python -m benchmarks [--quick] [--out DIR]``. Not part of the
wheel. See ``benchmarks/README.md``.
"""
