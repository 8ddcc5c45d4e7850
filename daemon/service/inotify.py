"""Linux inotify through ctypes: a recursive watch of one folder tree that reads its own events.

The watcher's native mode on Linux (:class:`daemon.service.watcher.Watcher`). Owning this small
binding (``inotify_init1``, ``inotify_add_watch``, ``inotify_rm_watch`` and ``read``) gives
freshness what a wrapped observer hides behind private internals: the moment each event is
read, whether the kernel still holds unread events (:meth:`InotifyTree.caught_up`), queue
overflows, and every folder that could not be watched, with the reason. Folders are walked
with an explicit stack, so no depth of nesting can exhaust the interpreter's recursion limit.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import select
import struct
import sys
import threading
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

# <sys/inotify.h>
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000

#: What every folder is watched for. Reads never produce events (no ``IN_OPEN``, ``IN_ACCESS``,
#: ``IN_CLOSE_NOWRITE``), so indexing cannot feed back into the watcher.
WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)

_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name
_READ_BYTES = 256 * 1024  # one read(2): ~10,000 events of short names
_DIR_EVENTS = IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM
#: errno of inotify_add_watch that mean a kernel limit, not a problem of one folder
LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE, errno.ENOMEM)


class _Libc:
    """The three inotify calls of the C library, with ``errno`` kept (ctypes ``use_errno``)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes, self.init1.restype = [ctypes.c_int], ctypes.c_int
        self.add_watch = libc.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int
        self.rm_watch = libc.inotify_rm_watch
        self.rm_watch.argtypes, self.rm_watch.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int


_libc: _Libc | None = None
_libc_error: str | None = None


def libc() -> _Libc:
    """The bound C library; ``OSError(ENOSYS)`` where there is no inotify (not Linux, or a C
    library without ``inotify_init1``)."""
    global _libc, _libc_error
    if _libc is None and _libc_error is None:
        if not sys.platform.startswith("linux"):
            _libc_error = f"no inotify on {sys.platform}"
        else:
            try:
                _libc = _Libc()
            except (OSError, AttributeError) as exc:
                _libc_error = f"the C library has no inotify: {exc}"
    if _libc is None:
        raise OSError(errno.ENOSYS, _libc_error)
    return _libc


def available() -> bool:
    """True when :class:`InotifyTree` can run here."""
    try:
        libc()
    except OSError:
        return False
    return True


def parse_events(buf: bytes) -> list[tuple[int, int, bytes]]:
    """``(wd, mask, name)`` of each ``struct inotify_event`` in one read's bytes; the name
    without its NUL padding (``b""`` for an event on the watched folder itself)."""
    out = []
    i, n, size = 0, len(buf), _EVENT.size
    while i + size <= n:
        wd, mask, _cookie, length = _EVENT.unpack_from(buf, i)
        name = buf[i + size : i + size + length].rstrip(b"\0")
        out.append((wd, mask, name))
        i += size + length
    return out


