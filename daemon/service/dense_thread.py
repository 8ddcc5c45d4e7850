"""The dense thread: embeds the chunks whose text changed, changed ones first, then the backlog
of a first index, in small batches with its own model instance, so that a query never waits
behind a batch. It takes turns with the platform help's entries, saves the dense side when its
journal grows or all is quiet, and keeps the team's shared embedding cache attached and drained.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from ..engine import Engine
from .background import BACKGROUND_NICE, COMPACT_IDLE_S, nice_this_thread
from .platform import PlatformHelp

log = logging.getLogger(__name__)

#: Batch size of background embedding: the longest a changed method waits behind the backlog.
DENSE_BATCH = 16
#: The embedding rate in ``status`` is over this many seconds.
RATE_WINDOW_S = 60


class DenseThread:
    """The dense thread's queues and what they leave for ``status``; :meth:`run` is the thread.

    Args:
        engine: returns the started engine (the thread runs only when it has an embedder).
        platform: returns the platform help, or None when it is off.
        stop: set when the service stops; the thread ends after its batch.
        spec: the embedder spec (:func:`daemon.index.embedder.make_embedder`), for a second instance.
        shared_cache_dsn, shared_cache_mode: the team's shared cache (``--shared-cache``), or None.
        counters: the service's counters (``vectors_embedded`` is the thread's).
        emit, on_error: the service's events and its ``last_error``.
    """

    def __init__(
        self,
        engine: Callable[[], Engine],
        *,
        platform: Callable[[], PlatformHelp | None],
        stop: threading.Event,
        spec: str | None,
        shared_cache_dsn: str | None,
        shared_cache_mode: str,
        counters: dict[str, int],
        emit: Callable[[str, dict], None],
        on_error: Callable[[str], None],
    ) -> None:
        self.engine = engine
        self.platform = platform
        self.stop = stop
        self.spec = spec
        self.shared_cache_dsn = shared_cache_dsn
        self.shared_cache_mode = shared_cache_mode
        self.counters = counters
        self._emit = emit
        self._on_error = on_error
        #: held while vectors are added or saved; the service's final save takes it too
        self.lock = threading.Lock()
        self._wake = threading.Event()
        self._priority: collections.deque[str] = collections.deque()
        self._backlog: collections.deque[str] = collections.deque()
        self._rate: collections.deque[tuple[float, int]] = collections.deque(maxlen=120)
        self._passage_embedder = None
        self._platform_embedder = None
        self._inflight = 0
        self._platform_turn = False
        self._platform_off = False
        self._backlog_due = False

    # ------------------------------------------------------------------ from other threads
    def wake(self) -> None:
        """Wake the thread to look at its queues (and at ``stop``)."""
        self._wake.set()

    def prioritize(self, ids: list[str]) -> None:
        """Embed these chunks (added or changed by a batch) before the backlog."""
        if self.engine().embedder is None:
            return
        self._priority.extend(ids)
        self._wake.set()

    def queue_backlog(self) -> None:
        """Ask the thread to work out the backlog (hashing every chunk's head takes a
        while at ssl31-ru size: not on the writer's time)."""
        if self.engine().embedder is None:
            return
        self._backlog_due = True
        self._wake.set()

    def pending(self) -> int:
        """Dense keys queued or in the batch being embedded."""
        return len(self._priority) + len(self._backlog) + self._inflight

    def rate_per_s(self) -> float | None:
        """Vectors made per second over the last :data:`RATE_WINDOW_S` seconds; None when
        none were made in that time."""
        now = time.monotonic()
        recent = [(t, n) for t, n in self._rate if now - t <= RATE_WINDOW_S]
        if not recent:
            return None
        span = max(now - recent[0][0], 1.0)
        return round(sum(n for _, n in recent) / span, 2)

    # ------------------------------------------------------------------ the thread
    def run(self) -> None:
        """The dense thread: load the dense side, then embed until the service stops."""
        nice_this_thread(BACKGROUND_NICE)  # before the passage model starts its threads
        if not self._start():
            return
        eng = self.engine()
        last_vector = time.monotonic()
        while not self.stop.is_set():
            if self._backlog_due:
                self._fill_backlog()
            # platform help takes turns with the export's backlog; changed chunks go first
            self._platform_turn = not self._platform_turn and not self._priority
            if self._platform_turn and self._embed_platform():
                continue
            ids = self._next_ids()
            if not ids:
                if self._embed_platform():
                    continue
                if eng.dense_unsaved and (eng.dense_compact_due or time.monotonic() - last_vector >= COMPACT_IDLE_S):
                    self.save()
                if eng.shared_cache is not None and eng.shared_cache.unsent_count:
                    eng.shared_cache.drain()  # the server may be back: tried when its back-off allows
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            n = self._embed_batch(ids)
            if n is None:
                break
            if n:
                last_vector = time.monotonic()
                self._rate.append((last_vector, n))
                self._emit("progress", {"stage": "embed", "done": eng.dense_done(), "total": len(eng.chunks)})
            if eng.dense_compact_due:
                self.save()

    def _start(self) -> bool:
        """Load the dense side, make the passage embedder, attach the shared cache; False when
        stopping meanwhile."""
        from ..index.embedder import make_embedder

        eng = self.engine()
        t0 = time.perf_counter()
        with self.lock:  # close() must not save a half-loaded dense side
            if self.stop.is_set():
                return False
            eng.load_dense()
        if self.stop.is_set():
            return False
        log.info("dense side loaded in %.2fs: %d vectors", time.perf_counter() - t0, len(eng.embedded))
        self._emit("progress", {"stage": "load_dense", "done": len(eng.embedded), "total": len(eng.chunks)})
        # a second instance of the model for passages: its lock is not the query's lock,
        # so a hybrid query never waits behind a background batch
        try:
            second = make_embedder(self.spec)
            if second.fingerprint != eng.embedder.fingerprint:
                second = eng.embedder
        except Exception:
            log.exception("second embedder instance failed; sharing the query embedder")
            second = eng.embedder
        self._passage_embedder = CountingEmbedder(second, self.counters)
        # platform help's entries are counted apart: vectors_embedded is the export's
        self._platform_embedder = CountingEmbedder(second, self.counters, key="platform_vectors_embedded")
        self.attach_shared_cache()
        return True

    def _embed_platform(self) -> int:
        """One batch of platform help entries without a vector (:meth:`PlatformHelp.embed_next`);
        0 when none is pending. A failure turns the platform's dense side off, logged."""
        ph = self.platform()
        if ph is None or self._platform_off or self._platform_embedder is None:
            return 0
        try:
            with self.lock:
                if self.stop.is_set():
                    return 0
                return ph.embed_next(self._platform_embedder, batch=DENSE_BATCH, shared=self.engine().shared_cache)
        except Exception as exc:
            log.exception("embedding platform help failed; its dense side is off")
            self._on_error(f"platform embedding: {type(exc).__name__}: {exc}")
            self._platform_off = True
            return 0

    def _fill_backlog(self) -> None:
        eng = self.engine()
        self._backlog_due = False
        self._backlog = collections.deque(eng.dense_pending())
        if eng.shared_cache is not None:  # shared-cache hook: bulk lookup of the backlog
            from ..index.shared_cache import prefetch

            prefetch(eng, list(self._backlog))

    def _next_ids(self) -> list[str]:
        """Up to :data:`DENSE_BATCH` chunk ids: changed ones first, else the backlog."""
        ids: list[str] = []
        while self._priority and len(ids) < DENSE_BATCH:
            ids.append(self._priority.popleft())
        while not ids and self._backlog and len(ids) < DENSE_BATCH:
            ids.append(self._backlog.popleft())
        return ids

    def _embed_batch(self, ids: list[str]) -> int | None:
        """Embed one batch: vectors made (0 after a logged failure); None when stopping."""
        self._inflight = len(ids)
        try:
            with self.lock:
                if self.stop.is_set():
                    return None
                return self.engine().embed_ids(ids, batch_size=DENSE_BATCH, embedder=self._passage_embedder)
        except Exception as exc:
            log.exception("embedding failed")
            self._on_error(f"embedding: {type(exc).__name__}: {exc}")
            self.stop.wait(5.0)
            return 0
        finally:
            self._inflight = 0

    def attach_shared_cache(self) -> None:
        """Give the engine its shared-cache client (``Engine.shared_cache``, the hook the
        embedding path reads); in the dense thread: the model's fingerprint takes a while."""
        eng = self.engine()
        if not self.shared_cache_dsn or eng.embedder is None:
            return
        from ..index.shared_cache import for_embedder

        try:
            eng.shared_cache = for_embedder(
                self.shared_cache_dsn, eng.embedder, self.shared_cache_mode, index_dir=eng.index_dir
            )
        except Exception as exc:
            log.exception("shared embedding cache not used")
            self._on_error(f"shared cache: {type(exc).__name__}: {exc}")
            return
        eng.shared_cache.drain()  # what an earlier run could not write goes first

    def save(self) -> None:
        """Write the dense side unless the service is stopping (:meth:`Service.close` writes
        the final save)."""
        with self.lock:
            if self.stop.is_set():
                return
            try:
                eng = self.engine()
                if eng.save_dense():
                    log.info("dense side saved: %d vectors", len(eng.embedded))
            except Exception as exc:
                log.exception("saving the dense side failed")
                self._on_error(f"save dense: {type(exc).__name__}: {exc}")


class CountingEmbedder:
    """An embedder that counts the passages it computes (``counters[key]``, by default
    ``vectors_embedded``): status shows that a ``touch`` storm or a restart re-embeds nothing."""

    def __init__(self, inner, counters: dict[str, int], *, key: str = "vectors_embedded") -> None:
        self._inner = inner
        self._counters = counters
        self._key = key

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def encode_passages(self, texts: list[str]):
        """The inner model's passages, counted."""
        out = self._inner.encode_passages(texts)
        self._counters[self._key] = self._counters.get(self._key, 0) + len(texts)
        return out
