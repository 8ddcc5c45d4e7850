"""Daemon results (``Hit``, ``Chunk``) as LSP values (``lsprotocol`` types), and back.

Pure functions, no I/O except :func:`file_uri`'s existence check for names that Unicode
normalisation can spell two ways. Conventions they rely on (``daemon.contract``):

* ``path`` is relative to the export root, forward slashes, NFC.
* ``name_range`` is already an LSP range: 0-based line, columns in UTF-16 code units, a
  BOM not counted. It is passed through untouched, so the server must speak UTF-16
  positions (it always negotiates ``utf-16``, see ``lsp.wire``).
* lines (``start_line``/``end_line``) are 1-based and inclusive.

Symbol kinds (LSP ``SymbolKind``), chosen so that editors' icons and kind filters make
sense for 1C:

============================================================  ==========================
daemon ``kind``                                               LSP kind
============================================================  ==========================
procedure                                                     Method
function                                                      Function
module (module-level code of one module)                      Module
object (a metadata object: Справочник.X, Документ.Y, ...)     Class
attribute, dimension, resource, tabular_section,              Field
addressing_attribute
enum_value                                                    EnumMember
form (a form of an object)                                    Object (a UI object)
command                                                       Event (it is run, not called)
template (a макет)                                            File (a stored document)
section (a heading of a docs page, ``--docs``)                String (text, not code)
============================================================  ==========================

A client that declares a ``symbolKind.valueSet`` without one of these gets the nearest
kind of the protocol's first version (EnumMember -> Field, Object -> Class, Event -> Method).
"""

from __future__ import annotations

import functools
import os
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

from lsprotocol import types

from daemon.contract import METHOD_KINDS, REF_KINDS

SK = types.SymbolKind

SYMBOL_KINDS: dict[str, types.SymbolKind] = {
    "procedure": SK.Method,
    "function": SK.Function,
    "module": SK.Module,
    "object": SK.Class,
    "attribute": SK.Field,
    "dimension": SK.Field,
    "resource": SK.Field,
    "tabular_section": SK.Field,
    "addressing_attribute": SK.Field,
    "enum_value": SK.EnumMember,
    "form": SK.Object,
    "command": SK.Event,
    "template": SK.File,
    "section": SK.String,
}
#: Stand-ins from the protocol's first version (File..Array) for clients without the rest.
_FALLBACK = {SK.EnumMember: SK.Field, SK.Object: SK.Class, SK.Event: SK.Method}
#: Kinds a client supports when it declares no ``valueSet`` (LSP: File..Array).
BASE_KINDS = frozenset(range(SK.File.value, SK.Array.value + 1))

#: Module kinds as 1C names the module (``Справочник.X.МодульОбъекта``); "" where the owner
#: already names the module (a common module, a form, an HTTP service).
MODULE_LABELS = {
    "common": "",
    "object": "МодульОбъекта",
    "manager": "МодульМенеджера",
    "recordset": "МодульНабораЗаписей",
    "value_manager": "МодульМенеджераЗначения",
    "form": "",
    "command": "МодульКоманды",
    "session": "МодульСеанса",
    "managed_application": "МодульУправляемогоПриложения",
    "ordinary_application": "МодульОбычногоПриложения",
    "external_connection": "МодульВнешнегоСоединения",
    "http_service": "",
    "web_service": "",
    "other": "",
}


_KIND_VALUES = {k: v.value for k, v in SYMBOL_KINDS.items()}


def symbol_kind_value(kind: str, supported: frozenset[int] | None = None) -> int:
    """:func:`symbol_kind` as its number (the hot path: no enum attribute lookups)."""
    v = _KIND_VALUES.get(kind)
    if v is not None and (supported is None or v in supported):
        return v
    return symbol_kind(kind, supported).value


def symbol_kind(kind: str, supported: frozenset[int] | None = None) -> types.SymbolKind:
    """The LSP kind of a daemon ``kind`` (table in the module docstring), limited to the
    client's ``supported`` kind values (None: all); unknown kinds are ``Variable``."""
    sk = SYMBOL_KINDS.get(kind, SK.Variable)
    if supported is not None and sk.value not in supported:
        sk = _FALLBACK.get(sk, SK.Variable)
    return sk


