"""The MCP server: search tools over the bsl-lens daemon, built on ``MCPServer`` (mcp 2.x).

:func:`build_server` returns an ``MCPServer`` whose lifespan yields a :class:`Bridge` (one
:class:`~mcp_bridge.links.RootLink` per export root, connecting in the background) and
whose tools are thin adapters: check the arguments, call the daemon, convert the answer
into the pydantic models of :mod:`mcp_bridge.models`.

Tools: ``search``, ``find_symbol``, ``get_method``, ``read_module``, ``read_document``, ``describe_object``,
``index_status``. Every tool is read-only and rejects unknown arguments (the input schema
has ``additionalProperties: false``; the error names the valid ones).

Errors (mcp 2.x semantics):

* a mistake the model can fix (bad mode or filter, unknown object, path outside the root,
  unknown argument, wrong root) -> :class:`ToolError`: an ``isError`` result whose text
  says what is valid. The daemon's ``CommandError`` -32602 (invalid params) and -32001
  (not found) become these, carrying the daemon's message;
* a problem the host must fix (the daemon cannot be started or reached) ->
  :class:`mcp.MCPError` (a JSON-RPC error) from :meth:`RootLink.host_error`.

No tool waits more than :data:`~mcp_bridge.links.CONNECT_WAIT` seconds for a starting
daemon: ``search``/``find_symbol`` then answer with no hits and ``warming: true``; the
lookup tools raise a tool error that says to call again. While the daemon indexes, tools
answer from what is indexed, with ``warming`` and the progress from its ``status``.
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import INTERNAL_ERROR, ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError, create_model, model_validator

from daemon import __version__
from daemon.client import CommandError, DaemonError, DaemonTimeout
from daemon.contract import CODE_KINDS, DOCS_KINDS, MODULE_KINDS, SCOPES, SEARCH_MODES
from daemon.server.protocol import INVALID_PARAMS, NOT_FOUND

from .links import CONNECT_WAIT, RootLink, Starting
from .models import (
    DenseInfo,
    DocMention,
    DocumentOutput,
    FindSymbolOutput,
    IndexInfo,
    MetaField,
    MethodOutput,
    ModuleOutput,
    ModuleRef,
    ObjectOutput,
    RootStatus,
    SharedCacheInfo,
    SearchHit,
    SearchOutput,
    SkippedFile,
    StatusOutput,
    SymbolDef,
)

log = logging.getLogger(__name__)

#: Most hits ``search`` and ``find_symbol`` return in one call (a model's context is the
#: limit; ``truncated`` says when there were more). The bridge's own cap, below the
#: daemon's ``daemon.contract.MAX_TOP_K``.
MAX_TOP_K = 50
#: ``read_module`` returns at most this many lines and characters per call (the daemon's
#: own cap is 2000 lines); the note says how to continue.
MAX_READ_LINES = 500
MAX_READ_CHARS = 60_000
#: ``get_method`` cuts a method's text after this many characters (a few SSL methods run
#: to 1000+ lines); the note says which ``read_module`` call returns the rest.
MAX_METHOD_CHARS = 60_000

SearchMode = Literal[SEARCH_MODES]  # type: ignore[valid-type]
Scope = Literal[SCOPES]  # type: ignore[valid-type]
ModuleKind = Literal[MODULE_KINDS]  # type: ignore[valid-type]

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


# ------------------------------------------------------------------------------ bridge state
class Bridge:
    """What the lifespan yields: the served roots and how long tools wait for a daemon."""

    def __init__(self, links: list[RootLink], connect_wait: float = CONNECT_WAIT) -> None:
        if not links:
            raise ValueError("the bridge needs at least one export root")
        self.links = links
        self.connect_wait = connect_wait

    def pick(self, root: str | None) -> RootLink:
        """The link for a tool's ``root`` argument: a root name, its path, or None when
        only one root is served. :class:`ToolError` listing the valid roots otherwise."""
        valid = ", ".join(repr(link.name) for link in self.links)
        if root is None or not root.strip():
            if len(self.links) == 1:
                return self.links[0]
            raise ToolError(f"several export roots are served here; pass root= one of {valid}")
        want = root.strip()
        for link in self.links:
            if want == link.name or want.casefold() == link.name.casefold():
                return link
        from daemon.server.runtime import resolve_root

        try:
            path = resolve_root(want)
        except (OSError, RuntimeError, ValueError):
            path = None
        for link in self.links:
            if path == link.root:
                return link
        raise ToolError(f"unknown root {root!r}; valid roots: {valid} (a name or the root's path)")

    def start(self) -> None:
        """Start connecting every link (from the event loop)."""
        for link in self.links:
            link.start()

    async def aclose(self) -> None:
        """Close every connection."""
        await asyncio.gather(*(link.aclose() for link in self.links), return_exceptions=True)


def _bridge(ctx: Context) -> Bridge:
    return ctx.request_context.lifespan_context


# ------------------------------------------------------------------------------ conversions
def _qualified(kind: str, name: str, owner: str) -> str:
    """``Модуль.Метод`` for code, the owner for an object, ``owner.name`` for a field
    (the ``name`` a model passes back to ``get_method``)."""
    if kind == "object":
        return owner
    if kind in CODE_KINDS:
        short = owner.split(".")[1] if "." in owner else owner
        return f"{short}.{name}" if short else name
    return f"{owner}.{name}"


def _name_line(h) -> int:
    """The line a hit is cited by: its name's line (a method's header), else its first."""
    nr = h.name_range
    return nr[0] + 1 if nr and (nr[0] or nr[2]) else h.start_line


def _hit_fields(h) -> dict:
    """The fields :class:`SearchHit` and :class:`SymbolDef` both take from a daemon hit."""
    return dict(
        path=h.path,
        line=_name_line(h),
        start_line=h.start_line,
        end_line=h.end_line,
        kind=h.kind,
        name=h.name,
        qualified_name=_qualified(h.kind, h.name, h.owner),
        owner=h.owner,
        object_type=h.object_type,
        module_kind=h.module_kind,
        export=h.export,
        signature=h.signature,
        match=h.match,
    )


def _doc_fields(h) -> dict:
    """Docs sections: the heading path and the ``path#anchor`` link of a hit."""
    if h.kind not in DOCS_KINDS:
        return {}
    return {"heading_path": h.signature, "link": f"{h.path}#{h.anchor}" if h.anchor else h.path}


