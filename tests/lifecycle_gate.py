"""A real daemon (``run_daemon`` with the real Service, socket and watcher) held at one
moment of its life until a gate file appears, for tests/daemon/test_daemon_lifecycle.py.

``python tests/lifecycle_gate.py ROOT INDEX_DIR GATE MODE WATCH``, MODE:

* ``start``: the snapshot load waits for GATE (the root lock is held, nothing answers);
* ``arm``: arming the watcher waits for GATE (the daemon already answers from its snapshot).

Gives up waiting after 120 s so a broken test never leaves it hanging.
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


def main(root: str, index_dir: str, gate: str, mode: str, watch: str) -> int:
    gate_path = Path(gate)

    class Gated(Service):
        def start(self) -> None:
            if mode == "start":
                _wait_for(gate_path)
            super().start()

        def _start_watcher(self) -> None:
            if mode == "arm":
                _wait_for(gate_path)
            super()._start_watcher()

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_daemon(root, index_dir=index_dir, embedder="none", watch=watch, service_factory=Gated)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
