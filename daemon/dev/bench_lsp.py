"""``bsl-lens bench ROOT --lsp``: the LSP round trip, measured the way an editor sees it.

A raw LSP client (:class:`RawClient`: JSON-RPC framing and ``json.loads``, as an editor does it)
starts ``python -m lsp`` over stdio with the root as its one workspace folder, waits until the
folder's daemon is ready, then times ``workspace/symbol`` over the gold set's symbol queries (and
scores those answers), typing one character at a time with every superseded request cancelled,
and the gold set's questions in words. The figures are listed in ``docs/frontends.md``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlparse

from daemon.contract import DEFAULT_EMBEDDER
from daemon.stats import percentile as _pct

READY_TIMEOUT_S = 600.0
METHOD, FUNCTION = 6, 12  # LSP SymbolKind values


def _summary(ms: list[float]) -> dict:
    return {
        "p50": round(_pct(ms, 0.5), 3),
        "p95": round(_pct(ms, 0.95), 3),
        "max": round(max(ms), 3) if ms else None,
        "n": len(ms),
    }


def default_gold() -> Path:
    """``$BSL_LENS_EVAL/gold_dev.jsonl``, else ``shared/eval/gold_dev.jsonl`` beside the
    repository (the tests' convention)."""
    base = Path(os.environ.get("BSL_LENS_EVAL", Path(__file__).resolve().parents[3] / "shared" / "eval"))
    return base / "gold_dev.jsonl"


CAPABILITIES = {
    "workspace": {"symbol": {"symbolKind": {"valueSet": list(range(1, 27))}}, "executeCommand": {}},
    "general": {"positionEncodings": ["utf-16"]},
}


class RawClient:
    """A minimal LSP client over a child's stdio: ``Content-Length`` frames, ``json.loads``
    (what an editor does natively), server requests answered with null, notifications
    dropped. Measures the server, not a client library's object mapping."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def start(cls, *cmd: str, env: dict | None = None) -> RawClient:
        """Start ``cmd`` (the server) with pipes for stdin/stdout; its stderr is discarded."""
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, limit=1 << 26
        )
        return cls(proc)

    def _write(self, msg: dict) -> None:
        body = json.dumps(msg, ensure_ascii=False).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send(self, method: str, params) -> tuple[int, asyncio.Future]:
        """Write a request now; its id and a future for the response message."""
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return rid, fut

    async def request(self, method: str, params=None):
        """The ``result`` of a request; RuntimeError for an error response."""
        _, fut = self.send(method, params)
        await self.proc.stdin.drain()
        msg = await fut
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']}")
        return msg.get("result")

    def notify(self, method: str, params=None) -> None:
        """Write a notification (flushed by the next ``drain``/request)."""
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def _read_loop(self) -> None:
        out = self.proc.stdout
        try:
            while True:
                head = await out.readuntil(b"\r\n\r\n")
                n = int(head.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
                msg = json.loads(await out.readexactly(n))
                if "method" in msg:
                    if "id" in msg:  # a request from the server
                        self._write({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                    continue
                fut = self._pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(RuntimeError("the server closed its stdout"))

    async def close(self) -> None:
        """Stop reading; wait up to 10 s for the server to exit, then kill it."""
        self._reader.cancel()
        if self.proc.returncode is None:
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def hit_key(sym: dict, root_uri: str) -> tuple[str, str | None]:
    """``(path relative to the root, symbol)`` of one ``workspace/symbol`` result (JSON), in
    the gold set's convention (methods: their name; metadata objects and everything else:
    None; fields cannot be told apart from the LSP answer and score as None)."""
    path = unquote(urlparse(sym["location"]["uri"]).path)
    rel = unicodedata.normalize("NFC", path[len(unquote(urlparse(root_uri).path).rstrip("/")) + 1 :])
    if sym["kind"] in (METHOD, FUNCTION):
        return rel, sym["name"]
    return rel, None


async def _bench(args) -> dict:
    from pygls.uris import from_fs_path

    from daemon.dev.evaluate import METRICS, load_gold, score

    root = Path(args.root).resolve()
    corpus = getattr(args, "corpus", None) or root.name
    gold_path = Path(args.gold) if getattr(args, "gold", None) else default_gold()
    entries = load_gold(gold_path, corpus) if gold_path.is_file() else []
    sym_entries = [e for e in entries if e["intent"] == "symbol"]
    nl_entries = [e for e in entries if e["intent"] == "semantic"]
    out: dict = {"root": str(root), "corpus": corpus, "gold": str(gold_path)}
    if not sym_entries:
        out["note"] = f"no symbol queries for corpus {corpus!r} in {gold_path}: latency on a few fixed names only"

    options = {"embedder": args.embedder or DEFAULT_EMBEDDER, "watch": "off", "logLevel": "error"}
    if args.index_dir:
        options["indexDir"] = str(Path(args.index_dir).resolve())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    t = time.perf_counter()
    client = await RawClient.start(sys.executable, "-m", "lsp", env=env)
    root_uri = from_fs_path(str(root))
    try:
        await client.request(
            "initialize",
            {
                "processId": os.getpid(),
                "capabilities": CAPABILITIES,
                "workspaceFolders": [{"uri": root_uri, "name": root.name}],
                "initializationOptions": options,
            },
        )
        out["initialize_ms"] = round((time.perf_counter() - t) * 1000, 1)  # incl. starting Python
        client.notify("initialized", {})
        st = await _wait_ready(client)
        out["ready_after_s"] = round(time.perf_counter() - t, 2)
        d = st["folders"][0].get("daemon") or {}
        dense = d.get("dense") or {}
        out["daemon"] = {
            "pid": d.get("pid"),
            "modules": d.get("modules"),
            "methods": d.get("methods"),
            "chunks": d.get("chunks"),
            "dense": f"{dense.get('done')}/{dense.get('total')}",
        }

        queries = [e["query"] for e in sym_entries] or ["ОбщегоНазначения", "ЗначениеРеквизитаОбъекта", "ЗнРекОб"]

        async def ask(q: str):
            t0 = time.perf_counter()
            res = await client.request("workspace/symbol", {"query": q})
            return res or [], (time.perf_counter() - t0) * 1000

        for q in queries:  # warm-up pass
            await ask(q)
        lat: list[float] = []
        answers: dict[str, list] = {}
        sizes = []
        for _ in range(max(1, args.rounds)):
            for q in queries:
                res, ms = await ask(q)
                lat.append(ms)
                answers.setdefault(q, res)
                sizes.append(len(res))
        out["workspace_symbol_ms"] = _summary(lat)
        out["results_per_query"] = {"mean": round(sum(sizes) / len(sizes), 1), "max": max(sizes)}
        if sym_entries:
            rows = [score(e, [hit_key(s, root_uri) for s in answers[e["query"]]], "symbol") for e in sym_entries]
            out["quality"] = {m: round(sum(r[m] for r in rows) / len(rows), 3) for m in METRICS}
            out["quality"]["n"] = len(rows)

        # typing: one request per keystroke written at once, each superseded one cancelled
        typing = []
        cancelled = answered = 0
        for q in queries:
            sent = []
            for i in range(1, len(q) + 1):
                if sent:
                    client.notify("$/cancelRequest", {"id": sent[-1][0]})
                sent.append(client.send("workspace/symbol", {"query": q[:i]}))
            t_last = time.perf_counter()
            await client.proc.stdin.drain()
            last = await sent[-1][1]
            typing.append((time.perf_counter() - t_last) * 1000)
            assert "result" in last, last
            for _, fut in sent[:-1]:
                msg = await fut
                if "error" in msg:
                    cancelled += 1
                else:
                    answered += 1
        out["typing_ms"] = _summary(typing)
        out["typing_superseded"] = {"cancelled": cancelled, "answered_before_the_cancel": answered}

        if nl_entries:
            nl = []
            for e in nl_entries[:50]:
                _, ms = await ask(e["query"])
                nl.append(ms)
            out["natural_language_ms"] = _summary(nl)
        await client.request("shutdown")
        client.notify("exit")
        await client.proc.stdin.drain()
    finally:
        await client.close()
    return out


async def _wait_ready(client: RawClient) -> dict:
    deadline = time.monotonic() + READY_TIMEOUT_S
    delay = 0.05
    while True:
        st = await client.request("workspace/executeCommand", {"command": "bsl-lens.status"})
        folders = st["folders"] if isinstance(st, dict) else []
        if folders and folders[0].get("state") == "ready" and (folders[0].get("daemon") or {}).get("state") == "ready":
            return st
        if time.monotonic() > deadline:
            raise TimeoutError(f"the daemon was not ready after {READY_TIMEOUT_S:g} s: {st}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


def run_lsp_bench(args) -> dict:
    """Run the LSP benchmark for ``args.root`` (module docstring); returns the measurements
    (the CLI prints them: nothing in ``lsp/`` writes to stdout)."""
    return asyncio.run(_bench(args))


__all__ = ["RawClient", "hit_key", "run_lsp_bench"]
