"""Find usages in the editor: ``textDocument/references``, ``textDocument/definition``,
``textDocument/prepareCallHierarchy``, ``callHierarchy/incomingCalls`` and
``callHierarchy/outgoingCalls``, answered from the references of the folder's daemon.

The handlers are functions of the language server (:class:`lsp.server.BslLensServer`, seen
through :class:`UsagesServer`); a call hierarchy item carries its folder and method id in
``data`` (:func:`lsp.convert.call_item`), so the follow-up requests need no position.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from lsprotocol import types

from daemon.client import CommandError, DaemonError
from daemon.server.protocol import NOT_FOUND

from . import convert
from .roots import Root
from .settings import Settings

log = logging.getLogger(__name__)

#: Most references ``textDocument/references`` and ``callHierarchy/incomingCalls`` list.
REFERENCES_LIMIT = 2000


class UsagesServer(Protocol):
    """What find usages needs of the language server (``lsp.server.BslLensServer``): its
    settings, folders and the symbol kinds the client knows. A protocol, so that this module
    does not import the server that registers its handlers."""

    settings: Settings
    roots: list[Root]
    symbol_kinds: frozenset[int] | None

    def root_of(self, path: str) -> tuple[Root, str] | None: ...  # noqa: D102


def _document_root(server: UsagesServer, uri: str) -> tuple[Root, str] | None:
    """The connected folder holding a document and its path there (None: outside every
    folder, or its daemon is not connected yet)."""
    path = convert.uri_to_path(uri)
    found = server.root_of(path) if path is not None else None
    if found is None or found[0].client is None:
        return None
    return found


async def _ask(server: UsagesServer, root: Root, method: str, *args: Any, **kw: Any) -> Any:
    """One find-usages call to ``root``'s daemon; None when it fails (logged; a name or
    position the daemon does not know is no error for the editor: no result)."""
    try:
        return await getattr(root.client, method)(*args, timeout=server.settings.request_timeout, **kw)
    except CommandError as exc:
        if exc.code != NOT_FOUND:
            log.warning("%s: %s failed: %s", root.name, method, exc.message)
    except DaemonError as exc:
        log.warning("%s: %s failed: %s", root.name, method, exc)
    return None


async def references(server: UsagesServer, params: types.ReferenceParams) -> list[types.Location] | None:
    """``textDocument/references``: the references of the method whose name, call or naming
    string is under the cursor (calls, strings, metadata bindings; the declaration too when
    the client asks for it), from that folder's daemon."""
    found = _document_root(server, params.text_document.uri)
    if found is None:
        return None
    root, rel = found
    pos = params.position
    res = await _ask(
        server, root, "references", path=rel, line=pos.line, character=pos.character, limit=REFERENCES_LIMIT
    )
    if res is None:
        return None
    out = []
    if params.context is not None and params.context.include_declaration:
        out += [types.Location(uri=root.uri_for(m.path), range=convert.lsp_range(m.name_range)) for m in res.targets]
    out += [types.Location(uri=root.uri_for(r.path), range=convert.ref_range(r)) for r in res.references]
    return out


async def definition(server: UsagesServer, params: types.DefinitionParams) -> list[types.Location] | None:
    """``textDocument/definition`` on a call or a string naming a method
    (``"Модуль.Метод"``, a notification handler, a form event in a layout): where that
    method is. None when nothing under the cursor resolves."""
    found = _document_root(server, params.text_document.uri)
    if found is None:
        return None
    root, rel = found
    pos = params.position
    res = await _ask(server, root, "definition", rel, pos.line, pos.character)
    if res is None or not res.targets:
        return None
    return [types.Location(uri=root.uri_for(m.path), range=convert.lsp_range(m.name_range)) for m in res.targets]


async def prepare_call_hierarchy(server: UsagesServer, params: types.CallHierarchyPrepareParams):
    """``textDocument/prepareCallHierarchy``: the method called under the cursor, else the
    method whose header or body holds it."""
    found = _document_root(server, params.text_document.uri)
    if found is None:
        return None
    root, rel = found
    pos = params.position
    res = await _ask(server, root, "definition", rel, pos.line, pos.character)
    if res is None:
        return None
    methods = res.targets or ([res.method] if res.method is not None else [])
    if not methods:
        return None
    return [convert.call_item(m, root.uri_for(m.path), root.folder.uri, kinds=server.symbol_kinds) for m in methods]


def _item_root(server: UsagesServer, item: types.CallHierarchyItem) -> tuple[Root, str] | None:
    """The connected folder of a call hierarchy item and its method id (from the item's ``data``)."""
    data = convert.plain(item.data)
    if not isinstance(data, dict) or not data.get("id"):
        return None
    root = next((r for r in server.roots if r.folder.uri == data.get("folder") and r.client is not None), None)
    return (root, data["id"]) if root is not None else None


async def incoming_calls(server: UsagesServer, params: types.CallHierarchyIncomingCallsParams):
    """``callHierarchy/incomingCalls``: the item's callers, one entry per calling method with
    the call sites as ``fromRanges``; bindings (subscriptions, jobs, form events ...) and
    module-level code are entries of their own."""
    found = _item_root(server, params.item)
    if found is None:
        return []
    root, method = found
    res = await _ask(server, root, "references", target=method, limit=REFERENCES_LIMIT, locate=True)
    if res is None:
        return []
    groups: dict[tuple, list] = {}
    for r in res.references:
        key = ("m", r.caller) if r.caller else ("b", r.path, r.kind, r.detail)
        groups.setdefault(key, []).append(r)
    out = []
    for refs in groups.values():
        r0 = refs[0]
        m = res.callers.get(r0.caller) if r0.caller else None
        uri = root.uri_for(r0.path)
        item = (
            convert.call_item(m, uri, root.folder.uri, kinds=server.symbol_kinds)
            if m is not None
            else convert.binding_item(r0, uri, root.folder.uri, kinds=server.symbol_kinds)
        )
        out.append(types.CallHierarchyIncomingCall(from_=item, from_ranges=[convert.ref_range(r) for r in refs]))
    return out


async def outgoing_calls(server: UsagesServer, params: types.CallHierarchyOutgoingCallsParams):
    """``callHierarchy/outgoingCalls``: the methods the item calls or names (resolved only),
    one entry per callee with the sites in the item's module as ``fromRanges``."""
    found = _item_root(server, params.item)
    if found is None:
        return []
    root, method = found
    res = await _ask(server, root, "callees", target=method, locate=True)
    if res is None:
        return []
    groups: dict[str, list] = {}
    for r in res.references:
        if r.target and r.target in res.targets:
            groups.setdefault(r.target, []).append(r)
    out = []
    for target, refs in groups.items():
        m = res.targets[target]
        item = convert.call_item(m, root.uri_for(m.path), root.folder.uri, kinds=server.symbol_kinds)
        out.append(types.CallHierarchyOutgoingCall(to=item, from_ranges=[convert.ref_range(r) for r in refs]))
    return out