def _mention(d) -> DocMention:
    return DocMention(link=d.link, heading_path=d.heading_path, path=d.path, line=d.line)


def _header_line(m) -> int:
    """Line of a method's header inside its text (which starts with the doc comment; a
    header written in ``#Если`` branches has its signatures joined by ``" | "``: the first)."""
    head = (m.signature or "").split(" | ", 1)[0].strip().splitlines()[0][:40] if m.signature else ""
    if head:
        for i, line in enumerate(m.text.splitlines()):
            if line.strip().startswith(head):
                return m.start_line + i
    return m.start_line


def _progress(st) -> str:
    """Human-readable progress of a warming index from a daemon ``Status``."""
    parts = []
    if st.state != "ready":
        p = st.progress or {}
        stage = (
            f"{p.get('stage')} {p.get('done')}/{p.get('total')}" if p.get("total") else str(p.get("stage") or st.state)
        )
        if p.get("eta_s") is not None:
            stage += f", ETA {p['eta_s']:.0f} s"
        parts.append(f"{st.state}: {stage}")
    d = st.dense
    if d.enabled and d.done < d.total:
        eta = f", ETA {d.eta_s:.0f} s" if d.eta_s else ""
        parts.append(
            f"dense chunks embedded {d.done}/{d.total}" + (f" ({d.rate_per_s:g}/s{eta})" if d.rate_per_s else "")
        )
    return "; ".join(parts)


def _lexical_warming(st) -> bool:
    return st.state in ("loading", "indexing")


def _dense_warming(st) -> bool:
    return bool(st.dense.enabled and st.dense.done < st.dense.total)


def _index_info(st) -> IndexInfo:
    return IndexInfo(
        state=st.state,
        progress=_progress(st),
        files=st.files,
        methods=st.methods,
        dense_enabled=st.dense.enabled,
        dense_done=st.dense.done,
        dense_total=st.dense.total,
        stale_count=st.stale_count,
    )


def _starting_info(link: RootLink) -> IndexInfo:
    waited = time.monotonic() - link.since if link.since is not None else 0.0
    return IndexInfo(state="starting", progress=f"the daemon is starting ({waited:.0f} s so far)")


def _meta_field(f) -> MetaField:
    return MetaField(
        kind=f.kind,
        name=f.name,
        synonym=dict(f.synonym),
        types=list(f.types),
        comment=f.comment,
        fields=[_meta_field(x) for x in f.fields],
    )


def _object_types_hint() -> str:
    from daemon.contract import OBJECT_TYPES

    ru = ", ".join(ru for ru, _ in OBJECT_TYPES.values())
    return f"valid types: {ru} (English singular names like Catalog, Document and folder names like Catalogs also work)"


def _tool_error(exc: DaemonError, *, warming: bool = False) -> Exception:
    """A daemon error as the tool error a model can act on (or a protocol error)."""
    if isinstance(exc, CommandError):
        msg = exc.message
        if exc.code == INVALID_PARAMS:
            if ("unknown object type" in msg or "unknown metadata object type" in msg) and "use one of" not in msg:
                msg = f"{msg}; {_object_types_hint()}"
            return ToolError(msg)
        if exc.code == NOT_FOUND:
            if warming:
                msg += " (the index is still being built, so it may not be indexed yet: see index_status)"
            return ToolError(msg)
        return ToolError(f"the bsl-lens daemon failed on {exc.method}: {msg}")
    if isinstance(exc, DaemonTimeout):
        return ToolError(f"the bsl-lens daemon did not answer in time ({exc}); try again")
    # a protocol error or a connection lost twice in a row: not the model's to fix
    return MCPError(code=INTERNAL_ERROR, message=f"bsl-lens: the daemon connection failed: {exc}")


