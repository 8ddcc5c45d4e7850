"""A slow background pass that re-reads every indexed file and compares its content hash.

The watcher and the reconcile decide what to re-read by events and by the stat signature
(size, mtime, ctime, inode). A change neither can see (a file system with coarse or forged
timestamps, a clock set back) would stay unseen for ever; this sweep catches it within one
pass. It runs on its own low-priority thread at a bounded read rate, pauses while the writer is
busy, and hands what it finds to the writer as an ordinary re-index of those paths. Its cost
at ERP size is in docs/freshness.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from ..engine import Engine
from ..sources.files import SkipFile, content_hash, read_regular_bytes
from .lookups import disk_path

log = logging.getLogger(__name__)

#: Seconds between the starts of two sweeps (0 turns the sweep off).
DEFAULT_SWEEP_INTERVAL_S = 900.0
#: Read rate of a sweep, bytes per second: the pass over an ERP-sized export takes minutes and
#: a few seconds of CPU (docs/freshness.md).
SWEEP_BYTES_PER_S = 16 << 20
#: The sweep sleeps once it is this far ahead of its read rate (seconds): fewer, longer pauses
#: (a wake-up per file cost more CPU than the hashing).
SWEEP_SLICE_S = 0.05


class SweepReport(msgspec.Struct, kw_only=True):
    """One pass: files and bytes read, files whose content differs from the index, its wall
    time and the CPU time of the thread (seconds); ``complete``: it was not cut short."""

    files: int = 0
    bytes: int = 0
    changed: list[str] = []
    seconds: float = 0.0
    cpu_s: float = 0.0
    complete: bool = False


class HashSweep:
    """Content-hash passes over ``engine``'s files (see the module docstring).

    ``ready()``: True while a pass may read (the first reconcile is done and the writer idle);
    ``on_changed(paths)``: called once per pass with the files whose content differs from what
    is indexed. ``stop``: set to end :meth:`run` and cut a pass short.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_file_bytes: int,
        interval_s: float = DEFAULT_SWEEP_INTERVAL_S,
        bytes_per_s: float = SWEEP_BYTES_PER_S,
        ready: Callable[[], bool] = lambda: True,
        on_changed: Callable[[list[str]], None] = lambda paths: None,
        stop: threading.Event | None = None,
    ) -> None:
        self.engine = engine
        self.root = Path(engine.root)
        self.max_file_bytes = max_file_bytes
        self.interval_s = interval_s
        self.bytes_per_s = bytes_per_s
        self._ready = ready
        self._on_changed = on_changed
        self._stop = stop or threading.Event()
        self.passes = 0
        self.found = 0
        self.last: SweepReport | None = None

    def run(self) -> None:
        """Sweep every :attr:`interval_s` until ``stop`` is set (a thread's target)."""
        if not self.interval_s:
            return
        next_at = time.monotonic() + self.interval_s
        while not self._stop.wait(min(1.0, max(next_at - time.monotonic(), 0.05))):
            if time.monotonic() < next_at or not self._ready():
                continue
            rep = self.sweep()
            next_at = time.monotonic() + self.interval_s
            log.info(
                "hash sweep: %d files, %.0f MB in %.1f s (%.2f s CPU), %d changed",
                rep.files,
                rep.bytes / 2**20,
                rep.seconds,
                rep.cpu_s,
                len(rep.changed),
            )

    def sweep(self) -> SweepReport:
        """One pass over the files indexed now, at :attr:`bytes_per_s`; what differs goes to
        ``on_changed``. Files that cannot be read now are left to the reconcile."""
        rep = SweepReport()
        t0, c0 = time.monotonic(), time.thread_time()
        paths = list(self.engine.files)  # a copy: the writer may change the dict meanwhile
        for path in paths:
            if not self._wait_ready():
                break
            digest = self._hash(path)
            if digest is None:
                continue
            rep.files += 1
            rep.bytes += digest[1]
            rec = self.engine.files.get(path)
            if rec is not None and rec.hash != digest[0]:
                rep.changed.append(path)
            self._pace(rep.bytes, t0)
        else:
            rep.complete = True
        rep.seconds = round(time.monotonic() - t0, 3)
        rep.cpu_s = round(time.thread_time() - c0, 3)
        self.passes += 1
        self.found += len(rep.changed)
        self.last = rep
        if rep.changed:
            log.warning("hash sweep: %d files differ from the index: %s", len(rep.changed), rep.changed[:5])
            self._on_changed(rep.changed)
        return rep

    def _hash(self, path: str) -> tuple[str, int] | None:
        """(content hash, bytes) of one file as the indexer reads it; None if it cannot be read."""
        try:
            data = read_regular_bytes(self.root / disk_path(self.root, path), self.max_file_bytes)
        except (OSError, SkipFile):
            return None
        return content_hash(data), len(data)

    def _wait_ready(self) -> bool:
        """Wait while the writer is busy; False once stopping."""
        while not self._ready():
            if self._stop.wait(0.5):
                return False
        return not self._stop.is_set()

    def _pace(self, done: int, t0: float) -> None:
        """Sleep so that reading stays at :attr:`bytes_per_s` (in slices of :data:`SWEEP_SLICE_S`)."""
        if self.bytes_per_s <= 0:
            return
        ahead = done / self.bytes_per_s - (time.monotonic() - t0)
        if ahead >= SWEEP_SLICE_S:
            self._stop.wait(ahead)
