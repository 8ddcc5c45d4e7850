"""One daemon connection per workspace folder, made in the background and re-made when lost.

A :class:`Root` is one workspace folder (an export root). :meth:`Root.start` starts its
connection supervisor (:class:`daemon.client.Supervisor`, shared with the MCP bridge),
which finds the folder's daemon or spawns it (with the folder's settings: index dir,
embedder, watch), subscribes to its pushes and re-makes a lost connection (the daemon
stopped, crashed or was restarted) with backoff (0.5 s doubling to 30 s), spawning again
when the settings allow it. The root keeps what is the editor's: messages and progress
bars, fed by the supervisor's hooks. Nothing here blocks the event loop: spawning runs in a worker thread
inside ``connect_async``.

Until a root is connected its :attr:`Root.client` is None and requests skip it, so
``workspace/symbol`` during warm-up answers from the folders that are ready (and from
whatever their daemons have indexed so far).

Progress: with a client that supports ``window.workDoneProgress`` each root shows
``$/progress`` work-done reports: "indexing <folder>" from the moment it starts
connecting until its daemon is connected and its first index is done (reports carry the
daemon's ``progress`` pushes: files chunked of total), and "embedding <folder>" while
the dense side fills (chunks embedded of total; ended after :data:`DENSE_QUIET_S` without
a push, and begun again when pushes resume).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Protocol

from lsprotocol import types

from daemon import notes
from daemon.client import AsyncDaemonClient, DaemonError, Supervisor, daemon_args

from . import convert
from .settings import Folder, Settings, index_dir_for

log = logging.getLogger(__name__)


class BslLensServer(Protocol):
    """What a :class:`Root` needs of the language server (``lsp.server.BslLensServer``):
    work-done progress, a message to the user and the ``initialized`` event. A protocol,
    so that this module does not import the server that imports it."""

    progress_supported: bool
    initialized_event: asyncio.Event

    @property
    def work_done_progress(self) -> Any: ...  # noqa: D102

    def new_progress_token(self) -> str: ...  # noqa: D102

    def notify_user(self, message: str, type_: types.MessageType = types.MessageType.Info) -> None: ...  # noqa: D102


#: An embedding progress bar ends after this many seconds without a push (the dense
#: thread pauses while the writer works, or the remaining chunks cannot be embedded).
DENSE_QUIET_S = 60.0
#: At most one ``report`` per bar this often (seconds); begin and end always go out.
REPORT_EVERY_S = 0.25


class ProgressBar:
    """One server-initiated work-done progress (``window/workDoneProgress/create`` then
    ``$/progress`` begin, reports, end). Methods are coroutines and must be called from
    one task at a time (a root's progress pump)."""

    def __init__(self, server: BslLensServer, title: str) -> None:
        self.server = server
        self.title = title
        self.token: str | None = None
        self._last = 0.0

    @property
    def active(self) -> bool:
        """True while the bar is shown (begun and not ended)."""
        return self.token is not None

    async def update(self, message: str, percentage: int | None = None, *, force: bool = False) -> None:
        """Begin the bar if needed, else report (throttled to :data:`REPORT_EVERY_S`
        unless ``force``)."""
        if not self.server.progress_supported:
            return
        pct = None if percentage is None else max(0, min(100, int(percentage)))
        if self.token is None:
            token = self.server.new_progress_token()
            try:
                await self.server.work_done_progress.create_async(token)
            except Exception as exc:  # the client refused or does not answer: no bar
                log.debug("window/workDoneProgress/create failed: %s", exc)
                return
            self.token = token
            self._last = time.monotonic()
            self.server.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title=self.title, message=message, percentage=pct, cancellable=False)
            )
            return
        now = time.monotonic()
        if not force and now - self._last < REPORT_EVERY_S:
            return
        self._last = now
        self.server.work_done_progress.report(self.token, types.WorkDoneProgressReport(message=message, percentage=pct))

    def end(self, message: str | None = None) -> None:
        """End the bar if it is shown."""
        if self.token is None:
            return
        token, self.token = self.token, None
        self.server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))


