"""MCP bridge: bsl-lens search tools for AI agents (official ``mcp`` SDK 2.x, ``MCPServer``).

``bsl-lens mcp [ROOT...]`` serves them on stdio (or streamable HTTP with ``--http``); each
export root's daemon is found or spawned in the background, so the server answers at once
however cold the daemon is.

* :mod:`mcp_bridge.server`: :func:`~mcp_bridge.server.build_server`, the tools and their
  error policy;
* :mod:`mcp_bridge.models`: the pydantic output models (the tools' output schemas);
* :mod:`mcp_bridge.links`: one daemon connection per root, with bounded waits;
* :mod:`mcp_bridge.serve`: the ``bsl-lens mcp`` command, stdio and HTTP (Origin check,
  bearer token).
"""
