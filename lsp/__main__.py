"""``python -m lsp``: the bsl-lens language server on stdio (same as ``bsl-lens lsp``)."""

import os

# One BLAS thread (as the CLI sets it, daemon/cli/__init__.py): set before anything imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .server import main  # noqa: E402

main()
