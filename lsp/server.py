"""The bsl-lens language server (pygls 2, stdio): editor symbol search over the daemons.

``bsl-lens lsp`` (or ``python -m lsp``) speaks LSP on stdin/stdout. On ``initialize`` it
reads the workspace folders (each one an export root) and ``initializationOptions``
(:mod:`lsp.settings`) and answers at once; the daemon of every folder is found or spawned
in the background (:mod:`lsp.roots`), with ``$/progress`` reports while it starts and
indexes.

Requests served (handlers are named after the LSP method):

* ``workspace/symbol``: the daemon's ``symbols`` ranking (names channel first for a name,
  hybrid BM25 + dense for several words) of every ready folder, merged in a stable order
  (:func:`lsp.convert.merge_ranked`), at most ``maxSymbols``. Results are
  ``WorkspaceSymbol`` with ``containerName`` = the owner; with a client that can resolve
  ``location.range`` the locations are URI-only and ``workspaceSymbol/resolve`` fills the
  range from the daemon's current chunk.
* ``textDocument/documentSymbol`` for ``.bsl`` files: regions as namespaces holding their
  methods, from the daemon's chunks.
* find usages, from the daemon's references (:mod:`lsp.usages`): ``textDocument/references``
  (calls, strings naming the method, metadata bindings), ``textDocument/definition`` (a call or
  a string naming a method), ``textDocument/prepareCallHierarchy``,
  ``callHierarchy/incomingCalls`` and ``callHierarchy/outgoingCalls``.
* ``textDocument/hover`` in ``.bsl`` files: the platform help entry (:mod:`lsp.hover`) of a
  global function, ``Новый <Тип>`` or a system enumeration's value under the cursor, from the
  version the daemon chose for the configuration; a method of the module of that name wins.
* ``bsl-lens/search`` (custom request, :mod:`lsp.search`): search by meaning for the editors'
  own UI, since a symbol picker re-filters results by name.
* ``workspace/executeCommand`` (:mod:`lsp.commands`): ``bsl-lens.status`` and ``bsl-lens.reindex``.

Nothing is cached here: every answer comes from the daemons, which watch the files.
Positions are always UTF-16 (the daemon computes them so; the server negotiates ``utf-16``
even when a client offers UTF-8 first: :class:`lsp.wire.BslLensProtocol`).
``$/cancelRequest`` cancels the request's task; its pending daemon call is abandoned (the
daemon's late answer is dropped), so a burst of keystrokes leaves nothing queued behind the
last one.

stdout is the protocol's alone: :func:`lsp.wire.claim_stdout` moves the wire to a private
file descriptor and points fd 1 (and ``sys.stdout``) at stderr before anything else runs, so
a stray ``print``, a C library or a child process cannot corrupt it. Logs go to stderr,
``--log-file`` and, from ``logLevel`` up, ``window/logMessage``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import sys
import threading
from typing import Any, BinaryIO

import msgspec
from lsprotocol import types
from pygls.io_ import run_async
from pygls.lsp.server import LanguageServer

from daemon import __version__
from daemon.client import CommandError, DaemonError
from daemon.server.protocol import NOT_FOUND

from . import commands, convert, search, usages
from .options import add_arguments
from .roots import Root
from .settings import Folder, Settings, parse_options
from .wire import BslLensProtocol, WireWriter, claim_stdout, encode, open_reader

log = logging.getLogger(__name__)
#: The logger trees of this process's own modules (each logs to ``getLogger(__name__)``):
#: forwarded to the window log, levelled by ``-v`` and the ``logLevel`` setting.
OWN_LOGGERS = ("lsp", "daemon")

_LOG_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


# ------------------------------------------------------------------------------ server
class BslLensServer(LanguageServer):
    """The server's state: settings, one :class:`~lsp.roots.Root` per workspace folder,
    and what the client can do (kinds, resolve support, progress)."""

    def __init__(self) -> None:
        super().__init__("bsl-lens", __version__, protocol_cls=BslLensProtocol, max_workers=4)
        self.settings = Settings()
        self.roots: list[Root] = []
        self.symbol_kinds: frozenset[int] | None = None
        self.document_kinds: frozenset[int] | None = None
        self.hierarchical = True
        self.resolve_range = False
        self.progress_supported = False
        self.initialized_event = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping = False  # set once serving ends: nothing more goes to the client
        self.inflight = 0  # daemon calls of symbol/search requests waiting right now
        self.requests = 0
        self.cancelled = 0
        self._tokens = itertools.count(1)
        self._window_handler: WindowLogHandler | None = None
        self._options: Any = None  # initializationOptions as received (for folders added later)

    # ------------------------------------------------------------------ setup
    def configure(self, params: types.InitializeParams) -> None:
        """Read the client's capabilities, folders and settings; start the roots."""
        self.loop = asyncio.get_running_loop()
        caps = params.capabilities
        ws = caps.workspace
        sym = ws.symbol if ws is not None else None
        self.symbol_kinds = _kinds(sym.symbol_kind if sym is not None else None)
        rs = sym.resolve_support if sym is not None else None
        self.resolve_range = bool(rs and "location.range" in (rs.properties or []))
        td = caps.text_document
        ds = td.document_symbol if td is not None else None
        self.document_kinds = _kinds(ds.symbol_kind if ds is not None else None)
        self.hierarchical = bool(ds and ds.hierarchical_document_symbol_support)
        self.progress_supported = bool(caps.window and caps.window.work_done_progress)

        folders = _folders(params)
        self._options = params.initialization_options
        parsed = parse_options(self._options, folders)
        self.settings = parsed.server
        self._install_window_log()
        for problem in parsed.problems:
            log.warning("settings: %s", problem)
        if parsed.problems:
            self.notify_user("bsl-lens settings: " + "; ".join(parsed.problems), types.MessageType.Warning)
        if parsed.unknown:
            log.info("settings: ignored unknown keys %s", ", ".join(parsed.unknown))
        if not folders:
            log.warning("no workspace folder: open the folder of a 1C export (Configuration.xml or EDT projects)")
        for f in folders:
            root = Root(self, f, parsed.folders[f.uri])
            self.roots.append(root)
            root.start()

    def change_folders(self, added: list[types.WorkspaceFolder], removed: list[types.WorkspaceFolder]) -> None:
        """``workspace/didChangeWorkspaceFolders``: stop the roots of removed folders and
        start roots for added ones, with their settings from the ``initializationOptions``
        given at ``initialize`` (a per-folder entry or an ``indexDir`` map may name them)."""
        gone = {wf.uri for wf in removed}
        for r in [r for r in self.roots if r.folder.uri in gone]:
            self.roots.remove(r)
            asyncio.get_running_loop().create_task(r.close())
            log.info("workspace folder %s removed", r.folder.path)
        have = {r.folder.uri for r in self.roots}
        new = [
            f
            for f in _folders(
                types.InitializeParams(capabilities=types.ClientCapabilities(), workspace_folders=list(added))
            )
            if f.uri not in have
        ]
        if not new:
            return
        parsed = parse_options(self._options, [r.folder for r in self.roots] + new)
        for f in new:
            root = Root(self, f, parsed.folders[f.uri])
            self.roots.append(root)
            root.start()
            log.info("workspace folder %s added", f.path)

    def _install_window_log(self) -> None:
        level = getattr(logging, self.settings.log_level.upper())
        if self._window_handler is None:
            self._window_handler = WindowLogHandler(self)
            for name in OWN_LOGGERS:
                logging.getLogger(name).addHandler(self._window_handler)
        self._window_handler.setLevel(level)
        for name in OWN_LOGGERS:
            logger = logging.getLogger(name)
            if logger.getEffectiveLevel() > level:
                logger.setLevel(level)

    def new_progress_token(self) -> str:
        """A fresh work-done progress token."""
        return f"bsl-lens/{os.getpid()}/{next(self._tokens)}"

    def notify_user(self, message: str, type_: types.MessageType = types.MessageType.Info) -> None:
        """``window/showMessage`` (from any thread)."""
        self.call_on_loop(self.window_show_message, types.ShowMessageParams(type=type_, message=message))

    def call_on_loop(self, fn, *args) -> None:
        """Run ``fn(*args)`` on the event loop thread (the protocol's writer is not
        thread-safe); directly when already there."""
        loop = self.loop
        if loop is None or loop.is_closed() or self.stopping:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    async def close_roots(self) -> None:
        """Close every daemon connection (the daemons keep running)."""
        roots, self.roots = self.roots, []
        await asyncio.gather(*(r.close() for r in roots), return_exceptions=True)

    # ------------------------------------------------------------------ queries
    def ready_roots(self, folder: str | None = None) -> list[Root]:
        """Connected roots (only the one with this folder URI or path if given)."""
        roots = [r for r in self.roots if r.client is not None]
        if folder:
            roots = [r for r in roots if folder in (r.folder.uri, r.folder.path)]
        return roots

    async def call_daemon(self, root: Root, method: str, *args: Any, serial: bool = False, **kw: Any) -> Any:
        """One daemon call for a request; None (logged) if the daemon fails it. A lost
        connection is noticed and re-made by the root itself.

        ``serial`` (``symbols`` and ``search``, the calls a user fires per keystroke): at
        most one such call per root and method is at the daemon at a time. A request
        waits for the previous call to finish, even if that one's request was cancelled
        meanwhile (its call runs to the end, shielded, and its answer is dropped), and a
        request cancelled while it waits never reaches the daemon. So a burst of
        keystrokes with ``$/cancelRequest`` for the superseded ones costs the daemon one
        or two queries, not one per keystroke, and nothing stale stays queued.
        """
        if root.client is None:
            return None
        if not serial:
            return await self._daemon_call(root, method, args, kw)
        lock = root.lock(method)
        await lock.acquire()
        try:
            task = asyncio.get_running_loop().create_task(self._daemon_call(root, method, args, kw))
        except BaseException:
            lock.release()
            raise
        task.add_done_callback(lambda _t: lock.release())
        return await asyncio.shield(task)

    async def _daemon_call(self, root: Root, method: str, args: tuple, kw: dict) -> Any:
        client = root.client
        if client is None:
            return None
        self.inflight += 1
        try:
            timeout = self.settings.request_timeout
            if method == "symbols":  # only the fields workspace/symbol uses: half the decoding
                return await client.call(
                    "symbols", {"query": args[0], "slim": True, **kw}, result=SymbolsAnswer, timeout=timeout
                )
            return await getattr(client, method)(*args, timeout=timeout, **kw)
        except CommandError as exc:
            log.warning("%s: %s failed: %s", root.name, method, exc.message)
        except DaemonError as exc:
            log.warning("%s: %s failed: %s", root.name, method, exc)
        finally:
            self.inflight -= 1
        return None

    async def workspace_symbols(self, query: str) -> list[dict]:
        """``workspace/symbol`` for ``query`` over every ready folder (see the module
        docstring), as the ``WorkspaceSymbol`` JSON objects themselves
        (:func:`lsp.convert.workspace_symbol_json`). Empty during warm-up and for an empty
        query; never raises for a daemon failure (that folder is left out and the failure
        logged)."""
        self.requests += 1
        roots = self.ready_roots()
        if not query.strip() or not roots:
            return []
        cap = self.settings.max_symbols
        try:
            results = await asyncio.gather(
                *(self.call_daemon(r, "symbols", query, limit=cap, serial=True) for r in roots)
            )
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        merged = convert.merge_ranked([res.hits if res is not None else [] for res in results], cap)
        out = []
        for ri, hit in merged:
            root = roots[ri]
            uri = root.uri_for(hit.path)
            data = (
                {"folder": root.folder.uri, "id": hit.id, "range": list(hit.name_range)} if self.resolve_range else None
            )
            out.append(
                convert.workspace_symbol_json(hit, uri, kinds=self.symbol_kinds, uri_only=self.resolve_range, data=data)
            )
        return out

    async def resolve_symbol(self, symbol: types.WorkspaceSymbol) -> types.WorkspaceSymbol:
        """``workspaceSymbol/resolve``: the range of a URI-only location, read from the
        daemon's current chunk (so an edit since the search is seen), falling back to the
        range the search saw."""
        data = convert.plain(symbol.data)
        if not isinstance(data, dict):
            data = {}
        loc = symbol.location
        if not isinstance(loc, types.LocationUriOnly) and getattr(loc, "range", None) is not None:
            return symbol
        rng = data.get("range") or [0, 0, 0, 0]
        root = next((r for r in self.roots if r.folder.uri == data.get("folder")), None)
        if root is not None and data.get("id"):
            chunk = await self.call_daemon(root, "get_chunk", data["id"])
            if chunk is not None:
                rng = list(chunk.name_range)
        symbol.location = types.Location(uri=loc.uri, range=convert.lsp_range(rng))
        return symbol

    def root_of(self, path: str) -> tuple[Root, str] | None:
        """The folder holding ``path`` (the innermost one) and the path relative to it."""
        best = None
        for r in self.roots:
            rel = convert.relative_path(r.folder.path, path)
            if rel is not None and (best is None or len(r.folder.path) > len(best[0].folder.path)):
                best = (r, rel)
        return best

    async def document_symbols(self, uri: str):
        """``textDocument/documentSymbol`` of a ``.bsl`` file (None for other files, files
        outside the folders, and during warm-up)."""
        path = convert.uri_to_path(uri)
        if path is None or not path.lower().endswith(".bsl"):
            return None
        found = self.root_of(path)
        if found is None or found[0].client is None:
            return None
        root, rel = found
        try:
            chunks = await root.client.document_symbols(rel, timeout=self.settings.request_timeout)
        except CommandError as exc:
            if exc.code != NOT_FOUND:
                log.warning("%s: document_symbols %s failed: %s", root.name, rel, exc.message)
            return None
        except DaemonError as exc:
            log.warning("%s: document_symbols %s failed: %s", root.name, rel, exc)
            return None
        outline = convert.document_symbols(chunks, kinds=self.document_kinds)
        return outline if self.hierarchical else convert.flat_symbols(outline, uri)

    async def hover(self, uri: str, line: int, character: int) -> types.Hover | None:
        """``textDocument/hover`` in a ``.bsl`` file: the platform help entry of the name under
        the cursor (:func:`lsp.hover.hover_target`: a global function, ``Новый <Тип>``, a system
        enumeration's value), read from the file's text as the daemon has it; a method of the
        module with that name wins (its header and doc comment). None for anything else, files
        outside the folders and during warm-up."""
        from .hover import hover_markdown, hover_target, local_method_markdown

        path = convert.uri_to_path(uri)
        if path is None or not path.lower().endswith(".bsl"):
            return None
        found = self.root_of(path)
        if found is None or found[0].client is None:
            return None
        root, rel = found
        text = await self.call_daemon(root, "read_module", rel, line + 1, line + 1)
        if text is None or not text.text:
            return None
        target = hover_target(text.text.splitlines()[0] if text.text else "", character)
        if target is None:
            return None
        rng = types.Range(start=types.Position(line, target.start), end=types.Position(line, target.end))
        if target.local:
            chunks = await self.call_daemon(root, "document_symbols", rel) or []
            key = target.name.casefold().replace("ё", "е")
            for c in chunks:
                if c.kind in ("procedure", "function") and c.name.casefold().replace("ё", "е") == key:
                    return types.Hover(contents=_markdown(local_method_markdown(c)), range=rng)
        ans = await self.call_daemon(root, "platform_help", target.query, top_k=5, names_only=True)
        if ans is None:
            return None
        entry = next((e for e in ans.entries if e.kind in target.kinds), None)
        if entry is None:
            return None
        return types.Hover(contents=_markdown(hover_markdown(entry, ans.platform)), range=rng)


