"""``python -m kvpool.oracle``: see :mod:`kvpool.oracle.entry.cli`."""

import sys

from .entry.cli import main

sys.exit(main())
