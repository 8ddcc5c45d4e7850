"""Watching an export root: which files changed, debounced into batches.

:class:`Watcher` wraps :mod:`watchdog` (inotify on Linux through
``watchdog.observers.Observer``; FSEvents/ReadDirectoryChanges elsewhere) and hands the
service one :class:`ChangeBatch` per burst of changes. It only *reports*; deciding what
to re-index (and whether a batch is too big to apply incrementally) is the service's job.

* **Filtering.** Only files ending in ``.bsl``, ``.xml``, ``.mdo`` or ``.md``/``.markdown`` (any case) are
  reported in ``paths``; created, deleted and moved directories are reported in ``dirs``.
  Nothing below a dot-directory (``.git``, ``.svn``, ``.hg``, ``.idea``, ``.vscode``,
  ``.bsl-lens``, ``.settings`` …) or below an ``ignore`` directory (the index directory
  when it lies inside the root) is reported, and neither are editor temp files
  (:data:`TEMP_PATTERNS`). A move reports both ends, each end filtered on its own, so an
  atomic save (write ``X.bsl.tmp`` or ``.X.bsl.swp``, rename it over ``X.bsl``) is a
  change of ``X.bsl``. Reads never produce events (the kernel watch mask leaves out
  ``IN_OPEN``/``IN_ACCESS``/``IN_CLOSE_NOWRITE``), so indexing cannot feed back.
* **Paths** are relative to the root, ``/``-separated, NFC (macOS hands out NFD names,
  ``QUIRKS.md`` §1), never ``..`` nor absolute: the spelling of
  :func:`daemon.sources.scan.module_identity` and :class:`daemon.sources.files.SourceFile` ``.path``.
  Open files through :func:`daemon.sources.scan.scan_paths`, which maps them back to the on-disk
  spelling.
* **Debounce.** A batch is delivered after ``quiet_s`` without a relevant event, or at
  the latest ``max_delay_s`` after the first event of the batch (a continuous storm is
  flushed periodically). ``on_batch`` runs on the watcher's flush thread, never
  concurrently with itself; events that arrive while it runs go into the next batch.
* **Notices.** ``on_notice(paths, dirs, overflow)`` (optional) hears of every relevant
  change the moment it is seen, before the debounce: with native events on Linux straight
  from the inotify reader thread (the earliest point in user space), otherwise when
  watchdog hands the event on. The service uses it to mark files *pending* so that an
  answer computed before the batch is applied can say so. :meth:`Watcher.caught_up` tells
  whether every event the kernel has queued has been noticed (native only), and
  :meth:`Watcher.settle` waits for that, bounded.
* **Degrading.** If inotify cannot be used (watch or instance limit: ``ENOSPC``,
  ``EMFILE``; at start or later, when a new folder cannot be watched) the watcher falls
  back to polling (mode ``"auto"``), says why in :attr:`Watcher.degraded` and delivers an
  ``overflow`` batch. A kernel queue overflow (``IN_Q_OVERFLOW``) or a dead observer
  thread also yields an ``overflow`` batch: the service must then reconcile the whole
  export with a full scan.

The default timings are measured; see :data:`DEFAULT_QUIET_S`, :data:`DEFAULT_MAX_DELAY_S`.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import re
import select
import threading
import time
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import msgspec
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer as NativeObserver
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver, PollingObserverVFS

log = logging.getLogger(__name__)

# watchdog 7 adds the watch of a folder twice when it sees ``mkdir -p a/b`` (once while
# walking ``a``, once on ``b``'s own IN_CREATE) and warns each time with the whole watch
# table in the message; the second registration replaces the first with the same callback.
warnings.filterwarnings("ignore", message=r"Callback with id '\d+' already exists", category=RuntimeWarning)

#: File name suffixes reported in :attr:`ChangeBatch.paths` (compared case-insensitively).
REPORTED_SUFFIXES = (".bsl", ".xml", ".mdo", ".md", ".markdown")  # .md: docs pages (daemon.sources.docs)

#: Editor and tool temp files, matched (case-insensitively) against the file name only:
#: Emacs backups/locks/autosaves (``X~``, ``.#X``, ``#X#``), Vim swap files and its
#: ``4913`` write probe, ``*.tmp`` (also ``.X.tmp``, e.g. :func:`daemon.index.storage.atomic_write_bytes`),
#: ``*.bak``, ``*.orig`` (merge leftovers). Only ``.#X.bsl`` would otherwise pass the
#: suffix filter, but a move *from* such a name must report only its destination.
TEMP_PATTERNS = ("*~", ".#*", "#*#", "*.swp", "*.swx", "*.tmp", "4913", "*.bak", "*.orig", ".*.tmp")

#: Default debounce quiet period, seconds. Measured (``/work/scratch/watch_measure.py``,
#: Linux 6.18, ext4, 2 CPUs shared with other jobs): an ``os.replace`` in another process
#: reaches the handler after median 0.6 ms, p99 6 ms (the 5 ms GIL switch interval: three
#: watchdog threads hand the event on); an atomic save is 1 relevant event, a Vim-style save
#: (``4913`` probe, rename to ``X~``, write, fsync, unlink) 4 events within 1.3 ms; in
#: 2,000 writes from another process the largest gap between relevant events was 8 ms, in
#: ``git checkout`` of 2,000 changed modules 9-20 ms. With 5 ms such a checkout split into
#: up to 30 batches, with 20 ms and more into 1-3 (``max_delay_s`` slices). 50 ms is 2.5x the
#: largest gap seen, and costs 50 ms of latency (replace -> ``on_batch``: median 51 ms).
DEFAULT_QUIET_S = 0.05

#: Default upper bound on how long the first event of a batch waits, seconds. The 2,000-file
#: writes took 0.4-1.0 s and the checkouts 1.0-2.7 s here, arriving as 1-3 batches: the
#: service hears about a long storm at least once a second (and can decide to wait for the
#: end or reconcile) instead of only when it stops.
DEFAULT_MAX_DELAY_S = 1.0

# What watchdog should emit; also shapes the inotify mask (no IN_OPEN/IN_ACCESS/CLOSE_NOWRITE).
_EVENT_FILTER: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileClosedEvent,
    FileAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]

_MONITOR_INTERVAL_S = 0.25  # how often the observer threads are checked for life
_RETRY_S = 2.0  # wait between attempts to restart a watch that could not be restarted
_JOIN_TIMEOUT_S = 2.0  # per thread, in stop()


class ChangeBatch(msgspec.Struct):
    """What one debounced burst of file-system events means.

    * ``paths``: files created, modified, deleted or moved (both ends of a move), relative
      to the root, ``/``-separated, NFC; only ``.bsl``/``.xml``/``.mdo`` names. A path may
      no longer exist (deleted, or moved away): check the disk.
    * ``dirs``: directories created, deleted or moved (both ends), same spelling. Their
      whole subtree must be re-checked: the per-file events of a folder moved in from
      outside, or filled while its watch was being added, are best effort.
    * ``overflow``: events were lost (inotify ``IN_Q_OVERFLOW``, the root itself was
      deleted or moved, the observer was restarted or switched to polling): reconcile the
      whole export. ``paths``/``dirs`` may still hold what was seen.
    * ``first_event``, ``last_event``: :func:`time.monotonic` when the first / last
      event of the batch reached the watcher (not the kernel time of the change).
    * ``events``: number of watchdog events that contributed to the batch (an event that
      is filtered out entirely, e.g. inside ``.git``, is not counted; an overflow counts 1).
    """

    paths: set[str]
    dirs: set[str]
    overflow: bool
    first_event: float
    last_event: float
    events: int


_TEMP_RE = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in TEMP_PATTERNS))


def is_temp_name(name: str) -> bool:
    """True if a file name (one component, no ``/``) is an editor/tool temp file
    (:data:`TEMP_PATTERNS`, case-insensitive)."""
    return _TEMP_RE.match(name.lower()) is not None


def _inotify_limit(kind: str) -> str:
    try:
        with open(f"/proc/sys/fs/inotify/max_user_{kind}", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def describe_native_failure(exc: BaseException) -> str:
    """Human reason why native watching failed, for :attr:`Watcher.degraded`/``last_error``.

    ``OSError(ENOSPC)`` -> ``"inotify watch limit reached (ENOSPC) ..."`` with the sysctl to
    raise and its current value; ``OSError(EMFILE)`` -> ``"inotify instance limit reached
    (EMFILE) ..."``; anything else -> ``"native watcher failed: <exc>"``.
    """
    no = getattr(exc, "errno", None)
    if no == errno.ENOSPC:
        return (
            f"inotify watch limit reached (ENOSPC): raise fs.inotify.max_user_watches (now {_inotify_limit('watches')})"
        )
    if no == errno.EMFILE:
        return (
            "inotify instance limit reached (EMFILE): raise fs.inotify.max_user_instances "
            f"(now {_inotify_limit('instances')}) or the open-file limit"
        )
    return f"native watcher failed: {type(exc).__name__}: {exc}"


class _Handler(FileSystemEventHandler):
    """Forwards every watchdog event to the watcher; never raises into watchdog's thread."""

    def __init__(self, watcher: Watcher) -> None:
        self._watcher = watcher

    def dispatch(self, event: FileSystemEvent) -> None:
        try:
            self._watcher._ingest(event)
        except Exception:  # a raise here would kill watchdog's dispatcher thread
            log.exception("watcher: cannot handle %r", event)