class SymbolHit(msgspec.Struct, kw_only=True):
    """The fields of a daemon ``Hit`` that ``workspace/symbol`` uses; decoding into it skips the
    rest (snippets, signatures: half the decoding time of a full answer)."""

    id: str
    path: str
    symbol: str | None = None
    kind: str
    name: str
    owner: str = ""
    object_type: str = ""
    module_kind: str = ""
    name_range: tuple[int, int, int, int] = (0, 0, 0, 0)
    score: float = 0.0
    match: str = ""


class SymbolsAnswer(msgspec.Struct, kw_only=True):
    """The daemon's ``symbols`` result (a ``SearchResult``) with :class:`SymbolHit` hits."""

    hits: list[SymbolHit]
    total: int = 0
    dense_done: int = 0
    dense_total: int = 0


def _markdown(text: str) -> types.MarkupContent:
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=text)


def _kinds(sk: types.ClientSymbolKindOptions | None) -> frozenset[int] | None:
    """The kind numbers a client supports (None: all of them are fine)."""
    if sk is None or not sk.value_set:
        return convert.BASE_KINDS
    return frozenset(int(k) for k in sk.value_set)


def _folders(params: types.InitializeParams) -> list[Folder]:
    out = []
    src = params.workspace_folders or []
    if not src:
        uri = params.root_uri
        if uri is None and params.root_path:
            from pygls.uris import from_fs_path

            uri = from_fs_path(params.root_path)
        if uri:
            src = [types.WorkspaceFolder(uri=uri, name=convert.uri_name(uri))]
    seen = set()
    for wf in src:
        path = convert.uri_to_path(wf.uri)
        if path is None or wf.uri in seen:
            log.warning("workspace folder %s is not a local folder; ignored", wf.uri)
            continue
        seen.add(wf.uri)
        out.append(Folder(uri=wf.uri, path=path, name=wf.name or convert.uri_name(wf.uri)))
    return out