def container_name(x: Any) -> str:
    """``containerName`` of a hit or chunk (anything with ``kind``, ``owner``,
    ``module_kind``, ``object_type``, ``symbol``):

    * methods and module code: the owner plus the module's 1C name:
      ``ОбщийМодуль.ОбщегоНазначения``, ``Справочник.Пользователи.МодульОбъекта``,
      ``Справочник.Пользователи.Форма.ФормаЭлемента``, ``Конфигурация.МодульСеанса``;
      for module code, whose symbol is the module itself, the owner alone;
    * a metadata object: its type (``Справочник``);
    * a field: the owning object (``Справочник.Пользователи``), and for an attribute of a
      tabular section the section (``Справочник.Пользователи.ТабличнаяЧасть.Роли``).
    """
    kind = x.kind
    if kind in METHOD_KINDS:
        label = MODULE_LABELS.get(x.module_kind, "")
        return f"{x.owner}.{label}" if label and x.owner else (x.owner or label)
    if kind == "module":
        return x.owner
    if kind == "object":
        return x.object_type or x.owner.partition(".")[0]
    sym = x.symbol or ""
    field = sym.partition(":")[2]
    if kind == "attribute" and "." in field:
        return f"{x.owner}.ТабличнаяЧасть.{field.split('.', 1)[0]}"
    return x.owner


def display_name(x: Any) -> str:
    """The symbol's ``name``: the method, object or field name; for module-level code the
    module's 1C name (``МодульОбъекта``, or the common module's own name)."""
    if x.kind != "module":
        return x.name
    label = MODULE_LABELS.get(x.module_kind, "")
    if label:
        return label
    short = x.owner.rpartition(".")[2]
    return short or "Модуль"


def lsp_range(r: Sequence[int]) -> types.Range:
    """An LSP range from a daemon ``name_range`` ``(line0, col16, line0, col16)``."""
    return types.Range(start=types.Position(line=r[0], character=r[1]), end=types.Position(line=r[2], character=r[3]))


def line_range(start_line: int, end_line: int) -> types.Range:
    """Whole lines ``start_line..end_line`` (1-based, inclusive) as an LSP range: from the
    start of the first to the start of the line after the last."""
    return types.Range(
        start=types.Position(line=max(0, start_line - 1), character=0),
        end=types.Position(line=max(0, end_line), character=0),
    )


# ------------------------------------------------------------------------------ URIs
def file_uri(folder_uri: str, folder_path: str, rel: str, *, check_spelling: bool = True) -> str:
    """The ``file://`` URI of ``rel`` (a daemon path: relative, forward slashes, NFC) under a
    workspace folder, built on the folder's URI as the client spelled it.

    Daemon paths are NFC; a file system that stores decomposed names (macOS HFS+, or files
    copied from one) may spell a name with ``й``/``ё`` in NFD. With ``check_spelling``, for
    such names only (those NFD changes: :func:`needs_spelling_check`) the path is checked
    on disk and, if missing, its components are matched against the directory listings by
    their NFC form; a path found neither way is returned as given (never an error).
    """
    if check_spelling and needs_spelling_check(rel):
        rel = on_disk_spelling(folder_path, rel)
    return folder_uri.rstrip("/") + "/" + _quote(rel)


@functools.lru_cache(maxsize=1 << 16)
def _quote(rel: str) -> str:
    """Percent-encoding of a relative path (a pure function of the string: memoised)."""
    return quote(rel, safe="/")


def needs_spelling_check(rel: str) -> bool:
    """True if NFD spells ``rel`` differently (it has ``й``, ``ё`` or another composed
    letter), so the file system may hold it under another byte string."""
    return not unicodedata.is_normalized("NFD", rel)


def on_disk_spelling(folder_path: str, rel: str) -> str:
    """``rel`` as spelled on disk under ``folder_path`` (see :func:`file_uri`)."""
    base = Path(folder_path)
    if (base / rel).exists():
        return rel
    parts = rel.split("/")
    out: list[str] = []
    cur = base
    for part in parts:
        name = part
        if not (cur / part).exists():
            try:
                with os.scandir(cur) as it:
                    for entry in it:
                        if unicodedata.normalize("NFC", entry.name) == part:
                            name = entry.name
                            break
                    else:
                        return rel
            except OSError:
                return rel
        out.append(name)
        cur = cur / name
    return "/".join(out)


