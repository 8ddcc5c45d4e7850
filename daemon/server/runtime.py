"""Where a root's daemon lives and whether it is alive: state files, locks, socket, spawn.

Per export root (files in its index dir, ``--index-dir`` or
:func:`daemon.index.storage.default_index_dir`)::

    daemon.json   DaemonState: pid, socket, version, protocol, root, index_dir, log, started_at,
                  options (what the daemon was started with: ``daemon restart`` reuses them)
                  (written once the socket accepts; unlinked first thing on shutdown)
    daemon.lock   flock held exclusively by the live daemon for its whole life (after the
                  root lock below); the holder writes its pid into it
    daemon.log    the daemon's log (the spawned process's stderr is appended to it too)

The index dir is made 0700 and the daemon runs with umask 077, so every file it writes
(the index holds the configuration's code and texts; the log names its files) is 0600.

Per user, independent of environment variables so a client with an empty environment
finds the daemon: ``/tmp/bsl-lens-<uid>/`` (mode 0700, owned by us, not a symlink) holds,
with ``key`` = the first 16 hex digits of sha256 of the resolved root path:

    <key>.lock        the ROOT LOCK: flock held by the root's daemon for its whole life,
                      taken before it touches any other file of the root, whatever its
                      index dir. One daemon per root. The holder writes
                      ``{"pid", "index_dir", "log", "phase"}`` into it (phase: starting |
                      serving | stopping), so a client finds the root's daemon and its index
                      dir before ``daemon.json`` exists. The ONLY liveness test: a pid in a
                      file is never trusted on its own.
    <key>.spawn.lock  flock held by a client while it spawns the root's daemon and waits for
                      it, so two clients starting at once (any index dirs) give one daemon
    <key>.sock        the socket (mode 0600); only the root lock's holder creates or
                      unlinks it
    <key>.json        the pointer ``{"root", "index_dir", "socket"}``: lets a client that was
                      not told ``--index-dir`` (or runs with another ``XDG_CACHE_HOME``) find
                      the index dir, and with it the log, after the daemon stopped

The transport (:func:`daemon_transport`): a Unix socket, or loopback TCP — the daemon
listens on 127.0.0.1 at a random port (in ``daemon.json``) and writes a random token to
``daemon.token`` in the index dir (created owner-only, like the 0700 index dir); clients
send it in ``hello`` and the daemon answers nothing else before it. Windows has no Unix
sockets in Python's asyncio and always uses TCP; elsewhere ``--transport tcp`` or
``BSL_LENS_TRANSPORT=tcp`` selects it, which is how the test suite runs the daemon, CLI, LSP
and MCP tests over the Windows path on Linux (``pytest --daemon-transport tcp``). Clients
follow the daemon (:func:`daemon.client.spawn.address_of`: the port in ``daemon.json``
while the daemon holds its lock, else the socket). Locks use ``msvcrt.locking`` on Windows,
on a byte far past the data, so that the lock file's content stays readable by others.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from ..contract import DEFAULT_WATCH
from ..index.storage import atomic_write_bytes, default_index_dir

log = logging.getLogger(__name__)

WINDOWS = sys.platform == "win32"

if WINDOWS:  # pragma: no cover - not testable here
    import msvcrt
else:
    import fcntl

STATE_FILE = "daemon.json"
LOCK_FILE = "daemon.lock"
SPAWN_LOCK_FILE = "spawn.lock"  # suffix of <key>.spawn.lock in the socket dir
LOG_FILE = "daemon.log"
TOKEN_FILE = "daemon.token"
#: ``daemon run`` exit code when another daemon already serves the root (or holds the index
#: dir): the spawning client tells it from a crash and reports that daemon instead.
EXIT_ALREADY_RUNNING = 5
#: A log bigger than this is moved to ``daemon.log.1`` when a client spawns a new daemon.
LOG_ROTATE_BYTES = 8 << 20


def daemon_transport(given: str | None = None) -> str:
    """The transport a daemon listens on: ``tcp`` on Windows; elsewhere ``given`` (a
    ``--transport`` flag), else ``$BSL_LENS_TRANSPORT``, else ``unix``.
    :class:`daemon.options.SettingError` for a bad value in the variable."""
    if WINDOWS:  # pragma: no cover - no Unix sockets in asyncio there
        return "tcp"
    from ..options import resolve

    return resolve("transport", given) or "unix"


class DaemonOptions(msgspec.Struct, kw_only=True):
    """The options a daemon was started with, recorded in ``daemon.json`` so that
    ``bsl-lens daemon restart`` starts the new daemon the same way (a flag given to the
    restart wins; :func:`daemon.cli.daemon_cmds.cmd_daemon_restart`).

    ``embedder``: the spec it runs with (``"none"``: lexical only); ``watch``: auto | native |
    polling | off; ``docs``: the ``--docs`` folders relative to the root (as normalised by
    :func:`daemon.sources.docs.normalize_docs_dirs`); ``reconcile_interval``: seconds, None for the
    service's default; ``shared_cache``: the DSN ("" for none) - ``daemon.json`` is 0600 in
    a 0700 index dir, like ``daemon.token``, and the DSN is shown only through
    :func:`daemon.index.shared_cache.mask_dsn`; ``shared_cache_mode``: rw | ro; ``log_file``: a
    ``--log-file`` given explicitly ("" for the default ``daemon.log`` in the index dir);
    ``transport``: unix | tcp ("" in a file of an older daemon);
    ``platform_help``: the ``--platform-help`` paths (absolute); ``platform_version``: the
    ``--platform-version`` given ("" for the configuration's rule)."""

    embedder: str = "none"
    watch: str = DEFAULT_WATCH
    docs: list[str] = []
    reconcile_interval: float | None = None
    shared_cache: str = ""
    shared_cache_mode: str = "rw"
    log_file: str = ""
    transport: str = ""
    platform_help: list[str] = []
    platform_version: str = ""


class DaemonState(msgspec.Struct, kw_only=True):
    """Contents of ``daemon.json``: how to reach the daemon and who it claims to be, and the
    options it was started with (None in a file written by an older daemon)."""

    pid: int
    socket: str  # Unix socket path; "" over TCP
    version: str
    protocol: int
    root: str
    index_dir: str
    log: str
    started_at: float  # epoch seconds
    port: int = 0  # TCP (Windows, --transport tcp): the loopback port
    options: DaemonOptions | None = None


class Paths(msgspec.Struct, kw_only=True, frozen=True):
    """Every file of one root's daemon (all absolute)."""

    root: Path
    index_dir: Path
    state: Path
    lock: Path
    spawn_lock: Path  # <key>.spawn.lock in the socket dir (per root)
    log: Path
    token: Path
    socket: Path
    pointer: Path
    root_lock: Path  # <key>.lock in the socket dir: held by the root's daemon


class RootOwner(msgspec.Struct, kw_only=True):
    """The process holding a root's lock (:func:`root_owner`): its ``pid`` (0 when unknown),
    the ``index_dir`` it serves from ("" while unknown), its ``log`` and ``phase``
    (starting | serving | stopping)."""

    pid: int = 0
    index_dir: str = ""
    log: str = ""
    phase: str = "starting"


class RuntimeDirError(OSError):
    """The per-user socket directory is unsafe (not ours, a symlink, group/world access)."""


# ------------------------------------------------------------------------------ locations
def resolve_root(root: str | os.PathLike) -> Path:
    """The export root as an absolute, symlink-resolved path (the daemon's identity)."""
    return Path(root).expanduser().resolve()


def root_key(root: Path) -> str:
    """First 16 hex digits of sha256 of the resolved root path (socket and pointer name)."""
    return hashlib.sha256(str(resolve_root(root)).encode("utf-8")).hexdigest()[:16]


def socket_dir() -> Path:
    """``/tmp/bsl-lens-<uid>`` on POSIX (never ``$TMPDIR``: it must not depend on the
    environment); ``%TEMP%\\bsl-lens-<user>`` on Windows (pointer files only)."""
    if WINDOWS:  # pragma: no cover
        return Path(tempfile.gettempdir()) / f"bsl-lens-{os.environ.get('USERNAME', 'user')}"
    return Path("/tmp") / f"bsl-lens-{os.getuid()}"


def ensure_socket_dir() -> Path:
    """Create :func:`socket_dir` with mode 0700 if missing and check it is safe to use.

    Raises :class:`RuntimeDirError` if it is a symlink, not a directory, owned by another
    user, or accessible by group/others (another user could then replace our socket).
    """
    d = socket_dir()
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    if WINDOWS:  # pragma: no cover
        return d
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise RuntimeDirError(f"{d} is not a directory (a symlink?): remove it")
    if st.st_uid != os.getuid():
        raise RuntimeDirError(f"{d} belongs to uid {st.st_uid}, not to us ({os.getuid()})")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


def paths_for(root: str | os.PathLike, index_dir: str | os.PathLike | None = None) -> Paths:
    """All state paths of the daemon for ``root``.

    ``index_dir`` given: that one. Otherwise the index dir of the daemon holding the root
    lock (:func:`root_owner`), else the pointer file's when it names this root, else
    :func:`daemon.index.storage.default_index_dir`. Creates nothing.
    """
    root = resolve_root(root)
    key = root_key(root)
    sdir = socket_dir()
    pointer = sdir / f"{key}.json"
    root_lock = sdir / f"{key}.lock"
    if index_dir is not None:
        idx = Path(index_dir).expanduser().resolve()
    else:
        idx = None
        owner = _read_owner(root_lock) if lock_is_held(root_lock) else None
        if owner is not None and owner.index_dir:
            idx = Path(owner.index_dir)
        else:
            p = read_pointer(pointer)
            if p is not None and p.get("root") == str(root) and p.get("index_dir"):
                idx = Path(p["index_dir"])
        if idx is None:
            idx = default_index_dir(root)
    return Paths(
        root=root,
        index_dir=idx,
        state=idx / STATE_FILE,
        lock=idx / LOCK_FILE,
        spawn_lock=sdir / f"{key}.{SPAWN_LOCK_FILE}",
        log=idx / LOG_FILE,
        token=idx / TOKEN_FILE,
        socket=sdir / f"{key}.sock",
        pointer=pointer,
        root_lock=root_lock,
    )


def _read_owner(path: Path) -> RootOwner | None:
    """The root lock file's JSON (None if empty, mid-write or damaged)."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=RootOwner)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def root_owner(paths: Paths) -> RootOwner | None:
    """Who holds the root lock of ``paths.root`` right now, or None if nobody does.

    ``pid`` is the holder's (``/proc/locks`` on Linux, else what it wrote); ``index_dir``,
    ``log`` and ``phase`` are what it wrote (a read that races its write is retried a few
    times over ~20 ms; then index_dir "" and phase "starting"). Works whatever index dir the
    caller was given: this is how ``status``/``stop``/``start`` find the root's daemon.
    """
    if not lock_is_held(paths.root_lock):
        return None
    info = None
    for _ in range(5):
        info = _read_owner(paths.root_lock)
        if info is not None:
            break
        time.sleep(0.004)
    info = info or RootOwner()
    holder = lock_holder(paths.root_lock)
    if holder is None and not lock_is_held(paths.root_lock):
        return None  # released meanwhile
    if holder:
        info.pid = holder
    return info


def write_owner(lock: "FileLock", paths: Paths, phase: str, log_path: str = "") -> None:
    """The root lock holder records ``{"pid", "index_dir", "log", "phase"}`` in the lock
    file (see :class:`RootOwner`)."""
    lock.write_bytes(
        msgspec.json.encode(
            RootOwner(pid=os.getpid(), index_dir=str(paths.index_dir), log=log_path or str(paths.log), phase=phase)
        )
    )


def make_private(d: Path) -> None:
    """Make the index dir ``d`` owner-only: 0700 for it and the folders under it, 0600 for
    its files (an index made by an older version, or by ``bsl-lens index`` with a loose
    umask, is repaired). Errors are logged at debug level and skipped."""
    for dirpath, _dirnames, filenames in os.walk(d):
        try:
            os.chmod(dirpath, 0o700)
        except OSError as exc:
            log.debug("chmod %s: %s", dirpath, exc)
        for f in filenames:
            p = os.path.join(dirpath, f)
            try:
                if stat.S_ISREG(os.lstat(p).st_mode):
                    os.chmod(p, 0o600)
            except OSError as exc:
                log.debug("chmod %s: %s", p, exc)


# ------------------------------------------------------------------------------ state files
def read_pointer(path: Path) -> dict | None:
    """The pointer file's dict, or None if missing or unreadable."""
    try:
        data = msgspec.json.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_pointer(paths: Paths) -> None:
    """Write ``<key>.json`` = {"root", "index_dir", "socket"} (atomic, mode 0600)."""
    data = {"root": str(paths.root), "index_dir": str(paths.index_dir), "socket": str(paths.socket)}
    atomic_write_bytes(paths.pointer, msgspec.json.encode(data))


def read_state(paths: Paths) -> DaemonState | None:
    """``daemon.json`` decoded, or None if missing or damaged (it is a hint, not proof of life)."""
    try:
        return msgspec.json.decode(paths.state.read_bytes(), type=DaemonState)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def write_state(paths: Paths, state: DaemonState) -> None:
    """Write ``daemon.json`` atomically."""
    atomic_write_bytes(paths.state, msgspec.json.encode(state))


def unlink_quietly(path: Path) -> None:
    """``path.unlink()`` ignoring a missing file (and any OSError, logged at debug level)."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.debug("cannot remove %s: %s", path, exc)


def remove_daemon_files(paths: Paths, *, pid: int | None = None, socket_ino: int | None = None) -> None:
    """Remove ``daemon.json``, the socket, the token and the pointer (if it points at this
    index dir). Call only while holding BOTH the root lock and ``daemon.lock`` (the daemon
    itself, or :func:`clean_stale`, which takes them).

    ``pid`` / ``socket_ino``: a live daemon cleaning up after itself removes ``daemon.json``
    only if it names ``pid`` and the socket only if it is the inode it bound (nothing it
    did not create is unlinked)."""
    st = read_state(paths)
    if pid is None or st is None or st.pid == pid:
        unlink_quietly(paths.state)
    if socket_ino is None:
        unlink_quietly(paths.socket)
    else:
        try:
            if os.stat(paths.socket).st_ino == socket_ino:
                unlink_quietly(paths.socket)
        except OSError:
            pass
    unlink_quietly(paths.token)
    p = read_pointer(paths.pointer)
    if p is None or p.get("index_dir") == str(paths.index_dir):
        unlink_quietly(paths.pointer)


def clean_stale(paths: Paths) -> bool:
    """If no daemon holds the root lock nor ``daemon.lock``, remove what a killed one left
    behind, holding both locks meanwhile (a daemon starting at that moment finds the root
    lock taken for a few ms and waits for it, see :func:`daemon.server.server.run_daemon`).

    Returns True if something was removed. Never touches the files of a live daemon.
    """
    if not (paths.state.exists() or paths.socket.exists()):
        return False
    root_lock, lock = FileLock(paths.root_lock), FileLock(paths.lock)
    try:
        if not root_lock.try_acquire(create=False) or not lock.try_acquire(create=False):
            return False
        stale = paths.state.exists() or paths.socket.exists()
        if stale:
            log.info("removing stale daemon files of %s (no process holds its locks)", paths.root)
            remove_daemon_files(paths)
        return stale
    finally:
        lock.release()
        root_lock.release()


# ------------------------------------------------------------------------------ locks
class FileLock:
    """An exclusive advisory lock on a file: ``flock`` on POSIX, ``msvcrt.locking`` on Windows.

    The lock belongs to the open file description: it is released when :meth:`release` is
    called or the process dies (``kill -9`` included), which is what makes it a liveness
    test. Not reentrant; not thread-safe.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def still_ours(self) -> bool:
        """True while the lock file on disk is the one this object holds (not deleted or
        replaced, e.g. by ``rm -rf`` of the index dir): after that another process could take
        a new lock on the same path, so the holder must stop."""
        if self._fd is None:
            return False
        try:
            disk, held = os.stat(self.path), os.fstat(self._fd)
        except OSError:
            return False
        return (disk.st_ino, disk.st_dev) == (held.st_ino, held.st_dev)

    def try_acquire(self, *, create: bool = True) -> bool:
        """Take the lock without waiting; False if another process holds it. ``create``:
        create the file (and its folder) if missing; with False a missing file counts as
        free and is created (0600) only if its folder exists."""
        if self._fd is not None:
            return True
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
        except FileNotFoundError:
            if create:
                raise
            return True  # no folder: nothing to protect; held stays False
        try:
            if WINDOWS:  # pragma: no cover
                _win_lock(fd, msvcrt.LK_NBLCK)
            else:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK) or WINDOWS:
                return False
            raise
        self._fd = fd
        return True

    def acquire(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the lock (polling 10 ms doubling to 200 ms)."""
        deadline = time.monotonic() + timeout
        delay = 0.01
        while not self.try_acquire():
            now = time.monotonic()
            if now >= deadline:
                return False
            time.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 0.2)
        return True

    def write_pid(self) -> None:
        """Record our pid in the lock file (for ``daemon stop``'s last-resort signal)."""
        self.write_bytes(f"{os.getpid()}\n".encode())

    def write_bytes(self, data: bytes) -> None:
        """Replace the lock file's content with ``data`` (through the held descriptor)."""
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        os.write(self._fd, data)

    def release(self) -> None:
        """Release and close; idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if WINDOWS:  # pragma: no cover
                _win_lock(fd, msvcrt.LK_UNLCK)
            else:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


#: Windows: the byte :class:`FileLock` locks. ``msvcrt.locking`` locks are mandatory: a
#: locked byte cannot be read by another process, and the root lock's holder writes its pid,
#: index dir and phase into the file for clients to read. A byte far past any data (locking
#: beyond the end of a file is allowed) keeps that content readable.
WIN_LOCK_OFFSET = 1 << 30


def _win_lock(fd: int, mode: int) -> None:  # pragma: no cover - Windows only
    """Lock or unlock (``mode``) the byte at :data:`WIN_LOCK_OFFSET` of ``fd``; the file
    position is put back (``msvcrt.locking`` works from the current position)."""
    pos = os.lseek(fd, 0, os.SEEK_CUR)
    os.lseek(fd, WIN_LOCK_OFFSET, os.SEEK_SET)
    try:
        msvcrt.locking(fd, mode, 1)
    finally:
        os.lseek(fd, pos, os.SEEK_SET)


def lock_is_held(path: Path) -> bool:
    """True if some process holds the lock on ``path`` right now (a missing file: False).

    Probes with a non-blocking lock of our own, released at once. In the daemon process
    itself (which holds it through another descriptor) this also says True.
    """
    if not path.exists():
        return False
    probe = FileLock(path)
    try:
        if probe.try_acquire():
            return False
        return True
    finally:
        probe.release()


def lock_holder(path: Path) -> int | None:
    """The pid holding the lock on ``path``, or None if it is free.

    On Linux read from ``/proc/locks`` (by inode); elsewhere the pid the holder wrote into
    the file (:meth:`FileLock.write_pid`). None also when held but the pid is unknown.
    """
    if not lock_is_held(path):
        return None
    try:
        content = path.read_bytes().strip()
        if content.startswith(b"{"):
            pid = msgspec.json.decode(content).get("pid")
            fallback = int(pid) if pid else None
        else:
            fallback = int(content or 0) or None
    except (OSError, ValueError, AttributeError, msgspec.DecodeError):
        fallback = None
    try:
        ino = os.stat(path).st_ino
        with open("/proc/locks", encoding="ascii") as fh:
            for line in fh:
                parts = line.split()
                # "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF"
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(ino):
                    return int(parts[4])
    except (OSError, ValueError):
        pass
    return fallback


# ------------------------------------------------------------------------------ spawning
def daemon_command(root: Path, index_dir: Path, args: list[str]) -> list[str]:
    """``[python, -m, daemon.cli, daemon, run, ROOT, --index-dir, DIR, *args]``."""
    return [sys.executable, "-m", "daemon.cli", "daemon", "run", str(root), "--index-dir", str(index_dir), *args]


def log_file_of(paths: Paths, args: list[str]) -> Path:
    """The log a daemon started with ``args`` writes: ``--log-file``'s value, else
    ``paths.log``."""
    if "--log-file" in args[:-1]:
        return Path(args[args.index("--log-file") + 1])
    return paths.log


def spawn_daemon(paths: Paths, args: list[str]) -> subprocess.Popen:
    """Start ``daemon run`` for ``paths.root`` detached from the caller.

    New session (no controlling terminal, not killed by the caller's Ctrl-C), stdin/stdout
    on /dev/null, stderr appended to the log (0600; :func:`log_file_of`; rotated to ``.1`` beyond
    :data:`LOG_ROTATE_BYTES`), where the daemon's own logging then goes too. The package's parent
    directory is prepended to ``PYTHONPATH`` so ``-m daemon.cli`` imports even from a source
    checkout with an empty environment. The caller must not wait on the process; a daemon thread reaps it.
    """
    paths.index_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = log_file_of(paths, args)
    try:
        if log_path.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(log_path, log_path.with_name(log_path.name + ".1"))
    except OSError:
        pass
    env = dict(os.environ)
    args = list(args)
    if "--shared-cache" in args:  # a DSN may hold a password: not on a command line (ps) nor in the log
        i = args.index("--shared-cache")
        env["BSL_LENS_SHARED_CACHE"] = args[i + 1]
        del args[i : i + 2]
    pkg_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    cmd = daemon_command(paths.root, paths.index_dir, args)
    log.info("spawning %s", " ".join(cmd))
    log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as err:
        kwargs: dict = {}
        if WINDOWS:  # pragma: no cover
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS
        else:
            kwargs["start_new_session"] = True
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=str(paths.index_dir),
            env=env,
            **kwargs,
        )
    return proc


def tail(path: Path, lines: int = 20, max_bytes: int = 16384) -> str:
    """The last ``lines`` lines of a text file ("" if unreadable)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def write_token(paths: Paths) -> str:
    """Create ``daemon.token`` with a fresh random token (owner-only create mode): the secret
    a client of a TCP daemon shows in ``hello``."""
    import secrets

    token = secrets.token_hex(16)
    unlink_quietly(paths.token)
    fd = os.open(paths.token, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token)
    return token


def read_token(paths: Paths) -> str:
    """The token from ``daemon.token`` ("" if absent: a daemon on a Unix socket)."""
    try:
        return paths.token.read_text(encoding="ascii").strip()
    except OSError:
        return ""


# ------------------------------------------------------------------------------ may a daemon start
def export_problem(root: str | os.PathLike) -> str | None:
    """Why a daemon must not be started for ``root``, or None if it may: it does not exist
    or is not a directory, or it is neither a 1C export (Designer ``Configuration.xml``, EDT
    ``src/Configuration/Configuration.mdo``, :func:`daemon.sources.scan.detect_export`) nor a
    folder with ``.bsl`` modules or ``.md`` pages among its first :data:`BSL_PROBE_ENTRIES`
    entries (a loose set of modules still gets a daemon; a folder of markdown is a docs root,
    :mod:`daemon.sources.docs`). Reads the folder, creates nothing."""
    p = Path(root).expanduser()
    if not p.exists():
        return f"export root is not a directory: {root} (it does not exist)"
    if not p.is_dir():
        return f"export root is not a directory: {root}"
    from ..sources.scan import IGNORE_FILE, detect_export

    info = detect_export(p)
    if info.format != "unknown" or _has_bsl(p, BSL_PROBE_ENTRIES):
        return None
    if info.hidden:
        return (
            f"no 1C export under {p.resolve()} to index: its {IGNORE_FILE} leaves out every EDT project "
            f"({', '.join(info.hidden)}); take those lines out of it"
        )
    return (
        f"no 1C export under {p.resolve()}: no Configuration.xml (Designer dump), no "
        "src/Configuration/Configuration.mdo (EDT project), no .bsl modules and no .md pages; "
        "point it at the export's root"
    )


#: :func:`export_problem` looks at most at this many directory entries for a ``.bsl`` file.
BSL_PROBE_ENTRIES = 20000


def _has_bsl(root: Path, limit: int) -> bool:
    """True if a ``*.bsl`` file is among the first ``limit`` entries of a breadth-first walk
    of ``root`` (hidden folders skipped, symlinks not followed)."""
    seen = 0
    todo = [root]
    while todo and seen < limit:
        d = todo.pop(0)
        try:
            with os.scandir(d) as it:
                for e in it:
                    seen += 1
                    if e.name.lower().endswith((".bsl", ".md", ".markdown")) and e.is_file(follow_symlinks=False):
                        return True
                    if not e.name.startswith(".") and e.is_dir(follow_symlinks=False):
                        todo.append(Path(e.path))
                    if seen >= limit:
                        break
        except OSError:
            continue
    return False


# ------------------------------------------------------------------------------ stopping
def wait_lock_free(path: Path, timeout: float, *, give_up: Callable[[], bool] | None = None) -> bool:
    """Wait up to ``timeout`` seconds for the lock file ``path`` to be free (polled, backing
    off from 10 ms to 200 ms). True when it is free, False when the time ran out or
    ``give_up()`` (asked while the lock is held) said there is no point in waiting."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while lock_is_held(path):
        if (give_up is not None and give_up()) or time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return True
