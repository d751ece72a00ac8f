"""The command line (``cli``), target and option resolution (``plan``) and the programmatic
entry (``api``); the pytest plugin stays at ``kvpool.oracle.pytest_plugin``."""