async def _status(bridge: Bridge, link: RootLink):
    """The root's daemon ``Status`` (cached briefly); Starting / MCPError as RootLink."""
    try:
        return (await link.status(wait=bridge.connect_wait)).service
    except DaemonError as exc:
        raise _tool_error(exc) from exc


async def _status_after(bridge: Bridge, link: RootLink, st, connections: int):
    """``st``, or the daemon's status asked again when the call made since reconnected
    (``connections`` changed: the daemon was stopped and a new one answered, perhaps still
    indexing): an answer must not carry the old daemon's "ready" over the new one's hits."""
    if link.link.connections == connections:
        return st
    try:
        return await _status(bridge, link)
    except Starting:
        return st


async def _status_or_fail(bridge: Bridge, link: RootLink):
    """:func:`_status`, with a daemon still starting as a ToolError (for the tools that have no
    partial answer to give meanwhile: get_method, read_document, ...)."""
    try:
        return await _status(bridge, link)
    except Starting as exc:
        raise ToolError(str(exc)) from None


#: ``wait_fresh`` of search and find_symbol: seconds; bounded so that a tool call stays well
#: inside the bridge's request timeout (mcp_bridge.links.REQUEST_TIMEOUT, 60 s).
MAX_WAIT_FRESH_S = 10.0
WaitFresh = Annotated[
    float,
    Field(
        ge=0,
        le=MAX_WAIT_FRESH_S,
        description="Seconds to wait first for files changed on disk to be indexed (1 after editing files is plenty; "
        f"at most {MAX_WAIT_FRESH_S:g}). 0: answer at once; stale then says whether changed files are not indexed yet",
    ),
]


def _stale_note(res, waited: float) -> str:
    """The ``note`` part for an answer with ``stale`` set."""
    shown = ", ".join(res.stale_paths[:5]) + (", ..." if res.stale_count > 5 else "")
    what = (
        f"{res.stale_count} changed files are not indexed yet ({shown})"
        if res.stale_count
        else "file changes are not indexed yet"
    )
    if res.full_reconcile_pending:
        what += "; the whole export is being re-checked"
    if waited:
        return f"{what}, even after waiting {waited:g} s: check them with read_module"
    return f"{what}: this answer may miss what they now contain; ask again with wait_fresh=1, or read them with read_module"


async def _call(bridge: Bridge, link: RootLink, fn, *, warming: bool = False):
    try:
        return await link.call(fn, wait=bridge.connect_wait)
    except DaemonError as exc:
        raise _tool_error(exc, warming=warming) from exc


def _strict(tool: Tool) -> Tool:
    """Make a tool reject unknown arguments (the SDK ignores them) with an error that
    names the valid ones; the input schema gets ``additionalProperties: false``. The SDK
    has no public option for it, so the tool's ``fn_metadata.arg_model`` is swapped (the
    limitation is pinned by ``tests/test_framework_overrides.py``)."""
    base = tool.fn_metadata.arg_model
    fields = {name: (f.annotation, f) for name, f in base.model_fields.items()}
    strict = create_model(base.__name__, __base__=_StrictArgs, **fields)
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


class _StrictArgs(ArgModelBase):
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = [f.alias or n for n, f in cls.model_fields.items()]
            unknown = sorted(k for k in data if k not in known)
            if unknown:
                raise ValueError(f"unknown argument(s) {', '.join(unknown)}; this tool takes: {', '.join(known)}")
        return data


class _Server(MCPServer):
    """``MCPServer`` whose argument errors read as one plain sentence per argument (the SDK
    passes on pydantic's text: model name, ``[type=..., input_value=...]`` and a link)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """As ``MCPServer.call_tool``; a ``ToolError`` caused by argument validation is
        raised again with :func:`argument_errors`' text (same cause, so the SDK still logs
        field names only)."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"invalid arguments for {name}: {argument_errors(cause)}") from cause
            raise


def argument_errors(exc: ValidationError) -> str:
    """pydantic's errors as ``arg: message`` joined by ``; `` (``Value error, `` and the
    boilerplate dropped; a missing argument reads ``query: required, missing``)."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", ""))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err.get("type") == "missing":
            msg = "required, missing"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


# ------------------------------------------------------------------------------ descriptions
def _instructions(links: list[RootLink]) -> str:
    roots = "; ".join(f"{link.name} = {link.root}" for link in links)
    return (
        "bsl-lens: search over 1C:Enterprise (BSL) configuration exports, kept fresh by a local daemon. "
        f"Roots served: {roots}. Before writing or changing 1C code, look things up here instead of "
        "guessing: find_symbol for a name you know (ОбщегоНазначения.СообщитьПользователю, СообщПольз), "
        'search for a question in words ("как отправить письмо"), get_method to read a method, '
        "describe_object for a metadata object's attributes and types, read_module for surrounding lines, "
        "search with scope docs and read_document for documentation pages served with the code. "
        "Cite results as path:line. If a result says warming, the index is still being built."
    )


SEARCH_DOC = """Search the 1C configuration's code and metadata by name or by meaning.

