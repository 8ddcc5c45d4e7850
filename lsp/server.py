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
* find usages, from the daemon's references: ``textDocument/references`` (calls, strings
  naming the method, metadata bindings), ``textDocument/definition`` (a call or a string
  naming a method), ``textDocument/prepareCallHierarchy``, ``callHierarchy/incomingCalls``
  and ``callHierarchy/outgoingCalls``.
* ``textDocument/hover`` in ``.bsl`` files: the platform help entry (:mod:`lsp.hover`) of a
  global function, ``Новый <Тип>`` or a system enumeration's value under the cursor, from the
  version the daemon chose for the configuration; a method of the module of that name wins.
* ``bsl-lens/search`` (custom request): search by meaning for the editors' own UI, since
  a symbol picker re-filters results by name. Params ``{query, mode?, topK?, filters?,
  folder?, freshTimeout?}``; result ``{query, mode, stale, hits: [...], folders: [...]}``
  (hit fields in :func:`lsp.convert.search_hit`; ``stale``: some folder's daemon has noticed
  file changes it has not indexed yet, named per folder in ``stalePaths``/``staleCount``;
  ``freshTimeout`` seconds, at most 10: wait that long first for them).
* ``workspace/executeCommand``: ``bsl-lens.status`` and ``bsl-lens.reindex``.

Nothing is cached here: every answer comes from the daemons, which watch the files.
Positions are always UTF-16 (the daemon computes them so; the server negotiates
``utf-16`` even when a client offers UTF-8 first). ``$/cancelRequest`` cancels the
request's task; its pending daemon call is abandoned (the daemon's late answer is
dropped), so a burst of keystrokes leaves nothing queued behind the last one.

stdout is the protocol's alone: :func:`claim_stdout` moves the wire to a private file
descriptor and points fd 1 (and ``sys.stdout``) at stderr before anything else runs, so a
stray ``print``, a C library or a child process cannot corrupt it. Logs go to stderr,
``--log-file`` and, from ``logLevel`` up, ``window/logMessage``.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import itertools
import logging
import os
import sys
import threading
from typing import Annotated, Any, BinaryIO

import msgspec
from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, default_converter, lsp_method

from daemon import __version__
from daemon.client import CommandError, DaemonError
from daemon.contract import DEFAULT_SCOPE, MAX_TOP_K, SEARCH_MODES
from daemon.server.protocol import NOT_FOUND

from . import convert
from .options import add_arguments
from .roots import Root
from .settings import Folder, Settings, parse_options

log = logging.getLogger(__name__)
#: The logger trees of this process's own modules (each logs to ``getLogger(__name__)``):
#: forwarded to the window log, levelled by ``-v`` and the ``logLevel`` setting.
OWN_LOGGERS = ("lsp", "daemon")

#: Custom request: search by meaning (see the module docstring).
SEARCH_REQUEST = "bsl-lens/search"
#: Most references ``textDocument/references`` and ``callHierarchy/incomingCalls`` list.
REFERENCES_LIMIT = 2000
#: ``workspace/executeCommand`` commands.
STATUS_COMMAND = "bsl-lens.status"
REINDEX_COMMAND = "bsl-lens.reindex"
_LOG_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


