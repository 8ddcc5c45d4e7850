"""Finding the daemon of an export root, and starting it when there is none.

:func:`connect` / :func:`connect_async` return a connected client. With ``spawn=True`` (the
default) a missing daemon is started under the root's ``spawn.lock`` (two clients starting at
once give one daemon, whatever their index dirs), as ``python -m daemon.cli daemon run ROOT ...``
in a new session, then probed with connect + ``hello`` until it answers, its process exits
(:class:`DaemonError` with the tail of its log) or the timeout passes (:class:`DaemonTimeout`).
The daemon is found without environment variables: its socket is
``/tmp/bsl-lens-<uid>/<key>.sock`` for the resolved root (:mod:`daemon.server.runtime`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..server import runtime
from ..server.protocol import VERSION_MISMATCH, HelloResult
from .connection import (
    HELLO_TIMEOUT,
    REQUEST_TIMEOUT,
    AsyncDaemonClient,
    CommandError,
    DaemonClient,
    DaemonError,
    DaemonNotRunning,
    DaemonTimeout,
    Notify,
)

#: Default total time to wait for a spawned daemon to answer ``hello`` (seconds).
SPAWN_TIMEOUT = 30.0


def daemon_args(
    *,
    embedder: str | None = None,
    watch: str | None = None,
    log_file: str | os.PathLike | None = None,
    verbose: int = 0,
    reconcile_interval: float | None = None,
    shared_cache: str | None = None,
    shared_cache_mode: str | None = None,
    docs: Iterable[str] = (),
    transport: str | None = None,
    platform_help: Iterable[str] = (),
    platform_version: str | None = None,
) -> list[str]:
    """Extra ``daemon run`` arguments for a spawned daemon (None = the daemon's default):
    ``embedder`` spec or "none", ``watch`` mode, ``log_file``, ``verbose`` count,
    ``reconcile_interval`` in seconds (0 disables the periodic full re-check),
    ``shared_cache`` DSN and its mode (``rw``/``ro``; the DSN never reaches the spawned
    command line: :func:`daemon.server.runtime.spawn_daemon` moves it into the child's environment),
    ``docs``: documentation folders inside the root (``--docs``, :mod:`daemon.sources.docs`),
    ``transport``: unix | tcp (None: the spawned daemon's default, which follows
    ``BSL_LENS_TRANSPORT`` in the environment it inherits);
    ``platform_help``: help folders or ``.hbk`` files (``--platform-help``, made absolute) and
    ``platform_version`` (``--platform-version``; :mod:`daemon.service.platform`)."""
    args: list[str] = []
    for d in docs or ():
        args += ["--docs", str(d)]
    for h in platform_help or ():
        args += ["--platform-help", str(Path(h).resolve())]
    if platform_version:
        args += ["--platform-version", platform_version]
    if embedder is not None:
        args += ["--embedder", embedder]
    if shared_cache:
        args += ["--shared-cache", shared_cache]
    if shared_cache_mode is not None:
        args += ["--shared-cache-mode", shared_cache_mode]
    if watch is not None:
        args += ["--watch", watch]
    if transport is not None:
        args += ["--transport", transport]
    if reconcile_interval is not None:
        args += ["--reconcile-interval", f"{reconcile_interval:g}"]
    if log_file is not None:
        args += ["--log-file", str(Path(log_file).resolve())]
    args += ["-v"] * verbose
    return args


def address_of(paths: runtime.Paths) -> str:
    """Where the daemon for ``paths`` listens: ``tcp:127.0.0.1:<port>`` when ``daemon.json``
    names a port and a daemon holds the index dir's lock (a TCP daemon: Windows, ``--transport
    tcp``; a port left by a killed one is never tried, another program may have it now), else
    the socket path ("" on Windows: no daemon there yet). The client follows the daemon, whatever
    its own ``BSL_LENS_TRANSPORT``."""
    st = runtime.read_state(paths)
    if st is not None and st.port and runtime.lock_is_held(paths.lock):
        return f"tcp:127.0.0.1:{st.port}"
    return "" if runtime.WINDOWS else str(paths.socket)


class RootBusy(DaemonError):
    """The root is served (or being started) by a daemon on another index dir than the one
    asked for: ``pid``, ``index_dir`` of that daemon. One daemon per root."""

    def __init__(self, paths: runtime.Paths, pid: int | None, index_dir: str):
        self.pid = pid
        self.index_dir = index_dir
        super().__init__(
            f"the daemon for {paths.root} (pid {pid or '?'}) uses the index dir {index_dir}, not "
            f"{paths.index_dir}: one daemon per export root; use it (leave out --index-dir) or stop it first "
            f"(bsl-lens daemon stop {paths.root} --index-dir {index_dir})"
        )


def _check_index_dir(paths: runtime.Paths, hello: HelloResult | None) -> None:
    if hello is not None and hello.index_dir != str(paths.index_dir):
        raise RootBusy(paths, hello.pid, hello.index_dir)


def _check_owner(paths: runtime.Paths) -> runtime.RootOwner | None:
    """The root lock's holder (:func:`daemon.server.runtime.root_owner`); :class:`RootBusy` if it
    serves another index dir than ``paths``'."""
    owner = runtime.root_owner(paths)
    if owner is not None and owner.index_dir and owner.index_dir != str(paths.index_dir):
        raise RootBusy(paths, owner.pid, owner.index_dir)
    return owner


def _try_open(paths: runtime.Paths, kw: dict) -> DaemonClient | None:
    address = address_of(paths)
    if not address:
        return None
    try:
        c = DaemonClient.open(address, token=runtime.read_token(paths), **kw)
    except DaemonNotRunning:
        return None
    except CommandError as exc:
        if exc.code == VERSION_MISMATCH:
            raise DaemonError(f"{exc.message}") from exc
        raise
    try:
        _check_index_dir(paths, c.hello)
    except DaemonError:
        c.close()
        raise
    return c


#: Longest pause between two readiness probes of a starting daemon (seconds).
PROBE_MAX_DELAY = 0.05


def ensure_daemon(
    paths: runtime.Paths,
    *,
    args: list[str] | None = None,
    timeout: float = SPAWN_TIMEOUT,
    probe: Callable[[], bool],
) -> bool:
    """Make sure a daemon for ``paths`` answers; ``probe()`` returns True once it does.

    Under the root's ``spawn.lock`` (per root, whatever the index dir): probe again, and if
    no process holds the root lock, spawn ``daemon run`` with ``args`` (it removes a killed
    daemon's leftovers itself; clients never unlink a daemon's files); then poll ``probe``
    with backoff (10 ms doubling to :data:`PROBE_MAX_DELAY`: a probe is one failed ``connect``,
    and a longer step would add up to its length to a warm start). A daemon that holds the
    root lock but does not answer yet (starting or stopping) is waited for the same way.
    Returns True if this call spawned the daemon.

    Raises :class:`RootBusy` at once when the root's daemon (running or starting) uses
    another index dir; :class:`DaemonTimeout` after ``timeout`` seconds;
    :class:`DaemonError` (with the log's tail) if the spawned process exits with an error
    before answering.
    """
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        if probe():
            return False
        _check_owner(paths)
        spawn_lock = runtime.FileLock(paths.spawn_lock)
        if not spawn_lock.acquire(max(0.0, deadline - time.monotonic())):
            raise DaemonTimeout(
                f"another client has been starting the daemon for {paths.root} for {timeout:g} s ({paths.spawn_lock})"
            )
        try:
            if probe():
                return False
            if _check_owner(paths) is None and _spawn_and_wait(paths, list(args or []), deadline, timeout, probe):
                return True
        finally:
            spawn_lock.release()
        if time.monotonic() >= deadline:
            raise DaemonTimeout(
                f"the daemon for {paths.root} holds its lock but did not answer within {timeout:g} s (see {paths.log})"
            )
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, PROBE_MAX_DELAY)


