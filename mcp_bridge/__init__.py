"""MCP bridge: bsl-lens search tools for AI agents (official ``mcp`` SDK 2.x, ``MCPServer``).

``bsl-lens mcp [ROOT...]`` serves them on stdio (or streamable HTTP with ``--http``); each
export root's daemon is found or spawned in the background, so the server answers at once
however cold the daemon is. Answers are compact by default, details on request.

* :mod:`mcp_bridge.server`: :func:`~mcp_bridge.server.build_server`, strict arguments, size budgets;
* :mod:`mcp_bridge.tools`: the tools and their error policy;
* :mod:`mcp_bridge.answers`: the daemon's answers as output models; :mod:`mcp_bridge.models`: those
  models (the tools' output schemas); :mod:`mcp_bridge.descriptions`: what the model reads;
* :mod:`mcp_bridge.links`: one daemon connection per root, with bounded waits;
* :mod:`mcp_bridge.serve`: the ``bsl-lens mcp`` command, stdio and HTTP (Origin check,
  bearer token); :mod:`mcp_bridge.options`: its arguments.
"""
