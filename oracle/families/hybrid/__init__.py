"""The hybrid sliding-window family (``python -m kvpool.oracle --family hybrid``); its call
table is ``calls.py``."""
