"""bsl-lens language server (pygls 2, stdio): ``workspace/symbol``, ``textDocument/documentSymbol``,
the ``bsl-lens/search`` request and status/reindex commands, answered by the per-root daemons.

Modules: :mod:`lsp.server` (the server and its handlers), :mod:`lsp.roots` (one daemon
connection per workspace folder, progress), :mod:`lsp.convert` (daemon results as LSP
values), :mod:`lsp.settings` (initializationOptions), :mod:`daemon.dev.bench_lsp` (the LSP round trip
for ``bsl-lens bench --lsp``).
"""