# ------------------------------------------------------------------------------ protocol
class BslLensProtocol(LanguageServerProtocol):
    """pygls' protocol with two changes to ``initialize``, a faster writer and a fix to
    ``shutdown``. ``initialize``:

    * the position encoding is always UTF-16: the daemon's ranges are UTF-16 and every
      client must accept it (pygls would otherwise pick the client's first choice, e.g.
      Neovim 0.11's ``utf-8``, and Cyrillic columns would be wrong);
    * no text document sync: the server reads files through the daemon, never the
      editor's buffers, so clients need not send them.
    """

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        """pygls' ``initialize`` with UTF-16 positions and no document sync (see the class)."""
        general = params.capabilities.general
        offered = general.position_encodings if general is not None else None
        if offered:
            general.position_encodings = [types.PositionEncodingKind.Utf16]
        try:
            result = yield from super().lsp_initialize(params)
        finally:
            if offered:
                general.position_encodings = offered
        result.capabilities.position_encoding = types.PositionEncodingKind.Utf16
        result.capabilities.text_document_sync = types.TextDocumentSyncOptions(
            open_close=False, change=types.TextDocumentSyncKind.None_
        )
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args):
        """pygls' shutdown, iterating over a copy of the pending requests while it cancels
        them (a cancelled generator-handled request, e.g. a command, removes itself from
        the dict at once, and pygls' own loop then fails with "dictionary changed size").
        Upstream limitation pinned by ``tests/test_framework_overrides.py``: drop this
        override when pygls iterates over a copy."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _send_data(self, data: Any) -> None:
        """pygls' writer, with msgspec's JSON encoder instead of ``json.dumps`` (ten times faster on a
        full ``workspace/symbol`` answer: ``docs/frontends.md``) and UTF-8 bodies; ``Content-Length`` counts
        bytes. Anything msgspec cannot encode goes the pygls way. pygls has no public hook for
        the encoder, hence the override of a private method (pinned by
        ``tests/test_framework_overrides.py``)."""
        if getattr(self.writer, "closed", False):
            return
        if not data or self.writer is None or not self._include_headers:
            return super()._send_data(data)
        try:
            result = getattr(data, "result", None)
            if isinstance(result, msgspec.Raw):  # a handler's JSON, encoded already
                obj: Any = {"jsonrpc": data.jsonrpc, "id": data.id, "result": result}
            elif hasattr(data, "__attrs_attrs__"):
                obj = self._converter.unstructure(data)
            else:
                obj = data
            body = _encoder.encode(obj)
        except Exception:  # noqa: BLE001 - e.g. an object only json.dumps' default knows
            return super()._send_data(data)
        header = f"Content-Length: {len(body)}\r\nContent-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        try:
            self.writer.write(header.encode("ascii") + body)
        except BrokenPipeError:
            log.error("the client closed the connection")
            raise
        except Exception as exc:  # noqa: BLE001 - as pygls: report, keep serving
            log.exception("sending a message failed")
            self._server._report_server_error(exc, JsonRpcInternalError)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, enum.Enum):
        return obj.value
    if hasattr(obj, "__attrs_attrs__"):
        return _converter.unstructure(obj)
    raise TypeError(f"cannot encode {type(obj).__name__}")


_converter = default_converter()
_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


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

    async def _call(self, root: Root, method: str, *args: Any, serial: bool = False, **kw: Any) -> Any:
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
            results = await asyncio.gather(*(self._call(r, "symbols", query, limit=cap, serial=True) for r in roots))
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
        data = plain(symbol.data)
        if not isinstance(data, dict):
            data = {}
        loc = symbol.location
        if not isinstance(loc, types.LocationUriOnly) and getattr(loc, "range", None) is not None:
            return symbol
        rng = data.get("range") or [0, 0, 0, 0]
        root = next((r for r in self.roots if r.folder.uri == data.get("folder")), None)
        if root is not None and data.get("id"):
            chunk = await self._call(root, "get_chunk", data["id"])
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

    # ------------------------------------------------------------------ find usages
    def _at(self, uri: str) -> tuple[Root, str] | None:
        """The connected folder holding a document and its path there (None: outside every
        folder, or its daemon is not connected yet)."""
        path = convert.uri_to_path(uri)
        found = self.root_of(path) if path is not None else None
        if found is None or found[0].client is None:
            return None
        return found

    async def _usages(self, root: Root, method: str, *args: Any, **kw: Any) -> Any:
        """One find-usages call to ``root``'s daemon; None when it fails (logged; a name or
        position the daemon does not know is no error for the editor: no result)."""
        try:
            return await getattr(root.client, method)(*args, timeout=self.settings.request_timeout, **kw)
        except CommandError as exc:
            if exc.code != NOT_FOUND:
                log.warning("%s: %s failed: %s", root.name, method, exc.message)
        except DaemonError as exc:
            log.warning("%s: %s failed: %s", root.name, method, exc)
        return None

    async def references(self, params: types.ReferenceParams) -> list[types.Location] | None:
        """``textDocument/references``: the references of the method whose name, call or naming
        string is under the cursor (calls, strings, metadata bindings; the declaration too when
        the client asks for it), from that folder's daemon."""
        found = self._at(params.text_document.uri)
        if found is None:
            return None
        root, rel = found
        pos = params.position
        res = await self._usages(
            root, "references", path=rel, line=pos.line, character=pos.character, limit=REFERENCES_LIMIT
        )
        if res is None:
            return None
        out = []
        if params.context is not None and params.context.include_declaration:
            out += [
                types.Location(uri=root.uri_for(m.path), range=convert.lsp_range(m.name_range)) for m in res.targets
            ]
        out += [types.Location(uri=root.uri_for(r.path), range=convert.ref_range(r)) for r in res.references]
        return out

    async def definition(self, params: types.DefinitionParams) -> list[types.Location] | None:
        """``textDocument/definition`` on a call or a string naming a method
        (``"Модуль.Метод"``, a notification handler, a form event in a layout): where that
        method is. None when nothing under the cursor resolves."""
        found = self._at(params.text_document.uri)
        if found is None:
            return None
        root, rel = found
        pos = params.position
        res = await self._usages(root, "definition", rel, pos.line, pos.character)
        if res is None or not res.targets:
            return None
        return [types.Location(uri=root.uri_for(m.path), range=convert.lsp_range(m.name_range)) for m in res.targets]

    async def prepare_call_hierarchy(self, params: types.CallHierarchyPrepareParams):
        """``textDocument/prepareCallHierarchy``: the method called under the cursor, else the
        method whose header or body holds it."""
        found = self._at(params.text_document.uri)
        if found is None:
            return None
        root, rel = found
        pos = params.position
        res = await self._usages(root, "definition", rel, pos.line, pos.character)
        if res is None:
            return None
        methods = res.targets or ([res.method] if res.method is not None else [])
        if not methods:
            return None
        return [convert.call_item(m, root.uri_for(m.path), root.folder.uri, kinds=self.symbol_kinds) for m in methods]

    def _item_root(self, item: types.CallHierarchyItem) -> tuple[Root, str] | None:
        data = plain(item.data)
        if not isinstance(data, dict) or not data.get("id"):
            return None
        root = next((r for r in self.roots if r.folder.uri == data.get("folder") and r.client is not None), None)
        return (root, data["id"]) if root is not None else None

    async def incoming_calls(self, params: types.CallHierarchyIncomingCallsParams):
        """``callHierarchy/incomingCalls``: the item's callers, one entry per calling method with
        the call sites as ``fromRanges``; bindings (subscriptions, jobs, form events ...) and
        module-level code are entries of their own."""
        found = self._item_root(params.item)
        if found is None:
            return []
        root, method = found
        res = await self._usages(root, "references", target=method, limit=REFERENCES_LIMIT, locate=True)
        if res is None:
            return []
        groups: dict[tuple, list] = {}
        for r in res.references:
            key = ("m", r.caller) if r.caller else ("b", r.path, r.kind, r.detail)
            groups.setdefault(key, []).append(r)
        out = []
        for key, refs in groups.items():
            r0 = refs[0]
            m = res.callers.get(r0.caller) if r0.caller else None
            uri = root.uri_for(r0.path)
            item = (
                convert.call_item(m, uri, root.folder.uri, kinds=self.symbol_kinds)
                if m is not None
                else convert.binding_item(r0, uri, root.folder.uri, kinds=self.symbol_kinds)
            )
            out.append(types.CallHierarchyIncomingCall(from_=item, from_ranges=[convert.ref_range(r) for r in refs]))
        return out

    async def outgoing_calls(self, params: types.CallHierarchyOutgoingCallsParams):
        """``callHierarchy/outgoingCalls``: the methods the item calls or names (resolved only),
        one entry per callee with the sites in the item's module as ``fromRanges``."""
        found = self._item_root(params.item)
        if found is None:
            return []
        root, method = found
        res = await self._usages(root, "callees", target=method, locate=True)
        if res is None:
            return []
        groups: dict[str, list] = {}
        for r in res.references:
            if r.target and r.target in res.targets:
                groups.setdefault(r.target, []).append(r)
        out = []
        for target, refs in groups.items():
            m = res.targets[target]
            item = convert.call_item(m, root.uri_for(m.path), root.folder.uri, kinds=self.symbol_kinds)
            out.append(types.CallHierarchyOutgoingCall(to=item, from_ranges=[convert.ref_range(r) for r in refs]))
        return out

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
        text = await self._call(root, "read_module", rel, line + 1, line + 1)
        if text is None or not text.text:
            return None
        target = hover_target(text.text.splitlines()[0] if text.text else "", character)
        if target is None:
            return None
        rng = types.Range(start=types.Position(line, target.start), end=types.Position(line, target.end))
        if target.local:
            chunks = await self._call(root, "document_symbols", rel) or []
            key = target.name.casefold().replace("ё", "е")
            for c in chunks:
                if c.kind in ("procedure", "function") and c.name.casefold().replace("ё", "е") == key:
                    return types.Hover(contents=_markdown(local_method_markdown(c)), range=rng)
        ans = await self._call(root, "platform_help", target.query, top_k=5, names_only=True)
        if ans is None:
            return None
        entry = next((e for e in ans.entries if e.kind in target.kinds), None)
        if entry is None:
            return None
        return types.Hover(contents=_markdown(hover_markdown(entry, ans.platform)), range=rng)

    async def search(self, params: Any) -> dict:
        """The ``bsl-lens/search`` request (see :class:`SearchParams`)."""
        p = _search_params(params, self.settings.search_top_k)
        roots = self.ready_roots(p.folder)
        filters = None
        if p.filters is not None:  # the daemon's Filters: snake_case, defaults left out
            filters = {
                k: v for k, v in msgspec.structs.asdict(p.filters).items() if v not in (None, False, DEFAULT_SCOPE)
            }
        fresh = {"fresh_timeout": p.fresh_timeout} if p.fresh_timeout else {}
        results = await asyncio.gather(
            *(
                self._call(r, "search", p.query, mode=p.mode, top_k=p.top_k, filters=filters, serial=True, **fresh)
                for r in roots
            )
        )
        merged = convert.merge_ranked([res.hits if res is not None else [] for res in results], p.top_k)
        hits = []
        for ri, hit in merged:
            root = roots[ri]
            uri = "" if hit.kind.startswith("platform_") else root.uri_for(hit.path)  # platform help: no file
            hits.append(convert.search_hit(hit, uri, root.folder.uri, kinds=self.symbol_kinds))
        folders = []
        for r in self.roots:
            if p.folder and p.folder not in (r.folder.uri, r.folder.path):
                continue
            entry: dict[str, Any] = {"folder": r.folder.uri, "name": r.name, "state": r.state}
            if r in roots:
                res = results[roots.index(r)]
                if res is not None:
                    entry.update(
                        denseDone=res.dense_done,
                        denseTotal=res.dense_total,
                        total=res.total,
                        tookMs=round(res.took_ms, 3),
                    )
                    entry.update(stale=res.stale, stalePaths=list(res.stale_paths), staleCount=res.stale_count)
                else:
                    entry["error"] = "the daemon did not answer (see the log)"
            elif r.error:
                entry["error"] = r.error
            folders.append(entry)
        stale = any(res is not None and res.stale for res in results)
        return {"query": p.query, "mode": p.mode, "stale": stale, "hits": hits, "folders": folders}

    async def status(self) -> dict:
        """The ``bsl-lens.status`` command: the server and every folder with its daemon's
        status when connected (``daemon``: the service's ``Status`` fields as ``bsl-lens
        status --json`` shows them; ``process``: pid, socket, log, connections, requests
        answered)."""
        folders = []
        for r in self.roots:
            entry = r.describe()
            res = await self._call(r, "status") if r.client is not None else None
            if res is not None:
                entry["daemon"] = msgspec.to_builtins(res.service)
                entry["process"] = msgspec.to_builtins(res.daemon)
            folders.append(entry)
        return {
            "version": __version__,
            "pid": os.getpid(),
            "inflight": self.inflight,
            "requests": self.requests,
            "cancelled": self.cancelled,
            "settings": msgspec.to_builtins(self.settings),
            "folders": folders,
        }

    async def reindex(self, args: tuple) -> dict:
        """The ``bsl-lens.reindex`` command. Argument (optional): ``{"folder": uri,
        "full": bool, "paths": [relative paths]}`` or a folder URI. Default: a full re-check
        by content hash of every folder (only changed files are re-read)."""
        arg = plain(args[0]) if args else {}
        if isinstance(arg, str):
            arg = {"folder": arg}
        if not isinstance(arg, dict):
            raise JsonRpcInvalidParams.of(ValueError("bsl-lens.reindex takes {folder?, full?, paths?} or a folder URI"))
        paths = arg.get("paths")
        if paths is not None and not (isinstance(paths, list) and all(isinstance(x, str) for x in paths)):
            raise JsonRpcInvalidParams.of(ValueError("paths must be a list of paths relative to the folder"))
        full = bool(arg.get("full", not paths))
        roots = self.ready_roots(arg.get("folder"))
        queued = []
        for r in roots:
            if await self._call(r, "reindex", full=full, paths=paths) is not None:
                queued.append(r.folder.uri)
        return {"queued": queued, "full": full}


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


