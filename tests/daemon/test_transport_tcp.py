"""The loopback-TCP transport (the only one on Windows) on Linux, in the default run: a daemon
started with ``--transport tcp``, the CLI (start, search, status, restart, stop), the token and
the ``hello`` rule over a raw connection, a killed daemon's port never tried; then the LSP
server (pytest-lsp, ``workspace/symbol``) and the MCP bridge (the SDK's stdio client, a search)
spawning their daemon with ``BSL_LENS_TRANSPORT=tcp``.

The whole daemon, CLI, LSP and MCP suite runs over TCP with ``pytest --daemon-transport tcp``
(tests/conftest.py); CI runs it so (``.ci/run``).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import sys

import pytest
from daemon_helpers import REPO, TIMEOUT, transport, wait_until

from daemon.server import protocol, runtime

LEXICAL = ("--embedder", "none", "--watch", "off")
TCP_ENV = {**os.environ, "PYTHONPATH": str(REPO), "BSL_LENS_TRANSPORT": "tcp"}


def _port(handle) -> int:
    st = runtime.read_state(handle.paths)
    assert st is not None and st.port and st.socket == "", st
    return st.port


def _line(f, payload: dict) -> dict:
    f.write(json.dumps(payload).encode() + b"\n")
    f.flush()
    return json.loads(f.readline())


def test_daemon_cli_and_token_over_tcp(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, "--transport", "tcp", wait_idle=True)
    port = _port(d)
    assert not d.paths.socket.exists()  # no Unix socket at all
    assert stat.S_IMODE(d.paths.token.stat().st_mode) == 0o600 and len(runtime.read_token(d.paths)) == 32
    assert stat.S_IMODE(d.index_dir.stat().st_mode) == 0o700

    out = d.cli("search", "КонтрагентПоИНН", "--mode", "lexical", "--no-spawn", "--json", check=True)
    assert json.loads(out.stdout)["hits"][0]["name"] == "КонтрагентПоИНН"
    assert f"socket:   tcp:127.0.0.1:{port}" in d.cli("status", "-v", check=True).stdout
    js = json.loads(d.cli("status", "--json", check=True).stdout)
    assert js["daemon"]["socket"] == f"tcp:127.0.0.1:{port}" and js["modules"] == 15
    again = d.cli("daemon", "start", *LEXICAL, check=True)
    assert f"already running for {sample_root.resolve()}: pid {d.pid}, socket tcp:127.0.0.1:{port}" in again.stdout

    # a raw connection: nothing before hello, no hello without the token (and no word about the root)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s, s.makefile("rwb") as f:
        early = _line(f, {"jsonrpc": "2.0", "id": 1, "method": "status", "params": {}})
        assert "must be 'hello'" in early["error"]["message"]
        hello = {"protocol": protocol.PROTOCOL_VERSION, "client": "raw"}
        for bad in ({}, {"token": "0" * 32}, {"token": "", "protocol": 0}):
            r = _line(f, {"jsonrpc": "2.0", "id": 2, "method": "hello", "params": {**hello, **bad}})
            assert r["error"]["message"] == "wrong or missing token", r
            assert str(sample_root.resolve()) not in json.dumps(r)
        assert "must be 'hello'" in _line(f, {"jsonrpc": "2.0", "id": 3, "method": "status"})["error"]["message"]
        ok = _line(
            f, {"jsonrpc": "2.0", "id": 4, "method": "hello", "params": {**hello, "token": runtime.read_token(d.paths)}}
        )
        assert ok["result"]["pid"] == d.pid and ok["result"]["socket"] == f"tcp:127.0.0.1:{port}"

    # restart keeps the transport it was started with
    r = d.cli("daemon", "restart", "--no-wait")
    assert r.returncode == 0, r.stderr
    if transport() == "unix":  # the session's default differs: the restart says it keeps tcp
        assert "--transport tcp" in r.stderr, r.stderr
    d2 = daemons.adopt(sample_root, d.index_dir)
    assert d2.pid != d.pid and _port(d2) and runtime.read_state(d2.paths).options.transport == "tcp"

    # killed: its port and token stay behind, and no client tries them (the lock is free)
    d2.kill()
    assert runtime.read_state(d2.paths).port and d2.paths.token.exists()
    gone = d2.cli("status")
    assert gone.returncode == 3 and "not running" in gone.stdout
    back = d2.cli("daemon", "start", *LEXICAL, "--transport", "unix", check=True)
    assert "daemon started" in back.stdout
    d3 = daemons.adopt(sample_root, d.index_dir)
    st = runtime.read_state(d3.paths)
    assert st.port == 0 and st.socket == str(d3.paths.socket) and not d3.paths.token.exists()
    d3.stop()
    assert not d3.paths.state.exists() and not d3.paths.token.exists()


def test_a_bad_transport_is_a_usage_error(sample_root, tmp_path):
    from daemon_helpers import run_cli

    r = run_cli("daemon", "start", str(sample_root), "--index-dir", str(tmp_path / "i"), "--transport", "pipe")
    assert r.returncode == 2 and "bad transport 'pipe': use unix or tcp" in r.stderr
    env = dict(os.environ, BSL_LENS_TRANSPORT="udp")
    r = run_cli("daemon", "start", str(sample_root), "--index-dir", str(tmp_path / "i"), env=env)
    assert r.returncode == 2 and "BSL_LENS_TRANSPORT='udp'" in r.stderr
    assert not (tmp_path / "i").exists()


@pytest.mark.asyncio
async def test_lsp_workspace_symbol_over_tcp(sample_root, tmp_path, daemons):
    """The language server spawns the folder's daemon over TCP (its environment says so) and
    answers ``workspace/symbol`` through it."""
    from lsprotocol import types
    from pytest_lsp import client_capabilities
    from pytest_lsp.client import make_test_lsp_client

    idx = tmp_path / "idx"
    lsp = make_test_lsp_client()
    await lsp.start_io(sys.executable, "-m", "lsp", env=TCP_ENV)
    try:
        await lsp.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                workspace_folders=[types.WorkspaceFolder(uri=sample_root.as_uri(), name="demo")],
                initialization_options={"indexDir": str(idx), "embedder": "none", "watch": "off"},
            )
        )
        handle = daemons.adopt(sample_root, idx)  # registered before it exists: teardown stops it
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        names: list[str] = []
        while "ИННСоответствуетТребованиям" not in names:
            assert asyncio.get_running_loop().time() < deadline, names
            res = await lsp.workspace_symbol_async(types.WorkspaceSymbolParams(query="ИННСоответствуетТребованиям"))
            names = [s.name for s in res or []]
            await asyncio.sleep(0.05)
        assert _port(handle)
    finally:
        await lsp.shutdown_session()
        await lsp.stop()


def test_mcp_search_over_tcp(sample_root, tmp_path, daemons):
    """The MCP bridge (stdio, the SDK's client) spawns its daemon over TCP and searches through it."""
    from mcp import Client, StdioServerParameters

    from mcp_bridge.models import SearchOutput

    idx = tmp_path / "idx"
    args = ["-m", "daemon.cli", "mcp", str(sample_root), "--index-dir", str(idx), *LEXICAL]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO), env=TCP_ENV)

    async def main():
        async with Client(params, mode="legacy") as c:
            deadline = asyncio.get_running_loop().time() + TIMEOUT
            while True:
                r = await c.call_tool("search", {"query": "ИННСоответствуетТребованиям", "top_k": 1})
                out = SearchOutput.model_validate(r.structured_content)
                if out.hits and not out.warming:
                    return out
                assert asyncio.get_running_loop().time() < deadline, out
                await asyncio.sleep(0.1)

    try:
        out = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    finally:
        handle = daemons.adopt(sample_root, idx)
    assert out.hits[0].qualified_name == "РаботаСКонтрагентами.ИННСоответствуетТребованиям"
    wait_until(lambda: handle.alive(), 10, "the spawned daemon")
    assert _port(handle)
