"""What an answer computed now may miss: changes noticed and not yet applied, and why the watch
may not see changes at all.

A watcher notice marks its file (or folder) pending the moment the event is read; the writer
clears it once a job that started reading after that notice is applied. Every search,
symbols, find-usages and indexed lookup (a method, a metadata object) answer carries what is
pending (:meth:`Freshness.report`), may first wait for it (:meth:`Freshness.wait`), and says
``stale`` with a reason whenever the watch itself is off or degraded, since then a change may
not be noticed at all. docs/freshness.md tells the whole story.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..contract import Callees, CallGraph, MethodInfo, ObjectDescription, References, SearchResult

T = TypeVar("T", MethodInfo, ObjectDescription)

#: An answer names at most this many stale paths (``SearchResult.stale_paths``); the count is
#: always complete.
ANSWER_STALE_PATHS = 20
#: Longest wait for freshness a query may ask for (``fresh_timeout``), seconds.
MAX_FRESH_S = 60.0
#: How long the watcher may take to catch up before an answer is computed: a zero-cost check
#: when the kernel holds no event; during a storm the answer goes out after this and says
#: ``unread_events``.
ANSWER_SETTLE_S = 0.02


class Freshness:
    """The pending changes of one root and the questions answers ask about them.

    ``watcher()``: the running :class:`daemon.service.watcher.Watcher` or None; ``known_stale()``:
    files known to be indexed older than the disk (a descriptor that does not parse keeps its
    previous chunks); ``watch_problem()``: why changes may go unseen now (None: the watch is
    whole, or was turned off on purpose). All three are called from any thread.
    """

    def __init__(
        self,
        *,
        watcher: Callable[[], Any],
        known_stale: Callable[[], list[str]],
        watch_problem: Callable[[], str | None],
    ) -> None:
        self._watcher = watcher
        self._known_stale = known_stale
        self._watch_problem = watch_problem
        # path (a folder: "dir/") -> (notice number, monotonic time)
        self._pending: dict[str, tuple[int, float]] = {}
        self._pending_full = 0  # notice number of an overflow not yet reconciled; 0: none
        self._queued: set[str] = set()  # pending keys a queued job will apply
        self._seq = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    # ------------------------------------------------------------------ bookkeeping (writer side)
    def notice(self, paths: Iterable[str], dirs: Iterable[str], overflow: bool, *, queued: bool = False) -> None:
        """Mark changes pending the moment they are seen (the watcher's ``on_notice``, from its
        threads; also batches and ``reindex``). ``queued``: a job for them is in the queue."""
        now = time.monotonic()
        with self._lock:
            self._seq += 1
            n = self._seq
            keys = list(paths) + [d.rstrip("/") + "/" for d in dirs]
            for k in keys:
                self._pending[k] = (n, now)
            if queued:
                self._queued.update(keys)
            if overflow:
                self._pending_full = n

    def mark(self) -> int:
        """The notice number a job about to read the disk covers: everything noticed so far."""
        with self._lock:
            return self._seq

    def applied(self, *, full: bool, paths: Iterable[str], dirs: Iterable[str], seq: int) -> None:
        """After a job was applied: drop what it covered and was noticed before it started
        reading (notice number <= ``seq``); a change noticed while it ran stays pending."""
        with self._lock:
            if full:
                covered = list(self._pending)
                if self._pending_full and self._pending_full <= seq:
                    self._pending_full = 0
            else:
                prefixes = tuple(d.rstrip("/") + "/" for d in dirs if d)
                covered = list(paths) + [d.rstrip("/") + "/" for d in dirs]
                if prefixes:
                    covered += [k for k in self._pending if k.startswith(prefixes)]
            for k in covered:
                self._queued.discard(k)  # its job ran: a later notice needs a batch of its own
                entry = self._pending.get(k)
                if entry is not None and entry[0] <= seq:
                    del self._pending[k]
            self._changed.notify_all()

    def failed(self, paths: Iterable[str]) -> None:
        """A job failed: its files stay pending and are not retried in a loop."""
        with self._lock:
            self._queued.update(k for k in paths if k in self._pending)

    def orphans(self, older_than_s: float) -> set[str]:
        """Pending paths no job will apply: noticed over ``older_than_s`` ago, while the watcher
        holds no event and nothing is queued for them (a notice the debounce dropped)."""
        w = self._watcher()
        if w is not None and w.pending:
            return set()
        old = time.monotonic() - older_than_s
        with self._lock:
            return {k for k, (_, t) in self._pending.items() if t < old and k not in self._queued}

    # ------------------------------------------------------------------ questions (any thread)
    def report(self, *, settle: float = ANSWER_SETTLE_S) -> dict:
        """What could change an answer computed now, as ``SearchResult`` fields: ``stale``
        (anything below says so), ``stale_paths`` (changes noticed and not yet applied first, a
        folder ending in ``/``; then files known to be indexed older than the disk),
        ``stale_count``, ``pending_count`` (the noticed part), ``full_reconcile_pending`` (events
        were lost), ``unread_events`` (the kernel still held events after waiting ``settle``
        seconds for the watcher) and ``stale_reason`` (the watch is off or degraded: a change
        may not be noticed at all)."""
        w = self._watcher()
        unread = False
        if w is not None and settle >= 0:
            unread = w.settle(settle) is False
        known = self._known_stale()
        with self._lock:
            pending = sorted(self._pending)
            full = bool(self._pending_full)
        pend_set = set(pending)
        paths = pending + sorted(p for p in set(known) if p not in pend_set)
        reason = self._watch_problem()
        return {
            "stale": bool(paths) or full or unread or reason is not None,
            "stale_paths": paths,
            "stale_count": len(paths),
            "pending_count": len(pending),
            "full_reconcile_pending": full,
            "unread_events": unread,
            "stale_reason": reason,
        }

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds (at most :data:`MAX_FRESH_S`) until every change
        noticed so far is applied: the watcher has caught up with the kernel and nothing is
        pending (files that do not parse are not waited for). True if that happened in time.
        With polling, a change not yet seen by a poll cannot be waited for."""
        deadline = time.monotonic() + min(max(timeout, 0.0), MAX_FRESH_S)
        w = self._watcher()
        if w is not None and w.settle(max(deadline - time.monotonic(), 0.0)) is False:
            return False
        with self._lock:
            while self._pending or self._pending_full:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.02))
            return True

    def stamp(self, res: SearchResult, before: dict | None = None) -> SearchResult:
        """Fill ``res``'s freshness fields (:meth:`report`, or :meth:`since` ``before``), and
        ``stale`` on each hit whose file is among the stale paths (or under a stale folder)."""
        paths = self._fill(res, None if before is None else self.since(before))
        if paths:
            files = set(paths)
            dirs = tuple(p for p in paths if p.endswith("/"))
            for h in res.hits:
                if h.path in files or (dirs and h.path.startswith(dirs)):
                    h.stale = True
        return res

    def stamp_usages(
        self, res: References | Callees | CallGraph, before: dict | None = None
    ) -> References | Callees | CallGraph:
        """Fill the freshness fields of a find-usages answer as :meth:`stamp` does a search's
        (its references carry no ``stale`` mark of their own)."""
        self._fill(res, None if before is None else self.since(before))
        return res

    def stamp_lookup(self, res: T, own: Iterable[str], before: dict) -> T:
        """Fill the freshness fields of a lookup answer (:class:`MethodInfo`,
        :class:`ObjectDescription`, :meth:`since` ``before``) and its ``stale_own``: those of
        ``own`` (the files the answer was read from) that are among the stale paths or under a
        stale folder, all of them."""
        paths = self._fill(res, self.since(before))
        if paths:
            files = set(paths)
            dirs = tuple(p for p in paths if p.endswith("/"))
            res.stale_own = [p for p in dict.fromkeys(own) if p in files or (dirs and p.startswith(dirs))]
        return res

    def since(self, before: dict) -> dict:
        """:meth:`report` for an answer computed after ``before`` (:meth:`report` taken, with
        the watcher settled, before the answer was): what is pending now together with what was
        pending then, since a change applied while the answer was computed may or may not be in
        it. Never fresher than either report."""
        now = self.report(settle=-1)  # the watcher was waited for when ``before`` was taken
        pend = set(now["stale_paths"])
        merged = dict(now)
        merged["stale_paths"] = now["stale_paths"] + [p for p in before["stale_paths"] if p not in pend]
        merged["stale_count"] = len(merged["stale_paths"])
        merged["pending_count"] = max(now["pending_count"], before["pending_count"])
        for k in ("full_reconcile_pending", "unread_events"):
            merged[k] = now[k] or before[k]
        merged["stale_reason"] = now["stale_reason"] or before["stale_reason"]
        merged["stale"] = now["stale"] or before["stale"]
        return merged

    def _fill(self, res, report: dict | None = None) -> list[str]:
        """Set the fields of ``report`` (default: :meth:`report` now) on ``res``, the stale paths
        cut to :data:`ANSWER_STALE_PATHS`; returns them all."""
        f = dict(report) if report is not None else self.report()
        paths = f.pop("stale_paths")
        for k, v in f.items():
            setattr(res, k, v)
        res.stale_paths = paths[:ANSWER_STALE_PATHS]
        return paths