class SearchFilters(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True, omit_defaults=True):
    """``filters`` of ``bsl-lens/search`` (the daemon's ``Filters``, camelCase)."""

    scope: str = DEFAULT_SCOPE  # workspace | code | metadata | docs | platform | all
    object_type: str | None = None  # Справочник | Catalog | Catalogs
    module_kind: str | None = None  # common | object | manager | form | ...
    path_prefix: str | None = None  # relative to the folder
    export_only: bool = False


class SearchParams(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Params of ``bsl-lens/search``: ``query``; ``mode`` hybrid (default) | lexical |
    vector; ``topK`` 1..1000 (default: the ``searchTopK`` setting); ``filters``;
    ``folder``: a workspace folder URI or path to search alone (default: all);
    ``freshTimeout``: seconds (0..10) to wait first for file changes the daemons have
    noticed to be indexed."""

    query: str
    mode: str = "hybrid"
    top_k: int | None = None
    filters: SearchFilters | None = None
    folder: str | None = None
    fresh_timeout: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.0


def _markdown(text: str) -> types.MarkupContent:
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=text)


def plain(value: Any) -> Any:
    """JSON values as plain dicts and lists: pygls hands the params of a custom request
    (and ``LSPAny`` members) over as nested namedtuples."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _search_params(params: Any, default_top_k: int) -> SearchParams:
    params = plain(params) if params is not None else {}
    try:
        p = msgspec.convert(params, SearchParams)
    except msgspec.ValidationError as exc:
        raise JsonRpcInvalidParams.of(ValueError(f"{SEARCH_REQUEST}: {exc}")) from None
    if p.mode not in SEARCH_MODES:
        raise JsonRpcInvalidParams.of(ValueError(f"{SEARCH_REQUEST}: mode must be one of {', '.join(SEARCH_MODES)}"))
    if p.top_k is None:
        p.top_k = default_top_k
    if not 1 <= p.top_k <= MAX_TOP_K:
        raise JsonRpcInvalidParams.of(ValueError(f"{SEARCH_REQUEST}: topK must be in 1..{MAX_TOP_K}"))
    return p


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
    ``WorkspaceSymbol[]`` JSON, encoded here (see ``BslLensProtocol._send_data``)."""
    return msgspec.Raw(_encoder.encode(await ls.workspace_symbols(params.query)))


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
    return await ls.references(params)


@SERVER.feature(types.TEXT_DOCUMENT_DEFINITION)
async def definition(ls: BslLensServer, params: types.DefinitionParams):
    """Go to the method a call or a string under the cursor names."""
    return await ls.definition(params)


@SERVER.feature(types.TEXT_DOCUMENT_PREPARE_CALL_HIERARCHY)
async def prepare_call_hierarchy(ls: BslLensServer, params: types.CallHierarchyPrepareParams):
    """The call hierarchy's root item: the method under the cursor."""
    return await ls.prepare_call_hierarchy(params)


@SERVER.feature(types.CALL_HIERARCHY_INCOMING_CALLS)
async def incoming_calls(ls: BslLensServer, params: types.CallHierarchyIncomingCallsParams):
    """Who calls the item."""
    return await ls.incoming_calls(params)


@SERVER.feature(types.CALL_HIERARCHY_OUTGOING_CALLS)
async def outgoing_calls(ls: BslLensServer, params: types.CallHierarchyOutgoingCallsParams):
    """What the item calls."""
    return await ls.outgoing_calls(params)


@SERVER.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: BslLensServer, params: types.HoverParams) -> types.Hover | None:
    """Platform help on the global function, ``Новый <Тип>`` or system enumeration value under
    the cursor (a method of the module with the same name wins)."""
    return await ls.hover(params.text_document.uri, params.position.line, params.position.character)


