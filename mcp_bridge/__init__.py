"""MCP bridge (official mcp SDK 2.x): placeholder package; the bridge is tracked by its own issue."""