def uri_to_path(uri: str) -> str | None:
    """The local file system path of a ``file://`` URI (None for other schemes)."""
    from pygls.uris import to_fs_path

    if not uri.startswith("file:"):
        return None
    return to_fs_path(uri)


def relative_path(folder_path: str, path: str) -> str | None:
    """``path`` relative to the folder as a daemon path (forward slashes, NFC), or None if
    it is not inside the folder. Symlinked spellings are compared after resolving."""
    for base, p in ((folder_path, path), (_resolve(folder_path), _resolve(path))):
        try:
            rel = Path(p).relative_to(base)
        except ValueError:
            continue
        return unicodedata.normalize("NFC", rel.as_posix())
    return None


def _resolve(p: str) -> str:
    try:
        return str(Path(p).resolve())
    except (OSError, RuntimeError):
        return p


def uri_name(uri: str) -> str:
    """The last path segment of a URI, decoded (a folder's display name)."""
    return unquote(urlparse(uri).path.rstrip("/").rpartition("/")[2])


# ------------------------------------------------------------------------------ workspace/symbol
def workspace_symbol(
    hit: Any,
    uri: str,
    *,
    kinds: frozenset[int] | None = None,
    uri_only: bool = False,
    data: Any = None,
) -> types.WorkspaceSymbol:
    """One ``WorkspaceSymbol`` for a daemon hit at ``uri``: name, kind, ``containerName``
    and the name's range; with ``uri_only`` a ``LocationUriOnly`` (the range comes from
    ``workspaceSymbol/resolve``) and ``data`` for the resolve request."""
    location: types.Location | types.LocationUriOnly
    if uri_only:
        location = types.LocationUriOnly(uri=uri)
    else:
        location = types.Location(uri=uri, range=lsp_range(hit.name_range))
    return types.WorkspaceSymbol(
        name=display_name(hit),
        kind=symbol_kind(hit.kind, kinds),
        container_name=container_name(hit) or None,
        location=location,
        data=data,
    )


def workspace_symbol_json(
    hit: Any,
    uri: str,
    *,
    kinds: frozenset[int] | None = None,
    uri_only: bool = False,
    data: Any = None,
) -> dict:
    """:func:`workspace_symbol` as the JSON object itself (what the server sends: building
    dicts and encoding them with msgspec costs a fifth of lsprotocol objects + cattrs)."""
    if uri_only:
        location: dict = {"uri": uri}
    else:
        r = hit.name_range
        location = {
            "uri": uri,
            "range": {"start": {"line": r[0], "character": r[1]}, "end": {"line": r[2], "character": r[3]}},
        }
    out = {"name": display_name(hit), "kind": symbol_kind_value(hit.kind, kinds), "location": location}
    container = container_name(hit)
    if container:
        out["containerName"] = container
    if data is not None:
        out["data"] = data
    return out


def _match_order(match: str) -> int:
    return {"exact": 0, "prefix": 1, "camelhump": 2}.get(match, 3)


def merge_ranked(results: Sequence[Sequence[Any]], cap: int) -> list[tuple[int, Any]]:
    """Merge per-root ranked hit lists into one list of ``(root index, hit)``, at most
    ``cap`` long, in a stable order that keeps each root's own order:

    name-channel matches first (exact, then prefix, then CamelHump; within a match kind
    the roots take turns: each root's first such hit, then each one's second, ...), then
    the rest by fused score (higher first); ties by rank within the root, then by root
    order. One root: its order unchanged.
    """
    if len(results) == 1:
        return [(0, h) for h in results[0][:cap]]
    keyed = []
    for ri, hits in enumerate(results):
        seen = [0, 0, 0]  # per match kind: this root's hits of that kind so far
        for pos, h in enumerate(hits):
            m = _match_order(getattr(h, "match", ""))
            if m < 3:
                key = (0, m, 0.0, seen[m], ri)
                seen[m] += 1
            else:
                key = (1, 0, -float(getattr(h, "score", 0.0)), pos, ri)
            keyed.append((key, ri, h))
    keyed.sort(key=lambda t: t[0])
    return [(ri, h) for _, ri, h in keyed[:cap]]


