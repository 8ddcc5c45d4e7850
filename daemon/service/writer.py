"""The writer thread: the only thread that changes the lexical side of a root's engine.

It arms the watcher, then runs jobs: the first reconcile with the disk, the watcher's batches,
``reindex`` requests, a periodic reconcile and re-checks of notices no batch brought. Each job is
:meth:`Engine.prepare` (read, chunk, tokenize; no lock) then :meth:`Engine.apply` (one batch
under the engine lock). Jobs queued while one runs are merged into one, and a burst of many
changed files (a checkout) becomes one full reconcile once the events stop. Every applied batch
is journaled at once; the full snapshot is rewritten when the journal grows or after
:data:`COMPACT_IDLE_S` quiet seconds (:mod:`daemon.index.journal`). The writer also owns the
chunking pool: every core for a first index, one niced worker later, a fresh one after a crash.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import threading
import time
from collections.abc import Callable

import msgspec

from ..engine import Cancelled, Engine, RefreshReport, make_pool
from .background import BACKGROUND_NICE, COMPACT_IDLE_S, trim_heap
from .freshness import Freshness

log = logging.getLogger(__name__)

#: A watcher batch with more changed files than this is a storm (see Writer.absorb_storm):
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
#: Latency samples kept for the p50/p95 in status.
LATENCY_SAMPLES = 200
#: A noticed change that no watcher batch brought to the writer within this many seconds (a
#: notice the debounce dropped, should that ever happen) is re-checked by a job of its own.
ORPHAN_NOTICE_S = 5.0


class Job(msgspec.Struct):
    """One reconcile for the writer: the whole export (``full``) or these relative paths and
    folders; ``first_event``: monotonic time of the first file event (for the latency);
    ``reason``: what queued it (``start``, ``watch``, ``reindex``, ``periodic``, ``notice``, ``storm``)."""

    full: bool = False
    paths: set[str] = set()
    dirs: set[str] = set()
    first_event: float | None = None
    reason: str = ""

    def merge(self, more: Job) -> None:
        """Take in a job queued behind this one."""
        self.full = self.full or more.full
        self.paths |= more.paths
        self.dirs |= more.dirs
        if more.first_event is not None:
            self.first_event = more.first_event if self.first_event is None else min(self.first_event, more.first_event)
        self.reason = self.reason or more.reason


class Writer:
    """The writer's queue, its jobs and what they leave for ``status`` (see the module
    docstring); :meth:`run` is the thread.

    Args:
        engine: returns the started engine.
        fresh: the service's :class:`Freshness` (notices in, applied or failed out).
        stop: set when the service stops; a job in flight is dropped at its next file.
        counters: the service's counters (``jobs``, ``full_reconciles``, ``storms`` are the writer's).
        reconcile_interval: seconds between periodic full reconciles (0: none).
        arm: arms the watcher, before the first reconcile so that it sees what arming missed.
        watcher: the running watcher or None (its pending events delay a storm's reconcile).
        set_state, emit, on_error: the service's state, its events and its ``last_error``.
        on_ready: called once the first full reconcile is done (the dense backlog is queued).
        on_changed: the chunk ids a later job added or changed (the dense thread's priority).
    """

    def __init__(
        self,
        engine: Callable[[], Engine],
        fresh: Freshness,
        *,
        stop: threading.Event,
        counters: dict[str, int],
        reconcile_interval: float,
        arm: Callable[[], None],
        watcher: Callable[[], object],
        set_state: Callable[[str], None],
        emit: Callable[[str, dict], None],
        on_error: Callable[[str], None],
        on_ready: Callable[[], None],
        on_changed: Callable[[list[str]], None],
    ) -> None:
        self.engine = engine
        self.fresh = fresh
        self.stop = stop
        self.counters = counters
        self.reconcile_interval = reconcile_interval
        self._arm = arm
        self._watcher = watcher
        self._set_state = set_state
        self._emit = emit
        self._on_error = on_error
        self._on_ready = on_ready
        self._on_changed = on_changed
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.busy = threading.Event()  # working on a job
        self.first_done = threading.Event()  # the first full reconcile is done
        #: held while a batch is applied or the lexical snapshot written; the service's final
        #: save takes it too (never two writers of one file)
        self.lock = threading.Lock()
        self.latencies: collections.deque[float] = collections.deque(maxlen=LATENCY_SAMPLES)
        self.last_index: dict[str, float | int] = {}
        self.last_saved_at: float | None = None
        self.saving = False
        self.overflowed = False  # an overflow batch's full reconcile has not finished yet
        self._idle = threading.Condition()
        self._job_progress: dict[str, str | int] = {}
        self._stage_mark: tuple[str, float, int] = ("", 0.0, 0)  # stage, its start (monotonic), done then
        self._pool_nice = BACKGROUND_NICE
        self._last_change = self._last_reconcile = time.monotonic()

    # ------------------------------------------------------------------ queue
    def put(self, job: Job) -> None:
        """Queue a job (any thread)."""
        self.jobs.put(job)

    def close(self) -> None:
        """Tell :meth:`run` to end once it takes the queue's next item."""
        self.jobs.put(None)

    def on_batch(self, batch) -> None:
        """The watcher's ``on_batch``: a :class:`daemon.service.watcher.ChangeBatch` as a job."""
        if getattr(batch, "overflow", False):
            self.overflowed = True
        job = Job(
            full=bool(getattr(batch, "overflow", False)),
            paths=set(batch.paths),
            dirs=set(batch.dirs),
            first_event=batch.first_event,
            reason="watch",
        )
        self.fresh.notice(job.paths, job.dirs, job.full, queued=True)
        self.jobs.put(job)

    def _next_job(self, timeout: float) -> Job | None | bool:
        """The next job with everything queued behind it merged in; False on timeout."""
        try:
            job = self.jobs.get(timeout=timeout)
        except queue.Empty:
            return False
        if job is None:
            return None
        while True:
            try:
                more = self.jobs.get_nowait()
            except queue.Empty:
                break
            if more is None:
                self.jobs.put(None)
                break
            job.merge(more)
        return job

    # ------------------------------------------------------------------ idle
    def quiet(self) -> bool:
        """True once the first reconcile is done and no job is queued or running (the hash
        sweep reads only then)."""
        return self.first_done.is_set() and not self.busy.is_set() and self.jobs.empty()

    def notify_idle(self) -> None:
        """Wake :meth:`wait_idle` callers to look again."""
        with self._idle:
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block until the first reconcile is done, no job is queued or running and the
        watcher holds no events; True if that happened within ``timeout`` seconds (False at
        once when the service is stopping)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while True:
                if self.stop.is_set():
                    return False
                w = self._watcher()
                pending = w.pending if w is not None else 0
                if self.first_done.is_set() and self.jobs.empty() and not self.busy.is_set() and not pending:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.05))

    # ------------------------------------------------------------------ progress
    def progress(self, stage: str, done: int, total: int) -> None:
        """The running job's ``progress(stage, done, total)``: kept for ``status`` and sent
        as a ``progress`` event."""
        self._set_job_progress(stage, done, total)
        self._emit("progress", {"stage": stage, "done": done, "total": total})

    def _set_job_progress(self, stage: str, done: int, total: int) -> None:
        """Record the writer's stage for ``status`` (a new stage, or ``done`` going back,
        restarts its clock: the rate and ETA are over the stage so far)."""
        mark = self._stage_mark
        if mark[0] != stage or done < mark[2]:
            self._stage_mark = (stage, time.monotonic(), done)
        self._job_progress = {"stage": stage, "done": done, "total": total}

    def progress_now(self) -> dict[str, str | int | float]:
        """``Status.progress``: the running job's stage and counts plus ``elapsed_s``, and
        ``rate_per_s`` (items of the stage per second since it began) and ``eta_s`` (the rest
        at that rate) once at least 1 s and one item have passed; {} when idle."""
        if not self.busy.is_set():
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

    # ------------------------------------------------------------------ chunking pool
    def open_pool(self) -> None:
        """Give the freshly opened engine its chunking pool: a first index (nothing loaded)
        chunks on every core at normal priority, since no query has anything to win yet
        (docs/freshness.md, "Priorities"); later ones run niced, on one worker."""
        eng = self.engine()
        self._pool_nice = BACKGROUND_NICE if eng.files else 0
        workers = POOL_WORKERS if eng.files else FIRST_INDEX_WORKERS
        eng.pool = make_pool(workers, nice=self._pool_nice)

    def _renice_pool(self) -> None:
        """After the first index: replace a normal-priority chunking pool by one at
        :data:`BACKGROUND_NICE` (a process cannot lower its nice value again), so that later
        reconciles (a checkout) leave the CPU to queries. The new worker starts on first use."""
        eng = self.engine()
        if self._pool_nice == BACKGROUND_NICE or eng.pool is None:
            return
        old, eng.pool = eng.pool, make_pool(POOL_WORKERS, nice=BACKGROUND_NICE)
        self._pool_nice = BACKGROUND_NICE
        old.shutdown(wait=False, cancel_futures=True)

    def _renew_broken_pool(self) -> None:
        """A worker died (e.g. a native crash on some file): a fresh pool for the next job."""
        eng = self.engine()
        if eng.pool_broken:
            old, eng.pool, eng.pool_broken = eng.pool, make_pool(POOL_WORKERS, nice=self._pool_nice), False
            old.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ the thread
    def run(self) -> None:
        """The writer thread: arm the watcher, then run jobs until the service stops."""
        if not self.stop.is_set():
            self._arm()  # before the first reconcile, so that it sees what arming missed
        self._last_change = self._last_reconcile = time.monotonic()
        while not self.stop.is_set():
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
        if self.engine().lexical_unsaved and now - self._last_change >= COMPACT_IDLE_S:
            self.save_lexical()
        if self.reconcile_interval and now - self._last_reconcile >= self.reconcile_interval:
            self.jobs.put(Job(full=True, reason="periodic"))
            self._last_reconcile = now
        orphans = self.fresh.orphans(ORPHAN_NOTICE_S)
        if orphans:
            log.debug("re-checking %d noticed paths no batch brought", len(orphans))
            files = {k for k in orphans if not k.endswith("/")}
            dirs = {k.rstrip("/") for k in orphans if k.endswith("/")}
            self.fresh.notice(files, dirs, False, queued=True)
            self.jobs.put(Job(paths=files, dirs=dirs, reason="notice"))
        self.notify_idle()

    def _run_writer_job(self, job: Job) -> bool:
        """Run one (merged) job and what follows it; False when the service is stopping."""
        self._set_job_progress("scan", 0, 0)
        self.busy.set()
        if not job.full and len(job.paths) + 10 * len(job.dirs) > STORM_FILES:
            job = self.absorb_storm(job)
        seq = self.fresh.mark()  # everything noticed so far is on disk before the job reads it
        report = None
        try:
            report = self.run_job(job)
        finally:
            if report is not None:
                self.fresh.applied(full=job.full, paths=job.paths, dirs=job.dirs, seq=seq)
            else:  # indexing failed (last_error says why): its files stay stale, not retried in a loop
                self.fresh.failed(job.paths)
            self.busy.clear()
        if self.stop.is_set():
            return False  # a dropped reconcile is not the first one done
        self._after_job(job, report)
        self.notify_idle()
        return True

    def _after_job(self, job: Job, report: RefreshReport | None) -> None:
        """Bookkeeping after a job: the reconcile clock, a snapshot when due, and after the
        first full reconcile: ready, the niced pool, the prewarm and the dense backlog."""
        eng = self.engine()
        if job.full:
            self._last_reconcile = time.monotonic()
            if report is not None:
                self.overflowed = False
            trim_heap()
        if report is not None and (report.files_changed or report.files_removed):
            self._last_change = time.monotonic()
        first = not self.first_done.is_set() and job.full
        if eng.compact_due or (first and not eng.generation):
            self.save_lexical()
            trim_heap()  # the save's transient pieces
        if first:
            self._renice_pool()
            self.first_done.set()
            self._set_state("ready")
            log.info("prewarmed the on-demand channels in %.2fs", eng.prewarm())
            self._on_ready()
        self._resolve_refs()

    def _resolve_refs(self) -> None:
        """Resolve the references a first index, a load or a big batch left pending, in steps
        (queries run between them and say ``resolving``), once the index is ready: the cold
        index is not slowed by it. The resolved graph goes into the next snapshot."""
        eng = self.engine()
        if not eng.state.refs.pending:
            return
        t0, n = time.perf_counter(), eng.state.refs.pending
        left = eng.resolve_references(cancel=self.stop.is_set)
        if left:
            return  # stopping: the snapshot keeps them pending, the next start resolves them
        eng.state.dirty = True  # the snapshot written before held them unresolved
        log.info("resolved the references of %d files in %.2fs", n, time.perf_counter() - t0)

    def absorb_storm(self, job: Job) -> Job:
        """A burst of many changed files (a ``git checkout``, a Designer dump): wait until the
        events stop (no new batch and nothing pending in the watcher for :data:`STORM_QUIET_S`,
        at most :data:`STORM_MAX_S`), then reconcile the whole export once. Queries keep seeing
        the old, consistent index meanwhile, never a mix of branches."""
        self.counters["storms"] += 1
        if self.first_done.is_set():
            self._set_state("indexing")
        log.info("storm of %d changed paths: waiting for the events to stop", len(job.paths))
        deadline = time.monotonic() + STORM_MAX_S
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and not self.stop.is_set():
            try:
                more = self.jobs.get(timeout=0.05)
            except queue.Empty:
                more = False
            if more is None:
                self.jobs.put(None)
                break
            if more is not False:
                job.paths |= more.paths
                job.dirs |= more.dirs
                if more.first_event is not None and job.first_event is not None:
                    job.first_event = min(job.first_event, more.first_event)
                quiet_since = time.monotonic()
            elif (w := self._watcher()) is not None and w.pending:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= STORM_QUIET_S:
                break
        job.full = True
        job.reason = "storm"
        return job

    def run_job(self, job: Job) -> RefreshReport | None:
        """Prepare and apply one job; its report, or None when it was dropped or failed."""
        eng = self.engine()
        if job.full and self.first_done.is_set():
            self._set_state("indexing")
        self._renew_broken_pool()
        try:
            if job.full:
                cs = eng.prepare(progress=self.progress, cancel=self.stop.is_set)
                self._set_job_progress("apply", 0, len(cs.updates) + len(cs.removed))
            else:
                cs = eng.prepare(sorted(job.paths), sorted(job.dirs), cancel=self.stop.is_set)
            with self.lock:
                if self.stop.is_set():
                    raise Cancelled()
                report = eng.apply(cs)
        except Cancelled:
            log.info("%s reconcile dropped: the daemon is stopping (it runs again on the next start)", job.reason)
            return None
        except Exception as exc:
            log.exception("indexing failed (%s)", job.reason)
            self._on_error(f"indexing ({job.reason}): {type(exc).__name__}: {exc}")
            if self.first_done.is_set():
                self._set_state("ready")
            return None
        self._record_report(job, report)
        return report

    def _record_report(self, job: Job, report: RefreshReport) -> None:
        """Counters, latency, ``last_index``, the log line, the dense priority and the
        ``indexed`` event of an applied job."""
        self.counters["jobs"] += 1
        if job.full:
            self.counters["full_reconciles"] += 1
        latency_ms = None
        if job.first_event is not None:
            latency_ms = (time.monotonic() - job.first_event) * 1000
            self.latencies.append(latency_ms)
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
        if job.full and self.first_done.is_set():
            self._set_state("ready")
        if report.changed_ids and self.first_done.is_set():
            self._on_changed(report.changed_ids)
        self._emit(
            "indexed",
            {
                "files": report.files_changed + report.files_removed,
                "chunks_changed": report.chunks_added + report.chunks_changed + report.chunks_removed,
                "latency_ms": latency_ms,
                "full": job.full,
            },
        )

    def save_lexical(self) -> None:
        """Write the lexical snapshot (the journal folded in) unless the service is stopping:
        :meth:`Service.close` writes the final one."""
        with self.lock:
            if self.stop.is_set():
                return
            self.saving = True
            try:
                if self.engine().save_lexical():
                    self.last_saved_at = time.time()
                    log.info("lexical snapshot saved")
            except Exception as exc:
                log.exception("saving the lexical snapshot failed")
                self._on_error(f"save: {type(exc).__name__}: {exc}")
            finally:
                self.saving = False


def kill_pool(pool) -> None:
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