class Root:
    """One workspace folder and its daemon (see the module docstring).

    Attributes: ``folder`` (:class:`~lsp.settings.Folder`), ``settings`` (its
    :class:`~lsp.settings.Settings`), ``client`` (an ``AsyncDaemonClient`` while
    connected, else None), ``state`` (``starting`` | ``ready`` | ``unavailable`` |
    ``closed``), ``error`` (why the last connection attempt failed), ``daemon_state``
    (the daemon's own: ``loading`` | ``indexing`` | ``ready`` | ``stopping``).
    """

    def __init__(self, server: BslLensServer, folder: Folder, settings: Settings) -> None:
        self.server = server
        self.folder = folder
        self.settings = settings
        self.index_dir = index_dir_for(settings, folder)
        self.daemon_state = ""
        s = settings
        self.link = Supervisor(
            folder.path,
            index_dir=self.index_dir,
            spawn=s.spawn,
            args=daemon_args(
                embedder=s.embedder,
                watch=s.watch,
                reconcile_interval=s.reconcile_interval,
                shared_cache=s.shared_cache,
                shared_cache_mode=s.shared_cache_mode,
                docs=s.docs,
                platform_help=s.platform_help,
                platform_version=s.platform_version,
            ),
            spawn_timeout=s.spawn_timeout,
            request_timeout=s.request_timeout,
            client="lsp",
            subscribe=True,
            on_notification=self._on_push,
            on_connecting=lambda: self._events.put_nowait(("_connecting", None)),
            on_failed=self._on_failed,
            on_connected=self._on_connected,
            on_lost=lambda err: log.warning(
                "%s: connection to the daemon lost (%s); reconnecting", self.folder.path, err
            ),
        )
        self._pump: asyncio.Task | None = None
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        name = folder.name or folder.path
        self._index_bar = ProgressBar(server, f"bsl-lens: indexing {name}")
        self._dense_bar = ProgressBar(server, f"bsl-lens: embedding {name}")
        self._dense_seen = 0.0
        self._nfc_on_disk = False
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def client(self) -> AsyncDaemonClient | None:
        """The daemon connection while connected, else None."""
        return self.link.client

    @client.setter
    def client(self, value: AsyncDaemonClient | None) -> None:
        self.link.client = value

    @property
    def state(self) -> str:
        """``starting`` | ``ready`` | ``unavailable`` | ``closed``."""
        return "starting" if self.link.state == "idle" else self.link.state

    @property
    def error(self) -> str | None:
        """Why the last connection attempt failed (None after a success)."""
        return None if self.link.error is None else str(self.link.error)

    @property
    def connections(self) -> int:
        """Connections made so far (reconnects included)."""
        return self.link.connections

    @property
    def name(self) -> str:
        """The folder's display name (its path if the client gave none)."""
        return self.folder.name or self.folder.path

    def lock(self, method: str) -> asyncio.Lock:
        """The lock that keeps one ``method`` call at a time at this root's daemon (see
        ``BslLensServer._call``)."""
        lk = self._locks.get(method)
        if lk is None:
            lk = self._locks[method] = asyncio.Lock()
        return lk

    def uri_for(self, rel: str) -> str:
        """The URI of a daemon path in this folder (:func:`lsp.convert.file_uri`). Once one
        name that NFD would spell differently is found on disk as the daemon spells it
        (NFC), the folder's file system is known to keep names as given and later names are
        not checked (a property of the folder, not a cached answer)."""
        check = False
        if not self._nfc_on_disk and convert.needs_spelling_check(rel):
            if os.path.exists(os.path.join(self.folder.path, rel)):
                self._nfc_on_disk = True
            else:
                check = True
        return convert.file_uri(self.folder.uri, self.folder.path, rel, check_spelling=check)

    def start(self) -> None:
        """Start connecting in the background (call on the event loop)."""
        if self._pump is None:
            self.link.start()
            self._pump = asyncio.get_running_loop().create_task(
                self._progress_pump(), name=f"bsl-lens progress {self.name}"
            )

    def stop(self) -> None:
        """Stop reconnecting and end the progress bars (no more messages from this root)."""
        self.link.stop()
        if self._pump is not None:
            self._pump.cancel()
        self._index_bar.end()
        self._dense_bar.end()

    async def close(self) -> None:
        """:meth:`stop`, then close the connection (the daemon keeps running: other editors
        and the MCP bridge share it)."""
        self.stop()
        await self.link.close()

    # ------------------------------------------------------------------ connection
    def _on_failed(self, exc: BaseException, failures: int) -> None:
        if failures == 1:  # said once; the supervisor keeps retrying with a back-off
            log.error("no bsl-lens daemon for %s: %s (retrying)", self.folder.path, exc)
            self.server.notify_user(f"bsl-lens: no daemon for {self.name}: {exc}", types.MessageType.Error)
            self._events.put_nowait(("_failed", None))
        else:
            log.debug("still no daemon for %s: %s", self.folder.path, exc)

    def _on_connected(self, client: AsyncDaemonClient) -> None:
        h = client.hello
        log.info(
            "%s: %s daemon pid %s (index %s)",
            self.folder.path,
            "spawned" if client.spawned else "connected to",
            h.pid if h else "?",
            h.index_dir if h else "?",
        )
        asyncio.get_running_loop().create_task(self._first_status(client), name=f"bsl-lens status {self.name}")

    async def _first_status(self, client: AsyncDaemonClient) -> None:
        try:
            st = await client.status()
            self._events.put_nowait(("_status", st.service))
        except DaemonError as exc:
            log.warning("%s: status failed: %s", self.folder.path, exc)

    def _on_push(self, method: str, params: Any) -> None:
        """Daemon pushes (called on the loop by the client's reader; must not block)."""
        self._events.put_nowait((method, params))

    # ------------------------------------------------------------------ progress
    async def _progress_pump(self) -> None:
        """Turn the root's events into progress bars, in order (one task: bars are
        created with a request/response round trip)."""
        await self.server.initialized_event.wait()
        while True:
            timeout = None
            if self._dense_bar.active:
                timeout = max(0.1, DENSE_QUIET_S - (time.monotonic() - self._dense_seen))
            try:
                method, params = await asyncio.wait_for(self._events.get(), timeout)
            except asyncio.TimeoutError:
                self._dense_bar.end("paused")
                continue
            try:
                await self._on_event(method, params)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("progress event %s failed", method)

    async def _on_event(self, method: str, params: Any) -> None:
        p = params if isinstance(params, dict) else {}
        if method == "_connecting":
            await self._index_bar.update("starting the daemon" if self.settings.spawn else "waiting for the daemon")
        elif method == "_failed":
            self._index_bar.end("no daemon (retrying in the background; see the log)")
        elif method == "_status":
            await self._on_status(params)
        elif method == "state":
            await self._on_state(p.get("state", ""))
        elif method == "progress":
            await self._on_progress(p)
        elif method == "indexed" and self.daemon_state == "ready":
            self._index_bar.end()

    async def _on_status(self, st: Any) -> None:
        """A ``Status`` read on connecting: the bars for a first index or an embedding backlog."""
        self.daemon_state = st.state
        if st.state in ("loading", "indexing"):
            prog = st.progress or {}
            await self._index_bar.update(_stage_message(prog) or st.state, _pct(prog), force=True)
        else:
            await self._index_bar.update("ready", 100, force=True)
            self._index_bar.end(f"{st.modules} modules, {st.methods} methods")
        d = st.dense
        if d.enabled and d.total and d.done < d.total and d.pending:
            self._dense_seen = time.monotonic()
            await self._dense_bar.update(f"{d.done}/{d.total} chunks", 100 * d.done // d.total, force=True)

    async def _on_state(self, state: str) -> None:
        """The daemon's ``state`` push."""
        self.daemon_state = state
        if state == "ready":
            self._index_bar.end("ready")
        elif state == "stopping":
            self._index_bar.end("daemon stopping")
            self._dense_bar.end("daemon stopping")
        elif state in ("loading", "indexing"):
            await self._index_bar.update(state)

    async def _on_progress(self, p: dict) -> None:
        """The daemon's ``progress`` push: the embedding bar, or the index bar (a small job on a
        ready daemon shows none)."""
        stage, done, total = p.get("stage", ""), int(p.get("done") or 0), int(p.get("total") or 0)
        if stage in ("embed", "load_dense"):
            self._dense_seen = time.monotonic()
            if total and done < total:
                await self._dense_bar.update(f"{done}/{total} chunks", 100 * done // total)
            else:
                self._dense_bar.end(f"{done} chunks embedded")
        elif self.daemon_state != "ready" or total >= 200 or self._index_bar.active:
            await self._index_bar.update(_stage_message(p), _pct(p))

    def describe(self) -> dict:
        """The root as the ``bsl-lens.status`` command shows it (JSON)."""
        h = self.client.hello if self.client is not None else None
        return {
            "folder": self.folder.uri,
            "name": self.name,
            "path": self.folder.path,
            "indexDir": str(self.index_dir) if self.index_dir else (h.index_dir if h else None),
            "state": self.state,
            "error": self.error,
            "daemonPid": h.pid if h else None,
            "connections": self.connections,
        }


def _stage_message(p: dict) -> str:
    """A progress bar's message for the daemon's job (:func:`daemon.notes.progress_line`; the bar
    shows the percentage itself)."""
    if not p.get("stage"):
        return ""
    return notes.progress_line(str(p["stage"]), int(p.get("done") or 0), int(p.get("total") or 0), percent=False)


def _pct(p: dict) -> int | None:
    total = p.get("total") or 0
    return 100 * int(p.get("done") or 0) // int(total) if total else None


__all__ = ["ProgressBar", "Root"]
