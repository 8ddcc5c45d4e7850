"""Clients of the bsl-lens daemon: find it for an export root, spawn it if needed, talk to it.

* :func:`connect` / :func:`connect_async` return a :class:`DaemonClient` (blocking socket;
  the CLI and tests) or an :class:`AsyncDaemonClient` (asyncio streams; the LSP and MCP
  front ends), after the ``hello`` handshake. With ``spawn=True`` (the default) a missing
  daemon is started: under the root's ``spawn.lock`` (so two clients starting at once give
  one daemon, whatever their index dirs), as ``python -m daemon.cli daemon run ROOT ...`` in a new session, then polled
  with connect + ``hello`` (10 ms doubling to 0.5 s) until it answers, its process exits
  (:class:`DaemonError` with the tail of its log) or ``timeout`` passes
  (:class:`DaemonTimeout`). ``spawn=False`` raises :class:`DaemonNotRunning` instead.
* Both clients route responses by id; pushes (``progress``, ``indexed``, ``state``; only
  after ``subscribe=True``) go to ``on_notification(method, params)`` if given, else to a
  buffer (``notifications`` / :meth:`DaemonClient.wait_notification`).
* Errors: :class:`DaemonError` ⊃ :class:`DaemonNotRunning` (no daemon, or the connection was
  closed), :class:`DaemonTimeout`, :class:`ProtocolError` (garbage on the wire),
  :class:`CommandError` (the daemon answered with an error: ``method``, ``code``,
  ``message``, ``data``; codes in :mod:`daemon.server.protocol`).

The daemon is found without environment variables: the socket is
``/tmp/bsl-lens-<uid>/<key>.sock`` for the resolved root (see :mod:`daemon.server.runtime`).
Neither client is thread-safe; use one per thread (or one async client per event loop).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from . import __version__
from .server import runtime
from .server.protocol import (
    PROTOCOL_VERSION,
    VERSION_MISMATCH,
    HelloParams,
    HelloResult,
    Message,
    decode_message,
    decode_raw,
    encode_request,
    result_type,
)

log = logging.getLogger(__name__)

#: Default total time to wait for a spawned daemon to answer ``hello`` (seconds).
SPAWN_TIMEOUT = 30.0
#: Default time one request may take before :class:`DaemonTimeout` (seconds).
REQUEST_TIMEOUT = 120.0
#: Time to connect and get the ``hello`` reply from a running daemon (seconds).
HELLO_TIMEOUT = 10.0

Notify = Callable[[str, Any], None]


# ------------------------------------------------------------------------------ errors
class DaemonError(Exception):
    """Any failure to get an answer from the daemon."""


class DaemonNotRunning(DaemonError):
    """No daemon for this root (and spawning was not allowed), or it closed the connection."""


class DaemonTimeout(DaemonError):
    """The daemon did not answer (or a spawned one did not come up) in time."""


class ProtocolError(DaemonError):
    """The daemon sent something that is not a valid message (or an unexpected id)."""


class CommandError(DaemonError):
    """The daemon answered a request with an error.

    ``code`` is a JSON-RPC/bsl-lens code from :mod:`daemon.server.protocol` (e.g. -32602 invalid
    params, -32001 not found, -32002 version mismatch); ``data`` the error's data member
    (``{"method", "field"}`` for bad params, ``{"type", "traceback"}`` for internal errors).
    """

    def __init__(self, method: str, code: int, message: str, data: Any = None):
        super().__init__(f"{method}: {message} (code {code})")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


def _params(params: Any) -> Any:
    if params is None or isinstance(params, (dict, msgspec.Struct)):
        return params
    raise TypeError(f"params must be a dict or a msgspec Struct, not {type(params).__name__}")


def _result(method: str, msg: Message, type_: Any) -> Any:
    if msg.error is not None:
        raise CommandError(method, msg.error.code, msg.error.message, msg.error.data)
    try:
        return decode_raw(msg.result, type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProtocolError(f"{method}: cannot decode the result: {exc}") from exc


def _decode(line: bytes) -> Message:
    try:
        return decode_message(line)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ProtocolError(f"invalid message from the daemon: {exc}: {line[:200]!r}") from exc


def _hello_params(client: str, subscribe: bool, token: str) -> HelloParams:
    return HelloParams(protocol=PROTOCOL_VERSION, client=client, version=__version__, subscribe=subscribe, token=token)


# ------------------------------------------------------------------------------ typed calls
class _Methods:
    """The typed methods both clients share (``_typed`` is sync or async)."""

    def _typed(self, method: str, params: dict, timeout: float | None):  # pragma: no cover - abstract
        raise NotImplementedError

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 10,
        filters: Any = None,
        fresh_timeout: float = 0.0,
        timeout: float | None = None,
    ):
        """``SearchResult`` (daemon.engine) for ``query``; ``mode`` hybrid|lexical|vector,
        ``top_k`` 1..``contract.MAX_TOP_K``, ``filters`` a ``daemon.contract.Filters`` or dict; ``fresh_timeout``
        0..60 s: let the daemon first wait that long at most for the changes it noticed to be
        applied (the answer's ``stale`` says whether they were). Give ``timeout`` more than
        ``fresh_timeout``."""
        params = {"query": query, "mode": mode, "top_k": top_k, "filters": filters}
        if fresh_timeout:
            params["fresh_timeout"] = fresh_timeout
        return self._typed("search", params, timeout)

    def symbols(
        self,
        query: str,
        *,
        limit: int = 128,
        filters: Any = None,
        slim: bool = False,
        fresh_timeout: float = 0.0,
        timeout: float | None = None,
    ):
        """Names-first ``SearchResult`` (for workspace/symbol), at most ``limit`` hits;
        ``slim``: without snippets; ``fresh_timeout`` as in :meth:`search`."""
        params = {"query": query, "limit": limit, "filters": filters, "slim": slim}
        if fresh_timeout:
            params["fresh_timeout"] = fresh_timeout
        return self._typed("symbols", params, timeout)

    def get_chunk(self, chunk_id: str, *, timeout: float | None = None):
        """The ``daemon.contract.Chunk`` with this id; CommandError code -32001 if unknown."""
        return self._typed("get_chunk", {"chunk_id": chunk_id}, timeout)

    def get_method(self, name: str, path: str | None = None, *, timeout: float | None = None):
        """``daemon.contract.MethodInfo`` for ``"Модуль.Метод"`` (or ``name`` in ``path``)."""
        return self._typed("get_method", {"name": name, "path": path}, timeout)

    def read_module(self, path: str, start_line: int = 1, end_line: int | None = None, *, timeout: float | None = None):
        """``daemon.contract.ModuleText``: lines ``start_line..end_line`` (1-based, inclusive)."""
        return self._typed("read_module", {"path": path, "start_line": start_line, "end_line": end_line}, timeout)

    def read_document(self, path: str, heading: str | None = None, *, timeout: float | None = None):
        """``daemon.contract.DocumentText``: a docs page, or its section under ``heading``."""
        return self._typed("read_document", {"path": path, "heading": heading}, timeout)

    def doc_mentions(self, ids: list[str], *, timeout: float | None = None):
        """``{method chunk id: [daemon.contract.DocRef]}``: docs sections naming each method."""
        return self._typed("doc_mentions", {"ids": list(ids)}, timeout)

    def describe_object(self, name: str, *, timeout: float | None = None):
        """``daemon.contract.ObjectDescription`` of ``"Справочник.Пользователи"``/``"Catalog.Users"``."""
        return self._typed("describe_object", {"name": name}, timeout)

    def document_symbols(self, path: str, *, timeout: float | None = None):
        """``list[daemon.contract.Chunk]``: the chunks of one file, in file order."""
        return self._typed("document_symbols", {"path": path}, timeout)

    def status(self, *, timeout: float | None = None):
        """``StatusResult``: ``.daemon`` (pid, socket, uptime, ...) and ``.service``
        (a :class:`daemon.contract.Status`)."""
        return self._typed("status", {}, timeout)

    def reindex(self, *, full: bool = False, paths: list[str] | None = None, timeout: float | None = None):
        """Queue a re-check (``full``: the whole root; ``paths``: these files); returns at
        once (an ``Ack``). Progress arrives as pushes to subscribed connections."""
        return self._typed("reindex", {"full": full, "paths": paths}, timeout)

    def shutdown(self, *, timeout: float | None = None):
        """Ask the daemon to stop; the reply (``Ack``) comes once ``daemon.json`` is gone.
        The process then saves and exits: wait for the root lock (``paths.root_lock``) to be free."""
        return self._typed("shutdown", {}, timeout)


def _drop_none(params: dict) -> dict:
    return {k: v for k, v in params.items() if v is not None}


# ------------------------------------------------------------------------------ sync client
class DaemonClient(_Methods):
    """A blocking connection to a daemon (already past ``hello``; see :func:`connect`).

    ``hello`` is the daemon's :class:`~daemon.server.protocol.HelloResult`; ``spawned`` is True if
    :func:`connect` started the daemon. Pushes received while waiting for a response go to
    ``on_notification`` or, without one, to the ``notifications`` deque (oldest first,
    at most 10000 kept).
    """

    def __init__(self, sock: socket.socket, *, on_notification: Notify | None = None, timeout: float = REQUEST_TIMEOUT):
        self._sock = sock
        self._buf = bytearray()
        self._ids = itertools.count(1)
        self._abandoned: set[int] = set()
        self.timeout = timeout
        self.on_notification = on_notification
        self.notifications: collections.deque[tuple[str, Any]] = collections.deque(maxlen=10000)
        self.hello: HelloResult | None = None
        self.spawned = False
        self.address = ""

    # ---- construction
    @classmethod
    def open(
        cls,
        address: str | os.PathLike,
        *,
        client: str = "bsl-lens",
        subscribe: bool = False,
        token: str = "",
        on_notification: Notify | None = None,
        timeout: float = REQUEST_TIMEOUT,
        connect_timeout: float = HELLO_TIMEOUT,
    ) -> DaemonClient:
        """Connect to ``address`` (a Unix socket path or ``"tcp:host:port"``) and say hello.

        Raises :class:`DaemonNotRunning` if nothing listens there, :class:`DaemonTimeout`,
        :class:`CommandError` (code -32002 when the daemon speaks another protocol).
        """
        sock = _connect_socket(str(address), connect_timeout)
        self = cls(sock, on_notification=on_notification, timeout=timeout)
        self.address = str(address)
        try:
            self.hello = self.call(
                "hello", _hello_params(client, subscribe, token), result=HelloResult, timeout=connect_timeout
            )
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close the socket (idempotent)."""
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- calls
    def call(self, method: str, params: Any = None, *, result: Any = Any, timeout: float | None = None) -> Any:
        """Send one request and wait for its response, decoded into ``result`` (a type;
        ``Any`` gives plain JSON values). ``params``: dict, msgspec Struct or None.

        Raises :class:`CommandError` for an error reply, :class:`DaemonTimeout` after
        ``timeout`` seconds (default ``self.timeout``; the connection stays usable and the
        late reply is discarded), :class:`DaemonNotRunning` if the connection closes.
        """
        rid = next(self._ids)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        self._send(encode_request(rid, method, _params(params)), deadline)
        while True:
            try:
                msg = self._read(deadline)
            except DaemonTimeout:
                self._abandoned.add(rid)
                raise DaemonTimeout(
                    f"{method}: no answer from the daemon in {self.timeout if timeout is None else timeout:g} s"
                ) from None
            if msg.is_push:
                self._push(msg)
                continue
            if msg.id == rid:
                return _result(method, msg, result)
            if msg.id in self._abandoned:
                self._abandoned.discard(msg.id)
                continue
            if msg.id is None and msg.error is not None:  # the daemon could not read our id
                raise CommandError(method, msg.error.code, msg.error.message, msg.error.data)
            raise ProtocolError(f"{method}: response for unknown id {msg.id!r}")

    def _typed(self, method: str, params: dict, timeout: float | None):
        return self.call(method, _drop_none(params), result=result_type(method), timeout=timeout)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """True once the daemon has no queued work and the lexical index is fresh; False if
        ``timeout`` seconds (at most 3600) passed first. Blocks up to that long."""
        return self._typed("wait_idle", {"timeout": timeout}, timeout + HELLO_TIMEOUT).idle

    def wait_notification(self, timeout: float) -> tuple[str, Any]:
        """The next push as ``(method, params)``: from the buffer, else read up to
        ``timeout`` seconds (:class:`DaemonTimeout`). Only without ``on_notification``."""
        deadline = time.monotonic() + timeout
        while not self.notifications:
            msg = self._read(deadline)
            if msg.is_push:
                self._push(msg)
            elif msg.id in self._abandoned:
                self._abandoned.discard(msg.id)
            else:
                raise ProtocolError(f"unexpected response id {msg.id!r} while waiting for a push")
        return self.notifications.popleft()

    def _push(self, msg: Message) -> None:
        try:
            params = msgspec.json.decode(bytes(msg.params)) if len(msg.params) else None
        except msgspec.DecodeError as exc:
            raise ProtocolError(f"invalid push {msg.method}: {exc}") from exc
        if self.on_notification is not None:
            try:
                self.on_notification(msg.method, params)
            except Exception:
                log.exception("on_notification failed for %s", msg.method)
        else:
            self.notifications.append((msg.method, params))

    # ---- wire
    def _send(self, data: bytes, deadline: float) -> None:
        try:
            self._sock.settimeout(max(0.001, deadline - time.monotonic()))
            self._sock.sendall(data)
        except socket.timeout:
            raise DaemonTimeout("the daemon does not read its socket") from None
        except OSError as exc:
            raise DaemonNotRunning(f"connection to the daemon lost: {exc}") from exc

    def _read(self, deadline: float) -> Message:
        start = 0
        while True:
            nl = self._buf.find(b"\n", start)
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                if line.strip():
                    return _decode(line)
                start = 0
                continue
            start = len(self._buf)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DaemonTimeout("timed out")
            try:
                self._sock.settimeout(remaining)
                data = self._sock.recv(1 << 16)
            except socket.timeout:
                raise DaemonTimeout("timed out") from None
            except OSError as exc:
                raise DaemonNotRunning(f"connection to the daemon lost: {exc}") from exc
            if not data:
                raise DaemonNotRunning("the daemon closed the connection")
            self._buf += data


def _connect_socket(address: str, timeout: float) -> socket.socket:
    if address.startswith("tcp:"):
        host, port = address[4:].rsplit(":", 1)
        family, target = socket.AF_INET, (host, int(port))
    else:
        family, target = socket.AF_UNIX, address
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(target)
    except socket.timeout:
        sock.close()
        raise DaemonTimeout(f"connecting to {address} timed out") from None
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK, errno.ECONNRESET) or isinstance(
            exc, (FileNotFoundError, ConnectionRefusedError)
        ):
            raise DaemonNotRunning(f"no daemon listens on {address}") from exc
        raise DaemonError(f"cannot connect to {address}: {exc}") from exc
    return sock


