"""The daemon's file lock across processes: :func:`daemon.server.runtime.lock_holder` names the
process that holds it, and the lock is free again when that process exits (the in-process lock
tests are in tests/unit/server/test_protocol.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from daemon.server import runtime

TIMEOUT = 60.0


def test_lock_holder_is_the_process_holding_it(tmp_path):
    path = tmp_path / "daemon.lock"
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[2]); from daemon.server.runtime import FileLock\n"
        "l = FileLock(sys.argv[1]); assert l.try_acquire(); print('locked', flush=True); sys.stdin.read()\n"
    )
    repo = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path), repo], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        assert runtime.lock_holder(path) == proc.pid
        assert not runtime.FileLock(path).acquire(0.05)
    finally:
        proc.stdin.close()
        proc.wait(TIMEOUT)
    assert runtime.lock_holder(path) is None  # released when the process exits
