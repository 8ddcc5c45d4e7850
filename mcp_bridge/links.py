"""The bridge's side of the daemon: one :class:`RootLink` per served export root.

A link connects to (or spawns) the root's daemon in a background task, so the MCP server
answers ``initialize`` at once however cold the daemon is. Tool calls ask the link for a
client with a bounded wait (:data:`CONNECT_WAIT`): a daemon that is not answering yet
yields ``None`` ("starting", the tools then answer as warming), one that could not start
raises :class:`mcp.MCPError` (a problem for the host, not the model). A connection that
drops (the daemon was stopped or killed) is re-established on the next call, spawning a
new daemon like any client does. The connecting itself is :class:`daemon.client.Supervisor`
(one attempt per :meth:`RootLink.start`, no background reconnect: the next call notices).

Nothing here prints; everything goes to the ``mcp_bridge.links`` logger (stderr).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from mcp import MCPError
from mcp_types import INTERNAL_ERROR

from daemon.server import runtime
from daemon.client import AsyncDaemonClient, DaemonNotRunning, Supervisor

log = logging.getLogger(__name__)

#: Longest a tool call waits for a daemon that is still starting before it answers as
#: warming (seconds): longer than a warm daemon takes to load its snapshot.
CONNECT_WAIT = 5.0
#: Longest a spawned daemon may take to answer ``hello`` before the link fails (seconds).
SPAWN_TIMEOUT = 120.0
#: Longest one daemon request may take (seconds); a search takes milliseconds.
REQUEST_TIMEOUT = 60.0
#: After a failed start, calls within this many seconds get the same error without a new
#: attempt; a later call tries again (the host may have fixed the cause).
RETRY_AFTER = 5.0
#: ``status`` answers are reused for this long (seconds): tools ask for it on every call.
STATUS_TTL = 1.0

T = TypeVar("T")


class Starting(Exception):
    """The daemon does not answer yet (spawned or still loading its snapshot)."""

    def __init__(self, link: RootLink):
        waited = time.monotonic() - link.since if link.since is not None else 0.0
        super().__init__(
            f"the bsl-lens daemon for {link.name} ({link.root}) is still starting ({waited:.0f} s so far); "
            "nothing can be looked up yet: call again in a few seconds (index_status shows progress)"
        )


class RootLink:
    """One export root served by the bridge and its daemon connection.

    Args:
        root: the export root (resolved here, as the daemon identifies it).
        name: the short name tools accept as ``root=`` (unique among the served roots).
        index_dir: the daemon's index dir (None: the root's pointer file, else the per-user
            cache dir; see :func:`daemon.server.runtime.paths_for`).
        spawn_args: extra ``daemon run`` arguments if this link has to start the daemon
            (:func:`daemon.client.daemon_args`); a daemon already running is used as it is.
        spawn_timeout: seconds a spawned daemon may take to answer.
    """

    def __init__(
        self,
        root: str | os.PathLike,
        name: str,
        *,
        index_dir: str | os.PathLike | None = None,
        spawn_args: list[str] | None = None,
        spawn_timeout: float = SPAWN_TIMEOUT,
    ) -> None:
        self.root = runtime.resolve_root(root)
        self.name = name
        self.index_dir = Path(index_dir).expanduser().resolve() if index_dir else None
        self.spawn_args = list(spawn_args or [])
        self.spawn_timeout = spawn_timeout
        self.spawned = False
        self.link = Supervisor(
            self.root,
            index_dir=self.index_dir,
            spawn=True,
            args=self.spawn_args,
            spawn_timeout=spawn_timeout,
            request_timeout=REQUEST_TIMEOUT,
            client="mcp",
            retry=False,  # a failed start is reported to the host; a later call tries again (RETRY_AFTER)
            reconnect=False,  # a dropped connection is noticed and re-made by the next call
            on_failed=lambda exc, _n: log.error("the bsl-lens daemon for %s could not be reached: %s", self.root, exc),
            on_connected=self._on_connected,
        )
        self._status: Any = None
        self._status_at = 0.0

    @property
    def client(self) -> AsyncDaemonClient | None:
        """The daemon connection while connected, else None."""
        return self.link.client

    @property
    def error(self) -> BaseException | None:
        """Why the last connection attempt failed (None after a success)."""
        return self.link.error

    @property
    def since(self) -> float | None:
        """Monotonic start of the current (or last) connection attempt."""
        return self.link.since

    def __repr__(self) -> str:
        state = "connected" if self.client else "failed" if self.error else "starting" if self.link.running else "idle"
        return f"<RootLink {self.name} {self.root} {state}>"

    # ------------------------------------------------------------------ connecting
    def start(self) -> None:
        """Begin connecting (spawning the daemon if needed) in the background; no-op while a
        connection exists or an attempt is running. Call from the event loop."""
        if self.client is None and not self.link.running:
            self.link.error = None  # a new attempt: "starting" until it ends
        self.link.start()

    def _on_connected(self, c: AsyncDaemonClient) -> None:
        self.spawned = c.spawned
        self._status = None  # a new connection (perhaps a new daemon): the cached status is not its
        log.info(
            "%s daemon for %s: pid %s (%.2f s)",
            "spawned" if c.spawned else "connected to the",
            self.root,
            c.hello.pid if c.hello else "?",
            time.monotonic() - (self.since or time.monotonic()),
        )

    def host_error(self) -> MCPError:
        """The protocol error for a daemon that could not be started or reached."""
        exc = self.error
        paths = runtime.paths_for(self.root, self.index_dir)
        return MCPError(
            code=INTERNAL_ERROR,
            message=f"bsl-lens: the daemon for {self.root} is not available: {exc} (daemon log: {paths.log})",
            data={"root": str(self.root), "type": type(exc).__name__ if exc else None},
        )

    async def get(self, wait: float = CONNECT_WAIT) -> AsyncDaemonClient | None:
        """The connected client, waiting at most ``wait`` seconds for a starting daemon.

        Returns None if it is still starting after that. Raises :class:`mcp.MCPError` if
        the daemon could not be started or reached (retried after :data:`RETRY_AFTER` s).
        """
        if self.client is not None:
            return self.client
        if self.error is not None and not self.link.running:
            if time.monotonic() - self.link.failed_at < RETRY_AFTER:
                raise self.host_error()
        self.start()
        client = await self.link.wait(wait)  # never cancels the attempt
        if client is not None:
            return client
        if self.error is not None and not self.link.running:
            raise self.host_error()
        return None

    async def drop(self) -> None:
        """Forget a connection that failed (the next :meth:`get` reconnects)."""
        self._status = None
        await self.link.drop()

    async def call(self, fn: Callable[[AsyncDaemonClient], Awaitable[T]], *, wait: float = CONNECT_WAIT) -> T:
        """``await fn(client)``; if the connection turns out to be lost, reconnect (bounded
        by ``wait``) and try once more. Raises :class:`Starting` when no daemon answers
        within ``wait``; :class:`mcp.MCPError` when it cannot be started; the daemon's
        errors (:class:`daemon.client.CommandError`, ``DaemonTimeout``) as they come."""
        for attempt in (1, 2):
            client = await self.get(wait)
            if client is None:
                raise Starting(self)
            try:
                return await fn(client)
            except DaemonNotRunning:
                log.warning("lost the connection to the daemon for %s; reconnecting", self.root)
                await self.drop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def status(self, *, wait: float = CONNECT_WAIT, fresh: bool = False):
        """The daemon's ``StatusResult`` (``.service`` is a :class:`daemon.contract.Status`).
        A settled answer (ready, embeddings complete) is reused for :data:`STATUS_TTL`
        seconds unless ``fresh``; a warming one is always asked again, so a tool never
        reports warming after the index is done. Errors as :meth:`call`."""
        now = time.monotonic()
        if (
            not fresh
            and self._status is not None
            and now - self._status_at < STATUS_TTL
            and _settled(self._status.service)
        ):
            return self._status
        res = await self.call(lambda c: c.status(), wait=wait)
        self._status, self._status_at = res, time.monotonic()
        return res

    async def aclose(self) -> None:
        """Stop a running attempt and close the connection (the daemon keeps running: it
        is shared with other clients and stops with ``bsl-lens daemon stop``)."""
        self._status = None
        await self.link.close(for_good=False)


class Bridge:
    """What the MCP server's lifespan yields: the served roots and how long tools wait for a daemon."""

    def __init__(self, links: list[RootLink], connect_wait: float = CONNECT_WAIT) -> None:
        if not links:
            raise ValueError("the bridge needs at least one export root")
        self.links = links
        self.connect_wait = connect_wait

    def pick(self, root: str | None) -> RootLink:
        """The link for a tool's ``root`` argument: a root name, its path, or None when only one
        root is served. ``ToolError`` listing the valid roots otherwise."""
        from mcp.server.mcpserver.exceptions import ToolError

        valid = ", ".join(repr(link.name) for link in self.links)
        if root is None or not root.strip():
            if len(self.links) == 1:
                return self.links[0]
            raise ToolError(f"several export roots are served here; pass root= one of {valid}")
        want = root.strip()
        for link in self.links:
            if want == link.name or want.casefold() == link.name.casefold():
                return link
        try:
            path = runtime.resolve_root(want)
        except (OSError, RuntimeError, ValueError):
            path = None
        for link in self.links:
            if path == link.root:
                return link
        raise ToolError(f"unknown root {root!r}; valid roots: {valid} (a name or the root's path)")

    def start(self) -> None:
        """Start connecting every link (from the event loop)."""
        for link in self.links:
            link.start()

    async def aclose(self) -> None:
        """Close every connection."""
        await asyncio.gather(*(link.aclose() for link in self.links), return_exceptions=True)


def _settled(st) -> bool:
    """A status that will not change by itself: ready, embeddings (if any) complete."""
    return st is not None and st.state == "ready" and not (st.dense.enabled and st.dense.done < st.dense.total)


# ------------------------------------------------------------------------------ roots
def root_names(roots: list[Path]) -> list[str]:
    """Short unique names for resolved roots: the folder name, or ``parent/folder`` when two
    roots share a folder name (``#2`` appended if still equal)."""
    base = [r.name or str(r) for r in roots]
    names = [
        (f"{r.parent.name}/{r.name}" if r.parent.name else str(r)) if base.count(base[i]) > 1 else base[i]
        for i, r in enumerate(roots)
    ]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        seen[n] = seen.get(n, 0) + 1
        if seen[n] > 1:
            names[i] = f"{n}#{seen[n]}"
    return names
