"""Connections to a running daemon: the blocking :class:`DaemonClient` (the CLI and tests) and
the asyncio :class:`AsyncDaemonClient` (the LSP and MCP front ends), past the ``hello`` handshake.

Both route responses by id; pushes (``progress``, ``indexed``, ``state``; only after
``subscribe=True``) go to ``on_notification(method, params)`` if given, else to a buffer.
Errors: :class:`DaemonError` ⊃ :class:`DaemonNotRunning` (no daemon, or the connection was
closed), :class:`DaemonTimeout`, :class:`ProtocolError` (garbage on the wire),
:class:`CommandError` (the daemon answered with an error; codes in :mod:`daemon.server.protocol`).
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
import time
from collections.abc import Callable
from typing import Any

import msgspec

from .. import __version__
from ..server.protocol import (
    PROTOCOL_VERSION,
    HelloParams,
    HelloResult,
    Message,
    decode_message,
    decode_raw,
    encode_request,
    result_type,
)

log = logging.getLogger(__name__)

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
        params = {
            "query": query,
            "mode": mode,
            "top_k": top_k,
            "filters": filters,
            "fresh_timeout": fresh_timeout or None,
        }
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
        params = {
            "query": query,
            "limit": limit,
            "filters": filters,
            "slim": slim,
            "fresh_timeout": fresh_timeout or None,
        }
        return self._typed("symbols", params, timeout)

    def get_chunk(self, chunk_id: str, *, timeout: float | None = None):
        """The ``daemon.contract.Chunk`` with this id; CommandError code -32001 if unknown."""
        return self._typed("get_chunk", {"chunk_id": chunk_id}, timeout)

    def get_method(
        self, name: str, path: str | None = None, *, fresh_timeout: float = 0.0, timeout: float | None = None
    ):
        """``daemon.contract.MethodInfo`` for ``"Модуль.Метод"`` (or ``name`` in ``path``);
        ``fresh_timeout`` as in :meth:`search`."""
        params = {"name": name, "path": path, "fresh_timeout": fresh_timeout or None}
        return self._typed("get_method", params, timeout)

    def read_module(self, path: str, start_line: int = 1, end_line: int | None = None, *, timeout: float | None = None):
        """``daemon.contract.ModuleText``: lines ``start_line..end_line`` (1-based, inclusive)."""
        return self._typed("read_module", {"path": path, "start_line": start_line, "end_line": end_line}, timeout)

    def read_document(self, path: str, heading: str | None = None, *, timeout: float | None = None):
        """``daemon.contract.DocumentText``: a docs page, or its section under ``heading``."""
        return self._typed("read_document", {"path": path, "heading": heading}, timeout)

    def doc_mentions(self, ids: list[str], *, timeout: float | None = None):
        """``{method chunk id: [daemon.contract.DocRef]}``: docs sections naming each method."""
        return self._typed("doc_mentions", {"ids": list(ids)}, timeout)

    def describe_object(self, name: str, *, fresh_timeout: float = 0.0, timeout: float | None = None):
        """``daemon.contract.ObjectDescription`` of ``"Справочник.Пользователи"``/``"Catalog.Users"``;
        ``fresh_timeout`` as in :meth:`search`."""
        params = {"name": name, "fresh_timeout": fresh_timeout or None}
        return self._typed("describe_object", params, timeout)

    def document_symbols(self, path: str, *, timeout: float | None = None):
        """``list[daemon.contract.Chunk]``: the chunks of one file, in file order."""
        return self._typed("document_symbols", {"path": path}, timeout)

    def references(
        self,
        name: str | None = None,
        *,
        target: str | None = None,
        path: str | None = None,
        line: int | None = None,
        character: int | None = None,
        limit: int = 100,
        possible: bool = False,
        locate: bool = False,
        context: bool = False,
        fresh_timeout: float = 0.0,
        timeout: float | None = None,
    ):
        """``daemon.contract.References``: who references the methods ``name`` (``Модуль.Метод``,
        a method name, a metadata object), ``target`` (a method id) or a position (``path``,
        0-based ``line`` and UTF-16 ``character``) stands for; at most ``limit`` listed,
        ``possible`` callers listed too, ``locate``: the callers' locations, ``context``: each
        reference's source line; ``fresh_timeout`` as in :meth:`search`."""
        params = dict(name=name, target=target, path=path, line=line, character=character, limit=limit)
        params.update({k: v for k, v in (("possible", possible), ("locate", locate), ("context", context)) if v})
        params["fresh_timeout"] = fresh_timeout or None
        return self._typed("references", params, timeout)

    def callees(
        self,
        name: str | None = None,
        *,
        target: str | None = None,
        path: str | None = None,
        line: int | None = None,
        character: int | None = None,
        locate: bool = False,
        context: bool = False,
        fresh_timeout: float = 0.0,
        timeout: float | None = None,
    ):
        """``daemon.contract.Callees``: what the method (as in :meth:`references`) references."""
        params = dict(name=name, target=target, path=path, line=line, character=character)
        params.update({k: v for k, v in (("locate", locate), ("context", context)) if v})
        params["fresh_timeout"] = fresh_timeout or None
        return self._typed("callees", params, timeout)

    def call_graph(
        self,
        name: str | None = None,
        *,
        target: str | None = None,
        path: str | None = None,
        line: int | None = None,
        character: int | None = None,
        direction: str = "callers",
        depth: int = 2,
        fan_out: int = 10,
        fresh_timeout: float = 0.0,
        timeout: float | None = None,
    ):
        """``daemon.contract.CallGraph``: callers or callees (``direction``) of the method, to
        ``depth`` levels, at most ``fan_out`` per node; ``methods``: where each method node is."""
        params = dict(name=name, target=target, path=path, line=line, character=character)
        params.update(direction=direction, depth=depth, fan_out=fan_out)
        params["fresh_timeout"] = fresh_timeout or None
        return self._typed("call_graph", params, timeout)

    def definition(self, path: str, line: int, character: int, *, timeout: float | None = None):
        """``daemon.contract.Definition``: the call or string naming a method at a position
        (0-based line, UTF-16 character) and where that method is."""
        return self._typed("definition", {"path": path, "line": line, "character": character}, timeout)

    def platform_help(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 5,
        kind: str | None = None,
        version: str | None = None,
        names_only: bool = False,
        timeout: float | None = None,
    ):
        """``daemon.contract.PlatformAnswer``: the platform help entries ``query`` names, else
        the ranked entries for it as a question (``names_only``: only named ones); ``kind``
        an entry kind, ``version`` an installed version or ``"bundled"`` (None: the chosen one)."""
        params = {"query": query, "mode": mode, "top_k": top_k, "kind": kind, "version": version}
        if names_only:
            params["names_only"] = True
        return self._typed("platform_help", params, timeout)

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
    """``params`` without its None values: an argument left at its default is not sent (a
    ``fresh_timeout`` of 0 is passed as None, so a daemon that predates it is still asked)."""
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