# ------------------------------------------------------------------------------ documentSymbol
def document_symbols(chunks: Iterable[Any], *, kinds: frozenset[int] | None = None) -> list[types.DocumentSymbol]:
    """The outline of one module from its chunks (file order): ``#Область`` regions as
    ``Namespace`` symbols holding their methods (nested regions nested), methods outside
    any region at the top level. Parts of a long method are one symbol. Module-level code
    (``<module>``) is left out. A region spans its first to its last method (the chunks do
    not carry the ``#Область`` lines themselves)."""
    methods: list[dict] = []
    by_id: dict[str, dict] = {}
    for c in chunks:
        if c.kind not in METHOD_KINDS:
            continue
        base = c.id.split("#", 1)[0]
        m = by_id.get(base)
        if m is None:
            m = {"c": c, "start": c.start_line, "end": c.end_line, "region": list(c.region)}
            by_id[base] = m
            methods.append(m)
        else:
            m["start"] = min(m["start"], c.start_line)
            m["end"] = max(m["end"], c.end_line)
    top: list[types.DocumentSymbol] = []
    regions: dict[tuple[str, ...], types.DocumentSymbol] = {}
    for m in methods:
        c = m["c"]
        rng = line_range(m["start"], m["end"])
        sel = lsp_range(c.name_range)
        if not _contains(rng, sel):
            sel = types.Range(start=rng.start, end=rng.start)
        sym = types.DocumentSymbol(
            name=c.name,
            kind=symbol_kind(c.kind, kinds),
            range=rng,
            selection_range=sel,
            detail=c.signature or None,
        )
        parent_children = top
        path: tuple[str, ...] = ()
        for name in m["region"]:
            path = path + (name,)
            reg = regions.get(path)
            if reg is None:
                reg = types.DocumentSymbol(
                    name=name,
                    kind=_ns(kinds),
                    range=types.Range(start=rng.start, end=rng.end),
                    selection_range=types.Range(start=rng.start, end=rng.start),
                    children=[],
                )
                regions[path] = reg
                parent_children.append(reg)
            else:
                if _before(rng.start, reg.range.start):
                    reg.range = types.Range(start=rng.start, end=reg.range.end)
                    reg.selection_range = types.Range(start=rng.start, end=rng.start)
                if _before(reg.range.end, rng.end):
                    reg.range = types.Range(start=reg.range.start, end=rng.end)
            parent_children = reg.children  # type: ignore[assignment]
        parent_children.append(sym)
    return top


def _ns(kinds: frozenset[int] | None) -> types.SymbolKind:
    return SK.Namespace if kinds is None or SK.Namespace.value in kinds else SK.Module


def flat_symbols(
    outline: Sequence[types.DocumentSymbol], uri: str, container: str | None = None
) -> list[types.SymbolInformation]:
    """The outline flattened into ``SymbolInformation`` for clients without hierarchical
    document symbols; ``containerName`` is the enclosing region."""
    out: list[types.SymbolInformation] = []
    for s in outline:
        out.append(
            types.SymbolInformation(
                name=s.name,
                kind=s.kind,
                location=types.Location(uri=uri, range=s.selection_range),
                container_name=container,
            )
        )
        if s.children:
            out.extend(flat_symbols(s.children, uri, s.name))
    return out


def _before(a: types.Position, b: types.Position) -> bool:
    return (a.line, a.character) < (b.line, b.character)


def _contains(outer: types.Range, inner: types.Range) -> bool:
    return not _before(inner.start, outer.start) and not _before(outer.end, inner.end)