class Watcher:
    """Recursive, filtered, debounced watch of one export root (see the module docstring).

    ``root``: an existing directory (made absolute, symlinks in it not resolved; events are
    matched against that spelling). ``on_batch(batch)`` receives each :class:`ChangeBatch`
    on the watcher's flush thread, one call at a time; an exception from it is logged and
    stored in :attr:`last_error`, and watching goes on. ``ignore``: absolute directories
    whose contents are never reported (the index directory when it lies inside the root;
    directories outside the root are irrelevant and dropped).

    ``mode``: ``"auto"`` (native events, falling back to polling when the native observer
    cannot start or run; :attr:`degraded` says why), ``"native"`` (native or nothing:
    :meth:`start` raises; a limit hit later leaves :attr:`last_error` and an overflow
    batch), ``"polling"`` (poll every ``poll_interval_s`` seconds from the start;
    ``degraded`` stays ``None``). Polling stats every file below the root (not below
    dot-directories or ``ignore`` dirs) once per interval, without following symlinks.

    Timing (seconds): ``quiet_s`` > 0 (default :data:`DEFAULT_QUIET_S`), ``max_delay_s``
    >= ``quiet_s`` (default :data:`DEFAULT_MAX_DELAY_S`), ``poll_interval_s`` > 0
    (default 1.0: the watchdog default; a poll of a 30,000-file export costs tens of ms).
    ``ValueError`` for a bad mode or timing.

    Where the defaults come from (measured with ``/work/scratch/watch_measure.py`` on Linux
    6.18, ext4, 2 CPUs shared with other jobs; details at :data:`DEFAULT_QUIET_S`):

    * an ``os.replace`` in another process reaches the watcher after median 0.6 ms,
      p99 6 ms, so ``quiet_s`` dominates the latency (replace -> ``on_batch``: 51 ms);
    * an atomic save (tmp + rename, with or without fsync) or a Vim-style save is one
      batch for any ``quiet_s`` >= 2 ms;
    * the largest gap inside 2,000 writes from one process was 8-11 ms, inside a real
      ``git checkout`` of 2,000 changed modules 9-20 ms: with ``quiet_s`` = 5 ms the
      checkout came in up to 30 batches, with 20 ms or more in 1-3 (cut by
      ``max_delay_s`` = 1 s, the checkout lasting 1.0-2.7 s on this loaded machine);
    * hence 50 ms (2.5x the largest gap seen) and 1 s (progress at least once a second
      during a storm).

    Attributes (read from any thread): :attr:`mode` ``"native" | "polling" | "off"``
    (``"off"`` before :meth:`start`, after :meth:`stop`, and while a lost watch cannot
    be restarted); :attr:`degraded` ``str | None``; :attr:`pending` (events buffered or
    being delivered); :attr:`last_error` ``str | None``; :attr:`batches` (delivered count).
    """

    def __init__(
        self,
        root: Path,
        on_batch: Callable[[ChangeBatch], None],
        *,
        ignore: Iterable[Path] = (),
        mode: str = "auto",
        quiet_s: float = DEFAULT_QUIET_S,
        max_delay_s: float = DEFAULT_MAX_DELAY_S,
        poll_interval_s: float = 1.0,
        on_notice: Callable[[list[str], list[str], bool], None] | None = None,
    ) -> None:
        if mode not in ("auto", "native", "polling"):
            raise ValueError(f"watch mode must be 'auto', 'native' or 'polling', not {mode!r}")
        if not quiet_s > 0:
            raise ValueError(f"quiet_s must be > 0, not {quiet_s!r}")
        if not max_delay_s >= quiet_s:
            raise ValueError(f"max_delay_s must be >= quiet_s ({quiet_s}), not {max_delay_s!r}")
        if not poll_interval_s > 0:
            raise ValueError(f"poll_interval_s must be > 0, not {poll_interval_s!r}")
        self.root = Path(os.path.abspath(root))
        self.requested_mode = mode
        self.quiet_s = float(quiet_s)
        self.max_delay_s = float(max_delay_s)
        self.poll_interval_s = float(poll_interval_s)
        self._on_batch = on_batch
        self._on_notice = on_notice
        self._root_str = str(self.root)
        self._prefix = self._root_str.rstrip(os.sep) + os.sep
        # FSEvents reports resolved paths (/private/var/... for /var/...): accept both spellings
        real = os.path.realpath(self._root_str)
        self._real_str = real if real != self._root_str else None
        self._real_prefix = real.rstrip(os.sep) + os.sep
        self._ignore_rel, self._ignore_abs = self._ignore_dirs(ignore)

        self.mode: str = "off"
        self.degraded: str | None = None
        self.last_error: str | None = None
        self.batches = 0

        # event buffer, guarded by _cond
        self._cond = threading.Condition()
        self._paths: set[str] = set()
        self._dirs: set[str] = set()
        self._overflow = False
        self._first = 0.0
        self._last = 0.0
        self._events = 0
        self._inflight = 0

        # observer state, guarded by _obs_lock (never held while starting/stopping observers)
        self._obs_lock = threading.Lock()
        self._observer: BaseObserver | None = None
        self._observer_kind = "off"
        self._native_trouble: str | None = None  # limit hit/thread error seen by the hooks
        self._native_trouble_is_limit = False
        self._native_trouble_reported = False
        self._retry_at: float | None = None  # monotonic time of the next restart attempt
        self._retry_kind = "polling"
        self._wake = threading.Event()
        self._started = False
        self._stopping = False
        self._flush_thread: threading.Thread | None = None
        self._monitor_thread: threading.Thread | None = None

        # the native observer's inotify reader, as seen by the hooks (see caught_up())
        self._reader_fd: int | None = None  # the inotify file descriptor
        self._reader_busy = False  # woke up to read: events read but not all noticed yet
        self._reader_left = 0  # events of the last read not yet handled

    # ------------------------------------------------------------------ public API

    @property
    def pending(self) -> int:
        """Events seen but not yet delivered: buffered, plus those of a batch whose
        ``on_batch`` call is running. 0 when the watcher is idle."""
        with self._cond:
            return self._events + self._inflight

    def caught_up(self) -> bool | None:
        """True when every event the kernel had queued for the native observer when this was
        called has reached ``on_notice`` (nothing unread on the inotify descriptor, and the
        reader thread has handled all it read); False while some have not; None when that
        cannot be known (polling: a change is seen at the next poll only; another platform;
        a watchdog without the inotify internals :meth:`_hook_inotify` relies on).

        Costs one ``poll(2)`` with a zero timeout."""
        fd = self._reader_fd
        if fd is None or self.mode != "native":
            return None
        try:
            p = select.poll()
            p.register(fd, select.POLLIN)
            unread = bool(p.poll(0))
        except (OSError, ValueError):
            return None
        # order matters: the reader sets _reader_busy before it reads, and clears it only
        # after every event it read was noticed
        return not unread and not self._reader_busy

    def settle(self, timeout: float) -> bool | None:
        """Wait up to ``timeout`` seconds for :meth:`caught_up`; its last value (None at
        once when it cannot be known). Polls every millisecond."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            ok = self.caught_up()
            if ok is not False or time.monotonic() >= deadline:
                return ok
            time.sleep(0.001)

    def start(self) -> None:
        """Start watching; returns once the observer is running (events from then on are seen).

        Changes made before :meth:`start` returns are not guaranteed to be reported: scan
        the export *after* starting the watcher. Falls back to polling in mode ``"auto"``
        (see the class docstring). Raises ``OSError`` (e.g. ``FileNotFoundError`` for a
        missing root) only if even polling cannot start, or the native observer cannot in
        mode ``"native"``; ``RuntimeError`` if called twice.
        """
        with self._obs_lock:
            if self._stopping:
                raise RuntimeError("Watcher.start() after stop(): make a new Watcher")
            if self._started:
                raise RuntimeError("Watcher.start() called twice")
            self._started = True
        try:
            if not os.path.isdir(self._root_str):
                raise FileNotFoundError(errno.ENOENT, "export root is not a directory", self._root_str)
            obs, kind, degraded = self._start_initial()
        except BaseException:
            with self._obs_lock:
                self._started = False
            raise
        with self._obs_lock:
            stopped = self._stopping  # stop() ran meanwhile, from another thread
            if not stopped:
                self._observer, self._observer_kind = obs, kind
                self.mode, self.degraded = kind, degraded
        if stopped:
            _shutdown(obs)
            return
        self._flush_thread = threading.Thread(target=self._flush_loop, name="bsl-lens-watch-flush", daemon=True)
        self._monitor_thread = threading.Thread(target=self._monitor_loop, name="bsl-lens-watch-monitor", daemon=True)
        self._flush_thread.start()
        self._monitor_thread.start()

    def stop(self) -> None:
        """Stop watching; idempotent, callable from any thread (also from ``on_batch``).

        Buffered events are dropped (nothing is flushed). Returns within a few seconds at
        worst: each thread is joined with a 2 s timeout (a running ``on_batch`` is not
        interrupted; it finishes on its own and no further batch follows).
        """
        with self._obs_lock:
            if self._stopping:
                return
            self._stopping = True
            obs, self._observer = self._observer, None
            self.mode = "off"
        self._wake.set()
        with self._cond:
            self._cond.notify_all()
        if obs is not None:
            _shutdown(obs)
        me = threading.current_thread()
        for t in (self._monitor_thread, self._flush_thread):
            if t is not None and t is not me and t.is_alive():
                t.join(_JOIN_TIMEOUT_S)
        with self._cond:
            self._paths, self._dirs = set(), set()
            self._overflow, self._events = False, 0

    def __enter__(self) -> Watcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ filtering

    def _ignore_dirs(self, ignore: Iterable[Path]) -> tuple[list[str], set[str]]:
        """NFC relative prefixes of the ``ignore`` dirs inside the root, and their absolute
        spellings (for the polling walk)."""
        rels: set[str] = set()
        abs_paths: set[str] = set()
        roots = {self._root_str, os.path.realpath(self._root_str)}
        for d in ignore:
            for cand in {os.path.abspath(d), os.path.realpath(d)}:
                for r in roots:
                    rel = os.path.relpath(cand, r)
                    if rel == "." or rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
                        continue
                    rels.add(unicodedata.normalize("NFC", rel.replace(os.sep, "/")))
                    abs_paths.add(os.path.join(self._root_str, rel))  # on-disk spelling, for polling
        return sorted(rels), abs_paths

    def _relative(self, path: str | bytes) -> str | None:
        """Root-relative NFC ``/`` path, ``""`` for the root itself, ``None`` if outside."""
        p = os.fsdecode(path)
        if p == self._root_str or p + os.sep == self._prefix or (self._real_str and p == self._real_str):
            return ""
        if p.startswith(self._prefix):
            rel = p[len(self._prefix) :]
        elif self._real_str and p.startswith(self._real_prefix):
            rel = p[len(self._real_prefix) :]
        else:
            return None
        if os.sep != "/":
            rel = rel.replace(os.sep, "/")
        rel = unicodedata.normalize("NFC", rel).strip("/")
        if not rel or any(part in ("", ".", "..") for part in rel.split("/")):
            return None
        return rel

    def _ignored_dir(self, rel: str) -> bool:
        """True if a relative directory (or any parent of it) is a dot-dir or an ignore dir."""
        if any(part.startswith(".") for part in rel.split("/")):
            return True
        return any(rel == ig or rel.startswith(ig + "/") for ig in self._ignore_rel)

    def _reported_file(self, rel: str) -> bool:
        parent, _, name = rel.rpartition("/")
        if parent and self._ignored_dir(parent):
            return False
        return name.lower().endswith(REPORTED_SUFFIXES) and not is_temp_name(name)

    def _ingest(self, event: FileSystemEvent) -> None:
        """Filter one watchdog event into the buffer (runs on watchdog's dispatcher thread)."""
        if event.event_type not in ("created", "deleted", "modified", "moved", "closed", "attrib"):
            return
        ends = [event.src_path]
        if event.event_type == "moved" and event.dest_path:
            ends.append(event.dest_path)
        paths: list[str] = []
        dirs: list[str] = []
        overflow = False
        for end in ends:
            if not end:
                continue
            rel = self._relative(end)
            if rel is None:
                continue
            if event.is_directory:
                if event.event_type not in ("created", "deleted", "moved"):
                    continue
                if rel == "":  # the root itself was deleted or moved away
                    overflow = True
                elif not self._ignored_dir(rel):
                    dirs.append(rel)
            elif rel and self._reported_file(rel):
                paths.append(rel)
        if not (paths or dirs or overflow):
            return
        if overflow:
            log.warning("watcher: the export root %s was deleted or moved", self._root_str)
        self._record(paths, dirs, overflow)

    def _notice(self, paths, dirs, overflow: bool) -> None:
        """Tell ``on_notice`` at once (never raises into the caller's thread)."""
        if self._on_notice is None or self._stopping:
            return
        try:
            self._on_notice(list(paths), list(dirs), overflow)
        except Exception:
            log.exception("watcher: on_notice failed")

    def _notice_raw(self, fd, event) -> None:
        """Early notice of one raw inotify event (on the reader thread, before watchdog's
        move grouping and dispatch): the path is built the way watchdog's watch group will
        build it. Best effort: anything unexpected leaves the notice to :meth:`_record`."""
        if self._on_notice is None or event.is_ignored or event.is_queue_overflow:
            return
        if event.is_directory and not (event.is_create or event.is_delete or event.is_move):
            return
        watch = fd._watch_for_wd.get(event.wd)
        if watch is None:
            return
        for cb in list(watch.callbacks.values()):
            build = getattr(cb, "_build_event_source_path", None)
            if build is None:
                continue
            src = build(event)
            if src is None:
                continue
            rel = self._relative(src)
            if not rel:
                continue
            if event.is_directory:
                if not self._ignored_dir(rel):
                    self._notice((), (rel,), False)
            elif self._reported_file(rel):
                self._notice((rel,), (), False)
            return

    def _mark_overflow(self, why: str) -> None:
        """Ask for a full reconcile in the next batch."""
        log.warning("watcher: full reconcile needed: %s", why)
        self._record((), (), True)

    def _record(self, paths, dirs, overflow: bool) -> None:
        """Add one relevant event to the pending batch and wake the flush thread."""
        self._notice(paths, dirs, overflow)
        now = time.monotonic()
        with self._cond:
            if self._stopping:
                return
            if not self._events:
                self._first = now
            self._last = now
            self._events += 1
            self._paths.update(paths)
            self._dirs.update(dirs)
            self._overflow = self._overflow or overflow
            self._cond.notify_all()

    # ------------------------------------------------------------------ flushing

    def _flush_loop(self) -> None:
        """Deliver batches: after ``quiet_s`` of silence or ``max_delay_s`` after the first event."""
        while True:
            with self._cond:
                while not self._stopping and not self._events:
                    self._cond.wait()
                if self._stopping:
                    return
                now = time.monotonic()
                due = min(self._last + self.quiet_s, self._first + self.max_delay_s)
                if now < due:
                    self._cond.wait(due - now)
                    continue
                batch = ChangeBatch(
                    paths=self._paths,
                    dirs=self._dirs,
                    overflow=self._overflow,
                    first_event=self._first,
                    last_event=self._last,
                    events=self._events,
                )
                self._paths, self._dirs = set(), set()
                self._overflow, self._events = False, 0
                self._inflight = batch.events
            try:
                self._on_batch(batch)
            except Exception as exc:
                log.exception("watcher: on_batch failed")
                self.last_error = f"on_batch raised {type(exc).__name__}: {exc}"
            finally:
                with self._cond:
                    self._inflight = 0
                    self.batches += 1

    # ------------------------------------------------------------------ observers

    def _start_initial(self) -> tuple[BaseObserver, str, str | None]:
        """(observer, kind, degraded) for :meth:`start`."""
        if self.requested_mode == "polling":
            return self._start_polling(), "polling", None
        if _native_is_polling():
            if self.requested_mode == "native":
                raise OSError(errno.ENOSYS, "no native file-system events on this platform")
            reason = "no native file-system events on this platform"
            log.warning("watcher: %s; polling %s every %.1f s", reason, self._root_str, self.poll_interval_s)
            return self._start_polling(), "polling", reason
        try:
            return self._start_native(), "native", None
        except Exception as exc:
            if self.requested_mode == "native":
                raise
            reason = describe_native_failure(exc)
            log.warning("watcher: %s; polling %s every %.1f s", reason, self._root_str, self.poll_interval_s)
            return self._start_polling(), "polling", reason

    def _start_native(self) -> BaseObserver:
        """A running native observer with a recursive watch of the root. Raises ``OSError``
        (ENOSPC/EMFILE) if any folder could not be watched (watchdog itself only raises
        for the root and silently skips sub-folders)."""
        with self._obs_lock:
            self._native_trouble = None
            self._native_trouble_is_limit = False
            self._native_trouble_reported = False
        obs = NativeObserver()
        try:
            self._hook_inotify(obs)
            obs.schedule(_Handler(self), self._root_str, recursive=True, event_filter=_EVENT_FILTER)
            obs.start()
        except BaseException:
            _shutdown(obs)
            raise
        with self._obs_lock:
            trouble = self._native_trouble if self._native_trouble_is_limit else None
        if trouble is not None:  # a sub-folder could not be watched: coverage is partial
            _shutdown(obs)
            no = errno.EMFILE if "EMFILE" in trouble else errno.ENOSPC
            raise OSError(no, trouble)
        return obs

    def _start_polling(self) -> BaseObserver:
        """A running polling observer: lstat walk (no symlinks), skipping dot-dirs and ignore dirs."""
        ignore_abs = self._ignore_abs

        def listdir(path: str | None) -> Iterator[os.DirEntry]:
            with os.scandir(path) as it:
                entries = list(it)
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False) and (e.name.startswith(".") or e.path in ignore_abs):
                        continue
                except OSError:
                    pass
                yield e

        obs = PollingObserverVFS(os.lstat, listdir, polling_interval=self.poll_interval_s)
        try:
            obs.schedule(_Handler(self), self._root_str, recursive=True, event_filter=_EVENT_FILTER)
            obs.start()
        except BaseException:
            _shutdown(obs)
            raise
        return obs

    def _hook_inotify(self, obs: BaseObserver) -> None:
        """Let the watcher see what watchdog's inotify reader hides: queue overflows
        (``IN_Q_OVERFLOW``: watchdog 7 rebuilds its watches and only logs), watch-limit
        errors on sub-folders (silently skipped), and exceptions that kill the reader.

        Also the early notices and :meth:`caught_up`: each raw event is passed to
        ``on_notice`` before watchdog handles it (:meth:`_notice_raw`), and the reader's
        wake-up (``_check_inotify_fd`` returned readable), what it read and each event it
        handled are tracked, so that "nothing unread on the descriptor and the reader idle"
        means every queued event has been noticed.

        Works on the observer's private ``InotifyFD`` (``InotifyObserver._inotify_fd``,
        watchdog 6-7; the notices also on ``_watch_for_wd`` and the watch group's
        ``_build_event_source_path``, watchdog 7.1); without one (another platform or
        version) nothing is hooked, overflows go unnoticed except through thread death, and
        :meth:`caught_up` says None.
        """
        self._reader_fd = None
        self._reader_busy = False
        fd = getattr(obs, "_inotify_fd", None)
        if fd is None or not hasattr(fd, "handle_event") or not hasattr(fd, "add_callback"):
            return
        handle_event, add_callback, read_events = fd.handle_event, fd.add_callback, getattr(fd, "read_events", None)
        check_fd = getattr(fd, "_check_inotify_fd", None)
        # caught_up() needs all three: the reader's wake-up, what it read, each event handled
        tracked = (
            read_events is not None
            and check_fd is not None
            and isinstance(getattr(fd, "_inotify_fd", None), int)
            and hasattr(fd, "_watch_for_wd")
        )

        def hooked_handle_event(event):  # noqa: ANN001, ANN202  (watchdog's InotifyEvent)
            if getattr(event, "is_queue_overflow", False):
                self._mark_overflow("the inotify event queue overflowed (IN_Q_OVERFLOW)")
            try:
                if tracked:
                    try:
                        self._notice_raw(fd, event)
                    except Exception:
                        log.debug("watcher: early notice failed", exc_info=True)
                return handle_event(event)
            except BaseException as exc:
                self._note_native_trouble(f"inotify reader failed: {type(exc).__name__}: {exc}")
                raise
            finally:
                if tracked:
                    self._reader_left -= 1
                    if self._reader_left <= 0:
                        self._reader_busy = False

        def hooked_add_callback(path, mask, callback, id_):  # noqa: ANN001, ANN202
            try:
                return add_callback(path, mask, callback, id_)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EMFILE):
                    self._note_native_trouble(describe_native_failure(exc) + f" at {os.fsdecode(path)}", limit=True)
                raise

        fd.handle_event = hooked_handle_event
        fd.add_callback = hooked_add_callback
        if read_events is not None:

            def hooked_read_events(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
                try:
                    events = read_events(*args, **kwargs)
                except BaseException as exc:
                    self._reader_busy = False
                    self._note_native_trouble(f"inotify reader failed: {type(exc).__name__}: {exc}")
                    raise
                if tracked:
                    self._reader_left = len(events)
                    if not events:
                        self._reader_busy = False
                return events

            fd.read_events = hooked_read_events
        if tracked:

            def hooked_check_fd():  # noqa: ANN202
                readable = check_fd()
                if readable:
                    self._reader_busy = True  # before the read: caught_up() waits from here
                return readable

            fd._check_inotify_fd = hooked_check_fd
            self._reader_fd = fd._inotify_fd

    def _note_native_trouble(self, why: str, *, limit: bool = False) -> None:
        """Called from watchdog threads: remember the first problem, wake the monitor."""
        with self._obs_lock:
            if self._native_trouble is None:
                self._native_trouble = why
                self._native_trouble_is_limit = limit
        log.warning("watcher: %s", why)
        self._wake.set()

    def _monitor_loop(self) -> None:
        """Check the observer every :data:`_MONITOR_INTERVAL_S`; replace it when it died or
        the native one hit a limit; retry a lost watch every :data:`_RETRY_S`."""
        while True:
            self._wake.wait(_MONITOR_INTERVAL_S)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self._check_observer()
            except Exception as exc:  # keep monitoring whatever happens
                log.exception("watcher: monitor failed")
                self.last_error = f"watcher monitor failed: {type(exc).__name__}: {exc}"

    def _check_observer(self) -> None:
        with self._obs_lock:
            if self._stopping:
                return
            obs, kind = self._observer, self._observer_kind
            trouble = self._native_trouble if kind == "native" else None
            is_limit = self._native_trouble_is_limit
            retry_at = self._retry_at
        if obs is None:  # a previous restart failed
            if retry_at is not None and time.monotonic() >= retry_at:
                self._replace(None, self._retry_kind, None)
            return
        dead = _dead_thread(obs)
        if dead is None and trouble is not None and not is_limit:
            dead = "inotify reader"  # it raised: the thread is dying, do not wait for it
        if trouble is not None and is_limit and dead is None:
            if self.requested_mode == "auto":
                self._replace(obs, "polling", trouble)
            elif not self._native_trouble_reported:  # "native": nowhere to go
                self._native_trouble_reported = True
                self.last_error = trouble
                self._mark_overflow(trouble)
            return
        if dead is None:
            return
        why = f"the {kind} observer stopped ({dead} thread died)"
        if trouble is not None:
            why += f": {trouble}"
        if not os.path.isdir(self._root_str):
            why = f"the export root {self._root_str} is gone"
            target = kind
        elif kind == "native" and self.requested_mode == "auto":
            target = "polling"
        else:
            target = kind
        log.warning("watcher: %s; restarting (%s)", why, target)
        self._replace(obs, target, why if target == "polling" and kind == "native" else None, error=why)

    def _replace(self, old: BaseObserver | None, kind: str, degraded: str | None, *, error: str | None = None) -> None:
        """Swap ``old`` for a new observer of ``kind``; on success deliver an overflow batch,
        on failure set mode ``"off"`` and retry later. ``error`` goes to :attr:`last_error`."""
        with self._obs_lock:
            if self._stopping or self._observer is not old:
                return  # stop() or another replacement got there first
            self._observer = None
            if error is not None:
                self.last_error = error
        if old is not None:
            _shutdown(old)
        try:
            new = self._start_native() if kind == "native" else self._start_polling()
        except Exception as exc:
            msg = f"cannot restart the {kind} watch: {type(exc).__name__}: {exc}"
            if kind == "native" and self.requested_mode == "auto" and os.path.isdir(self._root_str):
                degraded = degraded or describe_native_failure(exc)
                try:
                    new, kind = self._start_polling(), "polling"
                except Exception as exc2:
                    msg = f"cannot restart the polling watch: {type(exc2).__name__}: {exc2}"
                    new = None
            else:
                new = None
            if new is None:
                if not os.path.isdir(self._root_str):
                    msg = f"the export root {self._root_str} is gone (not watched until it is back)"
                log.warning("watcher: %s; retrying in %.0f s", msg, _RETRY_S)
                with self._obs_lock:
                    self.last_error = msg
                    self.mode = "off"
                    self._retry_at = time.monotonic() + _RETRY_S
                    self._retry_kind = kind
                return
        with self._obs_lock:
            if self._stopping:
                stale, new = new, None
            else:
                self._observer, self._observer_kind = new, kind
                self.mode = kind
                if kind == "polling" and self.requested_mode != "polling":
                    self.degraded = degraded or self.degraded
                elif kind == "native":
                    self.degraded = None
                self._retry_at = None
        if new is None:
            _shutdown(stale)
            return
        if kind == "polling" and degraded:
            log.warning("watcher: %s; now polling %s every %.1f s", degraded, self._root_str, self.poll_interval_s)
        self._mark_overflow(f"the watch was restarted ({kind})")


def _native_is_polling() -> bool:
    """True when watchdog has no native observer here (its ``Observer`` is a poller)."""
    return isinstance(NativeObserver, type) and issubclass(NativeObserver, PollingObserver)


def _observer_threads(obs: BaseObserver) -> list[tuple[str, threading.Thread]]:
    threads: list[tuple[str, threading.Thread]] = [("dispatcher", obs)]
    for _ in range(3):  # the set may change under us while watchdog (un)schedules
        try:
            threads += [("emitter", e) for e in list(obs.emitters)]
            break
        except RuntimeError:
            continue
    fd = getattr(obs, "_inotify_fd", None)
    if isinstance(fd, threading.Thread):
        threads.append(("inotify reader", fd))
    return threads


def _dead_thread(obs: BaseObserver) -> str | None:
    """Name of the first thread of a started observer that is no longer alive, else None."""
    for name, t in _observer_threads(obs):
        if not t.is_alive():
            return name
    return None


def _shutdown(obs: BaseObserver) -> None:
    """Stop an observer (started or not, healthy or not) and join its threads briefly."""
    threads = _observer_threads(obs)  # before stop(): stopping forgets the emitters
    try:
        obs.stop()
    except Exception:
        log.debug("watcher: stopping the observer failed", exc_info=True)
    for _name, t in threads:
        if t is threading.current_thread():
            continue
        try:
            t.join(_JOIN_TIMEOUT_S)
        except RuntimeError:  # never started
            pass
