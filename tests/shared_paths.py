"""Where the tests find ``../shared``: the corpora and the gold sets, read in place.

``BSL_LENS_CORPORA`` and ``BSL_LENS_EVAL`` override the locations. Test modules import these
names from here, not from ``conftest`` (a folder's own ``conftest.py`` would shadow the root's
under that module name)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA = Path(os.environ.get("BSL_LENS_CORPORA", REPO.parent / "shared" / "corpora"))
EVAL_DIR = Path(os.environ.get("BSL_LENS_EVAL", REPO.parent / "shared" / "eval"))