def _spawn_and_wait(
    paths: runtime.Paths, args: list[str], deadline: float, timeout: float, probe: Callable[[], bool]
) -> bool:
    """Spawn ``daemon run`` and probe until it answers (True). False when it lost the race to
    a daemon started meanwhile (the caller then waits for that one). Raises as
    :func:`ensure_daemon`."""
    runtime.ensure_socket_dir()
    proc = runtime.spawn_daemon(paths, args)
    log_path = runtime.log_file_of(paths, args)
    threading.Thread(target=proc.wait, name="bsl-lens-reaper", daemon=True).start()
    delay = 0.01
    while True:
        if probe():
            return True
        rc = proc.poll()
        if rc is not None and not probe():
            if rc != runtime.EXIT_ALREADY_RUNNING:
                raise DaemonError(
                    f"the daemon for {paths.root} exited with code {rc} before answering; "
                    f"end of {log_path}:\n{runtime.tail(log_path)}"
                )
            # lost a race to a daemon started by hand
            if _check_owner(paths) is None and runtime.lock_is_held(paths.lock):  # the index dir is another root's
                raise DaemonError(
                    f"the daemon for {paths.root} could not start; end of {log_path}:\n{runtime.tail(log_path)}"
                )
            return False  # RootBusy above if it serves another index dir; else wait for that one
        if time.monotonic() >= deadline:
            raise DaemonTimeout(
                f"the daemon for {paths.root} (pid {proc.pid}) did not answer within {timeout:g} s; "
                f"end of {log_path}:\n{runtime.tail(log_path)}"
            )
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, PROBE_MAX_DELAY)


