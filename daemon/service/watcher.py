"""Watching an export root: which files changed, debounced into batches.

:class:`Watcher` hands the service one :class:`ChangeBatch` per burst of changes, and a notice
of each change the moment it is read (``on_notice``), so that an answer computed before the
batch is applied can say so. It only *reports*; what to re-index is the service's job.

On Linux the native watch is our own inotify binding (:class:`daemon.service.inotify.InotifyTree`):
it tells when every queued event has been noticed (:meth:`Watcher.caught_up`), reports queue
overflows and names every folder it could not watch. Elsewhere the platform observer of
:mod:`watchdog` is used (public API only), and watchdog's polling observer is the fallback
everywhere. How freshness, storms and fallbacks work, and what was measured: ``docs/freshness.md``.

* **Filtering.** Only files ending in :data:`REPORTED_SUFFIXES` (any case) are reported in
  ``paths``; created, deleted and moved folders in ``dirs``. Nothing below a dot-folder or an
  ``ignore`` folder (the index folder inside the root) is watched or reported, and neither are
  editor temp files (:data:`TEMP_PATTERNS`). A move reports both ends, each filtered on its own,
  so an atomic save (write ``X.bsl.tmp``, rename it over ``X.bsl``) is a change of ``X.bsl``.
  Files and folders the root's ``.bsl-lens-ignore`` matches are not reported either (so they are
  never read again); a change of that file itself asks for a full reconcile with the new rules.
* **Paths** are relative to the root, ``/``-separated, NFC, never ``..`` nor absolute: the
  spelling of :class:`daemon.sources.files.SourceFile` ``.path``.
* **Debounce.** A batch is delivered after ``quiet_s`` without a relevant event, or at the
  latest ``max_delay_s`` after its first event. ``on_batch`` runs on the flush thread, never
  concurrently with itself.
* **Degrading.** A kernel limit (``ENOSPC``, ``EMFILE``; at start or for a new folder later) or
  a dead observer switches mode ``"auto"`` to polling, says why in :attr:`Watcher.degraded` and
  delivers an ``overflow`` batch (the service then reconciles the whole export). A folder that
  cannot be watched for its own reason (too long a path, no permission, too deep to poll) is
  skipped and named in :attr:`Watcher.unwatched`; the rest stays watched.
"""

from __future__ import annotations

import errno
import fnmatch
import logging
import os
import re
import threading
import time
import unicodedata
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

from ..sources.scan import IGNORE_FILE, IgnoreRules
from . import inotify

log = logging.getLogger(__name__)

#: File name suffixes reported in :attr:`ChangeBatch.paths` (compared case-insensitively).
#: ``.form``: an EDT form layout, read with its form's module (the references of its handlers).
REPORTED_SUFFIXES = (".bsl", ".xml", ".mdo", ".form", ".md", ".markdown")  # .md: docs pages (daemon.sources.docs)

#: Editor and tool temp files, matched (case-insensitively) against the file name only: Emacs
#: backups, locks and autosaves, Vim swap files and its ``4913`` write probe, ``*.tmp`` (also
#: :func:`daemon.index.storage.atomic_write_bytes`'s ``.X.tmp``), ``*.bak``, ``*.orig``.
TEMP_PATTERNS = ("*~", ".#*", "#*#", "*.swp", "*.swx", "*.tmp", "4913", "*.bak", "*.orig", ".*.tmp")

#: Debounce quiet period, seconds: 2.5x the largest gap measured inside a ``git checkout``
#: storm, so a checkout arrives in a few batches (docs/freshness.md, "Debounce").
DEFAULT_QUIET_S = 0.05

#: Longest wait of a batch's first event, seconds: during a long storm the service hears of it
#: at least once a second.
DEFAULT_MAX_DELAY_S = 1.0

#: Polling lists folders at most this deep below the root. watchdog's polling walk recurses
#: once per level, so a deeper chain would exhaust the recursion limit and kill the poller;
#: deeper folders are named in :attr:`Watcher.unwatched` instead.
POLL_MAX_DEPTH = 200

