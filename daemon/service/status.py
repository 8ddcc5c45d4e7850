"""The parts of a daemon's ``status`` that take more than a read: the skipped files sampled so
that every reason shows, the dense side's coverage and ETA, the watcher's state and whether
answers can be claimed fresh, the shared cache, latency percentiles, memory and the index's
size on disk. :meth:`daemon.service.service.Service.status` puts them into one :class:`Status`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from ..contract import DenseStatus, Latency, SharedCacheStatus, Skip, WatchStatus
from ..engine import Engine
from ..stats import percentile

#: Skipped files listed by ``status`` (``skipped_files``): every reason gets its share.
STATUS_SKIPPED_FILES = 50
#: Docs pages with a problem listed by ``status`` (``docs_problems``); the count is always complete.
STATUS_DOCS_PROBLEMS = 50
#: Stale paths listed by ``status`` (``stale_files``); the count is always complete.
STATUS_STALE_FILES = 50
#: The index's size on disk is measured again at most this often (seconds): a walk of its folder.
INDEX_SIZE_EVERY_S = 10.0


def skip_counts(skips: list[Skip]) -> dict[str, int]:
    """``Status.skipped``: how many files each reason skipped."""
    out: dict[str, int] = {}
    for k in skips:
        out[k.reason] = out.get(k.reason, 0) + 1
    return out


def skip_sample(skips: list[Skip], n: int) -> list[Skip]:
    """At most ``n`` skip records, every reason represented: round-robin over the reasons
    (alphabetical), each reason's files by path. So 136 ``missing_on_disk`` objects cannot
    hide the one binary ``.bsl``."""
    by_reason: dict[str, list[Skip]] = {}
    for k in sorted(skips, key=lambda k: (k.reason, k.path)):
        by_reason.setdefault(k.reason, []).append(k)
    out: list[Skip] = []
    queues = [iter(v) for _, v in sorted(by_reason.items())]
    while queues and len(out) < n:
        nxt = []
        for it in queues:
            k = next(it, None)
            if k is None:
                continue
            out.append(k)
            nxt.append(it)
            if len(out) >= n:
                break
        queues = nxt
    return sorted(out, key=lambda k: (k.reason, k.path))


def latency(samples: Sequence[float]) -> Latency:
    """``Status.latency``: p50, p95 and the last of the change-to-searchable samples (ms)."""
    lat = Latency(samples=len(samples))
    if samples:
        lat.p50_ms = round(percentile(samples, 0.5), 1)
        lat.p95_ms = round(percentile(samples, 0.95), 1)
        lat.last_ms = round(samples[-1], 1)
    return lat


def dense_status(
    engine: Engine,
    st: dict,
    *,
    spec: str | None,
    pending: int,
    rate_per_s: float | None,
    shared: SharedCacheStatus | None,
) -> DenseStatus:
    """``Status.dense``: coverage (``st``: :meth:`Engine.stats`), the queue (``pending``), the
    rate over the last minute (None: no vector made in it) and its ETA, the shared cache."""
    dense = DenseStatus(enabled=engine.embedder is not None)
    if engine.embedder is None:
        return dense
    dense.embedder = spec
    dense.model = getattr(engine.embedder, "name", None)
    dense.done, dense.total, dense.vectors = st["dense_done"], st["dense_total"], st["dense_vectors"]
    dense.pending = pending
    if rate_per_s is not None:
        dense.rate_per_s = rate_per_s
        if dense.rate_per_s > 0:
            dense.eta_s = round((dense.total - dense.done) / dense.rate_per_s, 1)
    elif dense.done >= dense.total:
        dense.eta_s = 0.0
    dense.shared_cache = shared
    return dense


def watch_status(watch_mode: str, watch_state: str, w, *, overflowed: bool, problem: str | None) -> WatchStatus:
    """``Status.watcher``: mode and state, and whether answers can be claimed fresh.
    ``watch_mode``: what was asked (``--watch``); ``watch_state``: ``arming``, ``armed`` or
    ``off``; ``w``: the running watcher or None; ``overflowed``: an overflow's full reconcile
    is still due; ``problem``: why changes may go unseen (:meth:`Freshness.report`)."""
    arming = watch_state == "arming"
    if watch_mode == "off":
        freshness = "off"
    elif arming:
        freshness = "arming"
    else:
        freshness = "degraded" if problem else "live"
    if w is None:
        return WatchStatus(
            mode="off", state="arming" if arming else "off", freshness=freshness, freshness_reason=problem
        )
    if arming:
        state = "arming"
    elif overflowed:
        state = "overflowed"
    else:
        state = {"native": "watching", "polling": "polling"}.get(w.mode, "off")
    return WatchStatus(
        mode=w.mode,
        state=state,
        degraded=w.degraded,
        pending_events=w.pending,
        last_error=w.last_error,
        freshness=freshness,
        freshness_reason=problem,
    )


def shared_status(dsn: str | None, mode: str, engine: Engine | None) -> SharedCacheStatus | None:
    """The shared cache's :class:`SharedCacheStatus` (``not connected`` until the dense thread
    attached it); None without ``--shared-cache``."""
    if not dsn:
        return None
    sc = engine.shared_cache if engine is not None else None
    if sc is not None:
        return sc.status()
    from ..index.shared_cache import mask_dsn

    return SharedCacheStatus(url=mask_dsn(dsn), mode=mode, state="not connected")


class IndexSize:
    """The index's size on disk in bytes, re-measured at most every :data:`INDEX_SIZE_EVERY_S`."""

    def __init__(self, index_dir: Path) -> None:
        self.index_dir = index_dir
        self._measured: tuple[float, int] = (-1e9, 0)  # (monotonic time, bytes)

    def bytes(self) -> int:
        """The last measure, taken again when it is too old."""
        now = time.monotonic()
        if now - self._measured[0] > INDEX_SIZE_EVERY_S:
            self._measured = (now, dir_size(self.index_dir))
        return self._measured[1]


def rss() -> int:
    """Resident set size of this process in bytes (psutil)."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return 0


def dir_size(d: Path) -> int:
    """Bytes of the regular files under ``d`` (the index on disk)."""
    total = 0
    for dirpath, _, files in os.walk(d):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f), follow_symlinks=False).st_size
            except OSError:
                pass
    return total
