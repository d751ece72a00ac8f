"""The unified memory-pool family (full + SWA in one byte buffer); see ``family.py``."""
