"""The daemon process: an asyncio server on a Unix socket around one :class:`Service`.

:func:`run_daemon` is the whole life of a daemon (``bsl-lens daemon run``): take the
root lock, then ``daemon.lock`` (or report the daemon that holds them and exit at once),
remove a killed daemon's leftovers, load the snapshot, listen and answer from it, write
``daemon.json`` and the pointer (the watcher is armed and the disk reconciled in the
background meanwhile), serve until ``shutdown``/SIGTERM/SIGINT, then unlink the state, tell
the service to stop (a reconcile in flight is dropped), close it (final save) and release
the locks, in that order, so ``daemon stop`` returning means the index is saved.

:class:`Server` speaks :mod:`daemon.server.protocol` to any number of connections at once. Each
request runs as its own task; service calls run on a small thread pool (``max_workers``,
default 8) so a slow search never blocks ``status`` or another client. A bad request gets
an error reply and the connection stays usable (except an oversized line, after which it
is closed); an exception inside the service becomes :data:`~daemon.server.protocol.INTERNAL_ERROR`
with the exception type and message, logged with its traceback. Nothing here prints:
everything goes to the ``daemon.server.server`` logger, configured by ``daemon.cli.main``.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec

from .. import __version__
from . import runtime
from ..contract import DEFAULT_EMBEDDER, DEFAULT_WATCH, NO_EMBEDDER, clip_echoes
from ..options import embedder_or_none
from .protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_REQUEST_BYTES,
    METHOD_NOT_FOUND,
    METHODS,
    NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSION,
    REQUEST_TOO_LARGE,
    SHUTTING_DOWN,
    VERSION_MISMATCH,
    Ack,
    DaemonInfo,
    HelloParams,
    HelloResult,
    StatusResult,
    WaitIdleResult,
    decode_message,
    decode_raw,
    encode_error,
    encode_push,
    encode_result,
    field_of,
)

log = logging.getLogger(__name__)

#: Pushes queued for one connection beyond which further pushes to it are dropped (a
#: subscriber that does not read must not grow the daemon's memory).
MAX_QUEUED_PUSHES = 1000
#: After an oversized line, how much more of it the server reads and discards (bytes) so
#: the client's send completes and it can read the error reply.
DISCARD_LIMIT = 64 << 20


EXIT_ALREADY_RUNNING = runtime.EXIT_ALREADY_RUNNING


class AlreadyRunning(Exception):
    """Another process holds this root's lock (``owner``: its pid, index dir, phase; None
    if it let go meanwhile), or the index dir's ``daemon.lock`` (``message`` says so)."""

    def __init__(self, paths: runtime.Paths, owner: runtime.RootOwner | None, message: str | None = None):
        self.paths = paths
        self.owner = owner
        if message is None:
            pid = owner.pid if owner and owner.pid else "?"
            idx = owner.index_dir if owner and owner.index_dir else "?"
            message = (
                f"a daemon for {paths.root} is already running (pid {pid}, index dir {idx}); "
                f"stop it with: bsl-lens daemon stop {paths.root}"
            )
        super().__init__(message)


class _Workers:
    """A fixed pool of daemon threads (``ThreadPoolExecutor`` threads are joined at exit, so
    one stuck service call would keep a stopped daemon alive)."""

    def __init__(self, n: int, name: str):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        for i in range(n):
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True).start()

    def _work(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fut, fn, arg = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(arg))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                fut.set_exception(exc)

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Future:
        fut: Future = Future()
        if self._closed:
            fut.set_exception(RuntimeError("cannot schedule new futures after shutdown"))
        else:
            self._q.put((fut, fn, arg))
        return fut

    def shutdown(self) -> None:
        self._closed = True
        while True:  # fail what is still queued, then stop the threads as they come free
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in range(64):
            self._q.put(None)


def _clipped(message: str, params: Any) -> str:
    """An error message about ``params`` (a params struct) with long echoes of its strings (and of
    its filters' and lists' strings) cut (:func:`daemon.contract.clip_echoes`)."""
    values: list[Any] = []
    todo = [params]
    while todo:
        s = todo.pop()
        for v in msgspec.structs.astuple(s) if isinstance(s, msgspec.Struct) else ():
            if isinstance(v, msgspec.Struct):
                todo.append(v)
            elif isinstance(v, list | tuple):
                values.extend(v)
            else:
                values.append(v)
    return clip_echoes(message, values)