@SERVER.feature(SEARCH_REQUEST)
async def search(ls: BslLensServer, params: Any) -> dict:
    """Search by meaning (custom request, see the module docstring)."""
    return await ls.search(params)


@SERVER.command(STATUS_COMMAND)
async def status_command(ls: BslLensServer, *args: Any) -> dict:
    """Status of the server and of every folder's daemon."""
    return await ls.status()


@SERVER.command(REINDEX_COMMAND)
async def reindex_command(ls: BslLensServer, *args: Any) -> dict:
    """Ask the daemons to re-check their files (see :meth:`BslLensServer.reindex`)."""
    return await ls.reindex(args)


# ------------------------------------------------------------------------------ running
def claim_stdout() -> BinaryIO:
    """Take stdout for the protocol: returns a binary stream on a duplicate of fd 1, then
    points fd 1 and ``sys.stdout`` at stderr. After this, anything else that writes to
    "stdout" (``print``, C code, child processes inheriting fd 1) lands on stderr."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(wire_fd, "wb")


class WireWriter(StdoutWriter):
    """pygls' stdout writer that drops what is written after ``close`` (pygls closes the
    wire on ``exit``; a late log line or progress report must not raise)."""

    closed = False

    def close(self) -> None:
        """Close the wire; later writes are dropped."""
        self.closed = True
        super().close()

    def write(self, data: bytes) -> None:
        """Write and flush one frame (nothing once closed)."""
        if not self.closed:
            super().write(data)


class PipeReader:
    """stdin read on the event loop itself (``connect_read_pipe``), for pygls' message
    loop: no worker-thread hop per header line and body as with pygls' own stdin reader,
    which a burst of keystrokes (a request and a ``$/cancelRequest`` each) pays for."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def readline(self) -> bytes:
        """One header line (``b""`` at the end of input)."""
        return await self._reader.readline()

    async def readexactly(self, n: int) -> bytes:
        """A body of ``n`` bytes (shorter only at the end of input)."""
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial


async def _open_reader(server: BslLensServer, stdin: BinaryIO):
    """A :class:`PipeReader` on ``stdin``, or pygls' threaded reader when stdin is not a
    pipe, socket or character device (a regular file) and on Windows."""
    if sys.platform == "win32":  # the proactor loop cannot read an inherited stdin pipe
        return StdinAsyncReader(stdin, server.thread_pool)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26, loop=loop)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stdin)
    except (ValueError, OSError) as exc:
        log.debug("stdin is not a pipe (%s): threaded reader", exc)
        return StdinAsyncReader(stdin, server.thread_pool)
    return PipeReader(reader)


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
        reader = await _open_reader(server, stdin)
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


__all__ = ["SERVER", "BslLensServer", "claim_stdout", "main", "serve_args", "serve_stdio"]
