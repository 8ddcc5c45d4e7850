"""``python -m daemon.cli``: the ``bsl-lens`` command line (the daemon is spawned this way)."""

import sys

from .main import main

sys.exit(main())