# ------------------------------------------------------------------------------ bsl-lens/search
def search_hit(hit: Any, uri: str, folder_uri: str, *, kinds: frozenset[int] | None = None) -> dict:
    """One hit of the ``bsl-lens/search`` response (camelCase JSON): ``name``, ``kind``
    (the daemon's: procedure, function, object, attribute, ...), ``symbolKind`` (the LSP
    number), ``containerName``, ``owner``, ``symbol`` (gold-set convention), ``path``
    (relative to the folder), ``folder`` (its URI), ``location`` {uri, range},
    ``snippet``, ``signature``, ``export``, ``score`` (fused RRF score), ``ranks`` (1-based
    rank per channel: names, bm25, meta, metanames, api, dense, meta_dense), ``match`` (names channel:
    exact, prefix, camelhump, substring, translated), ``stale`` (its file changed on disk and is not
    re-indexed yet) and ``test`` (test or fixture code)."""
    r = hit.name_range
    return {
        "name": display_name(hit),
        "kind": hit.kind,
        "symbolKind": symbol_kind(hit.kind, kinds).value,
        "containerName": container_name(hit),
        "owner": hit.owner,
        "symbol": hit.symbol,
        "path": hit.path,
        "folder": folder_uri,
        "location": {
            "uri": uri,
            "range": {"start": {"line": r[0], "character": r[1]}, "end": {"line": r[2], "character": r[3]}},
        }
        if uri
        else None,  # a platform help entry (scope platform or all) has no file
        "startLine": hit.start_line,
        "endLine": hit.end_line,
        "moduleKind": hit.module_kind,
        "objectType": hit.object_type,
        "export": hit.export,
        "signature": hit.signature,
        "snippet": hit.snippet,
        "score": hit.score,
        "ranks": dict(hit.ranks),
        "match": hit.match,
        "stale": hit.stale,
        "test": hit.test,
    }


__all__ = [
    "BASE_KINDS",
    "MODULE_LABELS",
    "SYMBOL_KINDS",
    "container_name",
    "display_name",
    "document_symbols",
    "file_uri",
    "flat_symbols",
    "line_range",
    "lsp_range",
    "merge_ranked",
    "relative_path",
    "search_hit",
    "symbol_kind",
    "uri_name",
    "uri_to_path",
    "workspace_symbol",
    "workspace_symbol_json",
]


# ------------------------------------------------------------------------------ find usages
#: What a binding (a reference without a calling method) is in a call hierarchy: metadata (an
#: event subscription, a scheduled job, a form event ...) an event, module-level code a module.
_REF_GROUP_KIND = {"metadata": SK.Event}


def ref_range(r: Any) -> types.Range:
    """The LSP range of a daemon ``Reference`` (0-based line, UTF-16 columns)."""
    return types.Range(
        start=types.Position(line=r.line, character=r.col), end=types.Position(line=r.line, character=r.end)
    )


def call_item(m: Any, uri: str, folder_uri: str, *, kinds: frozenset[int] | None = None) -> types.CallHierarchyItem:
    """A ``CallHierarchyItem`` of a daemon ``MethodRef``: its whole lines as ``range``, its name
    as ``selectionRange``, the module as ``detail``; ``data`` names the folder and the method id
    (what ``callHierarchy/incomingCalls`` and ``outgoingCalls`` ask the daemon about)."""
    sel = lsp_range(m.name_range)
    rng = line_range(m.start_line, m.end_line) if m.end_line >= m.start_line else sel
    if not _contains(rng, sel):
        rng = sel
    return types.CallHierarchyItem(
        name=m.name,
        kind=symbol_kind(m.kind or "procedure", kinds),
        uri=uri,
        range=rng,
        selection_range=sel,
        detail=container_name(m),
        data={"folder": folder_uri, "id": m.id},
    )


def binding_item(r: Any, uri: str, folder_uri: str, *, kinds: frozenset[int] | None = None) -> types.CallHierarchyItem:
    """A ``CallHierarchyItem`` for a reference made by no method: a metadata binding (named by
    its event or command: ``OnOpen``, ``BeforeWrite``, a scheduled job's name) or module-level
    code. It has no callers of its own (``data`` carries no method id)."""
    group = REF_KINDS.get(r.kind, "call")
    sk = _REF_GROUP_KIND.get(group, SK.Module)
    if kinds is not None and sk.value not in kinds:
        sk = _FALLBACK.get(sk, SK.Variable)
    name = (r.detail or r.kind) if group == "metadata" else "<module>"
    rng = ref_range(r)
    return types.CallHierarchyItem(
        name=name, kind=sk, uri=uri, range=rng, selection_range=rng, detail=r.kind, data={"folder": folder_uri}
    )


# ------------------------------------------------------------------------------ params
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
