"""``python -m kvpool.oracle``: see :mod:`kvpool.oracle.cli`."""

import sys

from .entry.cli import main

sys.exit(main())