Use it to find where something is done ("где считается НДС", "как отправить письмо", "проверка заполнения ИНН", English questions work too), or to find a method or object whose exact name you do not know. For a name you know, find_symbol is more direct. Results are ranked (names, BM25 words and semantic vectors fused); each hit gives path, lines, owner object, module kind, method name and kind, export flag, a snippet with the doc comment and signature, and its rank in each channel. Then read a hit with get_method (methods) or describe_object (metadata). After editing files, pass wait_fresh=1 so the answer includes your change; otherwise stale: true with stale_paths says which changed files it may miss.

With scope "docs" it searches the documentation pages served with the code (coding standards, a framework's guide): each hit is a section with its heading_path and a path#anchor link; read it with read_document.

Examples: {"query": "отправка почты"}; {"query": "ЗначениеРеквизитаОбъекта", "scope": "code", "export_only": true}; {"query": "реквизит ИНН", "scope": "metadata", "object_type": "Справочник"}; {"query": "как проверить тип значения", "scope": "docs"}."""

FIND_SYMBOL_DOC = """Find definitions by name, fuzzy like an IDE's "go to symbol": exact names, prefixes, CamelHump abbreviations and Модуль.Метод qualified names.

Use it when you know (part of) a method or object name and need its definition: signature, parameters, compilation directives (&НаСервере ...), export flag, #Область path and doc comment. Metadata objects and fields are symbols too (Справочник.Пользователи). After adding or renaming a method, pass wait_fresh=1 (see stale and stale_paths in the answer).

Examples: {"query": "ОбщегоНазначения.СообщитьПользователю"}; {"query": "СообщПольз"}; {"query": "ЗначениеРеквизитаОбъекта", "export_only": true}; {"query": "Пользователи", "scope": "metadata"}."""

GET_METHOD_DOC = """Return the full source text of one BSL method, with its signature, directives, doc comment, #Область path and line numbers.

Give either a qualified name Модуль.Метод ("ОбщегоНазначения.СообщитьПользователю") or a method name plus the module path from a search hit ({"name": "ПередЗаписью", "path": "Catalogs/Пользователи/Ext/ObjectModule.bsl"}). Read the code before calling or imitating a method."""

READ_MODULE_DOC = """Read a line range of a file under the export root (a .bsl module or a metadata XML), e.g. the lines around a search hit or the rest of a long method.

Lines are 1-based and inclusive; at most 500 lines (and 60000 characters) per call; when cut, the note says which start_line to ask for next. Paths are relative to the export root, as in search results ("CommonModules/ОбщегоНазначения/Ext/Module.bsl"); paths that leave the root are refused."""

READ_DOCUMENT_DOC = """Read a documentation page (markdown served with the code: coding standards, a framework's guide) or one section of it with its sub-sections.

Give the path from a search hit with scope docs, and optionally the heading ("Проверка типа значения", its anchor, or "Базовые утверждения > Доступные методы"). At most 20000 characters per call; when cut, the note says how to read on. The answer lists the page's headings and the code methods the section names (read them with get_method).

Examples: {"path": "features/assertions/assertions-base.md", "heading": "Проверка типа значения"}; {"path": "diagnostics/MagicNumber.md"}."""

DESCRIBE_OBJECT_DOC = """Describe a metadata object: synonym, attributes with their types, tabular sections with their attributes, register dimensions and resources, enum values, forms, commands, templates, and the paths of its modules.

Name it as Тип.Имя in Russian or English: "Справочник.Пользователи", "Документ.ЗаказКлиента", "РегистрСведений.КурсыВалют", "Перечисление.СтавкиНДС", "Catalog.Users". Use it before writing code that reads or writes an object's attributes, so the names and types are real."""

INDEX_STATUS_DOC = """Report each served export root and its daemon, as `bsl-lens status` does: state (starting, indexing, ready), progress, how many files and methods are indexed, semantic (dense) coverage, stale files, file watching, errors, and the files left out of the index with the reason (binary, too large, undecodable, XML that does not parse, objects missing on disk).

Call it when a result says warming, to see how far indexing has got, or to learn the names of the served roots."""


# ------------------------------------------------------------------------------ server
def build_server(links: list[RootLink], *, connect_wait: float = CONNECT_WAIT) -> MCPServer:
    """The MCP server for these export roots.

    Args:
        links: one :class:`RootLink` per root (not started: the lifespan starts them, so
            ``initialize`` never waits for a daemon).
        connect_wait: seconds a tool waits for a daemon that is still starting (tests use
            a short one).

    The server's lifespan yields a :class:`Bridge`; on exit it closes the connections
    (daemons keep running). Run it with ``server.run()`` (stdio) or see
    :mod:`mcp_bridge.serve` for streamable HTTP.
    """
    bridge = Bridge(links, connect_wait)
    names = ", ".join(repr(link.name) for link in links)
    if len(links) == 1:
        root_desc = f"Export root; only {names} is served here, so leave it out"
    else:
        root_desc = f"Export root to use: one of {names} (its name or path). Required: several roots are served"
    RootArg = Annotated[str | None, Field(description=root_desc)]

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[Bridge]:
        bridge.start()  # connect/spawn in the background: initialize answers at once
        try:
            yield bridge
        finally:
            await bridge.aclose()

    # -------------------------------------------------------------- search
    async def search(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                min_length=1,
                description='A name (СообщитьПользователю, ОбщегоНазначения.Сообщ) or a question in words ("как отправить письмо", "where are exchange rates loaded")',
            ),
        ],
        mode: Annotated[
            SearchMode,
            Field(
                description="hybrid (default: names + words + meaning), lexical (names and words only: exact terms), vector (meaning only)"
            ),
        ] = "hybrid",
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description=f"Hits to return, 1..{MAX_TOP_K}")] = 10,
        scope: Annotated[
            Scope,
            Field(
                description="code (BSL methods), metadata (objects and their fields), docs (documentation sections: markdown pages served with the code), or all"
            ),
        ] = "all",
        object_type: Annotated[
            str | None,
            Field(
                description="Only this metadata type and its modules: Справочник, Документ, РегистрСведений, ОбщийМодуль, Перечисление ... (Catalog, Catalogs work too)"
            ),
        ] = None,
        module_kind: Annotated[
            ModuleKind | None,
            Field(description="Only this module kind: common, object, manager, form, command, recordset, ..."),
        ] = None,
        path_prefix: Annotated[
            str | None,
            Field(
                description='Only files under this path, relative to the root: "CommonModules/", "Catalogs/Пользователи"'
            ),
        ] = None,
        export_only: Annotated[
            bool, Field(description="Only exported methods (Экспорт): the module's public API")
        ] = False,
        wait_fresh: WaitFresh = 0.0,
        root: RootArg = None,
    ) -> SearchOutput:
        b = _bridge(ctx)
        link = b.pick(root)
        # object_type and path_prefix are checked once, by the daemon (-32602 -> a ToolError naming the value)
        try:
            st = await _status(b, link)
        except Starting as exc:
            return SearchOutput(
                root=link.name,
                query=query,
                mode=mode,
                total=0,
                shown=0,
                truncated=False,
                stale=False,
                warming=True,
                note=str(exc),
                index=_starting_info(link),
                hits=[],
            )
        if mode == "vector" and not st.dense.enabled:
            raise ToolError(
                "vector mode needs the semantic (dense) index, which is off for this root (its daemon runs "
                "with --embedder none); use mode hybrid or lexical"
            )
        filters = {
            "scope": scope,
            "object_type": object_type,
            "module_kind": module_kind,
            "path_prefix": path_prefix,
            "export_only": export_only,
        }
        filters = {k: v for k, v in filters.items() if v not in (None, False, "all")}
        conns = link.link.connections
        res = await _call(
            b,
            link,
            lambda c: c.search(query, mode=mode, top_k=top_k, filters=filters or None, fresh_timeout=wait_fresh),
        )
        st = await _status_after(b, link, st, conns)
        hits = [
            SearchHit(
                rank=i,
                **_hit_fields(h),
                score=h.score,
                ranks=dict(h.ranks),
                snippet=h.snippet,
                stale=h.stale,
                **_doc_fields(h),
            )
            for i, h in enumerate(res.hits, 1)
        ]
        notes = []
        lex_warm = _lexical_warming(st)
        dense_warm = mode != "lexical" and _dense_warming(st)
        if lex_warm and st.chunks:  # a warm start: the saved index answers while the daemon checks the disk
            notes.append(
                f"the index is being brought up to date with the disk ({_progress(st)}): results come from the saved index, files changed since it was saved may be missing or out of date; search again later for complete results"
            )
        elif lex_warm:
            notes.append(
                f"the index is still being built ({_progress(st)}): results cover only the files indexed so far; search again later for complete results"
            )
        if dense_warm:
            notes.append(
                f"semantic search covers {st.dense.done} of {st.dense.total} chunks so far (embedding continues in the background); names and words still match everywhere"
            )
        if res.stale:
            notes.append(_stale_note(res, wait_fresh))
        return SearchOutput(
            root=link.name,
            query=query,
            mode=mode,
            total=res.total,
            shown=len(hits),
            truncated=res.total > len(hits),
            stale=res.stale,
            stale_paths=list(res.stale_paths),
            stale_count=res.stale_count,
            warming=lex_warm or dense_warm,
            note="; ".join(notes),
            index=_index_info(st),
            hits=hits,
        )

    # -------------------------------------------------------------- find_symbol
    async def find_symbol(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                min_length=1,
                description='A name or part of one: "ОбщегоНазначения.СообщитьПользователю", "СообщитьПользователю", "СообщПольз" (CamelHump), "Справочник.Пользователи"',
            ),
        ],
        limit: Annotated[int, Field(ge=1, le=MAX_TOP_K, description=f"Definitions to return, 1..{MAX_TOP_K}")] = 10,
        scope: Annotated[Scope, Field(description="code (methods), metadata (objects and fields), or all")] = "all",
        export_only: Annotated[bool, Field(description="Only exported methods (Экспорт)")] = False,
        wait_fresh: WaitFresh = 0.0,
        root: RootArg = None,
    ) -> FindSymbolOutput:
        b = _bridge(ctx)
        link = b.pick(root)
        try:
            st = await _status(b, link)
        except Starting as exc:
            return FindSymbolOutput(
                root=link.name,
                query=query,
                total=0,
                shown=0,
                truncated=False,
                warming=True,
                note=str(exc),
                index=_starting_info(link),
                symbols=[],
            )
        filters = {k: v for k, v in {"scope": scope, "export_only": export_only}.items() if v not in (False, "all")}
        conns = link.link.connections
        res = await _call(
            b, link, lambda c: c.symbols(query, limit=limit, filters=filters or None, fresh_timeout=wait_fresh)
        )
        st = await _status_after(b, link, st, conns)

        async def chunks(c):
            return await asyncio.gather(*(c.get_chunk(h.id) for h in res.hits))

        try:
            full = await _call(b, link, chunks)
        except ToolError:  # a chunk replaced between the two calls: fall back to the hits
            full = [None] * len(res.hits)
        method_ids = [h.id for h in res.hits if h.kind in ("procedure", "function")]
        try:
            mentions = await _call(b, link, lambda c: c.doc_mentions(method_ids)) if method_ids else {}
        except ToolError:  # an older daemon without docs links
            mentions = {}
        symbols = []
        for h, ch in zip(res.hits, full):
            symbols.append(
                SymbolDef(
                    **_hit_fields(h),
                    params=ch.params if ch else "",
                    directives=list(ch.directives) if ch else [],
                    annotations=list(ch.annotations) if ch else [],
                    is_async=ch.is_async if ch else False,
                    region=list(ch.region) if ch else [],
                    doc=ch.doc if ch else "",
                    synonym=dict(ch.synonym) if ch else {},
                    types=list(ch.types) if ch else [],
                    docs=[_mention(d) for d in mentions.get(h.id, [])],
                )
            )
        warming = _lexical_warming(st)
        notes = (
            [f"the index is still being built ({_progress(st)}): definitions in files not reached yet are missing"]
            if warming
            else []
        )
        if res.stale:
            notes.append(_stale_note(res, wait_fresh))
        return FindSymbolOutput(
            root=link.name,
            query=query,
            total=res.total,
            shown=len(symbols),
            truncated=res.total > len(symbols),
            warming=warming,
            stale=res.stale,
            stale_paths=list(res.stale_paths),
            stale_count=res.stale_count,
            note="; ".join(notes),
            index=_index_info(st),
            symbols=symbols,
        )

    # -------------------------------------------------------------- get_method
    async def get_method(
        ctx: Context,
        name: Annotated[
            str,
            Field(
                min_length=1,
                description='Модуль.Метод ("ОбщегоНазначения.СообщитьПользователю"), or a bare method name together with path',
            ),
        ],
        path: Annotated[
            str | None,
            Field(
                description='Module path relative to the root, from a search hit: "CommonModules/ОбщегоНазначения/Ext/Module.bsl"'
            ),
        ] = None,
        root: RootArg = None,
    ) -> MethodOutput:
        b = _bridge(ctx)
        link = b.pick(root)
        st = await _status_or_fail(b, link)
        m = await _call(b, link, lambda c: c.get_method(name, path), warming=_lexical_warming(st))
        text, truncated, note = m.text, False, ""
        if len(text) > MAX_METHOD_CHARS:
            cut = text.rfind("\n", 0, MAX_METHOD_CHARS)
            cut = cut if cut > 0 else MAX_METHOD_CHARS
            text = text[:cut]
            last = m.start_line + text.count("\n")
            truncated = True
            note = (
                f"the method has {m.end_line - m.start_line + 1} lines; text cut after line {last}: read the rest with "
                f"read_module(path={m.path!r}, start_line={last + 1}, end_line={m.end_line})"
            )
        return MethodOutput(
            root=link.name,
            path=m.path,
            name=m.name,
            qualified_name=_qualified(m.kind, m.name, m.owner),
            kind=m.kind,
            owner=m.owner,
            module_kind=m.module_kind,
            export=m.export,
            is_async=m.is_async,
            params=m.params,
            directives=list(m.directives),
            annotations=list(m.annotations),
            region=list(m.region),
            doc=m.doc,
            signature=m.signature,
            line=_header_line(m),
            start_line=m.start_line,
            end_line=m.end_line,
            text=text,
            truncated=truncated,
            note=note,
            warming=_lexical_warming(st),
            docs=[_mention(d) for d in m.docs],
        )

    # -------------------------------------------------------------- read_document
    async def read_document(
        ctx: Context,
        path: Annotated[
            str,
            Field(
                min_length=1,
                description='Docs page relative to the root, from a search hit: "features/assertions/assertions-base.md"',
            ),
        ],
        heading: Annotated[
            str | None,
            Field(
                description="A heading of the page (as written, plain text, its anchor, or H1 > H2 path); default: the whole page"
            ),
        ] = None,
        root: RootArg = None,
    ) -> DocumentOutput:
        b = _bridge(ctx)
        link = b.pick(root)
        st = await _status_or_fail(b, link)
        d = await _call(b, link, lambda c: c.read_document(path, heading), warming=_lexical_warming(st))
        return DocumentOutput(
            root=link.name,
            path=d.path,
            heading=d.heading,
            heading_path=d.heading_path,
            link=d.link,
            lang=d.lang,
            start_line=d.start_line,
            end_line=d.end_line,
            total_lines=d.total_lines,
            text=d.text,
            truncated=d.truncated,
            note=d.note,
            headings=list(d.headings),
            mentions=list(d.mentions),
        )

    # -------------------------------------------------------------- read_module
    async def read_module(
        ctx: Context,
        path: Annotated[
            str,
            Field(
                min_length=1,
                description='File relative to the export root: "CommonModules/ОбщегоНазначения/Ext/Module.bsl", "Catalogs/Пользователи.xml"',
            ),
        ],
        start_line: Annotated[int, Field(ge=1, description="First line, 1-based")] = 1,
        end_line: Annotated[
            int | None, Field(ge=1, description=f"Last line, inclusive; default start_line + {MAX_READ_LINES - 1}")
        ] = None,
        root: RootArg = None,
    ) -> ModuleOutput:
        b = _bridge(ctx)
        link = b.pick(root)
        if end_line is not None and end_line < start_line:
            raise ToolError(f"end_line {end_line} is before start_line {start_line}")
        want_end = end_line if end_line is not None else start_line + MAX_READ_LINES - 1
        ask_end = min(want_end, start_line + MAX_READ_LINES - 1)
        try:
            mt = await _call(b, link, lambda c: c.read_module(path, start_line, ask_end))
        except Starting as exc:
            raise ToolError(str(exc)) from None
        if mt.total_lines and start_line > mt.total_lines:
            raise ToolError(f"{mt.path} has {mt.total_lines} lines; start_line must be at most {mt.total_lines}")
        text, end = mt.text, mt.end_line
        if len(text) > MAX_READ_CHARS:
            cut = text.rfind("\n", 0, MAX_READ_CHARS)
            text = text[: cut if cut > 0 else MAX_READ_CHARS]
            end = start_line + text.count("\n")
        expected = min(want_end, mt.total_lines)
        truncated = end < expected
        note = ""
        if truncated:
            note = f"lines {start_line}-{end} of {mt.total_lines} returned (at most {MAX_READ_LINES} lines / {MAX_READ_CHARS} characters per call); continue with start_line={end + 1}"
        elif end_line is None and end < mt.total_lines:
            truncated = True
            note = f"lines {start_line}-{end} of {mt.total_lines}; continue with start_line={end + 1}"
        elif end_line is not None and end_line > mt.total_lines:
            note = f"the file has {mt.total_lines} lines"
        return ModuleOutput(
            root=link.name,
            path=mt.path,
            start_line=start_line,
            end_line=end,
            total_lines=mt.total_lines,
            text=text,
            truncated=truncated,
            note=note,
        )

    # -------------------------------------------------------------- describe_object
    async def describe_object(
        ctx: Context,
        name: Annotated[
            str,
            Field(
                min_length=1,
                description='Тип.Имя: "Справочник.Пользователи", "Документ.ЗаказКлиента", "РегистрСведений.КурсыВалют", "Catalog.Users"',
            ),
        ],
        root: RootArg = None,
    ) -> ObjectOutput:
        b = _bridge(ctx)
        link = b.pick(root)
        st = await _status_or_fail(b, link)
        try:
            d = await link.call(lambda c: c.describe_object(name), wait=b.connect_wait)
        except DaemonError as exc:  # NOT_FOUND names similar and closest objects (the daemon's "did you mean")
            raise _tool_error(exc, warming=_lexical_warming(st)) from exc
        from daemon.contract import english_type

        return ObjectOutput(
            root=link.name,
            owner=d.owner,
            object_type=d.object_type,
            object_type_en=english_type(d.object_type) or "",
            name=d.name,
            path=d.path,
            synonym=dict(d.synonym),
            comment=d.comment,
            properties=dict(d.properties),
            attributes=[_meta_field(f) for f in d.attributes],
            tabular_sections=[_meta_field(f) for f in d.tabular_sections],
            dimensions=[_meta_field(f) for f in d.dimensions],
            resources=[_meta_field(f) for f in d.resources],
            enum_values=[_meta_field(f) for f in d.enum_values],
            forms=[_meta_field(f) for f in d.forms],
            commands=[_meta_field(f) for f in d.commands],
            templates=[_meta_field(f) for f in d.templates],
            other_fields=[_meta_field(f) for f in d.other_fields],
            modules=[ModuleRef(path=p, module_kind=k) for p, k in d.modules.items()],
            warming=_lexical_warming(st),
        )

    # -------------------------------------------------------------- index_status
    async def index_status(
        ctx: Context,
        root: Annotated[str | None, Field(description=f"Only this root ({names}); default: every served root")] = None,
    ) -> StatusOutput:
        b = _bridge(ctx)
        links_ = [b.pick(root)] if root else b.links
        return StatusOutput(roots=list(await asyncio.gather(*(_root_status(b, link) for link in links_))))

    tools = [
        Tool.from_function(search, description=SEARCH_DOC, annotations=READ_ONLY),
        Tool.from_function(find_symbol, description=FIND_SYMBOL_DOC, annotations=READ_ONLY),
        Tool.from_function(get_method, description=GET_METHOD_DOC, annotations=READ_ONLY),
        Tool.from_function(read_module, description=READ_MODULE_DOC, annotations=READ_ONLY),
        Tool.from_function(read_document, description=READ_DOCUMENT_DOC, annotations=READ_ONLY),
        Tool.from_function(describe_object, description=DESCRIBE_OBJECT_DOC, annotations=READ_ONLY),
        Tool.from_function(index_status, description=INDEX_STATUS_DOC, annotations=READ_ONLY),
    ]
    return _Server(
        "bsl-lens",
        title="bsl-lens: 1C:Enterprise code search",
        version=__version__,
        instructions=_instructions(links),
        tools=[_strict(t) for t in tools],
        lifespan=lifespan,
        log_level="WARNING",
    )


