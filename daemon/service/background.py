"""How the daemon's background work yields to queries and edits: its nice value, the quiet time
before a journal is folded into a snapshot, a thread lowering its own priority, and freed heap
handed back to the OS after a big batch. Shared by the writer, the dense thread and the sweep.
"""

from __future__ import annotations

import os
import sys
import threading

#: Quiet seconds after which the journal is folded into a full snapshot (a snapshot costs the
#: writer most of a second at ssl31-ru size, so it is not written per edit).
COMPACT_IDLE_S = 60.0
#: Nice value added to background work (the chunking worker process, the dense thread and the
#: model threads it starts, the hash sweep): queries and edits win the CPU over a backlog.
BACKGROUND_NICE = 10


def nice_this_thread(n: int) -> None:
    """Lower the calling thread's CPU priority by ``n`` (Linux: ``setpriority`` on the thread
    id affects that thread only, and threads it starts inherit it). No-op elsewhere."""
    if not n or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + n)
    except (OSError, AttributeError):
        pass


def trim_heap() -> None:
    """Hand freed heap memory back to the OS after a big batch (glibc ``malloc_trim``; a
    reconcile of every module frees hundreds of MB that CPython's allocator would otherwise
    keep in RSS). No-op where there is no glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