# What watchdog should emit (polling, non-Linux native observers).
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

_MONITOR_INTERVAL_S = 0.25  # how often the observer is checked for life
_RETRY_S = 2.0  # wait between attempts to restart a watch that could not be restarted
_JOIN_TIMEOUT_S = 2.0  # per thread, in stop()


class ChangeBatch(msgspec.Struct):
    """What one debounced burst of file-system events means.

    * ``paths``: files created, modified, deleted or moved (both ends of a move), relative to
      the root; a path may no longer exist (check the disk).
    * ``dirs``: folders created, deleted or moved (both ends): their whole subtree must be
      re-checked (the file events of a folder moved in, or filled while its watch was being
      added, are best effort).
    * ``overflow``: events were lost (queue overflow, the root deleted or moved, the observer
      restarted or switched to polling): reconcile the whole export.
    * ``first_event``, ``last_event``: :func:`time.monotonic` when the first / last event of the
      batch reached the watcher.
    * ``events``: relevant events that contributed (an overflow counts 1).
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


def describe_native_failure(exc: BaseException) -> str:
    """Human reason why native watching failed, for :attr:`Watcher.degraded`: the sysctl to
    raise for ``ENOSPC``/``EMFILE`` (with its value now), else the exception."""
    no = getattr(exc, "errno", None)
    if no in (errno.ENOSPC, errno.EMFILE):
        return inotify.describe_errno(no)
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


class _WatchdogObserver:
    """A watchdog observer as the watcher drives it: polling, or the platform's native observer
    where there is no inotify. Public watchdog API only."""

    def __init__(self, observer: BaseObserver, kind: str) -> None:
        self.kind = kind
        self.observer = observer
        self._lock = threading.Lock()
        self._unwatched: dict[str, str] = {}

    def start(self, handler: FileSystemEventHandler, root: str) -> None:
        try:
            self.observer.schedule(handler, root, recursive=True, event_filter=_EVENT_FILTER)
            self.observer.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        _shutdown(self.observer)

    def dead(self) -> str | None:
        for name, t in _observer_threads(self.observer):
            if not t.is_alive():
                return f"its {name} thread died"
        return None

    def caught_up(self) -> bool | None:
        return None  # a change is seen when watchdog hands it on (polling: at the next poll)

    def skip(self, path: str, why: str) -> None:
        with self._lock:
            first = path not in self._unwatched
            self._unwatched[path] = why
        if first:
            log.warning("watcher: not polling %s: %s", path, why)

    @property
    def unwatched(self) -> dict[str, str]:
        with self._lock:
            return dict(self._unwatched)


class Watcher:
    """Recursive, filtered, debounced watch of one export root (see the module docstring).

    ``root``: an existing folder (made absolute; symlinks in it not resolved). ``on_batch(batch)``
    receives each :class:`ChangeBatch` on the flush thread; an exception from it is logged and
    kept in :attr:`last_error`, and watching goes on. ``ignore``: absolute folders never watched
    nor reported (folders outside the root are dropped). ``on_notice(paths, dirs, overflow)``
    (optional) hears of every relevant change the moment it is read, before the debounce.

    ``mode``: ``"auto"`` (native, falling back to polling; :attr:`degraded` says why),
    ``"native"`` (native or nothing: :meth:`start` raises; a limit hit later leaves
    :attr:`last_error` and an overflow batch), ``"polling"`` (poll every ``poll_interval_s``;
    ``degraded`` stays None). Timing in seconds: ``quiet_s`` > 0, ``max_delay_s`` >= ``quiet_s``,
    ``poll_interval_s`` > 0; ``ValueError`` otherwise.

    Attributes (read from any thread): :attr:`mode` ``"native" | "polling" | "off"`` (``"off"``
    before :meth:`start`, after :meth:`stop`, and while a lost watch cannot be restarted);
    :attr:`degraded`; :attr:`unwatched`; :attr:`pending`; :attr:`last_error`; :attr:`batches`.
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
        _check_arguments(mode, quiet_s, max_delay_s, poll_interval_s)
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
        self._rules = IgnoreRules.read(self.root)  # the root's .bsl-lens-ignore

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
        self._observer: inotify.InotifyTree | _WatchdogObserver | None = None
        self._limit_hit: str | None = None  # a kernel limit hit on a folder made later
        self._limit_reported = False
        self._retry_at: float | None = None  # monotonic time of the next restart attempt
        self._retry_kind = "polling"
        self._wake = threading.Event()
        self._started = False
        self._stopping = False
        self._flush_thread: threading.Thread | None = None
        self._monitor_thread: threading.Thread | None = None

    # ------------------------------------------------------------------ public API

    @property
    def pending(self) -> int:
        """Events seen but not yet delivered: buffered, plus those of a batch whose ``on_batch``
        call is running. 0 when the watcher is idle."""
        with self._cond:
            return self._events + self._inflight

    @property
    def unwatched(self) -> dict[str, str]:
        """Folders below the root that are not watched now: relative path -> reason."""
        obs = self._observer
        if obs is None:
            return {}
        return {self._relative(p) or p: why for p, why in obs.unwatched.items()}

    def problem(self) -> str | None:
        """Why changes may go unseen or be seen late, for answers and ``status``; None when the
        watch is whole. Not for a watcher that was never started (arming is the caller's)."""
        if self.mode == "off":
            return f"file watching stopped: {self.last_error or 'no observer'}"
        if self.degraded:
            return f"file watching fell back to polling ({self.degraded})"
        unwatched = self.unwatched
        if unwatched:
            path, why = sorted(unwatched.items())[0]
            more = f" and {len(unwatched) - 1} more" if len(unwatched) > 1 else ""
            return f"{len(unwatched)} folders are not watched: {path or '.'}: {why}{more}"
        return None

    def caught_up(self) -> bool | None:
        """True when every event the kernel had queued when this was called has reached
        ``on_notice``; False while some have not; None when that cannot be known (polling, or
        a platform without our inotify binding). Costs one ``poll(2)`` with a zero timeout."""
        obs = self._observer
        if obs is None or self.mode != "native":
            return None
        return obs.caught_up()

    def settle(self, timeout: float) -> bool | None:
        """Wait up to ``timeout`` seconds for :meth:`caught_up`; its last value (None at once
        when it cannot be known). Polls every millisecond."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            ok = self.caught_up()
            if ok is not False or time.monotonic() >= deadline:
                return ok
            time.sleep(0.001)

    def start(self) -> None:
        """Start watching; returns once the observer runs (events from then on are seen).

        Changes made before this returns are not guaranteed to be reported: scan the export
        *after* starting. Raises ``OSError`` (``FileNotFoundError`` for a missing root) only if
        even polling cannot start, or native watching cannot in mode ``"native"``;
        ``RuntimeError`` if called twice or after :meth:`stop`.
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
            obs, degraded = self._start_initial()
        except BaseException:
            with self._obs_lock:
                self._started = False
            raise
        with self._obs_lock:
            stopped = self._stopping  # stop() ran meanwhile, from another thread
            if not stopped:
                self._observer = obs
                self.mode, self.degraded = obs.kind, degraded
        if stopped:
            obs.stop()
            return
        self._flush_thread = threading.Thread(target=self._flush_loop, name="bsl-lens-watch-flush", daemon=True)
        self._monitor_thread = threading.Thread(target=self._monitor_loop, name="bsl-lens-watch-monitor", daemon=True)
        self._flush_thread.start()
        self._monitor_thread.start()

    def stop(self) -> None:
        """Stop watching; idempotent, callable from any thread (also from ``on_batch``).
        Buffered events are dropped; each thread is joined with a 2 s timeout."""
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
            obs.stop()
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
        """NFC relative prefixes of the ``ignore`` folders inside the root, and their absolute
        on-disk spellings (never watched nor polled)."""
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
                    abs_paths.add(os.path.join(self._root_str, rel))
        return sorted(rels), abs_paths

    def _pruned(self, path: str, name: str) -> bool:
        """True for a folder (absolute path, its name) that is neither polled nor walked: a
        dot-folder or an ``ignore`` folder (the inotify tree applies the same rule)."""
        return name.startswith(".") or path in self._ignore_abs

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
        """True if a relative folder (or any parent of it) is a dot-folder, an ignore folder or
        matched by the root's ``.bsl-lens-ignore``."""
        if any(part.startswith(".") for part in rel.split("/")):
            return True
        if any(rel == ig or rel.startswith(ig + "/") for ig in self._ignore_rel):
            return True
        return bool(self._rules) and self._rules.ignored(rel, folder=True)

    def _reported_file(self, rel: str) -> bool:
        if rel == IGNORE_FILE:  # the rules changed: read them again and reconcile everything
            self._rules = IgnoreRules.read(self.root)
            self._mark_overflow(f"{IGNORE_FILE} changed")
            return False
        parent, _, name = rel.rpartition("/")
        if parent and self._ignored_dir(parent):
            return False
        if not name.lower().endswith(REPORTED_SUFFIXES) or is_temp_name(name):
            return False
        return not (self._rules and self._rules.ignored(rel))

    def _ingest_changes(self, changes: list[tuple[str, bool]]) -> None:
        """Filter one inotify read into the buffer (runs on the inotify reader thread)."""
        paths: list[str] = []
        dirs: list[str] = []
        for path, is_dir in changes:
            rel = self._relative(path)
            if not rel:
                continue
            if is_dir:
                if not self._ignored_dir(rel):
                    dirs.append(rel)
            elif self._reported_file(rel):
                paths.append(rel)
        if paths or dirs:
            self._record(paths, dirs, False, len(paths) + len(dirs))

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
            rel = self._relative(end) if end else None
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

    def _mark_overflow(self, why: str) -> None:
        """Ask for a full reconcile in the next batch."""
        log.warning("watcher: full reconcile needed: %s", why)
        self._record((), (), True)

    def _record(self, paths, dirs, overflow: bool, events: int = 1) -> None:
        """Notice relevant changes, add them to the pending batch and wake the flush thread."""
        self._notice(paths, dirs, overflow)
        now = time.monotonic()
        with self._cond:
            if self._stopping:
                return
            if not self._events:
                self._first = now
            self._last = now
            self._events += events
            self._paths.update(paths)
            self._dirs.update(dirs)
            self._overflow = self._overflow or overflow
            self._cond.notify_all()

    # ------------------------------------------------------------------ flushing

    def _flush_loop(self) -> None:
        """Deliver batches: after ``quiet_s`` of silence or ``max_delay_s`` after the first event."""
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._on_batch(batch)
            except Exception as exc:
                log.exception("watcher: on_batch failed")
                self.last_error = f"on_batch raised {type(exc).__name__}: {exc}"
            finally:
                with self._cond:
                    self._inflight = 0
                    self.batches += 1

    def _next_batch(self) -> ChangeBatch | None:
        """Wait until a batch is due and take it from the buffer; None when stopping."""
        with self._cond:
            while True:
                while not self._stopping and not self._events:
                    self._cond.wait()
                if self._stopping:
                    return None
                now = time.monotonic()
                due = min(self._last + self.quiet_s, self._first + self.max_delay_s)
                if now >= due:
                    break
                self._cond.wait(due - now)
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
            return batch

    # ------------------------------------------------------------------ observers

    def _start_initial(self) -> tuple[inotify.InotifyTree | _WatchdogObserver, str | None]:
        """(a running observer, why it is not native) for :meth:`start`."""
        if self.requested_mode == "polling":
            return self._start_polling(), None
        try:
            return self._start_native(), None
        except Exception as exc:
            if self.requested_mode == "native":
                raise
            reason = describe_native_failure(exc)
            log.warning("watcher: %s; polling %s every %.1f s", reason, self._root_str, self.poll_interval_s)
            return self._start_polling(), reason

    def _start_native(self) -> inotify.InotifyTree | _WatchdogObserver:
        """A running native watch of the whole tree: our inotify binding on Linux, watchdog's
        platform observer elsewhere. ``OSError`` if it cannot run or any folder hits a kernel
        limit (coverage would be partial)."""
        with self._obs_lock:
            self._limit_hit = None
            self._limit_reported = False
        if inotify.available():
            tree = inotify.InotifyTree(
                self._root_str,
                ignore=self._ignore_abs,
                skip_hidden=True,
                on_events=self._ingest_changes,
                on_lost=self._mark_overflow,
                on_limit=self._note_limit,
            )
            tree.start()
            return tree
        if isinstance(NativeObserver, type) and issubclass(NativeObserver, PollingObserver):
            raise OSError(errno.ENOSYS, "no native file-system events on this platform")
        obs = _WatchdogObserver(NativeObserver(), "native")
        obs.start(_Handler(self), self._root_str)
        return obs

    def _start_polling(self) -> _WatchdogObserver:
        """A running polling observer: an lstat walk (no symlinks) that skips dot-folders and
        ``ignore`` folders, and names the folders it cannot list or that are too deep."""
        root, prefix = self._root_str, self._prefix
        holder: list[_WatchdogObserver] = []

        def listdir(path: str | None) -> Iterator[os.DirEntry]:
            p = os.fsdecode(path or root)
            depth = p[len(prefix) :].count(os.sep) + 1 if p.startswith(prefix) else 0
            if depth > POLL_MAX_DEPTH:
                holder[0].skip(p, f"more than {POLL_MAX_DEPTH} folders below the root: not polled")
                return
            try:
                with os.scandir(p) as it:
                    entries = list(it)
            except (FileNotFoundError, NotADirectoryError):
                raise  # vanished since its parent was listed: watchdog treats it as empty
            except OSError as exc:
                holder[0].skip(p, f"cannot list it: {inotify.describe_errno(exc.errno, str(exc))}")
                return
            for e in entries:
                if not (_is_dir(e) and self._pruned(e.path, e.name)):
                    yield e

        obs = _WatchdogObserver(PollingObserverVFS(os.lstat, listdir, polling_interval=self.poll_interval_s), "polling")
        holder.append(obs)
        obs.start(_Handler(self), root)
        return obs

    def _note_limit(self, why: str) -> None:
        """From the inotify reader: a folder made later could not be watched (a kernel limit)."""
        with self._obs_lock:
            if self._limit_hit is None:
                self._limit_hit = why
        log.warning("watcher: %s", why)
        self._wake.set()

    def _monitor_loop(self) -> None:
        """Check the observer every :data:`_MONITOR_INTERVAL_S`; replace it when it died or hit
        a limit; retry a lost watch every :data:`_RETRY_S`."""
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
            obs, limit, retry_at = self._observer, self._limit_hit, self._retry_at
        if obs is None:  # a previous restart failed
            if retry_at is not None and time.monotonic() >= retry_at:
                self._replace(None, self._retry_kind, None)
            return
        dead = obs.dead()
        if dead is None and limit is not None and obs.kind == "native":
            self._on_limit_hit(obs, limit)
            return
        if dead is None:
            return
        why = f"the {obs.kind} watch stopped: {dead}"
        if not os.path.isdir(self._root_str):
            why, target = f"the export root {self._root_str} is gone", obs.kind
        elif obs.kind == "native" and self.requested_mode == "auto":
            target = "polling"
        else:
            target = obs.kind
        log.warning("watcher: %s; restarting (%s)", why, target)
        self._replace(obs, target, why if target != obs.kind else None, error=why)

    def _on_limit_hit(self, obs: inotify.InotifyTree | _WatchdogObserver, why: str) -> None:
        """A new folder could not be watched: poll instead (``auto``), else say so once."""
        if self.requested_mode == "auto":
            self._replace(obs, "polling", why)
        elif not self._limit_reported:  # "native": nowhere to go
            self._limit_reported = True
            self.last_error = why
            self._mark_overflow(why)

    def _replace(self, old, kind: str, degraded: str | None, *, error: str | None = None) -> None:
        """Swap ``old`` for a new observer of ``kind``; on success deliver an overflow batch, on
        failure set mode ``"off"`` and retry later. ``error`` goes to :attr:`last_error`."""
        with self._obs_lock:
            if self._stopping or self._observer is not old:
                return  # stop() or another replacement got there first
            self._observer = None
            if error is not None:
                self.last_error = error
        if old is not None:
            old.stop()
        new, kind, degraded = self._restart(kind, degraded)
        if new is None:
            return
        with self._obs_lock:
            if self._stopping:
                stale, new = new, None
            else:
                self._observer = new
                self.mode = kind
                if kind == "polling" and self.requested_mode != "polling":
                    self.degraded = degraded or self.degraded
                elif kind == "native":
                    self.degraded = None
                self._retry_at = None
        if new is None:
            stale.stop()
            return
        if kind == "polling" and degraded:
            log.warning("watcher: %s; now polling %s every %.1f s", degraded, self._root_str, self.poll_interval_s)
        self._mark_overflow(f"the watch was restarted ({kind})")

    def _restart(self, kind: str, degraded: str | None):
        """(new observer or None, its kind, degraded reason): native falls back to polling in
        ``auto``; when nothing starts, mode ``"off"`` and a retry in :data:`_RETRY_S`."""
        try:
            return (self._start_native() if kind == "native" else self._start_polling()), kind, degraded
        except Exception as exc:
            msg = f"cannot restart the {kind} watch: {type(exc).__name__}: {exc}"
            if kind == "native" and self.requested_mode == "auto" and os.path.isdir(self._root_str):
                degraded = degraded or describe_native_failure(exc)
                try:
                    return self._start_polling(), "polling", degraded
                except Exception as exc2:
                    msg = f"cannot restart the polling watch: {type(exc2).__name__}: {exc2}"
        if not os.path.isdir(self._root_str):
            msg = f"the export root {self._root_str} is gone (not watched until it is back)"
        log.warning("watcher: %s; retrying in %.0f s", msg, _RETRY_S)
        with self._obs_lock:
            self.last_error = msg
            self.mode = "off"
            self._retry_at = time.monotonic() + _RETRY_S
            self._retry_kind = kind
        return None, kind, degraded


def _check_arguments(mode: str, quiet_s: float, max_delay_s: float, poll_interval_s: float) -> None:
    if mode not in ("auto", "native", "polling"):
        raise ValueError(f"watch mode must be 'auto', 'native' or 'polling', not {mode!r}")
    if not quiet_s > 0:
        raise ValueError(f"quiet_s must be > 0, not {quiet_s!r}")
    if not max_delay_s >= quiet_s:
        raise ValueError(f"max_delay_s must be >= quiet_s ({quiet_s}), not {max_delay_s!r}")
    if not poll_interval_s > 0:
        raise ValueError(f"poll_interval_s must be > 0, not {poll_interval_s!r}")


def _is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _observer_threads(obs: BaseObserver) -> list[tuple[str, threading.Thread]]:
    threads: list[tuple[str, threading.Thread]] = [("dispatcher", obs)]
    for _ in range(3):  # the set may change under us while watchdog (un)schedules
        try:
            threads += [("emitter", e) for e in list(obs.emitters)]
            break
        except RuntimeError:
            continue
    return threads


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