def connect(
    root: str | os.PathLike,
    *,
    index_dir: str | os.PathLike | None = None,
    spawn: bool = True,
    args: list[str] | None = None,
    timeout: float = SPAWN_TIMEOUT,
    request_timeout: float = REQUEST_TIMEOUT,
    connect_timeout: float = HELLO_TIMEOUT,
    client: str = "bsl-lens",
    subscribe: bool = False,
    on_notification: Notify | None = None,
) -> DaemonClient:
    """A :class:`DaemonClient` connected to the daemon for ``root``, spawning it if needed.

    ``index_dir``: as ``--index-dir`` (default: the pointer file's, else the per-root cache
    dir). ``args``: extra ``daemon run`` arguments for a spawned daemon (:func:`daemon_args`).
    ``timeout``: seconds to wait for a spawned daemon (default 30); ``request_timeout``: per
    request (default 120); ``connect_timeout``: connect + hello (default 10). ``spawn=False``:
    raise :class:`DaemonNotRunning` when none answers. ``client.spawned`` tells whether this
    call started it. A daemon serving the root from another index dir than the one given is
    a :class:`DaemonError` (one daemon per root). Other errors as :func:`ensure_daemon` and
    :meth:`DaemonClient.open`.
    """
    paths = runtime.paths_for(root, index_dir)
    kw = dict(
        client=client,
        subscribe=subscribe,
        on_notification=on_notification,
        timeout=request_timeout,
        connect_timeout=connect_timeout,
    )
    found: list[DaemonClient] = []

    def probe() -> bool:
        c = _try_open(paths, kw)
        if c is not None:
            found.append(c)
        return c is not None

    if probe():
        return found[0]
    if not spawn:
        _check_owner(paths)  # RootBusy when the root's daemon serves another index dir
        raise DaemonNotRunning(
            f"no bsl-lens daemon is running for {paths.root} (start it: bsl-lens daemon start {paths.root})"
        )
    spawned = ensure_daemon(paths, args=args, timeout=timeout, probe=probe)
    c = found[-1]
    c.spawned = spawned
    return c


async def connect_async(
    root: str | os.PathLike,
    *,
    index_dir: str | os.PathLike | None = None,
    spawn: bool = True,
    args: list[str] | None = None,
    timeout: float = SPAWN_TIMEOUT,
    request_timeout: float = REQUEST_TIMEOUT,
    connect_timeout: float = HELLO_TIMEOUT,
    client: str = "bsl-lens",
    subscribe: bool = False,
    on_notification: Notify | None = None,
) -> AsyncDaemonClient:
    """:func:`connect` for asyncio: an :class:`AsyncDaemonClient`. Spawning and waiting
    for the daemon run in a worker thread, so the event loop keeps running."""
    paths = runtime.paths_for(root, index_dir)
    kw = dict(
        client=client,
        subscribe=subscribe,
        on_notification=on_notification,
        timeout=request_timeout,
        connect_timeout=connect_timeout,
    )

    async def open_() -> AsyncDaemonClient:
        address = address_of(paths)
        if not address:
            raise DaemonNotRunning(f"no bsl-lens daemon is running for {paths.root}")
        try:
            c = await AsyncDaemonClient.open(address, token=runtime.read_token(paths), **kw)
        except CommandError as exc:
            if exc.code == VERSION_MISMATCH:
                raise DaemonError(exc.message) from exc
            raise
        try:
            _check_index_dir(paths, c.hello)
        except DaemonError:
            await c.close()
            raise
        return c

    try:
        return await open_()
    except DaemonNotRunning:
        if not spawn:
            _check_owner(paths)  # RootBusy when the root's daemon serves another index dir
            raise DaemonNotRunning(
                f"no bsl-lens daemon is running for {paths.root} (start it: bsl-lens daemon start {paths.root})"
            ) from None

    def probe() -> bool:
        c = _try_open(paths, dict(client=client, timeout=request_timeout, connect_timeout=connect_timeout))
        if c is None:
            return False
        c.close()
        return True

    spawned = await asyncio.to_thread(ensure_daemon, paths, args=args, timeout=timeout, probe=probe)
    c = await open_()
    c.spawned = spawned
    return c


def find_daemon(root: str | os.PathLike, index_dir: str | os.PathLike | None = None) -> runtime.DaemonState | None:
    """``daemon.json`` of the live daemon for ``root``, or None. Liveness is the lock, not
    the file: a state file without a lock holder is stale and ignored (not removed).
    Without ``index_dir``, the index dir of the daemon holding the root lock."""
    paths = runtime.paths_for(root, index_dir)
    if not runtime.lock_is_held(paths.lock):
        return None
    return runtime.read_state(paths)
