"""``bsl-lens bench ROOT --mcp``: what each MCP answer costs an agent, in bytes on the wire.

A raw JSON-RPC client starts ``python -m daemon.cli mcp ROOT`` over stdio, waits until the root's
daemon is ready (embeddings included), sends ``tools/list`` and the calls of :data:`CALLS`, and
reports per call the UTF-8 bytes of the ``result`` received as compact JSON (structured content
and its text copy together), each part's share and the round trip. A daemon the bench started is
stopped at the end. The budgets: :data:`mcp_bridge.server.SIZE_BUDGETS`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from daemon.contract import DEFAULT_EMBEDDER

READY_TIMEOUT_S = 600.0

#: ``(label, tool, arguments)``: the calls measured (names of ssl31-ru; on another root some
#: answer with a tool error, which is measured too).
CALLS: tuple[tuple[str, str, dict], ...] = (
    ("index_status", "index_status", {}),
    ("index_status detail", "index_status", {"detail": True}),
    ("search top 5 (question)", "search", {"query": "как отправить письмо", "top_k": 5}),
    ("search top 5 (name)", "search", {"query": "СообщитьПользователю", "top_k": 5}),
    ("search top 5 (metadata)", "search", {"query": "реквизит ИНН", "top_k": 5}),
    ("search top 5 detail", "search", {"query": "как отправить письмо", "top_k": 5, "detail": True}),
    ("find_symbol 3 hits", "find_symbol", {"query": "СообщитьПользователю", "limit": 3}),
    ("find_symbol 3 hits (fuzzy)", "find_symbol", {"query": "ЗначРекв", "limit": 3}),
    ("find_symbol 3 hits detail", "find_symbol", {"query": "СообщитьПользователю", "limit": 3, "detail": True}),
    ("get_method", "get_method", {"name": "ОбщегоНазначения.СообщитьПользователю"}),
    ("describe_object", "describe_object", {"name": "Справочник.Пользователи"}),
    ("platform_help (name)", "platform_help", {"query": "СтрНайти"}),
    ("platform_help top 5 (question)", "platform_help", {"query": "как найти подстроку в строке"}),
    ("platform_help detail", "platform_help", {"query": "СтрНайти", "detail": True}),
)


def _bytes(obj) -> int:
    """UTF-8 bytes of ``obj`` as compact JSON (non-ASCII kept, as the SDK writes it)."""
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def result_sizes(result: dict) -> dict:
    """``{"bytes", "structured_bytes", "text_bytes"}`` of one ``tools/call`` or ``tools/list``
    result (a dict as received): the whole result, its ``structuredContent`` and its text
    blocks (JSON-encoded, as they travel)."""
    text = [b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text"]
    return {
        "bytes": _bytes(result),
        "structured_bytes": _bytes(result["structuredContent"]) if "structuredContent" in result else 0,
        "text_bytes": sum(_bytes(t) for t in text),
    }


class StdioClient:
    """JSON-RPC over a child's stdin/stdout, one JSON message per line (MCP's stdio framing)."""

    def __init__(self, cmd: list[str], env: dict) -> None:
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self._id = 0

    def request(self, method: str, params: dict | None = None) -> dict:
        """The response message of one request (server notifications are skipped)."""
        self._id += 1
        self.notify(method, params, rid=self._id)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the MCP server closed its stdout (exit {self.proc.poll()})")
            msg = json.loads(line)
            if msg.get("id") == self._id:
                return msg

    def notify(self, method: str, params: dict | None = None, *, rid: int | None = None) -> None:
        """Write one message (a request when ``rid`` is given)."""
        msg: dict = {"jsonrpc": "2.0", "method": method}
        if rid is not None:
            msg["id"] = rid
        if params is not None:
            msg["params"] = params
        self.proc.stdin.write(json.dumps(msg, ensure_ascii=False).encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Close stdin; wait up to 10 s for the server to exit, then kill it."""
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(10)


def _wait_ready(c: StdioClient) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    delay = 0.05
    while True:
        msg = c.request("tools/call", {"name": "index_status", "arguments": {}})
        res = msg.get("result") or {}
        if "error" in msg or res.get("isError"):
            raise RuntimeError(f"index_status failed: {msg.get('error') or res.get('content')}")
        roots = (res.get("structuredContent") or {}).get("roots") or [{}]
        if roots[0].get("state") == "ready" and not roots[0].get("warming"):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the daemon was not ready after {READY_TIMEOUT_S:g} s: {roots[0]}")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def run_mcp_bench(args) -> dict:
    """Measure the answers of ``bsl-lens mcp`` on ``args.root`` (module docstring); returns the
    measurements (the CLI prints them)."""
    from daemon.client import DaemonError, connect, stop_daemon
    from daemon.server import runtime

    root = Path(args.root).resolve()
    index_dir = Path(args.index_dir).resolve() if args.index_dir else None
    try:
        with connect(root, index_dir=index_dir, spawn=False, client="cli"):
            was_running = True
    except DaemonError:
        was_running = False
    cmd = [sys.executable, "-m", "daemon.cli", "mcp", str(root), "--watch", "off"]
    cmd += ["--embedder", args.embedder or DEFAULT_EMBEDDER]
    if index_dir is not None:
        cmd += ["--index-dir", str(index_dir)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out: dict = {"root": str(root), "embedder": args.embedder or DEFAULT_EMBEDDER}
    c = StdioClient(cmd, env)
    try:
        c.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        c.notify("notifications/initialized")
        _wait_ready(c)
        calls: dict = {}
        t = time.perf_counter()
        listed = c.request("tools/list")["result"]
        calls["tools/list"] = {**result_sizes(listed), "ms": round((time.perf_counter() - t) * 1000, 1)}
        for label, tool, arguments in CALLS:
            t = time.perf_counter()
            msg = c.request("tools/call", {"name": tool, "arguments": arguments})
            ms = round((time.perf_counter() - t) * 1000, 1)
            if "error" in msg:
                calls[label] = {"bytes": _bytes(msg["error"]), "ms": ms, "error": msg["error"].get("message", "")}
                continue
            res = msg["result"]
            calls[label] = {**result_sizes(res), "ms": ms}
            if res.get("isError"):
                calls[label]["error"] = (res.get("content") or [{}])[0].get("text", "")[:200]
        out["calls"] = calls
    finally:
        c.close()
        if not was_running:
            try:
                stop_daemon(runtime.paths_for(root, index_dir), 60.0)
            except Exception as exc:  # noqa: BLE001 - reported, not raised: the figures are taken
                out["stop_error"] = str(exc)
    return out


__all__ = ["CALLS", "StdioClient", "result_sizes", "run_mcp_bench"]