def _in_thread(fn: Callable[[Any], Any], arg: Any) -> Future:
    """Run ``fn(arg)`` on a new daemon thread (for calls that may block for long)."""
    fut: Future = Future()

    def run() -> None:
        if fut.set_running_or_notify_cancel():
            try:
                fut.set_result(fn(arg))
            except BaseException as exc:  # noqa: BLE001
                fut.set_exception(exc)

    threading.Thread(target=run, name="bsl-lens-wait", daemon=True).start()
    return fut


#: Per connection: requests running at once, and answers waiting to be written, before the
#: daemon stops reading that connection (see Server._on_connect).
MAX_INFLIGHT = 16
MAX_QUEUED = 64


class _Conn:
    """One client connection: an outbound queue drained by a writer task."""

    def __init__(self, num: int, writer: asyncio.StreamWriter):
        self.num = num
        self.writer = writer
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.greeted = False
        self.subscribed = False
        self.client = "?"
        self.closed = False
        self.dropped_pushes = 0
        self.tasks: set[asyncio.Task] = set()
        self.pump_task: asyncio.Task | None = None

    def send(self, line: bytes, *, push: bool = False) -> None:
        if self.closed:
            return
        if push and self.queue.qsize() >= MAX_QUEUED_PUSHES:
            self.dropped_pushes += 1
            if self.dropped_pushes == 1:
                log.warning("connection %d (%s) does not read its pushes; dropping them", self.num, self.client)
            return
        self.queue.put_nowait(line)

    async def pump(self) -> None:
        try:
            while True:
                line = await self.queue.get()
                if line is None:
                    break
                self.writer.write(line)
                await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            log.debug("connection %d: write failed: %s", self.num, exc)
        finally:
            self.closed = True

    async def close(self, timeout: float = 5.0) -> None:
        """Flush what is queued (up to ``timeout`` s), then close the socket."""
        if not self.closed:
            self.queue.put_nowait(None)
        self.closed = True
        if self.pump_task is not None:
            try:
                await asyncio.wait_for(self.pump_task, timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self.pump_task.cancel()
        try:
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), 1.0)
        except (ConnectionError, OSError, asyncio.TimeoutError):
            pass


