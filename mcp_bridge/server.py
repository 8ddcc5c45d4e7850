"""The MCP server: :func:`build_server` registers the tools of :mod:`mcp_bridge.tools` on an
``MCPServer`` (mcp 2.x) whose lifespan yields a :class:`~mcp_bridge.links.Bridge` (one
:class:`~mcp_bridge.links.RootLink` per export root, connecting in the background).

Every tool is read-only and rejects unknown arguments (its input schema has
``additionalProperties: false``; the error names the valid ones); an unknown tool name is answered
with the list of tools. Answers are compact by default (``detail: true`` for every field) and held
to :data:`SIZE_BUDGETS`.
"""

import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, ValidationError, create_model, model_validator

from daemon import __version__
from daemon.contract import ECHO_CHARS, clip_echoes, shown

from . import descriptions
from .links import CONNECT_WAIT, Bridge, RootLink
from .models import compact_schema
from .tools import MAX_READ_LINES, MAX_TOP_K, TOOLS, root_help

__all__ = ["MAX_READ_LINES", "MAX_TOP_K", "SIZE_BUDGETS", "argument_errors", "build_server"]

#: The most a client receives, in bytes of compact UTF-8 JSON (structured content and its text copy
#: together), for: the tool list, ``index_status`` of one root, ``search`` with top_k 5,
#: ``find_symbol`` with limit 3, ``find_references`` with limit 10, ``call_graph`` at its defaults
#: (depth 2, fan_out 10) and ``platform_help`` (a name, a question; top_k 5), compact answers.
#: Checked by ``tests/mcp/test_mcp.py``.
SIZE_BUDGETS = {
    "tools/list": 24_000,  # ten tools (docs/frontends.md has the measured size)
    "index_status": 3_000,
    "search": 6_000,
    "find_symbol": 5_000,
    "find_references": 6_000,
    "call_graph": 8_000,
    "platform_help": 5_000,
}

#: Every tool only reads (the destructive and idempotent hints mean something only for tools that write).
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

DESCRIPTIONS = {
    "search": descriptions.SEARCH,
    "find_symbol": descriptions.FIND_SYMBOL,
    "get_method": descriptions.GET_METHOD,
    "read_module": descriptions.READ_MODULE,
    "read_document": descriptions.READ_DOCUMENT,
    "describe_object": descriptions.DESCRIBE_OBJECT,
    "find_references": descriptions.FIND_REFERENCES,
    "call_graph": descriptions.CALL_GRAPH,
    "platform_help": descriptions.PLATFORM_HELP,
    "index_status": descriptions.INDEX_STATUS,
}


def build_server(links: list[RootLink], *, connect_wait: float = CONNECT_WAIT) -> MCPServer:
    """The MCP server for these export roots.

    ``links``: one :class:`RootLink` per root, not started (the lifespan starts them, so
    ``initialize`` never waits for a daemon); ``connect_wait``: seconds a tool waits for a daemon
    that is still starting (tests use a short one). The lifespan closes the connections on exit
    (the daemons keep running). Run it with ``server.run()`` (stdio) or see :mod:`mcp_bridge.serve`
    for streamable HTTP.
    """
    bridge = Bridge(links, connect_wait)

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[Bridge]:
        bridge.start()  # connect/spawn in the background: initialize answers at once
        try:
            yield bridge
        finally:
            await bridge.aclose()

    tools = [
        _strict(
            Tool.from_function(fn, description=DESCRIPTIONS[fn.__name__], annotations=READ_ONLY),
            root=root_help(links, fn.__name__),
        )
        for fn in TOOLS
    ]
    return _Server(
        "bsl-lens",
        title="bsl-lens: 1C:Enterprise code search",
        version=__version__,
        instructions=descriptions.instructions("; ".join(f"{link.name} = {link.root}" for link in links)),
        tools=tools,
        lifespan=lifespan,
        log_level="WARNING",
    )


# ------------------------------------------------------------------------------ strict arguments
class _StrictArgs(ArgModelBase):
    model_config = ConfigDict(
        arbitrary_types_allowed=True,
        extra="forbid",
        json_schema_extra=lambda schema, _cls: compact_schema(schema, output=False),
    )

    @model_validator(mode="before")
    @classmethod
    def _known_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = [f.alias or n for n, f in cls.model_fields.items()]
            unknown = sorted(shown(k) if len(k) > ECHO_CHARS else k for k in data if k not in known)
            if unknown:
                raise ValueError(f"unknown argument(s) {', '.join(unknown)}; this tool takes: {', '.join(known)}")
        return data


def _strict(tool: Tool, *, root: str | None = None) -> Tool:
    """Make a tool reject unknown arguments (the SDK ignores them) with an error that names the
    valid ones, and its input schema carry ``additionalProperties: false`` and no titles. ``root``:
    the description of its ``root`` argument, naming the served roots; ``""``: one root is served,
    so the argument is accepted but not advertised. The SDK has no public option for this, so the
    tool's ``fn_metadata.arg_model`` is swapped (pinned by ``tests/test_framework_overrides.py``)."""
    base = tool.fn_metadata.arg_model
    fields = {}
    for name, f in base.model_fields.items():
        if name == "root" and root:
            f = copy.copy(f)
            f.description = root
        fields[name] = (f.annotation, f)
    strict = create_model(base.__name__, __base__=_StrictArgs, **fields)
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    if root == "":
        tool.parameters["properties"].pop("root", None)
    return tool


class _Server(MCPServer):
    """``MCPServer`` whose argument errors read as one plain sentence per argument (the SDK passes
    on pydantic's text: model name, ``[type=..., input_value=...]`` and a link), and which answers
    an unknown tool name with the tools it has."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """As ``MCPServer.call_tool``; a ``ToolError`` caused by argument validation is raised
        again with :func:`argument_errors`' text (same cause, so the SDK still logs field names
        only); an unknown ``name`` is a ``ToolError`` that lists the tools. Every tool error
        passes here, so this is where a long argument echoed in its text is cut to a prefix
        (:func:`daemon.contract.clip_echoes`)."""
        known = [t.name for t in await self.list_tools()]
        if name not in known:
            raise ToolError(f"unknown tool {shown(name)}; the tools are: {', '.join(known)}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            invalid = isinstance(cause, ValidationError)
            message = f"invalid arguments for {name}: {argument_errors(cause)}" if invalid else str(exc)
            clipped = clip_echoes(message, [*arguments.keys(), *arguments.values()])
            if invalid or clipped != message:
                raise ToolError(clipped) from cause
            raise


def argument_errors(exc: ValidationError) -> str:
    """pydantic's errors as ``arg: message`` joined by ``; `` (``Value error, `` and the
    boilerplate dropped; a missing argument reads ``query: required, missing``)."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", ""))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err.get("type") == "missing":
            msg = "required, missing"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
