"""Wire codec, per-root runtime files and the server's request handling, in-process.

The server tests run :class:`daemon.server.server.Server` on its own event loop thread around a
tiny fake service, so failure paths the real Service never takes (an internal exception, a
request that blocks until told to finish) are exercised deterministically, without timing.
The real daemon process is tested in tests/daemon/test_daemon_process.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import msgspec
import pytest

from daemon.server import protocol, runtime
from daemon.client import AsyncDaemonClient, CommandError, DaemonClient, DaemonNotRunning, DaemonTimeout
from daemon.engine import Filters, SearchResult
from daemon.server.protocol import (
    METHODS,
    HelloResult,
    SearchParams,
    WireFilters,
    decode_message,
    decode_raw,
    encode_error,
    encode_push,
    encode_request,
    encode_result,
    field_of,
)
from daemon.server.server import Server

TIMEOUT = 60.0


# ------------------------------------------------------------------------------ codec
def test_messages_round_trip_one_line_each():
    req = encode_request(7, "search", SearchParams(query="строка\nс переводом", filters=WireFilters(scope="code")))
    assert req.endswith(b"\n") and req.count(b"\n") == 1
    m = decode_message(req)
    assert m.is_request and m.method == "search" and m.id == 7
    p = decode_raw(m.params, SearchParams)
    assert p.query == "строка\nс переводом" and p.filters.scope == "code" and isinstance(p.filters, Filters)

    res = decode_message(encode_result(7, {"a": 1}))
    assert res.id == 7 and res.error is None and msgspec.json.decode(bytes(res.result)) == {"a": 1}
    err = decode_message(encode_error(None, protocol.PARSE_ERROR, "bad", {"x": 1}))
    assert err.id is None and err.error.code == -32700 and err.error.data == {"x": 1}
    push = decode_message(encode_push("progress", {"stage": "scan", "done": 1, "total": 2}))
    assert push.is_push and not push.is_request and push.method == "progress"
    assert b'"jsonrpc":"2.0"' in req and b'"jsonrpc":"2.0"' in encode_push("state", {})


def test_decode_errors_are_typed():
    with pytest.raises(msgspec.DecodeError):
        decode_message(b'{"id": 1,')
    with pytest.raises(msgspec.ValidationError):
        decode_message(b"[1]")
    with pytest.raises(msgspec.ValidationError):
        decode_message(b'{"id": [1], "method": "x"}')


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (b'{"query":"x","topk":3}', "topk"),
        (b'{"top_k":3}', "query"),
        (b'{"query":1}', "query"),
        (b'{"query":"x","top_k":0}', "top_k"),
        (b'{"query":"x","filters":{"scopee":"code"}}', "filters.scopee"),
        (b'{"query":"x","filters":{"scope":1}}', "filters.scope"),
    ],
)
def test_invalid_params_name_the_field(params, field):
    with pytest.raises(msgspec.ValidationError) as exc:
        decode_raw(msgspec.Raw(params), SearchParams)
    assert field_of(exc.value) == field


def test_absent_params_mean_defaults():
    assert decode_raw(msgspec.Raw(), protocol.StatusParams) == protocol.StatusParams()
    assert decode_raw(msgspec.Raw(b"null"), protocol.ReindexParams) == protocol.ReindexParams()
    with pytest.raises(msgspec.ValidationError):
        decode_raw(msgspec.Raw(), protocol.GetChunkParams)  # chunk_id is required


def test_every_method_has_a_handler_and_a_result_type():
    for name in METHODS:
        if name not in ("hello", "shutdown"):
            assert callable(getattr(Server, f"cmd_{name}")), name
        protocol.result_type(name)  # a daemon.contract or daemon.server.protocol type
    assert protocol.result_type("search") is SearchResult
    assert set(protocol.PUSH_METHODS) == {"progress", "indexed", "state"}


# ------------------------------------------------------------------------------ runtime
def test_file_lock_is_exclusive_and_released(tmp_path):
    path = tmp_path / "x.lock"
    assert not runtime.lock_is_held(path)  # missing file: free
    a, b = runtime.FileLock(path), runtime.FileLock(path)
    assert a.try_acquire()
    assert not b.try_acquire()  # another open file description, same process: refused
    assert runtime.lock_is_held(path)
    a.write_pid()
    assert path.read_text().strip() == str(os.getpid())
    a.release()
    assert not runtime.lock_is_held(path)
    assert b.acquire(1.0)
    b.release()


def test_wait_lock_free_waits_for_the_release_or_gives_up(tmp_path):
    path = tmp_path / "x.lock"
    held = runtime.FileLock(path)
    assert held.try_acquire()
    t0 = time.monotonic()
    assert not runtime.wait_lock_free(path, 30.0, give_up=lambda: True)
    assert time.monotonic() - t0 < 5.0  # gave up at the first look, not after 30 s
    assert not runtime.wait_lock_free(path, 0.05)  # the time ran out
    threading.Timer(0.2, held.release).start()
    assert runtime.wait_lock_free(path, 30.0, give_up=lambda: False)


def test_a_stopped_daemon_replaced_by_a_new_one_is_told_apart_from_one_still_running(tmp_path, monkeypatch):
    from daemon.client.stop import _replaced

    paths = _fake_paths(tmp_path, monkeypatch)
    paths.root_lock.parent.mkdir(parents=True, exist_ok=True)
    import psutil

    gone = next(p for p in range(4_194_303, 1, -1) if not psutil.pid_exists(p))  # the daemon asked to stop
    new = runtime.FileLock(paths.root_lock)
    assert new.try_acquire()  # this process took the root: the new daemon
    new.write_pid()
    try:
        assert _replaced(paths, gone, 30.0)
        assert not _replaced(paths, os.getpid(), 0.05)  # still the same daemon's when the time ran out
    finally:
        new.release()
    assert not _replaced(paths, gone, 1.0)  # the lock is free: nobody took over


def _fake_paths(tmp_path: Path, monkeypatch) -> runtime.Paths:
    sdir = Path(tempfile.mkdtemp(prefix="bl-", dir="/tmp")) / "sock"
    monkeypatch.setattr(runtime, "socket_dir", lambda: sdir)
    return runtime.paths_for(tmp_path / "root", tmp_path / "idx")


def test_socket_dir_must_be_ours_and_private(tmp_path, monkeypatch):
    paths = _fake_paths(tmp_path, monkeypatch)
    sdir = paths.socket.parent
    try:
        assert runtime.ensure_socket_dir() == sdir
        assert sdir.stat().st_mode & 0o777 == 0o700
        os.chmod(sdir, 0o755)
        runtime.ensure_socket_dir()
        assert sdir.stat().st_mode & 0o777 == 0o700  # repaired
        os.rmdir(sdir)
        os.symlink(tmp_path, sdir)
        with pytest.raises(runtime.RuntimeDirError):
            runtime.ensure_socket_dir()
    finally:
        shutil.rmtree(sdir.parent, ignore_errors=True)


def test_pointer_gives_the_index_dir_and_stale_files_are_cleaned(tmp_path, monkeypatch):
    (tmp_path / "root").mkdir()
    paths = _fake_paths(tmp_path, monkeypatch)
    try:
        runtime.ensure_socket_dir()
        paths.index_dir.mkdir()
        runtime.write_pointer(paths)
        assert runtime.paths_for(tmp_path / "root").index_dir == paths.index_dir  # no --index-dir given
        assert runtime.paths_for(tmp_path / "root" / ".." / "root").socket == paths.socket  # resolved
        state = runtime.DaemonState(
            pid=1, socket=str(paths.socket), version="0", protocol=1, root="r", index_dir="i", log="l", started_at=0
        )
        runtime.write_state(paths, state)
        paths.socket.write_text("")
        assert runtime.read_state(paths) == state

        held = runtime.FileLock(paths.lock)
        assert held.try_acquire()
        assert not runtime.clean_stale(paths)  # a live daemon's files are never touched
        assert paths.state.exists()
        held.release()
        assert runtime.clean_stale(paths)
        assert not paths.state.exists() and not paths.socket.exists() and not paths.pointer.exists()
    finally:
        shutil.rmtree(paths.socket.parent.parent, ignore_errors=True)


def test_log_tail(tmp_path):
    log = tmp_path / "daemon.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert runtime.tail(log, 3) == "line 97\nline 98\nline 99"
    assert runtime.tail(tmp_path / "missing") == ""


# ------------------------------------------------------------------------------ server, in-process
class FakeService:
    """Just enough of the Service contract: search can block or raise on demand."""

    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Event()
        self.listeners = []
        self.lookups = self  # the read-only lookups (daemon.service.lookups.Lookups) live here too

    def add_listener(self, fn):
        self.listeners.append(fn)
        return lambda: self.listeners.remove(fn)

    def emit(self, event, data):
        for fn in list(self.listeners):
            fn(event, data)

    def search(self, query, *, mode="hybrid", top_k=10, filters=None, fresh_timeout=0.0):
        if query == "boom":
            raise ZeroDivisionError("division by zero in a handler")
        if query == "block":
            self.entered.set()
            assert self.release.wait(TIMEOUT)
        if mode not in ("hybrid", "lexical", "vector"):
            raise ValueError(f"unknown mode {mode!r}")
        return SearchResult(query=query, mode=mode, hits=[], total=0, dense_done=0, dense_total=0, took_ms=0.0)

    def get_chunk(self, chunk_id):
        raise LookupError(f"no chunk with id {chunk_id!r}")

    def reindex(self, *, full=False, paths=None):
        self.emit("progress", {"stage": "chunk", "done": 1, "total": 1})
        self.emit("indexed", {"files": 1, "chunks_changed": 1, "latency_ms": None})

    def wait_idle(self, timeout):
        return True


@pytest.fixture()
def server():
    """(FakeService, socket path) with a Server on its own loop thread; stopped at teardown."""
    service = FakeService()
    sdir = Path(tempfile.mkdtemp(prefix="bl-", dir="/tmp"))
    sock = sdir / "s.sock"
    info = HelloResult(
        protocol=protocol.PROTOCOL_VERSION,
        version="t",
        pid=os.getpid(),
        root="/r",
        index_dir="/i",
        started_at=time.time(),
    )
    srv = Server(service, info, max_workers=2)
    service.add_listener(srv.on_service_event)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def main():
        await srv.start(sock)
        ready.set()
        await srv.wait_stopped(grace=1.0)

    t = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    t.start()
    assert ready.wait(TIMEOUT)
    try:
        yield service, sock
    finally:
        service.release.set()
        loop.call_soon_threadsafe(srv.request_shutdown, "test teardown")
        t.join(TIMEOUT)
        loop.close()
        shutil.rmtree(sdir, ignore_errors=True)


def test_internal_errors_are_replies_and_the_server_lives_on(server):
    _, sock = server
    with DaemonClient.open(sock, client="t", timeout=TIMEOUT) as c:
        with pytest.raises(CommandError) as exc:
            c.search("boom")
        e = exc.value
        assert e.code == protocol.INTERNAL_ERROR and e.method == "search"
        assert e.message == "ZeroDivisionError: division by zero in a handler"
        assert e.data["type"] == "ZeroDivisionError" and "Traceback" in e.data["traceback"]
        with pytest.raises(CommandError) as exc:
            c.search("x", mode="nope")
        assert exc.value.code == protocol.INVALID_PARAMS
        with pytest.raises(CommandError) as exc:
            c.get_chunk("zz")
        assert exc.value.code == protocol.NOT_FOUND and exc.value.message == "no chunk with id 'zz'"
        assert c.search("ok").query == "ok"


def test_a_blocked_request_does_not_block_other_connections(server):
    service, sock = server
    with DaemonClient.open(sock, timeout=TIMEOUT) as a, DaemonClient.open(sock, timeout=TIMEOUT) as b:
        done = []
        t = threading.Thread(target=lambda: done.append(a.search("block").query))
        t.start()
        assert service.entered.wait(TIMEOUT)  # a's search is now inside the service
        assert b.search("other").query == "other"  # answered while a's is still blocked
        assert not done
        service.release.set()
        t.join(TIMEOUT)
        assert done == ["block"]


def test_responses_on_one_connection_are_routed_by_id(server):
    service, sock = server

    async def main():
        c = await AsyncDaemonClient.open(sock, timeout=TIMEOUT)
        async with c:
            slow = asyncio.ensure_future(c.search("block"))
            await asyncio.get_running_loop().run_in_executor(None, service.entered.wait, TIMEOUT)
            fast = await c.search("fast")  # same connection, answered first
            assert fast.query == "fast" and not slow.done()
            service.release.set()
            assert (await slow).query == "block"

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_sync_client_timeout_keeps_the_connection_usable(server):
    service, sock = server
    with DaemonClient.open(sock, timeout=TIMEOUT) as c:
        with pytest.raises(DaemonTimeout):
            c.search("block", timeout=0.2)
        assert service.entered.wait(TIMEOUT)
        service.release.set()
        assert c.search("after").query == "after"  # the late "block" reply is skipped


def test_pushes_go_to_subscribers_only(server):
    service, sock = server
    got = []
    with (
        DaemonClient.open(sock, subscribe=True) as sub,
        DaemonClient.open(sock) as quiet,
        DaemonClient.open(sock, subscribe=True, on_notification=lambda m, p: got.append(m)) as cb,
    ):
        quiet.reindex()
        assert sub.wait_notification(TIMEOUT) == ("progress", {"stage": "chunk", "done": 1, "total": 1})
        assert sub.wait_notification(TIMEOUT)[0] == "indexed"
        assert cb.search("x").query == "x"  # pushes before the reply went to the callback
        while len(got) < 2:
            cb.wait_idle(1.0)
        assert got == ["progress", "indexed"]
        assert quiet.search("x").query == "x" and not quiet.notifications


def test_closed_daemon_raises_not_running(server, tmp_path):
    with pytest.raises(DaemonNotRunning):
        DaemonClient.open(tmp_path / "nothing.sock")
    service, sock = server
    c = DaemonClient.open(sock)
    with c:
        c.shutdown()
        with pytest.raises((DaemonNotRunning, CommandError)):
            c.search("x")