# ------------------------------------------------------------------------------ logging
class WindowLogHandler(logging.Handler):
    """Forwards the records of :data:`OWN_LOGGERS` as ``window/logMessage`` (never pygls' own, which
    would recurse), from any thread."""

    def __init__(self, server: BslLensServer) -> None:
        super().__init__()
        self.server = server
        self._busy = threading.local()
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        """Send one record as ``window/logMessage`` (on the event loop)."""
        if record.name.startswith("pygls") or getattr(self._busy, "on", False):
            return  # pygls' own records, and records logged while sending one (a failing wire)
        self._busy.on = True
        try:
            msg = self.format(record)
            type_ = _LOG_TYPES.get(
                record.levelno, types.MessageType.Log if record.levelno < logging.INFO else types.MessageType.Error
            )
            self.server.call_on_loop(self.server.window_log_message, types.LogMessageParams(type=type_, message=msg))
        except Exception:  # noqa: BLE001 - a log line must never break the server
            pass
        finally:
            self._busy.on = False


# ------------------------------------------------------------------------------ handlers
SERVER = BslLensServer()


@SERVER.feature(types.INITIALIZE)
def initialize(ls: BslLensServer, params: types.InitializeParams) -> None:
    """Read folders and settings, start connecting; returns at once (warm-up runs in the
    background)."""
    ls.configure(params)


