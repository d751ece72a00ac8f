"""Module-level factories of the broken hybrid allocators, by class name, for running repros.

A hybrid repro imports its factory by the name the run recorded (``broken_hybrid:<Class>``,
the class itself, which needs more constructor arguments than a factory takes); these are the
factories the run used, importable under that name.
"""

from __future__ import annotations

from broken_hybrid import BROKEN_HYBRID

for _b in BROKEN_HYBRID:
    globals()[_b.cls.__name__] = _b.factory()