def _shared_info(sc) -> SharedCacheInfo | None:
    """The daemon's ``SharedCacheStatus`` for ``index_status`` (None without a shared cache)."""
    if sc is None:
        return None
    return SharedCacheInfo(
        url=sc.url,
        mode=sc.mode,
        state=sc.state,
        reachable=sc.reachable,
        hits=sc.hits,
        misses=sc.misses,
        written=sc.written,
        unreached=sc.unreached,
        last_error=sc.last_error,
        retry_in_s=sc.retry_in_s,
    )


async def _root_status(b: Bridge, link: RootLink) -> RootStatus:
    """One root's status for ``index_status``: the daemon's, or why there is none."""
    try:
        res = await link.status(wait=b.connect_wait, fresh=True)
    except Starting:
        info = _starting_info(link)
        return RootStatus(
            name=link.name, root=str(link.root), running=False, state="starting", warming=True, progress=info.progress
        )
    except DaemonError as exc:
        return RootStatus(
            name=link.name, root=str(link.root), running=False, state="failed", warming=False, error=str(exc)
        )
    except MCPError as exc:  # a daemon that cannot start: reported here, not raised
        return RootStatus(
            name=link.name, root=str(link.root), running=False, state="failed", warming=False, error=exc.message
        )
    import msgspec

    from daemon.cli.status_text import format_status

    st, daemon = res.service, res.daemon
    data = msgspec.to_builtins(st)
    data["running"] = True
    data["daemon"] = msgspec.to_builtins(daemon)
    d = st.dense
    return RootStatus(
        name=link.name,
        root=st.root,
        running=True,
        state=st.state,
        warming=_lexical_warming(st) or _dense_warming(st),
        progress=_progress(st),
        error=st.last_error or "",
        format=st.format,
        files=st.files,
        modules=st.modules,
        methods=st.methods,
        metadata_chunks=st.metadata_chunks,
        docs_pages=st.docs_pages,
        docs_sections=st.docs_sections,
        chunks=st.chunks,
        dense=DenseInfo(
            enabled=d.enabled,
            embedder=d.embedder,
            model=d.model,
            done=d.done,
            total=d.total,
            rate_per_s=d.rate_per_s,
            eta_s=d.eta_s,
            shared_cache=_shared_info(d.shared_cache),
        ),
        watcher=st.watcher.mode,
        stale_count=st.stale_count,
        stale_files=list(st.stale_files),
        skipped=dict(st.skipped),
        skipped_count=st.skipped_count,
        skipped_files=[SkippedFile(path=k.path, reason=k.reason, detail=k.detail) for k in st.skipped_files],
        pid=st.pid,
        uptime_s=st.uptime_s,
        index_dir=st.index_dir,
        log=daemon.log,
        summary=format_status(data),
    )