@SERVER.feature(types.INITIALIZED)
def initialized(ls: BslLensServer, params: types.InitializedParams) -> None:
    """The client is ready for server requests: progress bars may be created now."""
    ls.initialized_event.set()


@SERVER.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_workspace_folders(ls: BslLensServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    """Folders added to or removed from the workspace: connect or drop their daemons."""
    ls.change_folders(list(params.event.added or []), list(params.event.removed or []))


@SERVER.feature(types.SHUTDOWN)
def shutdown(ls: BslLensServer, params: None) -> None:
    """Stop reconnecting and end the progress bars; the connections are closed on exit
    (the daemons keep running for other clients)."""
    for r in ls.roots:
        r.stop()


@SERVER.feature(types.WORKSPACE_SYMBOL)
async def workspace_symbol(ls: BslLensServer, params: types.WorkspaceSymbolParams) -> msgspec.Raw:
    """Symbols by name (and by meaning for several words) over every ready folder; the
    ``WorkspaceSymbol[]`` JSON, encoded here (see :meth:`lsp.wire.BslLensProtocol._send_data`)."""
    return msgspec.Raw(encode(await ls.workspace_symbols(params.query)))


@SERVER.feature(types.WORKSPACE_SYMBOL_RESOLVE)
async def workspace_symbol_resolve(ls: BslLensServer, params: types.WorkspaceSymbol) -> types.WorkspaceSymbol:
    """Fill the range of a URI-only symbol location."""
    return await ls.resolve_symbol(params)


@SERVER.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL, types.DocumentSymbolOptions(label="bsl-lens"))
async def document_symbol(ls: BslLensServer, params: types.DocumentSymbolParams):
    """Regions and methods of a ``.bsl`` module."""
    return await ls.document_symbols(params.text_document.uri)