class Server:
    """JSON-RPC-over-NDJSON front of one :class:`daemon.service.service.Service`.

    ``info`` describes the daemon for ``hello``/``status`` (its ``pid``, ``root``,
    ``index_dir``, ``socket``, ``log``, ``started_at``). ``on_stop`` runs once, on the
    event loop, when a shutdown is requested and before the ``shutdown`` reply is sent
    (``run_daemon`` unlinks ``daemon.json`` there, like dmypy, so a client never sees
    the state file of a dying daemon). ``token``: required in ``hello`` when non-empty
    (Windows TCP). Command handlers are the ``cmd_<method>`` methods; they run on the pool
    and may be called directly in tests.
    """

    def __init__(
        self,
        service: Any,
        info: HelloResult,
        *,
        max_workers: int = 8,
        token: str = "",
        on_stop: Callable[[], None] | None = None,
    ):
        self.service = service
        self.info = info
        self.token = token
        self.on_stop = on_stop
        self._pool = _Workers(max_workers, "bsl-lens-rpc")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopping = False
        self._conns: set[_Conn] = set()
        self._next_conn = 0
        self.requests = 0
        self.errors = 0
        self._listener: asyncio.base_events.Server | None = None

    # -------------------------------------------------------------------- lifecycle
    async def start(self, socket_path: Path | None = None, *, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``socket_path`` (created mode 0600; a leftover file is replaced: the
        caller holds the root lock, so it can only be a dead daemon's), or on
        TCP ``host:port`` when ``socket_path`` is None. Returns the address: the socket
        path, or ``"tcp:<host>:<port>"``."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if socket_path is None:
            self._listener = await asyncio.start_server(self._on_connect, host, port, limit=MAX_REQUEST_BYTES)
            h, p = self._listener.sockets[0].getsockname()[:2]
            return f"tcp:{h}:{p}"
        runtime.unlink_quietly(socket_path)
        old = os.umask(0o177)
        try:
            self._listener = await asyncio.start_unix_server(
                self._on_connect, path=str(socket_path), limit=MAX_REQUEST_BYTES
            )
        finally:
            os.umask(old)
        os.chmod(socket_path, 0o600)
        return str(socket_path)

    def request_shutdown(self, reason: str) -> None:
        """Stop taking requests and wake :meth:`wait_stopped` (idempotent; loop thread)."""
        if self._stopping:
            return
        self._stopping = True
        log.info("shutting down: %s", reason)
        if self.on_stop is not None:
            try:
                self.on_stop()
            except Exception:
                log.exception("on_stop failed")
        if self._listener is not None:
            self._listener.close()
        if self._stop is not None:
            self._stop.set()

    async def wait_stopped(self, grace: float = 5.0) -> None:
        """Serve until a shutdown is requested, then give in-flight requests ``grace``
        seconds to answer and close every connection."""
        assert self._stop is not None
        await self._stop.wait()
        tasks = [t for c in self._conns for t in c.tasks]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        await asyncio.gather(*(c.close(timeout=1.0) for c in list(self._conns)), return_exceptions=True)
        self._pool.shutdown()

    def on_service_event(self, event: str, data: dict) -> None:
        """Service listener (any thread): push ``event`` to subscribed connections."""
        loop = self._loop
        if loop is None or self._stopping:
            return
        try:
            loop.call_soon_threadsafe(self._broadcast, event, data)
        except RuntimeError:  # loop closed
            pass

    def _broadcast(self, event: str, data: dict) -> None:
        subs = [c for c in self._conns if c.subscribed and not c.closed]
        if not subs:
            return
        try:
            line = encode_push(event, data)
        except (TypeError, ValueError, msgspec.EncodeError):
            log.exception("cannot encode %s push %r", event, data)
            return
        for c in subs:
            c.send(line, push=True)

    # -------------------------------------------------------------------- connections
    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._next_conn += 1
        conn = _Conn(self._next_conn, writer)
        conn.pump_task = asyncio.create_task(conn.pump())
        self._conns.add(conn)
        log.debug("connection %d opened", conn.num)
        try:
            while not conn.closed:
                # backpressure: a client that sends requests but does not read the answers is
                # not read either once it has MAX_INFLIGHT requests running or MAX_QUEUED
                # answers unsent (its own socket buffer then fills and blocks it); the
                # daemon's memory stays bounded and other clients are unaffected
                while not conn.closed and (len(conn.tasks) >= MAX_INFLIGHT or conn.queue.qsize() >= MAX_QUEUED):
                    await asyncio.sleep(0.005)
                try:
                    line = await reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:  # EOF; a last line without "\n" still counts
                    if exc.partial.strip():
                        await self._on_line(conn, exc.partial)
                    break
                except asyncio.LimitOverrunError:
                    await self._too_large(conn, reader)
                    break
                if line.strip():
                    await self._on_line(conn, line)
        except (ConnectionError, OSError) as exc:
            log.debug("connection %d: read failed: %s", conn.num, exc)
        except asyncio.CancelledError:
            pass
        finally:
            await conn.close()
            self._conns.discard(conn)
            log.debug("connection %d closed", conn.num)

    async def _too_large(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        self._reply_error(
            conn, None, REQUEST_TOO_LARGE, f"request line longer than {MAX_REQUEST_BYTES} bytes; closing the connection"
        )
        discarded = 0
        try:
            while discarded < DISCARD_LIMIT:
                chunk = await asyncio.wait_for(reader.read(1 << 16), 10.0)
                if not chunk or b"\n" in chunk:
                    break
                discarded += len(chunk)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass

    async def _on_line(self, conn: _Conn, line: bytes) -> None:
        try:
            msg = decode_message(line)
        except msgspec.ValidationError as exc:
            return self._reply_error(conn, None, INVALID_REQUEST, f"not a request object: {exc}")
        except msgspec.DecodeError as exc:
            return self._reply_error(conn, None, PARSE_ERROR, f"malformed JSON: {exc}")
        if msg.method is None:
            return self._reply_error(conn, msg.id, INVALID_REQUEST, "a request needs a 'method'")
        if msg.id is None:
            return self._reply_error(
                conn,
                None,
                INVALID_REQUEST,
                f"request {msg.method!r} has no 'id' (notifications to the daemon are not supported)",
            )
        spec = METHODS.get(msg.method)
        if spec is None:
            return self._reply_error(
                conn,
                msg.id,
                METHOD_NOT_FOUND,
                f"unknown method {msg.method!r}",
                {"method": msg.method, "methods": sorted(METHODS)},
            )
        try:
            params = decode_raw(msg.params, spec.params)
        except msgspec.ValidationError as exc:
            field = field_of(exc)
            return self._reply_error(
                conn,
                msg.id,
                INVALID_PARAMS,
                f"invalid params for {msg.method}: {exc}",
                {"method": msg.method, "field": field},
            )
        except msgspec.DecodeError as exc:  # cannot happen for a Raw cut from valid JSON
            return self._reply_error(conn, msg.id, INVALID_PARAMS, f"invalid params for {msg.method}: {exc}")
        if msg.method == "hello":
            return self._hello(conn, msg.id, params)
        if not conn.greeted:
            return self._reply_error(conn, msg.id, INVALID_REQUEST, "the first request on a connection must be 'hello'")
        if self._stopping:
            return self._reply_error(conn, msg.id, SHUTTING_DOWN, "the daemon is shutting down")
        if msg.method == "shutdown":
            self.request_shutdown(f"shutdown request (connection {conn.num}, {conn.client})")
            self.requests += 1
            conn.send(encode_result(msg.id, Ack()))
            return None
        task = asyncio.create_task(self._call(conn, msg.id, msg.method, params))
        conn.tasks.add(task)
        task.add_done_callback(conn.tasks.discard)
        return None

    def _reply_error(self, conn: _Conn, id: Any, code: int, message: str, data: Any = None) -> None:
        self.requests += 1
        self.errors += 1
        log.info("connection %d: error %d: %s", conn.num, code, message)
        conn.send(encode_error(id, code, message, data))

    def _hello(self, conn: _Conn, id: Any, p: HelloParams) -> None:
        if self.token and not hmac.compare_digest(p.token.encode(), self.token.encode()):
            return self._reply_error(conn, id, INVALID_REQUEST, "wrong or missing token")
        if p.protocol != PROTOCOL_VERSION:
            return self._reply_error(
                conn,
                id,
                VERSION_MISMATCH,
                f"the daemon speaks protocol {PROTOCOL_VERSION} (bsl-lens {__version__}), the client {p.protocol} "
                f"(bsl-lens {p.version or '?'}): restart the daemon (bsl-lens daemon restart {self.info.root})",
                {"protocol": PROTOCOL_VERSION, "version": __version__},
            )
        conn.greeted = True
        conn.subscribed = p.subscribe
        conn.client = f"{p.client or '?'} {p.version}".strip()
        log.info("connection %d: hello from %s (subscribe=%s)", conn.num, conn.client, p.subscribe)
        self.requests += 1
        conn.send(encode_result(id, self.info))
        return None

    async def _call(self, conn: _Conn, id: Any, method: str, params: Any) -> None:
        handler = getattr(self, f"cmd_{method}")
        t0 = time.perf_counter()
        try:
            if method == "wait_idle":  # may block for long: not on the bounded pool
                result = await asyncio.wrap_future(_in_thread(handler, params))
            else:
                result = await asyncio.wrap_future(self._pool.submit(handler, params))
            line = encode_result(id, result)
        except ValueError as exc:
            return self._reply_error(conn, id, INVALID_PARAMS, _clipped(str(exc), params), {"method": method})
        except LookupError as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            return self._reply_error(conn, id, NOT_FOUND, _clipped(str(message), params), {"method": method})
        except asyncio.CancelledError:
            if self._stopping:  # queued when the pool shut down
                return self._reply_error(conn, id, SHUTTING_DOWN, "the daemon is shutting down")
            raise
        except RuntimeError as exc:
            if "cannot schedule new futures" in str(exc):  # pool shut down under us
                return self._reply_error(conn, id, SHUTTING_DOWN, "the daemon is shutting down")
            return self._internal(conn, id, method, exc)
        except Exception as exc:  # noqa: BLE001 - the daemon must outlive any bug in a handler
            return self._internal(conn, id, method, exc)
        self.requests += 1
        log.debug("connection %d: %s answered in %.1f ms", conn.num, method, (time.perf_counter() - t0) * 1000)
        conn.send(line)
        return None

    def _internal(self, conn: _Conn, id: Any, method: str, exc: Exception) -> None:
        log.error("%s failed", method, exc_info=exc)
        tb = "".join(traceback.format_exception(exc))
        self._reply_error(
            conn,
            id,
            INTERNAL_ERROR,
            f"{type(exc).__name__}: {exc}",
            {"method": method, "type": type(exc).__name__, "traceback": tb},
        )

    # -------------------------------------------------------------------- commands (pool threads)
    # Each takes the method's params struct (daemon.server.protocol) and returns what the Service
    # or its read-only Lookups (daemon.service.lookups) return; ValueError -> -32602,
    # LookupError -> -32001, anything else -> -32603.
    def cmd_search(self, p):
        """``Service.search`` -> ``SearchResult`` (``remember=False`` passed only when asked)."""
        extra = {} if p.remember else {"remember": False}
        return self.service.search(
            p.query, mode=p.mode, top_k=p.top_k, filters=p.filters, fresh_timeout=p.fresh_timeout, **extra
        )

    def cmd_symbols(self, p):
        """``Service.symbols`` -> ``SearchResult`` (names first)."""
        return self.service.symbols(
            p.query, limit=p.limit, filters=p.filters, slim=p.slim, fresh_timeout=p.fresh_timeout
        )

    def cmd_get_chunk(self, p):
        """``Lookups.get_chunk`` -> ``Chunk``."""
        return self.service.lookups.get_chunk(p.chunk_id)

    def cmd_get_method(self, p):
        """``Service.get_method`` -> ``MethodInfo`` (with the freshness fields)."""
        return self.service.get_method(p.name, p.path, fresh_timeout=p.fresh_timeout)

    def cmd_read_module(self, p):
        """``Lookups.read_module`` -> ``ModuleText``."""
        return self.service.lookups.read_module(p.path, p.start_line, p.end_line)

    def cmd_read_document(self, p):
        """``Lookups.read_document`` -> ``DocumentText``."""
        return self.service.lookups.read_document(p.path, p.heading)

    def cmd_doc_mentions(self, p):
        """``Lookups.doc_mentions`` -> ``{id: [DocRef]}``."""
        return self.service.lookups.doc_mentions(p.ids)

    def cmd_describe_object(self, p):
        """``Service.describe_object`` -> ``ObjectDescription`` (with the freshness fields)."""
        return self.service.describe_object(p.name, fresh_timeout=p.fresh_timeout)

    def cmd_document_symbols(self, p):
        """``Lookups.document_symbols`` -> ``list[Chunk]``."""
        return self.service.lookups.document_symbols(p.path)

    def cmd_references(self, p):
        """``Service.references`` -> ``References`` (find usages)."""
        return self.service.references(
            _target(p),
            limit=p.limit,
            possible=p.possible,
            locate=p.locate,
            context=p.context,
            fresh_timeout=p.fresh_timeout,
        )

    def cmd_callees(self, p):
        """``Service.callees`` -> ``Callees``."""
        return self.service.callees(_target(p), locate=p.locate, context=p.context, fresh_timeout=p.fresh_timeout)

    def cmd_call_graph(self, p):
        """``Service.call_graph`` -> ``CallGraph``."""
        return self.service.call_graph(
            _target(p), direction=p.direction, depth=p.depth, fan_out=p.fan_out, fresh_timeout=p.fresh_timeout
        )

    def cmd_definition(self, p):
        """``Engine.definition`` -> ``Definition``."""
        return self.service.definition(p.path, p.line, p.character)

    def cmd_platform_help(self, p):
        """``Service.platform_help`` -> ``PlatformAnswer``."""
        return self.service.platform_help(
            p.query, mode=p.mode, top_k=p.top_k, kind=p.kind, version=p.version, names_only=p.names_only
        )

    def cmd_status(self, p) -> StatusResult:
        """The server's counters (``DaemonInfo``: uptime from ``info.started_at``, open
        connections, requests and error replies since start) plus ``Service.status()``."""
        i = self.info
        daemon = DaemonInfo(
            pid=i.pid,
            version=i.version,
            protocol=i.protocol,
            root=i.root,
            index_dir=i.index_dir,
            socket=i.socket,
            log=i.log,
            started_at=i.started_at,
            uptime_s=round(time.time() - i.started_at, 3),
            connections=len(self._conns),
            requests=self.requests,
            errors=self.errors,
        )
        return StatusResult(daemon=daemon, service=self.service.status())

    def cmd_reindex(self, p) -> Ack:
        """``Service.reindex`` (queues and returns at once)."""
        self.service.reindex(full=p.full, paths=p.paths)
        return Ack()

    def cmd_wait_idle(self, p) -> WaitIdleResult:
        """``Service.wait_idle(timeout)``; runs on its own thread, not the bounded pool."""
        return WaitIdleResult(idle=bool(self.service.wait_idle(p.timeout)))


def _target(p):
    """The :class:`daemon.index.usages.Target` of find-usages params (ValueError: not exactly one)."""
    from ..engine import Target

    return Target(name=p.name, method=p.target, path=p.path, line=p.line, character=p.character)


# ------------------------------------------------------------------------------ daemon main
def run_daemon(
    root: str | os.PathLike,
    *,
    index_dir: str | os.PathLike | None = None,
    embedder: str | None = DEFAULT_EMBEDDER,
    watch: str = DEFAULT_WATCH,
    log_file: str | os.PathLike | None = None,
    reconcile_interval: float | None = None,
    service_factory: Callable[..., Any] | None = None,
    shared_cache: str | None = None,
    shared_cache_mode: str = "rw",
    docs: list[str] | None = None,
    transport: str | None = None,
    platform_help: list[str] | None = None,
    platform_version: str | None = None,
) -> int:
    """Run the daemon for ``root`` in this process until it is told to stop. Returns 0.

    ``embedder``: a ``make_embedder`` spec, ``"none"``/None for lexical only
    (:func:`daemon.options.embedder_or_none`). ``watch``:
    auto | native | polling | off. ``log_file`` is only recorded in ``daemon.json`` and
    ``hello`` (logging itself is configured by the CLI). ``reconcile_interval``: seconds between
    the service's full re-checks (None: its default; 0 disables). ``shared_cache``: the team's
    PostgreSQL DSN (:mod:`daemon.index.shared_cache`), ``shared_cache_mode`` rw | ro.
    ``platform_help``: ``--platform-help`` folders or files, ``platform_version``:
    ``--platform-version`` (:mod:`daemon.service.platform`).
    ``service_factory`` replaces :class:`daemon.service.service.Service` (same signature) in tests.
    ``transport``: unix | tcp, None for :func:`daemon.server.runtime.daemon_transport`'s default
    (tcp on Windows, else ``$BSL_LENS_TRANSPORT``, else unix).

    Order: the root lock (``/tmp/bsl-lens-<uid>/<key>.lock``, whatever the index dir)
    before any other file of the root is touched, then the index dir (made 0700, umask
    077) and its ``daemon.lock``; only then are a killed daemon's leftovers removed.

    Raises :class:`AlreadyRunning` at once if another process holds the root lock (any
    index dir) or the index dir's lock (the CLI exits :data:`EXIT_ALREADY_RUNNING`),
    :class:`runtime.RuntimeDirError` for an unsafe socket dir, and whatever the service
    raises while starting (after cleaning up).
    """
    paths = runtime.paths_for(root, index_dir)
    if not paths.root.is_dir():
        raise FileNotFoundError(f"export root is not a directory: {paths.root}")
    transport = runtime.daemon_transport(transport)
    os.umask(0o077)  # every file of the index dir and the log: owner-only (they record queries)
    runtime.ensure_socket_dir()
    log_path = str(Path(log_file).resolve()) if log_file else str(paths.log)
    root_lock = _take_root_lock(paths)
    lock = runtime.FileLock(paths.lock)
    service = None
    owner = False  # True once the root's socket and state files are ours to remove
    try:
        runtime.write_owner(root_lock, paths, "starting", log_path)
        paths.index_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        runtime.make_private(paths.index_dir)
        if not lock.try_acquire():
            holder = runtime.lock_holder(paths.lock)
            raise AlreadyRunning(
                paths,
                None,
                f"the index dir {paths.index_dir} is in use by pid {holder or '?'} (a daemon of another export root?); "
                "give this root its own --index-dir",
            )
        lock.write_pid()
        owner = True
        runtime.remove_daemon_files(paths)  # a killed daemon's leftovers: we hold both locks
        if service_factory is None:
            from ..service.service import Service as service_factory
        emb = embedder_or_none(embedder)
        log.info(
            "starting bsl-lens %s daemon for %s (index %s, embedder %s, watch %s)",
            __version__,
            paths.root,
            paths.index_dir,
            emb or "none (lexical only)",
            watch,
        )
        kwargs = _service_options(paths, reconcile_interval, shared_cache, shared_cache_mode, docs)
        if platform_help:
            kwargs["platform_help"] = [str(Path(p).resolve()) for p in platform_help]
        if platform_version:
            kwargs["platform_version"] = platform_version
        service = service_factory(paths.root, index_dir=paths.index_dir, embedder=emb, watch=watch, **kwargs)
        options = runtime.DaemonOptions(  # in daemon.json: `daemon restart` starts the next daemon the same way
            embedder=emb or NO_EMBEDDER,
            watch=watch,
            docs=list(kwargs["config"].docs) if "config" in kwargs else [],
            reconcile_interval=reconcile_interval,
            shared_cache=shared_cache or "",
            shared_cache_mode=shared_cache_mode or "rw",
            log_file=str(Path(log_file).resolve()) if log_file else "",
            transport=transport,
            platform_help=list(kwargs.get("platform_help", [])),
            platform_version=platform_version or "",
        )
        asyncio.run(_serve(service, paths, log_path, lock, root_lock, options))
        return 0
    finally:
        if owner:
            runtime.remove_daemon_files(paths, pid=os.getpid(), socket_ino=_bound.get("ino"))
        if service is not None:
            try:
                service.close()
            except Exception:
                log.exception("closing the service failed")
        lock.release()
        root_lock.release()
        log.info("daemon for %s stopped", paths.root)


def _take_root_lock(paths: runtime.Paths) -> runtime.FileLock:
    """The root lock, held; :class:`AlreadyRunning` if another daemon holds it. A daemon
    writes its pid into the lock at once; a holder that did not is a client cleaning stale
    files (:func:`runtime.clean_stale`, a few ms) or a daemon a moment old: waited for briefly."""
    root_lock = runtime.FileLock(paths.root_lock)
    if not root_lock.try_acquire():
        written = runtime._read_owner(paths.root_lock)
        holder = runtime.lock_holder(paths.root_lock)
        if written is None or not holder or written.pid != holder:
            root_lock.acquire(0.5)
        if not root_lock.held:
            raise AlreadyRunning(paths, runtime.root_owner(paths))
    return root_lock


def _service_options(
    paths: runtime.Paths,
    reconcile_interval: float | None,
    shared_cache: str | None,
    shared_cache_mode: str,
    docs: list[str] | None,
) -> dict[str, Any]:
    """The service's keyword arguments beyond root, index dir, embedder and watch mode."""
    kwargs: dict[str, Any] = {} if reconcile_interval is None else {"reconcile_interval": reconcile_interval}
    if shared_cache:
        from ..index.shared_cache import mask_dsn

        log.info("shared embedding cache %s (mode %s)", mask_dsn(shared_cache), shared_cache_mode)
        kwargs.update(shared_cache=shared_cache, shared_cache_mode=shared_cache_mode)
    if docs:  # documentation folders inside the root (daemon.sources.docs)
        from ..engine import EngineConfig
        from ..sources.docs import normalize_docs_dirs

        kwargs["config"] = EngineConfig(docs=normalize_docs_dirs(paths.root, docs))
    return kwargs


#: Seconds a shutdown gives requests in flight to answer (a query takes milliseconds; a
#: ``wait_idle`` returns at once once the service is told to stop).
STOP_GRACE_S = 1.0
#: inode of the socket this process bound (cleanup removes only that one)
_bound: dict[str, int] = {}
#: Seconds between checks that the index dir's lock file is still the one we hold.
LOCK_CHECK_S = 2.0


async def _watch_lock(server: "Server", locks: list[runtime.FileLock]) -> None:
    """Shut down if ``daemon.lock`` or the root lock was deleted or replaced (``rm -rf`` of
    the index dir, a /tmp cleaner): another daemon could then start for the same root, and
    two writers must never share one index."""
    while not server._stopping:
        await asyncio.sleep(LOCK_CHECK_S)
        for lock in locks:
            if not lock.still_ours():
                log.error("%s was removed or replaced (index dir or /tmp cleaned?); shutting down", lock.path)
                server.request_shutdown("lock file gone")
                return


async def _serve(
    service: Any,
    paths: runtime.Paths,
    log_path: str,
    lock: runtime.FileLock | None = None,
    root_lock: runtime.FileLock | None = None,
    options: runtime.DaemonOptions | None = None,
) -> None:
    loop = asyncio.get_running_loop()
    info = HelloResult(
        protocol=PROTOCOL_VERSION,
        version=__version__,
        pid=os.getpid(),
        root=str(paths.root),
        index_dir=str(paths.index_dir),
        started_at=time.time(),
        log=log_path,
    )
    tcp = runtime.WINDOWS or (options is not None and options.transport == "tcp")
    token = runtime.write_token(paths) if tcp else ""  # over TCP any local user could connect: hello needs it

    def on_stop() -> None:
        # first the files (a client never sees a dying daemon's socket or state), then tell
        # the service: its writer drops a reconcile in flight, wait_idle callers return
        runtime.remove_daemon_files(paths, pid=os.getpid(), socket_ino=_bound.get("ino"))
        if root_lock is not None and root_lock.held:
            runtime.write_owner(root_lock, paths, "stopping", log_path)
        request_stop = getattr(service, "request_stop", None)
        if request_stop is not None:
            request_stop()

    server = Server(service, info, token=token, on_stop=on_stop)
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, server.request_shutdown, f"signal {signal.Signals(sig).name}")
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
            pass
    remove_listener = service.add_listener(server.on_service_event)
    try:
        t0 = time.perf_counter()
        # answer first: the watcher, the reconcile and the embedding start once we listen
        background = getattr(service, "start_background", None)
        if background is not None:
            service.defer_background = True
        # The service may take a while to load a big snapshot: keep the loop free for signals.
        await loop.run_in_executor(None, service.start)
        log.info("service started in %.2f s", time.perf_counter() - t0)
        if server._stopping:
            return
        address = await server.start(None if tcp else paths.socket)
        info.socket = address
        if not tcp:
            _bound["ino"] = os.stat(paths.socket).st_ino
        locks = [x for x in (lock, root_lock) if x is not None]
        if locks:
            server._lock_task = asyncio.create_task(_watch_lock(server, locks))  # a strong ref keeps it alive
        port = int(address.rsplit(":", 1)[1]) if address.startswith("tcp:") else 0
        runtime.write_pointer(paths)
        runtime.write_state(
            paths,
            runtime.DaemonState(
                pid=info.pid,
                socket="" if port else address,
                version=__version__,
                protocol=PROTOCOL_VERSION,
                root=info.root,
                index_dir=info.index_dir,
                log=log_path,
                started_at=info.started_at,
                port=port,
                options=options,
            ),
        )
        if root_lock is not None:
            runtime.write_owner(root_lock, paths, "serving", log_path)
        log.info("ready: pid %d, listening on %s", info.pid, address)
        if background is not None:
            background()
        await server.wait_stopped(grace=STOP_GRACE_S)
    finally:
        remove_listener()
