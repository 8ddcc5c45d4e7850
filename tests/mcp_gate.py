"""A daemon whose start can be held back, for the MCP bridge's warming tests.

``python tests/mcp_gate.py ROOT INDEX_DIR GATE MODE`` runs the real daemon
(:func:`daemon.server.run_daemon`, lexical only, no watcher) with a Service that waits for
the file ``GATE`` to exist:

* ``MODE=start``: before :meth:`Service.start`, so the daemon holds its lock but does not
  answer yet (what a client sees while a big snapshot or the model loads);
* ``MODE=index``: before its first full reconcile, so it answers from the persisted
  snapshot with state ``indexing`` (what a client sees during a first or catch-up index).

The wait gives up after 120 s so a forgotten gate never leaves an orphan behind.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from daemon.server import run_daemon  # noqa: E402
from daemon.service import Service  # noqa: E402

GIVE_UP_S = 120.0


def _wait_for(gate: Path) -> None:
    deadline = time.monotonic() + GIVE_UP_S
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def main(root: str, index_dir: str, gate: str, mode: str) -> int:
    gate_path = Path(gate)

    class Gated(Service):
        def start(self) -> None:
            if mode == "start":
                _wait_for(gate_path)
            super().start()

        def _run_job(self, job):
            if mode == "index" and job.full and not self._first_reconcile_done.is_set():
                _wait_for(gate_path)
            return super()._run_job(job)

    Path(index_dir).mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, filename=str(Path(index_dir) / "gate.log"))
    return run_daemon(root, index_dir=index_dir, embedder="none", watch="off", service_factory=Gated)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
