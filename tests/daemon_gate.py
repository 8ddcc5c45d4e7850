"""A real daemon (``run_daemon`` with the real Service, socket and watcher, lexical only)
held at one moment of its life until a gate file appears, for the lifecycle tests
(tests/daemon/test_daemon_lifecycle.py) and the MCP bridge's warming tests
(tests/mcp/test_mcp.py).

``python tests/daemon_gate.py ROOT INDEX_DIR GATE MODE [WATCH]`` (WATCH default ``off``), MODE:

* ``start``: before :meth:`Service.start` (the snapshot load), so the daemon holds its root
  lock but does not answer yet (what a client sees while a big snapshot or the model loads);
* ``index``: before its first full reconcile, so it answers from the persisted snapshot with
  state ``indexing`` (what a client sees during a first or catch-up index);
* ``arm``: arming the watcher waits (the daemon already answers from its snapshot);
* ``apply``: every job after the first full index waits before it runs, so a change the
  watcher noticed stays pending (what a client sees between an edit and its re-index).

Logs go to ``INDEX_DIR/gate.log``. Gives up waiting after 120 s so a forgotten gate never
leaves an orphan behind.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from daemon.server.server import run_daemon  # noqa: E402
from daemon.service.service import Service  # noqa: E402

GIVE_UP_S = 120.0
MODES = ("start", "index", "arm", "apply")


def _wait_for(gate: Path) -> None:
    deadline = time.monotonic() + GIVE_UP_S
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def main(root: str, index_dir: str, gate: str, mode: str, watch: str = "off") -> int:
    if mode not in MODES:
        raise SystemExit(f"MODE must be one of {MODES}, got {mode!r}")
    gate_path = Path(gate)

    class Gated(Service):
        def start(self) -> None:
            if mode == "start":
                _wait_for(gate_path)
            super().start()

        def start_background(self) -> None:
            if mode in ("index", "apply"):
                run_job = self.writer.run_job

                def gated(job):
                    first = not self.writer.first_done.is_set()
                    if (mode == "index" and job.full and first) or (mode == "apply" and not first):
                        _wait_for(gate_path)
                    return run_job(job)

                self.writer.run_job = gated
            super().start_background()

        def _start_watcher(self) -> None:
            if mode == "arm":
                _wait_for(gate_path)
            super()._start_watcher()

    Path(index_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    logging.basicConfig(
        level=logging.INFO,
        filename=str(Path(index_dir) / "gate.log"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return run_daemon(root, index_dir=index_dir, embedder="none", watch=watch, service_factory=Gated)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
