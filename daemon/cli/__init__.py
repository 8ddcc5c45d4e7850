"""The ``bsl-lens`` command line: the parser, one module per group of commands, the status page.

One BLAS thread for every command: numpy's threads otherwise spin against the embedder's
OpenMP threads on small machines. Set here, before anything loads numpy.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
