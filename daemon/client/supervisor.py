"""One root's daemon connection kept in the background for a long-lived front end."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

from ..server import runtime
from .connection import REQUEST_TIMEOUT, AsyncDaemonClient, DaemonError, Notify
from .spawn import SPAWN_TIMEOUT, connect_async

#: :class:`Supervisor` retries: first after this many seconds, doubling up to :data:`RETRY_MAX_S`.
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0


class Supervisor:
    """One root's daemon connection, kept in the background for a long-lived front end
    (the LSP server per workspace folder, the MCP bridge per served root).

    :meth:`start` connects (spawning the daemon if ``spawn``; :func:`connect_async`) in a
    task, so the front end answers its own client at once however cold the daemon is.
    With ``retry`` a failed attempt is retried after :data:`RETRY_FIRST_S` seconds,
    doubling up to :data:`RETRY_MAX_S`; without it the attempt ends and the next
    :meth:`start` tries again. With ``reconnect`` a connection that drops (the daemon was
    stopped or killed) is re-established at once, spawning a new daemon like any client
    does; without it the front end calls :meth:`drop` when a call finds it gone. Without
    ``index_dir``, a daemon spawned after one was served keeps the index dir of the one
    served (a clean stop removes the root's pointer file, and the default cache dir would
    mean a first index and a full re-embedding); while another daemon holds the root, that
    one is used whatever its index dir.

    The front end keeps what is its own (progress bars, messages, error mapping) in the
    hooks, all called on the loop and none may block:

    * ``on_connecting()``: an attempt begins (not for each retry of a failing one);
    * ``on_failed(exc, failures)``: an attempt failed (``failures`` in a row, from 1);
    * ``on_connected(client)``: connected (``client.spawned``: this attempt spawned it);
    * ``on_lost(err)``: a connection dropped (``err``: the :class:`DaemonError` that ended it).

    Attributes: ``client`` (while connected, else None), ``state`` (``idle`` |
    ``starting`` | ``ready`` | ``unavailable`` | ``closed``), ``error`` (the last failed
    attempt's exception, None after a success), ``since`` (monotonic start of the current
    attempt), ``failed_at`` (monotonic time of the last failure), ``connections`` (made
    so far). Other arguments as :func:`connect_async`.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        index_dir: str | os.PathLike | None = None,
        spawn: bool = True,
        args: list[str] | None = None,
        spawn_timeout: float = SPAWN_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
        client: str = "bsl-lens",
        subscribe: bool = False,
        on_notification: Notify | None = None,
        retry: bool = True,
        reconnect: bool = True,
        on_connecting: Callable[[], None] | None = None,
        on_failed: Callable[[BaseException, int], None] | None = None,
        on_connected: Callable[[AsyncDaemonClient], None] | None = None,
        on_lost: Callable[[DaemonError], None] | None = None,
    ) -> None:
        self.root = root
        self.index_dir = index_dir
        self.spawn = spawn
        self.args = list(args or [])
        self.spawn_timeout = spawn_timeout
        self.request_timeout = request_timeout
        self.client_name = client
        self.subscribe = subscribe
        self.on_notification = on_notification
        self.retry = retry
        self.reconnect = reconnect
        self._hooks = (on_connecting, on_failed, on_connected, on_lost)
        self.client: AsyncDaemonClient | None = None
        self.state = "idle"
        self.error: BaseException | None = None
        self.since: float | None = None
        self.failed_at = 0.0
        self.connections = 0
        self.served_index_dir: str | None = None  # the index dir of the last daemon connected to
        self._task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        """True while the background task runs (connecting, retrying or watching a connection)."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Begin connecting in the background; no-op while connected or while the task runs,
        and after :meth:`close`. Call on the event loop."""
        if self.state == "closed" or self.client is not None or self.running:
            return
        self.since = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"bsl-lens-{self.client_name}-connect")

    async def wait(self, timeout: float) -> AsyncDaemonClient | None:
        """The client, waiting at most ``timeout`` seconds for the running attempt (which is
        never cancelled by the wait); None if there is none yet."""
        task = self._task
        if self.client is None and task is not None and not task.done() and timeout > 0:
            deadline = time.monotonic() + timeout
            while self.client is None and not task.done():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                await asyncio.wait({task}, timeout=min(left, 0.05))  # a retrying task runs on: poll the client
        return self.client

    async def drop(self) -> None:
        """Forget a connection that failed (the next :meth:`start` reconnects)."""
        c, self.client = self.client, None
        if c is not None:
            await c.close()
        if self.state == "ready":
            self.state = "starting"

    def stop(self) -> None:
        """Stop connecting and reconnecting for good (the connection, if any, stays open
        until :meth:`close`)."""
        self.state = "closed"
        if self._task is not None:
            self._task.cancel()

    async def close(self, *, for_good: bool = True) -> None:
        """Stop the background task (waiting for it to end) and close the connection; the
        daemon keeps running (other clients share it). ``for_good``: no :meth:`start` after
        this (:meth:`stop`); else the supervisor is ``idle`` again and may be started anew."""
        task = self._task
        if for_good:
            self.stop()
        elif task is not None:
            task.cancel()
        if task is not None and not task.done():
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        c, self.client = self.client, None
        if c is not None:
            await c.close()
        if not for_good:
            self._task = None
            self.state = "idle"

    def _connect_index_dir(self) -> str | os.PathLike | None:
        """``index_dir`` for the next attempt: the one given; else, when no daemon holds the
        root (it was stopped), the served daemon's (:attr:`served_index_dir`), so a respawn
        does not start over in the default cache dir; else None (the running daemon's)."""
        if self.index_dir is not None or self.served_index_dir is None:
            return self.index_dir
        if runtime.lock_is_held(runtime.paths_for(self.root).root_lock):
            return None
        return self.served_index_dir

    def _hook(self, i: int, *a: Any) -> None:
        fn = self._hooks[i]
        if fn is not None:
            fn(*a)

    async def _run(self) -> None:
        delay = RETRY_FIRST_S
        failures = 0
        while True:
            if failures == 0:
                self.state = "starting"
                self._hook(0)
            try:
                c = await connect_async(
                    self.root,
                    index_dir=self._connect_index_dir(),
                    spawn=self.spawn,
                    args=self.args,
                    timeout=self.spawn_timeout,
                    request_timeout=self.request_timeout,
                    client=self.client_name,
                    subscribe=self.subscribe,
                    on_notification=self.on_notification,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # DaemonError, or OSError/ValueError from spawning (unwritable index dir, ...)
                failures += 1
                self.state = "unavailable"
                self.error = exc
                self.failed_at = time.monotonic()
                self._hook(1, exc, failures)
                if not self.retry:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            if self.state == "closed":  # stopped while connecting
                await c.close()
                return
            failures = 0
            delay = RETRY_FIRST_S
            self.connections += 1
            if c.hello is not None and c.hello.index_dir:
                self.served_index_dir = c.hello.index_dir
            self.client = c
            self.state = "ready"
            self.error = None
            self._hook(2, c)
            if not self.reconnect:
                return
            err = await c.wait_closed()
            if self.client is c:
                self.client = None
            if self.state == "closed":
                return
            self.state = "starting"
            self._hook(3, err)
            await asyncio.sleep(0.1)
            self.since = time.monotonic()
