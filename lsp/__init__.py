"""LSP front end (pygls): placeholder package; the server is tracked by its own issue."""
