"""bsl-lens engine: scanning, chunking, indexing and searching a 1C:Enterprise export.

A plain library: no sockets, no asyncio. Front ends (``lsp``, ``mcp_bridge``) reach it
through the daemon's local socket; tests may call it in-process.
"""

__version__ = "0.1.0"
