"""bsl-lens language server (pygls 2, stdio): ``workspace/symbol``, ``textDocument/documentSymbol``,
the ``bsl-lens/search`` request and status/reindex commands, answered by the per-root daemons.

Modules: :mod:`lsp.server` (the server, its folders and settings, the handlers' registration),
:mod:`lsp.usages` (references, definition, call hierarchy), :mod:`lsp.search` (``bsl-lens/search``),
:mod:`lsp.commands` (status, reindex), :mod:`lsp.hover` (platform help on hover), :mod:`lsp.wire`
(the protocol on stdio and the pygls internals it overrides), :mod:`lsp.roots` (one daemon
connection per workspace folder, progress), :mod:`lsp.convert` (daemon results as LSP
values), :mod:`lsp.settings` (initializationOptions), :mod:`daemon.dev.bench_lsp` (the LSP round trip
for ``bsl-lens bench --lsp``).
"""