def _limit_path(kind: str) -> str:
    try:
        with open(f"/proc/sys/fs/inotify/max_user_{kind}", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def describe_errno(no: int | None, detail: str = "") -> str:
    """Human reason for an inotify failure: the limit to raise for ``ENOSPC``/``EMFILE``, else
    the error's text."""
    if no == errno.ENOSPC:
        return f"inotify watch limit reached (ENOSPC): raise fs.inotify.max_user_watches (now {_limit_path('watches')})"
    if no == errno.EMFILE:
        return (
            "inotify instance limit reached (EMFILE): raise fs.inotify.max_user_instances "
            f"(now {_limit_path('instances')}) or the open-file limit"
        )
    if no == errno.ENOMEM:
        return "the kernel has no memory for another inotify watch (ENOMEM)"
    if no == errno.ENAMETOOLONG:
        return "its path is too long to watch (ENAMETOOLONG)"
    if no == errno.EACCES:
        return "permission denied (EACCES)"
    return detail or (os.strerror(no) if no else "unknown error")


class InotifyTree:
    """A recursive inotify watch of ``root`` (an absolute folder path) with its own reader thread.

    Folders named in ``ignore`` (absolute paths) and, with ``skip_hidden``, every folder whose
    name starts with a dot are neither watched nor descended into. ``on_events(changes)`` gets,
    on the reader thread, the changes of one ``read``: ``(absolute path, is_dir)`` in kernel
    order, a folder for its creation, deletion or either end of a move, a file for anything
    else (a folder that appears is walked, and what is in it already is handed on too).
    ``on_lost(why)``: events were lost (a kernel queue overflow; the root deleted or moved): the
    caller must reconcile everything. ``on_limit(why)``: a folder created later could not be
    watched because a kernel limit was reached (coverage is now partial).

    :meth:`start` raises ``OSError`` if the instance cannot be made (``EMFILE``), the root
    cannot be watched, or any folder hits a kernel limit. Folders that cannot be watched for
    their own reasons (too long a path, no permission) are skipped and listed in
    :attr:`unwatched` (path -> reason); the rest is watched. Paths are kept as bytes inside
    (what the kernel and ``os.scandir`` speak) and handed on as ``str``.
    """

    kind = "native"

    def __init__(
        self,
        root: str,
        *,
        on_events: Callable[[list[tuple[str, bool]]], None],
        on_lost: Callable[[str], None],
        on_limit: Callable[[str], None],
        ignore: Iterable[str] = (),
        skip_hidden: bool = True,
    ) -> None:
        self.root = root.rstrip(os.sep) or os.sep
        self._root = os.fsencode(self.root)
        self._ignore = frozenset(os.fsencode(p) for p in ignore)
        self._skip_hidden = skip_hidden
        self._on_events = on_events
        self._on_lost = on_lost
        self._on_limit = on_limit
        self._fd = -1
        self._add_watch: Callable[[int, bytes, int], int] | None = None  # libc's, bound in start()
        self._wake_r = self._wake_w = -1
        self._path_of: dict[int, bytes] = {}  # wd -> folder
        self._wd_of: dict[bytes, int] = {}  # folder -> wd
        self._kids: dict[bytes, list[bytes]] = {}  # folder -> its watched sub-folders
        self._lock = threading.Lock()  # guards unwatched (read by other threads)
        self._unwatched: dict[bytes, str] = {}
        self._busy = False  # the reader woke up to read: not everything read is handed on yet
        self._stopping = False
        self._strict = False  # during start(): a limit raises instead of being reported
        self.gone: str | None = None  # why the tree is no longer watched (the root went away)
        self.error: str | None = None  # why the reader thread died
        self.thread: threading.Thread | None = None

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        """Watch the tree and start the reader (see the class docstring for errors)."""
        lib = libc()
        fd = lib.init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            no = ctypes.get_errno()
            raise OSError(no, describe_errno(no))
        self._fd = fd
        self._add_watch = lib.add_watch
        self._wake_r, self._wake_w = os.pipe()
        try:
            self._strict = True
            if not self._add(self._root, None):
                reason = self._unwatched.get(self._root, "it vanished")
                raise OSError(errno.ENOENT, f"cannot watch the export root {self.root}: {reason}")
            self._walk(self._root)
        except BaseException:
            self._close()
            raise
        finally:
            self._strict = False
        self.thread = threading.Thread(target=self._run, name="bsl-lens-inotify", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the reader and close the instance (the kernel drops every watch). Idempotent."""
        if self._stopping:
            return
        self._stopping = True
        t = self.thread
        if t is not None and t.is_alive():
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
            if t is not threading.current_thread():
                t.join(timeout)
        if t is None or not t.is_alive():
            self._close()

    def _close(self) -> None:
        for fd in (self._fd, self._wake_r, self._wake_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fd = self._wake_r = self._wake_w = -1

    def dead(self) -> str | None:
        """Why this tree no longer watches (the reader died, the root went away), else None."""
        if self.gone:
            return self.gone
        t = self.thread
        if t is not None and not t.is_alive() and not self._stopping:
            return "the inotify reader thread died" + (f": {self.error}" if self.error else "")
        return None

    @property
    def unwatched(self) -> dict[str, str]:
        """Folders below the root that are not watched: absolute path -> reason."""
        with self._lock:
            return {os.fsdecode(p): why for p, why in self._unwatched.items()}

    @property
    def watches(self) -> int:
        """Folders watched now."""
        return len(self._path_of)

    def caught_up(self) -> bool:
        """True when nothing is unread on the inotify descriptor and the reader has handed on
        all it read (one ``poll(2)`` with a zero timeout)."""
        fd = self._fd
        if fd < 0:
            return False
        p = select.poll()
        p.register(fd, select.POLLIN)
        try:
            unread = bool(p.poll(0))
        except (OSError, ValueError):
            return False
        # order matters: the reader sets _busy before it reads and clears it after handing on
        return not unread and not self._busy

    # ------------------------------------------------------------------ watches
    def _pruned(self, path: bytes, name: bytes) -> bool:
        return (self._skip_hidden and name[:1] == b".") or path in self._ignore

    def _add(self, path: bytes, parent: bytes | None) -> bool:
        """Watch one folder (``parent``: the watched folder it is in); False if it is not
        watched (vanished, skipped, a limit)."""
        wd = self._add_watch(self._fd, path, WATCH_MASK)
        if wd < 0:
            return self._add_failed(path, ctypes.get_errno())
        old = self._path_of.get(wd)
        if old == path:
            return True  # watched already (a walk after an overflow)
        if old is not None:  # the same folder under a new name
            self._forget(old)
        self._path_of[wd] = path
        self._wd_of[path] = wd
        if parent is not None:
            self._kids.setdefault(parent, []).append(path)
        return True

    def _add_failed(self, path: bytes, no: int) -> bool:
        if no in (errno.ENOENT, errno.ENOTDIR):
            return False  # gone meanwhile (or replaced by a file): nothing to watch
        why = describe_errno(no)
        if no in LIMIT_ERRNOS:
            why = f"{why} at {os.fsdecode(path)}"
            if self._strict:
                raise OSError(no, why)
            self._on_limit(why)
            return False
        self._skip(path, why)
        return False

    def _walk(self, top: bytes, found: list[tuple[str, bool]] | None = None) -> None:
        """Watch every folder below ``top`` (itself already watched): an explicit stack, each
        folder watched before it is listed so that a sub-folder made meanwhile is seen.
        ``found``: collects what the walk meets (a folder that appeared may be filled already)."""
        stack = [top]
        add, pruned = self._add, self._pruned
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = [(e.path, e.name, e.is_dir(follow_symlinks=False)) for e in it]
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                self._skip(d, f"cannot list it: {describe_errno(exc.errno, exc.strerror or str(exc))}")
                continue
            for path, name, is_dir in entries:
                if not is_dir:
                    if found is not None:
                        found.append((os.fsdecode(path), False))
                elif not pruned(path, name) and add(path, d):
                    stack.append(path)
                    if found is not None:
                        found.append((os.fsdecode(path), True))

    def _skip(self, path: bytes, why: str) -> None:
        with self._lock:
            first = path not in self._unwatched
            self._unwatched[path] = why
        if first:
            log.warning("watcher: not watching %s: %s", os.fsdecode(path), why)

    def _forget(self, path: bytes) -> None:
        """Drop the bookkeeping of one folder (its watch is gone or replaced)."""
        wd = self._wd_of.pop(path, None)
        if wd is not None and self._path_of.get(wd) == path:
            del self._path_of[wd]
        self._kids.pop(path, None)
        siblings = self._kids.get(path.rpartition(b"/")[0])
        if siblings is not None and path in siblings:
            siblings.remove(path)

    def _drop_tree(self, top: bytes) -> None:
        """Stop watching ``top`` and every folder below it (moved away)."""
        rm_watch = libc().rm_watch
        stack = [top]
        while stack:
            d = stack.pop()
            stack.extend(self._kids.get(d, ()))
            wd = self._wd_of.get(d)
            self._forget(d)
            if wd is not None:
                rm_watch(self._fd, wd)  # EINVAL if the kernel dropped it already: fine
        with self._lock:
            prefix = top + b"/"
            for p in [p for p in self._unwatched if p == top or p.startswith(prefix)]:
                del self._unwatched[p]

    # ------------------------------------------------------------------ reading
    def _run(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        try:
            while not self._stopping:
                ready = poller.poll()
                if self._stopping:
                    break
                if any(fd == self._fd for fd, _ in ready):
                    self._read_once()
        except Exception as exc:  # the thread ends; dead() says why and the watcher replaces it
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("watcher: the inotify reader failed")
        finally:
            if self._stopping:
                self._close()

    def _read_once(self) -> None:
        self._busy = True  # before the read: caught_up() waits from here
        try:
            try:
                buf = os.read(self._fd, _READ_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            self._handle(buf)
        finally:
            self._busy = False

    def _handle(self, buf: bytes) -> None:
        """Map one read's events to changes, hand them on, then follow the folder changes."""
        changes: list[tuple[str, bool]] = []
        folder_ops: list[tuple[bool, bytes]] = []  # (appeared, path) in kernel order
        lost: str | None = None
        for wd, mask, name in parse_events(buf):
            if mask & IN_Q_OVERFLOW:
                lost = "the inotify event queue overflowed (IN_Q_OVERFLOW)"
                continue
            d = self._path_of.get(wd)
            if d is None:
                continue
            if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT):
                if mask & IN_IGNORED:  # the kernel dropped the watch (folder deleted, unmounted)
                    self._forget(d)
                if d == self._root:
                    lost = self._root_gone()
                continue  # other folders: their parent reports them
            path = d + b"/" + name if name else d
            if not mask & IN_ISDIR:
                changes.append((os.fsdecode(path), False))
            elif mask & _DIR_EVENTS:
                changes.append((os.fsdecode(path), True))
                folder_ops.append((bool(mask & (IN_CREATE | IN_MOVED_TO)), path))
        if changes:
            self._on_events(changes)
        for appeared, path in folder_ops:
            self._follow(appeared, path)
        if lost is not None:
            self._on_lost(lost)
            if not self.gone:
                self._walk(self._root)  # folders made while events were lost get their watches

    def _follow(self, appeared: bool, path: bytes) -> None:
        """A folder appeared (watch its tree and hand on what is in it already) or went away
        (drop the watches of its tree)."""
        if not appeared:
            self._drop_tree(path)
            return
        parent, _, name = path.rpartition(b"/")
        if self._pruned(path, name) or not self._add(path, parent):
            return
        found: list[tuple[str, bool]] = []
        self._walk(path, found)
        if found:
            self._on_events(found)

    def _root_gone(self) -> str:
        self.gone = f"the export root {self.root} was deleted or moved"
        return self.gone


def _is_dir(e: os.DirEntry) -> bool:
    try:
        return e.is_dir(follow_symlinks=False)
    except OSError:
        return False