# ------------------------------------------------------------------------------ async client
class AsyncDaemonClient(_Methods):
    """An asyncio connection to a daemon (past ``hello``; see :func:`connect_async`).

    A reader task routes responses to the waiting calls by id and pushes to
    ``on_notification`` (called on the loop; must not block) or, without one, to the
    ``notifications`` queue. Calls may run concurrently on one connection. When the
    connection drops, pending and later calls raise :class:`DaemonNotRunning`.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_notification: Notify | None = None,
        timeout: float = REQUEST_TIMEOUT,
    ):
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, Any, asyncio.Future]] = {}
        self._closed: DaemonError | None = None
        self.timeout = timeout
        self.on_notification = on_notification
        self.notifications: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.hello: HelloResult | None = None
        self.spawned = False
        self.address = ""
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(
        cls,
        address: str | os.PathLike,
        *,
        client: str = "bsl-lens",
        subscribe: bool = False,
        token: str = "",
        on_notification: Notify | None = None,
        timeout: float = REQUEST_TIMEOUT,
        connect_timeout: float = HELLO_TIMEOUT,
    ) -> AsyncDaemonClient:
        """Connect to ``address`` and say hello; errors as :meth:`DaemonClient.open`."""
        address = str(address)
        try:
            if address.startswith("tcp:"):
                host, port = address[4:].rsplit(":", 1)
                coro = asyncio.open_connection(host, int(port), limit=1 << 30)
            else:
                coro = asyncio.open_unix_connection(address, limit=1 << 30)
            reader, writer = await asyncio.wait_for(coro, connect_timeout)
        except asyncio.TimeoutError:
            raise DaemonTimeout(f"connecting to {address} timed out") from None
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonNotRunning(f"no daemon listens on {address}") from exc
        except OSError as exc:
            raise DaemonError(f"cannot connect to {address}: {exc}") from exc
        self = cls(reader, writer, on_notification=on_notification, timeout=timeout)
        self.address = address
        try:
            self.hello = await self.call(
                "hello", _hello_params(client, subscribe, token), result=HelloResult, timeout=connect_timeout
            )
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        """Close the connection and stop the reader task (idempotent)."""
        self._task.cancel()
        try:
            self._writer.close()
            await self._writer.wait_closed()
        except (OSError, RuntimeError):
            pass
        self._fail(DaemonNotRunning("connection closed"))

    @property
    def closed(self) -> bool:
        """True once the connection is gone (calls then raise :class:`DaemonNotRunning`)."""
        return self._closed is not None

    async def wait_closed(self) -> DaemonError:
        """Wait until the connection is gone (the daemon stopped, or :meth:`close`); returns
        the :class:`DaemonError` that ended it. For front ends that reconnect."""
        await asyncio.wait({self._task})
        return self._closed or DaemonNotRunning("connection closed")

    async def __aenter__(self) -> AsyncDaemonClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def call(self, method: str, params: Any = None, *, result: Any = Any, timeout: float | None = None) -> Any:
        """As :meth:`DaemonClient.call`, awaitable; several calls may be in flight."""
        if self._closed is not None:
            raise self._closed
        rid = next(self._ids)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[rid] = (method, result, fut)
        try:
            self._writer.write(encode_request(rid, method, _params(params)))
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._pending.pop(rid, None)
            raise DaemonNotRunning(f"connection to the daemon lost: {exc}") from exc
        t = self.timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(fut, t)
        except asyncio.TimeoutError:
            raise DaemonTimeout(f"{method}: no answer from the daemon in {t:g} s") from None
        finally:
            self._pending.pop(rid, None)

    async def _typed(self, method: str, params: dict, timeout: float | None):
        return await self.call(method, _drop_none(params), result=result_type(method), timeout=timeout)

    async def wait_idle(self, timeout: float = 30.0) -> bool:
        """As :meth:`DaemonClient.wait_idle`, awaitable."""
        res = await self._typed("wait_idle", {"timeout": timeout}, timeout + HELLO_TIMEOUT)
        return res.idle

    async def _read_loop(self) -> None:
        err: DaemonError = DaemonNotRunning("the daemon closed the connection")
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                msg = _decode(line)
                if msg.is_push:
                    try:
                        params = msgspec.json.decode(bytes(msg.params)) if len(msg.params) else None
                    except msgspec.DecodeError as exc:
                        raise ProtocolError(f"invalid push {msg.method}: {exc}") from exc
                    if self.on_notification is not None:
                        try:
                            self.on_notification(msg.method, params)
                        except Exception:
                            log.exception("on_notification failed for %s", msg.method)
                    else:
                        self.notifications.put_nowait((msg.method, params))
                    continue
                entry = self._pending.get(msg.id) if msg.id is not None else None
                if entry is None:
                    if msg.id is None and msg.error is not None and len(self._pending) == 1:
                        entry = next(iter(self._pending.values()))  # the daemon could not read our id
                    else:
                        continue  # a reply to a call that timed out
                method, type_, fut = entry
                if fut.done():
                    continue
                try:
                    fut.set_result(_result(method, msg, type_))
                except DaemonError as exc:
                    fut.set_exception(exc)
        except ProtocolError as exc:
            err = exc
        except (ConnectionError, OSError) as exc:
            err = DaemonNotRunning(f"connection to the daemon lost: {exc}")
        except asyncio.CancelledError:
            err = DaemonNotRunning("connection closed")
        finally:
            self._fail(err)

    def _fail(self, err: DaemonError) -> None:
        if self._closed is None:
            self._closed = err
        for _, _, fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()


# ------------------------------------------------------------------------------ discovery / spawn
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
) -> list[str]:
    """Extra ``daemon run`` arguments for a spawned daemon (None = the daemon's default):
    ``embedder`` spec or "none", ``watch`` mode, ``log_file``, ``verbose`` count,
    ``reconcile_interval`` in seconds (0 disables the periodic full re-check),
    ``shared_cache`` DSN and its mode (``rw``/``ro``; the DSN never reaches the spawned
    command line: :func:`daemon.server.runtime.spawn_daemon` moves it into the child's environment),
    ``docs``: documentation folders inside the root (``--docs``, :mod:`daemon.sources.docs`)."""
    args: list[str] = []
    for d in docs or ():
        args += ["--docs", str(d)]
    if embedder is not None:
        args += ["--embedder", embedder]
    if shared_cache:
        args += ["--shared-cache", shared_cache]
    if shared_cache_mode is not None:
        args += ["--shared-cache-mode", shared_cache_mode]
    if watch is not None:
        args += ["--watch", watch]
    if reconcile_interval is not None:
        args += ["--reconcile-interval", f"{reconcile_interval:g}"]
    if log_file is not None:
        args += ["--log-file", str(Path(log_file).resolve())]
    args += ["-v"] * verbose
    return args


def address_of(paths: runtime.Paths) -> str:
    """Where the daemon for ``paths`` listens: the socket path, or ``tcp:127.0.0.1:<port>``
    from ``daemon.json`` on Windows ("" when unknown)."""
    if runtime.WINDOWS:  # pragma: no cover
        st = runtime.read_state(paths)
        return f"tcp:127.0.0.1:{st.port}" if st and st.port else ""
    return str(paths.socket)


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
    with backoff (10 ms doubling to :data:`PROBE_MAX_DELAY`, 50 ms: a probe is one failed
    ``connect``, and a longer step would add up to its length to the warm start of a ~1.5 s
    daemon). A daemon that holds the root lock but does not answer yet (starting or
    stopping) is waited for the same way. Returns True if this call spawned the daemon.

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
            if _check_owner(paths) is None:
                runtime.ensure_socket_dir()
                proc = runtime.spawn_daemon(paths, list(args or []))
                log_path = runtime.log_file_of(paths, list(args or []))
                threading.Thread(target=proc.wait, name="bsl-lens-reaper", daemon=True).start()
                while True:
                    if probe():
                        return True
                    rc = proc.poll()
                    if rc is not None and not probe():
                        if rc == runtime.EXIT_ALREADY_RUNNING:  # lost a race to a daemon started by hand
                            if _check_owner(paths) is not None:  # RootBusy if it serves another index dir
                                break  # else wait for that one
                            if runtime.lock_is_held(paths.lock):  # the index dir is another root's
                                raise DaemonError(
                                    f"the daemon for {paths.root} could not start; end of {log_path}:\n{runtime.tail(log_path)}"
                                )
                            break
                        raise DaemonError(
                            f"the daemon for {paths.root} exited with code {rc} before answering; "
                            f"end of {log_path}:\n{runtime.tail(log_path)}"
                        )
                    if time.monotonic() >= deadline:
                        raise DaemonTimeout(
                            f"the daemon for {paths.root} (pid {proc.pid}) did not answer within {timeout:g} s; "
                            f"end of {log_path}:\n{runtime.tail(log_path)}"
                        )
                    time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                    delay = min(delay * 2, PROBE_MAX_DELAY)
        finally:
            spawn_lock.release()
        if time.monotonic() >= deadline:
            raise DaemonTimeout(
                f"the daemon for {paths.root} holds its lock but did not answer within {timeout:g} s (see {paths.log})"
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


__all__ = [
    "AsyncDaemonClient",
    "CommandError",
    "DaemonClient",
    "DaemonError",
    "DaemonNotRunning",
    "DaemonTimeout",
    "ProtocolError",
    "RootBusy",
    "connect",
    "connect_async",
    "daemon_args",
    "ensure_daemon",
    "find_daemon",
]


# ------------------------------------------------------------------------------ supervisor
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


# ------------------------------------------------------------------------------ stopping
class StopError(RuntimeError):
    """:func:`stop_daemon` could not stop the daemon, or refused to; the message says why
    and what to do."""


class Stopped(msgspec.Struct, frozen=True):
    """What :func:`stop_daemon` did: ``was_running`` False when no daemon held the root lock;
    ``pid`` of the stopped daemon (None when unknown)."""

    was_running: bool
    pid: int | None = None


def stop_daemon(paths: runtime.Paths, timeout: float, *, note: Callable[[str], None] | None = None) -> Stopped:
    """Stop the daemon of ``paths.root``, found by the root lock whatever index dir it uses:
    a ``shutdown`` request, then a wait of up to ``timeout`` seconds for the root lock to
    be free (which means the final save is done). If it does not answer (still starting,
    hung) or does not exit, SIGTERM (plus SIGCONT for a stopped process; 10 s) and then
    SIGKILL (5 s) the pid holding the root lock. Leftover files are removed afterwards.

    ``note`` receives a line for each step the user should see (no answer, a signal sent).
    Raises :class:`StopError` when ``paths.index_dir`` is not the daemon's (naming its
    own), when the root lock is held by another pid than the daemon's (no signal is sent),
    or when the pid still holds the lock after SIGKILL.
    """
    import signal

    say = note or (lambda text: None)
    owner = runtime.root_owner(paths)
    if owner is None:
        runtime.clean_stale(paths)
        return Stopped(was_running=False)
    if owner.index_dir and owner.index_dir != str(paths.index_dir):
        raise StopError(
            f"the daemon for {paths.root} (pid {owner.pid or '?'}) uses the index dir {owner.index_dir}, "
            f"not {paths.index_dir}; not stopping it. Stop it with: bsl-lens daemon stop {paths.root} --index-dir {owner.index_dir}"
        )
    pid = owner.pid or None
    asked = False
    try:
        with connect(
            paths.root, index_dir=paths.index_dir, spawn=False, request_timeout=10.0, connect_timeout=5.0, client="cli"
        ) as c:
            pid = c.hello.pid
            c.shutdown()
            asked = True
    except DaemonError as exc:
        say(f"the daemon does not answer ({exc}); stopping it by signal")
    if not asked or not runtime.wait_lock_free(paths.root_lock, timeout):
        holder = runtime.lock_holder(paths.root_lock)
        if holder is None and not runtime.lock_is_held(paths.root_lock):
            pass  # it exited meanwhile
        elif pid is None or holder != pid:
            raise StopError(
                f"{paths.root_lock} is held by pid {holder or '?'}, not by the daemon's pid {pid or '?'}; not sending signals"
            )
        else:
            for sig, wait in ((signal.SIGTERM, 10.0), (getattr(signal, "SIGKILL", signal.SIGTERM), 5.0)):
                if runtime.lock_holder(paths.root_lock) != pid:
                    break
                say(f"sending {sig.name} to pid {pid}")
                try:
                    os.kill(pid, sig)
                    if sig == signal.SIGTERM and hasattr(signal, "SIGCONT"):
                        os.kill(pid, signal.SIGCONT)  # a stopped (Ctrl-Z) daemon must run to handle it
                except ProcessLookupError:
                    break
                if runtime.wait_lock_free(paths.root_lock, wait):
                    break
            if runtime.lock_is_held(paths.root_lock):
                raise StopError(f"pid {pid} still holds {paths.root_lock}")
    runtime.clean_stale(paths)
    return Stopped(was_running=True, pid=pid)