@SERVER.feature(types.TEXT_DOCUMENT_REFERENCES)
async def references(ls: BslLensServer, params: types.ReferenceParams):
    """Find usages of the method under the cursor."""
    return await usages.references(ls, params)


@SERVER.feature(types.TEXT_DOCUMENT_DEFINITION)
async def definition(ls: BslLensServer, params: types.DefinitionParams):
    """Go to the method a call or a string under the cursor names."""
    return await usages.definition(ls, params)


@SERVER.feature(types.TEXT_DOCUMENT_PREPARE_CALL_HIERARCHY)
async def prepare_call_hierarchy(ls: BslLensServer, params: types.CallHierarchyPrepareParams):
    """The call hierarchy's root item: the method under the cursor."""
    return await usages.prepare_call_hierarchy(ls, params)


@SERVER.feature(types.CALL_HIERARCHY_INCOMING_CALLS)
async def incoming_calls(ls: BslLensServer, params: types.CallHierarchyIncomingCallsParams):
    """Who calls the item."""
    return await usages.incoming_calls(ls, params)


@SERVER.feature(types.CALL_HIERARCHY_OUTGOING_CALLS)
async def outgoing_calls(ls: BslLensServer, params: types.CallHierarchyOutgoingCallsParams):
    """What the item calls."""
    return await usages.outgoing_calls(ls, params)


@SERVER.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: BslLensServer, params: types.HoverParams) -> types.Hover | None:
    """Platform help on the global function, ``Новый <Тип>`` or system enumeration value under
    the cursor (a method of the module with the same name wins)."""
    return await ls.hover(params.text_document.uri, params.position.line, params.position.character)


@SERVER.feature(search.SEARCH_REQUEST)
async def search_request(ls: BslLensServer, params: Any) -> dict:
    """Search by meaning (custom request, :mod:`lsp.search`)."""
    return await search.search(ls, params)


@SERVER.command(commands.STATUS_COMMAND)
async def status_command(ls: BslLensServer, *args: Any) -> dict:
    """Status of the server and of every folder's daemon."""
    return await commands.status(ls)


@SERVER.command(commands.REINDEX_COMMAND)
async def reindex_command(ls: BslLensServer, *args: Any) -> dict:
    """Ask the daemons to re-check their files (see :func:`lsp.commands.reindex`)."""
    return await commands.reindex(ls, args)


# ------------------------------------------------------------------------------ running
def serve_stdio(server: BslLensServer, stdin: BinaryIO, wire: BinaryIO) -> int:
    """Serve LSP on ``stdin``/``wire`` until ``exit`` or end of input; returns the exit
    code (0 after ``shutdown`` + ``exit`` or at end of input, 1 for ``exit`` without
    ``shutdown``). Daemon connections are closed on the way out.

    Not pygls' ``start_io``: it always reads stdin through its threaded ``StdinAsyncReader``
    and takes no reader, so this runs pygls' public ``run_async`` loop with a pipe reader and
    sets the server's private ``_stop_event`` (which pygls' ``shutdown``/``exit`` set);
    both pinned by ``tests/test_framework_overrides.py``."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    stop = threading.Event()
    server._stop_event = stop
    server.protocol.set_writer(WireWriter(wire))
    code = 0

    async def main() -> None:
        reader = await open_reader(server, stdin)
        await run_async(
            stop_event=stop,
            reader=reader,
            protocol=server.protocol,
            logger=log,
            error_handler=server.report_server_error,
        )

    try:
        loop.run_until_complete(main())
    except SystemExit as exc:  # pygls' exit handler
        code = exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        log.error("the client closed the connection")
    finally:
        server.stopping = True
        try:
            loop.run_until_complete(asyncio.wait_for(server.close_roots(), 2.0))
        except BaseException:  # noqa: BLE001 - leaving anyway
            pass
    return code


def main(argv: list[str] | None = None) -> int:
    """``python -m lsp [--stdio] [-v] [--log-file FILE]``: see :func:`serve_args`."""
    return serve_args(build_parser().parse_args(argv))


def serve_args(args: argparse.Namespace, *, configured: bool = False) -> int:
    """Entry point of ``bsl-lens lsp`` / ``python -m lsp`` with parsed options (``verbose``,
    ``log_file``): claim stdout, serve on stdio, and leave with ``os._exit`` (exit code
    as :func:`serve_stdio`), not waiting for daemon spawns still in progress in worker
    threads (the daemons live on by themselves). ``configured``: the caller already set
    up stderr logging."""
    wire = claim_stdout()
    configure_logging(args.verbose, args.log_file, configured=configured)
    log.info("bsl-lens %s language server on stdio (pid %d)", __version__, os.getpid())
    code = serve_stdio(SERVER, sys.stdin.buffer, wire)
    logging.shutdown()
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def build_parser() -> argparse.ArgumentParser:
    """Options of ``python -m lsp`` (the same as ``bsl-lens lsp``)."""
    p = argparse.ArgumentParser(prog="bsl-lens lsp", description="The bsl-lens language server on stdio.")
    add_arguments(p)
    return p


def configure_logging(verbose: int, log_file: str | None, *, configured: bool = False) -> None:
    """stderr logging (WARNING, -v INFO, -vv DEBUG) and an optional file; pygls' chatter
    (every message body at INFO, unknown-id cancels at WARNING) only with -vv."""
    level = logging.WARNING - 10 * min(verbose, 2)
    root = logging.getLogger()
    if not configured:
        logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root.setLevel(min(root.level or level, level))
    for h in root.handlers:  # stderr keeps its level when OWN_LOGGERS are lowered for the window log
        if h.level == logging.NOTSET:
            h.setLevel(level)
    if log_file:
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
        fh.setLevel(min(level, logging.INFO))
        root.addHandler(fh)
    logging.getLogger("pygls").setLevel(logging.DEBUG if verbose >= 2 else logging.ERROR)
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(level)


__all__ = ["SERVER", "BslLensServer", "main", "serve_args", "serve_stdio"]
