"""The MCP tools: module-level adapters that check the arguments, call the root's daemon and answer
with :func:`mcp_bridge.answers.answer` (compact unless ``detail``).

Errors (mcp 2.x semantics): a mistake the model can fix (bad mode or filter, unknown object, path
outside the root, wrong root) is a ``ToolError`` (an ``isError`` result whose text says what is
valid; the daemon's -32602 invalid params and -32001 not found carry its message); a problem the
host must fix (the daemon cannot be started or reached) is an ``MCPError`` (a JSON-RPC error).

No tool waits more than the bridge's ``connect_wait`` for a starting daemon: ``search`` and
``find_symbol`` then answer with no hits and ``warming: true``, the lookups raise a tool error that
says to call again. While the daemon indexes, tools answer from what is indexed, with ``warming``
and a note. The ``root`` argument's description names the served roots: :func:`root_help` fills it
in when the server is built.
"""

import asyncio
from typing import Annotated, Literal

from mcp import MCPError
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import INTERNAL_ERROR, CallToolResult
from pydantic import Field

from daemon import notes
from daemon.client import CommandError, DaemonError, DaemonTimeout
from daemon.contract import DEFAULT_SCOPE, english_type, object_type_list
from daemon.server.protocol import INVALID_PARAMS, NOT_FOUND

from . import answers
from .answers import answer
from .arguments import (
    Detail,
    Flag,
    ModuleKind,
    Name,
    OptName,
    OptPath,
    PlatformKind,
    Query,
    RelPath,
    Root,
    Scope,
    SearchMode,
    SymbolScope,
    WaitFresh,
)
from .links import Bridge, RootLink, Starting
from .models import (
    CallGraphOutput,
    DocumentOutput,
    FindReferencesOutput,
    FindSymbolOutput,
    GraphEdgeInfo,
    GraphNode,
    RefCountsInfo,
    RefLine,
    RefModule,
    MethodOutput,
    ModuleOutput,
    ModuleRef,
    ObjectOutput,
    PlatformOutput,
    RootStatus,
    SearchOutput,
    StatusOutput,
)

#: Most hits ``search`` and ``find_symbol`` return in one call (below the daemon's cap,
#: ``daemon.contract.MAX_TOP_K``): a model's context is the limit; ``truncated`` says when there were more.
MAX_TOP_K = 50
#: ``read_module`` returns at most this many lines and characters per call; the note says how to continue.
MAX_READ_LINES = 500
MAX_READ_CHARS = 60_000
#: ``get_method`` cuts a method's text after this many characters; the note says which
#: ``read_module`` call returns the rest.
MAX_METHOD_CHARS = 60_000
#: ``get_method`` lists at most this many docs sections (``docs_total`` counts them all).
METHOD_DOCS = 10
#: Most references ``find_references`` lists in one call (the counts cover all of them); its
#: ``text`` lines are cut to this many characters.
MAX_REFS = 200
REF_TEXT_CHARS = 100
#: Methods a name stands for listed in a compact ``find_references`` answer (``detail``: all the
#: daemon looked at, ``more_targets`` counts the rest); their references are counted all the same.
TARGETS_SHOWN = 5
#: ``call_graph`` bounds: levels and neighbours per method (below the daemon's).
MAX_GRAPH_DEPTH = 5
MAX_FAN_OUT = 30
#: Most entries ``platform_help`` returns in one call.
MAX_PLATFORM_TOP_K = 20


def root_help(links: list[RootLink], tool: str) -> str:
    """The ``root`` argument's description for ``tool``, naming the served roots; ``""`` when one
    root is served (the argument is then not advertised)."""
    if len(links) == 1:
        return ""
    names = ", ".join(repr(link.name) for link in links)
    if tool == "index_status":
        return f"Only this root ({names}); default: all"
    return f"Export root: one of {names} (name or path); required"


# ------------------------------------------------------------------------------ the daemon
def _bridge(ctx: Context) -> Bridge:
    return ctx.request_context.lifespan_context


def _tool_error(exc: DaemonError, *, warming: bool = False) -> Exception:
    """A daemon error as the tool error a model can act on (or a protocol error)."""
    if isinstance(exc, CommandError):
        msg = exc.message
        if exc.code == INVALID_PARAMS:
            if ("unknown object type" in msg or "unknown metadata object type" in msg) and "use one of" not in msg:
                msg = f"{msg}; use one of: {object_type_list()}"
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


async def _call(b: Bridge, link: RootLink, fn, *, warming: bool = False):
    try:
        return await link.call(fn, wait=b.connect_wait)
    except DaemonError as exc:
        raise _tool_error(exc, warming=warming) from exc


async def _status(b: Bridge, link: RootLink):
    """The root's daemon ``Status`` (cached briefly); ``Starting`` / ``MCPError`` as RootLink."""
    try:
        return (await link.status(wait=b.connect_wait)).service
    except DaemonError as exc:
        raise _tool_error(exc) from exc


async def _status_after(b: Bridge, link: RootLink, st, connections: int):
    """``st``, or the daemon's status asked again when the call made since reconnected
    (``connections`` changed: the daemon was stopped and a new one answered, perhaps still
    indexing): an answer must not carry the old daemon's "ready" over the new one's hits."""
    if link.link.connections == connections:
        return st
    try:
        return await _status(b, link)
    except Starting:
        return st


async def _status_or_fail(b: Bridge, link: RootLink):
    """:func:`_status`, with a daemon still starting as a ToolError (for the tools that have no
    partial answer to give meanwhile)."""
    try:
        return await _status(b, link)
    except Starting as exc:
        raise ToolError(str(exc)) from None


def _stale_note(res, waited: float) -> str:
    text = notes.stale_note(
        res,
        waited=waited,
        wait_hint="ask again with wait_fresh=1, or read them with read_module",
        status_hint="index_status with detail=true says why",
    )
    return f"{text}; read them with read_module" if waited else text


def _freshness(res) -> dict:
    """The stale fields of a search or find_symbol answer."""
    return {
        "stale": res.stale,
        "stale_paths": list(res.stale_paths),
        "stale_count": res.stale_count,
        "stale_reason": res.stale_reason or "",
    }


# ------------------------------------------------------------------------------ search
async def search(
    ctx: Context,
    query: Annotated[
        Query,
        Field(
            min_length=1,
            description='A name (ОбщегоНазначения.Сообщ) or a question ("как отправить письмо")',
        ),
    ],
    mode: Annotated[
        SearchMode,
        Field(description="hybrid: names, words and meaning; lexical: exact terms; vector: meaning"),
    ] = "hybrid",
    top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description=f"Hits to return, 1..{MAX_TOP_K}")] = 10,
    scope: Annotated[
        Scope,
        Field(
            description="workspace (code, metadata, docs), code, metadata (objects, fields), docs (documentation), "
            "platform (1C platform help) or all"
        ),
    ] = DEFAULT_SCOPE,
    object_type: Annotated[
        OptName,
        Field(description="Only this metadata type and its modules: Справочник, Catalog, ..."),
    ] = None,
    module_kind: Annotated[ModuleKind | None, Field(description="Only this module kind")] = None,
    path_prefix: Annotated[OptPath, Field(description='Only files under this path: "CommonModules/"')] = None,
    export_only: Annotated[Flag, Field(description="Only exported methods (Экспорт)")] = False,
    wait_fresh: WaitFresh = 0.0,
    detail: Detail = False,
    root: Root = None,
) -> Annotated[CallToolResult, SearchOutput]:
    """The ``search`` tool (description: :data:`mcp_bridge.descriptions.SEARCH`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    # object_type and path_prefix are checked once, by the daemon (-32602 -> a ToolError naming the value)
    try:
        st = await _status(b, link)
    except Starting as exc:
        out = SearchOutput(
            root=link.name, total=0, shown=0, truncated=False, stale=False, warming=True, note=str(exc), hits=[]
        )
        out.index = answers.starting_info(link) if detail else None
        return answer(out)
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
    filters = {k: v for k, v in filters.items() if v not in (None, False, DEFAULT_SCOPE)}
    conns = link.link.connections
    res = await _call(
        b, link, lambda c: c.search(query, mode=mode, top_k=top_k, filters=filters or None, fresh_timeout=wait_fresh)
    )
    st = await _status_after(b, link, st, conns)
    dense_warm = mode != "lexical" and notes.dense_warming(st)
    warming = notes.lexical_warming(st) or dense_warm
    note = [notes.lexical_note(st) + ("; search again later for complete results" if notes.lexical_warming(st) else "")]
    if dense_warm:
        note.append(notes.dense_note(st.dense.done, st.dense.total))
    if res.stale:
        note.append(_stale_note(res, wait_fresh))
    out = SearchOutput(
        root=link.name,
        total=res.total,
        shown=len(res.hits),
        truncated=res.total > len(res.hits),
        warming=warming,
        note="; ".join(n for n in note if n),
        index=answers.index_info(st) if detail else None,
        mode=mode if detail else "",
        hits=[answers.search_hit(h, query, detail=detail) for h in res.hits],
        **_freshness(res),
    )
    return answer(out)


# ------------------------------------------------------------------------------ find_symbol
async def find_symbol(
    ctx: Context,
    query: Annotated[
        Query,
        Field(
            min_length=1,
            description='A name or part of one: "ОбщегоНазначения.СообщитьПользователю", "СообщПольз"',
        ),
    ],
    limit: Annotated[int, Field(ge=1, le=MAX_TOP_K, description=f"Definitions to return, 1..{MAX_TOP_K}")] = 10,
    scope: Annotated[SymbolScope, Field(description="workspace (all of it), code, metadata or docs")] = DEFAULT_SCOPE,
    export_only: Annotated[Flag, Field(description="Only exported methods (Экспорт)")] = False,
    wait_fresh: WaitFresh = 0.0,
    detail: Detail = False,
    root: Root = None,
) -> Annotated[CallToolResult, FindSymbolOutput]:
    """The ``find_symbol`` tool (description: :data:`mcp_bridge.descriptions.FIND_SYMBOL`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    try:
        st = await _status(b, link)
    except Starting as exc:
        out = FindSymbolOutput(
            root=link.name, total=0, shown=0, truncated=False, stale=False, warming=True, note=str(exc), symbols=[]
        )
        out.index = answers.starting_info(link) if detail else None
        return answer(out)
    filters = {k: v for k, v in {"scope": scope, "export_only": export_only}.items() if v not in (False, DEFAULT_SCOPE)}
    conns = link.link.connections
    res = await _call(
        b, link, lambda c: c.symbols(query, limit=limit, filters=filters or None, fresh_timeout=wait_fresh)
    )
    st = await _status_after(b, link, st, conns)
    chunks, mentions = await _definitions(b, link, res.hits)
    warming = notes.lexical_warming(st)
    note = [notes.lexical_note(st) + ("; definitions in files not reached yet are missing" if warming else "")]
    if res.stale:
        note.append(_stale_note(res, wait_fresh))
    out = FindSymbolOutput(
        root=link.name,
        total=res.total,
        shown=len(res.hits),
        truncated=res.total > len(res.hits),
        warming=warming,
        note="; ".join(n for n in note if n),
        index=answers.index_info(st) if detail else None,
        symbols=[
            answers.symbol_def(h, ch, mentions.get(h.id, []), query, detail=detail)
            for h, ch in zip(res.hits, chunks, strict=True)
        ],
        **_freshness(res),
    )
    return answer(out)


async def _definitions(b: Bridge, link: RootLink, hits) -> tuple[list, dict]:
    """Each hit's ``Chunk`` (None where it was replaced since) and the docs sections that
    mention the methods among them (``{}`` from a daemon without docs links)."""

    async def chunks(c):
        return await asyncio.gather(*(c.get_chunk(h.id) for h in hits))

    try:
        full = await _call(b, link, chunks)
    except ToolError:  # a chunk replaced between the two calls: fall back to the hits
        full = [None] * len(hits)
    method_ids = [h.id for h in hits if h.kind in ("procedure", "function")]
    try:
        mentions = await _call(b, link, lambda c: c.doc_mentions(method_ids)) if method_ids else {}
    except ToolError:
        mentions = {}
    return list(full), mentions


# ------------------------------------------------------------------------------ get_method
def _header_line(m) -> int:
    """Line of a method's header inside its text (which starts with the doc comment; a header
    written in ``#Если`` branches has its signatures joined by ``" | "``: the first)."""
    head = (m.signature or "").split(" | ", 1)[0].strip().splitlines()[0][:40] if m.signature else ""
    if head:
        for i, line in enumerate(m.text.splitlines()):
            if line.strip().startswith(head):
                return m.start_line + i
    return m.start_line


def _method_text(m) -> tuple[str, bool, str]:
    """``(text, truncated, note)``: the method's text, cut after :data:`MAX_METHOD_CHARS`."""
    if len(m.text) <= MAX_METHOD_CHARS:
        return m.text, False, ""
    cut = m.text.rfind("\n", 0, MAX_METHOD_CHARS)
    text = m.text[: cut if cut > 0 else MAX_METHOD_CHARS]
    last = m.start_line + text.count("\n")
    note = (
        f"the method has {m.end_line - m.start_line + 1} lines; text cut after line {last}: read the rest with "
        f"read_module(path={m.path!r}, start_line={last + 1}, end_line={m.end_line})"
    )
    return text, True, note


async def get_method(
    ctx: Context,
    name: Annotated[
        Name,
        Field(
            min_length=1,
            description='Модуль.Метод ("ОбщегоНазначения.СообщитьПользователю"), or a method name with path',
        ),
    ],
    path: Annotated[
        OptPath,
        Field(description='Module path from a search hit: "CommonModules/ОбщегоНазначения/Ext/Module.bsl"'),
    ] = None,
    wait_fresh: WaitFresh = 0.0,
    root: Root = None,
) -> Annotated[CallToolResult, MethodOutput]:
    """The ``get_method`` tool (description: :data:`mcp_bridge.descriptions.GET_METHOD`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    st = await _status_or_fail(b, link)
    warming = notes.lexical_warming(st)
    m = await _call(b, link, lambda c: c.get_method(name, path, fresh_timeout=wait_fresh), warming=warming)
    text, truncated, note = _method_text(m)
    if m.stale:
        own = "its module changed on disk and is not indexed yet: the text and lines may be old; "
        note = "; ".join(n for n in (note, (own if m.stale_own else "") + _stale_note(m, wait_fresh)) if n)
    total = max(m.docs_total, len(m.docs))  # an older daemon sends no total (0)
    docs_truncated = total > min(len(m.docs), METHOD_DOCS)
    out = MethodOutput(
        root=link.name,
        path=m.path,
        qualified_name=answers.qualified(m.kind, m.name, m.owner),
        kind=m.kind,
        owner=m.owner,
        module_kind=m.module_kind,
        export=m.export,
        is_async=m.is_async,
        directives=list(m.directives),
        annotations=list(m.annotations),
        region=list(m.region),
        signature=m.signature,
        line=_header_line(m),
        start_line=m.start_line,
        end_line=m.end_line,
        text=text,
        truncated=truncated,
        note=note,
        warming=warming,
        docs=[answers.mention(d) for d in m.docs[:METHOD_DOCS]],
        docs_total=total,
        docs_truncated=docs_truncated,
        path_stale=bool(m.stale_own),
        **_freshness(m),
    )
    return answer(out)


# ------------------------------------------------------------------------------ read_document, read_module
async def read_document(
    ctx: Context,
    path: Annotated[
        RelPath,
        Field(min_length=1, description='Docs page from a search hit: "features/assertions/assertions-base.md"'),
    ],
    heading: Annotated[
        OptPath,
        Field(description="A heading of the page (as written, its anchor, or H1 > H2); default: the whole page"),
    ] = None,
    root: Root = None,
) -> Annotated[CallToolResult, DocumentOutput]:
    """The ``read_document`` tool (description: :data:`mcp_bridge.descriptions.READ_DOCUMENT`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    st = await _status_or_fail(b, link)
    d = await _call(b, link, lambda c: c.read_document(path, heading), warming=notes.lexical_warming(st))
    out = DocumentOutput(
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
    return answer(out)


def _module_note(start_line: int, end_line: int | None, end: int, total: int, want_end: int) -> tuple[bool, str]:
    """``(truncated, note)`` of a ``read_module`` answer that returned lines ``start_line..end``."""
    if end < min(want_end, total):
        return True, (
            f"lines {start_line}-{end} of {total} returned (at most {MAX_READ_LINES} lines / {MAX_READ_CHARS} "
            f"characters per call); continue with start_line={end + 1}"
        )
    if end_line is None and end < total:
        return True, f"lines {start_line}-{end} of {total}; continue with start_line={end + 1}"
    if end_line is not None and end_line > total:
        return False, f"the file has {total} lines"
    return False, ""


async def read_module(
    ctx: Context,
    path: Annotated[
        RelPath,
        Field(
            min_length=1,
            description='File relative to the export root: "Catalogs/Пользователи.xml"',
        ),
    ],
    start_line: Annotated[int, Field(ge=1, description="First line, 1-based")] = 1,
    end_line: Annotated[
        int | None, Field(ge=1, description=f"Last line, inclusive; default start_line + {MAX_READ_LINES - 1}")
    ] = None,
    root: Root = None,
) -> Annotated[CallToolResult, ModuleOutput]:
    """The ``read_module`` tool (description: :data:`mcp_bridge.descriptions.READ_MODULE`)."""
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
    truncated, note = _module_note(start_line, end_line, end, mt.total_lines, want_end)
    out = ModuleOutput(
        root=link.name,
        path=mt.path,
        start_line=start_line,
        end_line=end,
        total_lines=mt.total_lines,
        text=text,
        truncated=truncated,
        note=note,
    )
    return answer(out)


# ------------------------------------------------------------------------------ describe_object
def _object_note(d, own: set[str], waited: float) -> str:
    """The note of a ``describe_object`` answer: what may be out of date in it."""
    if not d.stale:
        return ""
    what = "its descriptor changed on disk and is not indexed yet: the fields may be old; " if d.path in own else ""
    return what + _stale_note(d, waited)


async def describe_object(
    ctx: Context,
    name: Annotated[
        Name,
        Field(
            min_length=1,
            description='Тип.Имя: "Справочник.Пользователи", "Документ.ЗаказКлиента", "РегистрСведений.КурсыВалют"',
        ),
    ],
    wait_fresh: WaitFresh = 0.0,
    root: Root = None,
) -> Annotated[CallToolResult, ObjectOutput]:
    """The ``describe_object`` tool (description: :data:`mcp_bridge.descriptions.DESCRIBE_OBJECT`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    st = await _status_or_fail(b, link)
    # NOT_FOUND names similar and closest objects (the daemon's "did you mean")
    d = await _call(
        b, link, lambda c: c.describe_object(name, fresh_timeout=wait_fresh), warming=notes.lexical_warming(st)
    )
    mf = answers.meta_field
    own = set(d.stale_own)
    out = ObjectOutput(
        root=link.name,
        owner=d.owner,
        object_type=d.object_type,
        object_type_en=english_type(d.object_type) or "",
        name=d.name,
        path=d.path,
        synonym=dict(d.synonym),
        comment=d.comment,
        properties=dict(d.properties),
        attributes=[mf(f) for f in d.attributes],
        tabular_sections=[mf(f) for f in d.tabular_sections],
        dimensions=[mf(f) for f in d.dimensions],
        resources=[mf(f) for f in d.resources],
        enum_values=[mf(f) for f in d.enum_values],
        forms=[mf(f) for f in d.forms],
        commands=[mf(f) for f in d.commands],
        templates=[mf(f) for f in d.templates],
        other_fields=[mf(f) for f in d.other_fields],
        modules=[ModuleRef(path=p, module_kind=k, stale=p in own) for p, k in d.modules.items()],
        warming=notes.lexical_warming(st),
        note=_object_note(d, own, wait_fresh),
        path_stale=d.path in own,
        also_in=list(d.also_in),
        **_freshness(d),
    )
    return answer(out)


# ------------------------------------------------------------------------------ find usages
RefName = Annotated[
    Name,
    Field(
        min_length=1,
        description="Модуль.Метод, a method name, or a metadata object (Справочник.Валюты: its modules' methods)",
    ),
]


def _ref_note(res, st, waited: float) -> tuple[bool, str]:
    """``(warming, note)`` of a find-usages answer: the index still being built, references
    still resolving or being read again, stale files, code run from strings."""
    warming = notes.lexical_warming(st) or bool(res.resolving) or res.building
    note = []
    if notes.lexical_warming(st):
        note.append(notes.lexical_note(st) + "; references in files not indexed yet are missing")
    if res.resolving:
        note.append(f"the references of {res.resolving} files are still being resolved: ask again in a moment")
    if res.building:
        note.append("the references are being read from the files again: files not read yet are missing")
    if res.stale:
        note.append(_stale_note(res, waited))
    return warming, "; ".join(n for n in note if n)


def _target_label(m) -> str:
    return f"{answers.qualified(m.kind or 'procedure', m.name, m.owner)} {m.path}:{m.name_range[0] + 1}"


def _ref_modules(refs, *, detail: bool) -> list[RefModule]:
    """References grouped by file, in order (they come sorted by path and line)."""
    out: dict[str, list[RefLine]] = {}
    for r in refs:
        line = RefLine(
            line=r.line + 1,
            kind=r.kind,
            caller=r.caller.rpartition("::")[2] if r.caller else "",
            text=answers.cut(r.context, REF_TEXT_CHARS) if r.context else "",
        )
        if detail:
            line.callee, line.event, line.reason = r.callee, r.detail, r.reason or ""
        out.setdefault(r.path, []).append(line)
    return [RefModule(path=p, refs=lines) for p, lines in out.items()]


async def find_references(
    ctx: Context,
    name: RefName,
    limit: Annotated[int, Field(ge=1, le=MAX_REFS, description=f"References to list, 1..{MAX_REFS}")] = 20,
    possible: Annotated[Flag, Field(description="Also list the possible callers")] = False,
    wait_fresh: WaitFresh = 0.0,
    detail: Detail = False,
    root: Root = None,
) -> Annotated[CallToolResult, FindReferencesOutput]:
    """The ``find_references`` tool (description: :data:`mcp_bridge.descriptions.FIND_REFERENCES`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    st = await _status_or_fail(b, link)
    conns = link.link.connections
    res = await _call(
        b,
        link,
        lambda c: c.references(name, limit=limit, possible=possible, context=True, fresh_timeout=wait_fresh),
        warming=notes.lexical_warming(st),
    )
    st = await _status_after(b, link, st, conns)
    warming, note = _ref_note(res, st, wait_fresh)
    c = res.counts
    shown_targets = res.targets if detail else res.targets[:TARGETS_SHOWN]
    out = FindReferencesOutput(
        root=link.name,
        targets=[_target_label(m) for m in shown_targets],
        more_targets=res.targets_total - len(shown_targets),
        total=res.total,
        shown=len(res.references),
        truncated=res.truncated,
        counts=RefCountsInfo(
            resolved=c.resolved, string=c.string, metadata=c.metadata, possible=c.possible, dynamic=c.dynamic
        ),
        lower_bound=res.lower_bound,
        warming=warming,
        stale=res.stale,
        note=note,
        stale_paths=list(res.stale_paths),
        modules=_ref_modules(res.references, detail=detail),
        possible=_ref_modules(res.possible, detail=detail),
    )
    return answer(out)


async def call_graph(
    ctx: Context,
    name: RefName,
    direction: Annotated[
        Literal["callers", "callees"], Field(description="callers (what a change affects) or callees")
    ] = "callers",
    depth: Annotated[int, Field(ge=1, le=MAX_GRAPH_DEPTH, description="Levels to walk")] = 2,
    fan_out: Annotated[int, Field(ge=1, le=MAX_FAN_OUT, description="Neighbours per method")] = 10,
    wait_fresh: WaitFresh = 0.0,
    detail: Detail = False,
    root: Root = None,
) -> Annotated[CallToolResult, CallGraphOutput]:
    """The ``call_graph`` tool (description: :data:`mcp_bridge.descriptions.CALL_GRAPH`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    st = await _status_or_fail(b, link)
    conns = link.link.connections

    g = await _call(
        b,
        link,
        lambda c: c.call_graph(name, direction=direction, depth=depth, fan_out=fan_out, fresh_timeout=wait_fresh),
        warming=notes.lexical_warming(st),
    )
    st = await _status_after(b, link, st, conns)
    warming, note = _ref_note(g, st, wait_fresh)
    if g.possible and direction == "callers" and not any(e.dest == g.start for e in g.edges):
        # no resolved caller is not "nothing calls it": say so where the agent reads on
        maybe = f"0 resolved callers, {g.possible} possible by name (chained calls, variables): find_references"
        note = "; ".join(n for n in (note, f"{maybe} possible=true lists them") if n)
    index = {n: i for i, n in enumerate(g.nodes)}
    nodes = [_graph_node(n, d, g.methods.get(n), detail=detail) for n, d in g.nodes.items()]
    out = CallGraphOutput(
        root=link.name,
        direction=g.direction,
        nodes=nodes,
        edges=[GraphEdgeInfo(src=index[e.source], dst=index[e.dest], kind=e.kind, count=e.count) for e in g.edges],
        truncated=g.truncated,
        revisited=g.revisited,
        lower_bound=g.lower_bound,
        possible=g.possible,
        other_starts=list(g.starts),
        warming=warming,
        stale=g.stale,
        note=note,
    )
    return answer(out)


# ------------------------------------------------------------------------------ platform_help
async def platform_help(
    ctx: Context,
    query: Annotated[
        Query,
        Field(
            min_length=1,
            description="A name (СтрНайти, Тип.Метод, Новый Тип) or a question",
        ),
    ],
    kind: Annotated[PlatformKind | None, Field(description="Only this kind")] = None,
    version: Annotated[OptName, Field(description="8.3.24 or bundled; default: the configuration's")] = None,
    top_k: Annotated[int, Field(ge=1, le=MAX_PLATFORM_TOP_K, description=f"1..{MAX_PLATFORM_TOP_K}")] = 5,
    detail: Detail = False,
    root: Root = None,
) -> Annotated[CallToolResult, PlatformOutput]:
    """The ``platform_help`` tool (description: :data:`mcp_bridge.descriptions.PLATFORM_HELP`)."""
    b = _bridge(ctx)
    link = b.pick(root)
    mode = "hybrid"
    try:
        st = await _status(b, link)
        if not st.dense.enabled:
            mode = "lexical"
    except Starting as exc:
        raise ToolError(str(exc)) from None
    res = await _call(b, link, lambda c: c.platform_help(query, mode=mode, top_k=top_k, kind=kind, version=version))
    used = res.platform
    note = used.why if used.state != "ready" or (version and used.version != version) else ""
    if not res.entries and not note:
        note = "nothing found; try another wording, a name (СтрНайти) or Тип.Метод"
    out = PlatformOutput(
        root=link.name,
        platform=used.label,
        exact=res.exact,
        total=res.total,
        note=note,
        why=used.why if detail else "",
        entries=[
            answers.platform_entry(e, h, exact=res.exact, detail=detail)
            for e, h in zip(res.entries, res.hits, strict=True)
        ],
    )
    return answer(out)


def _graph_node(node: str, depth: int, m, *, detail: bool) -> GraphNode:
    """A node of the walk: a method (with its place), a binding (``<path>#<kind>:<detail>``) or
    module-level code (``<path>::<module>``)."""
    if m is not None:
        out = GraphNode(
            name=answers.qualified(m.kind or "procedure", m.name, m.owner),
            path=m.path,
            line=m.name_range[0] + 1,
            depth=depth,
        )
        if detail:
            out.id, out.module_kind = m.id, m.module_kind
        return out
    if "::" in node:
        path, _, name = node.rpartition("::")
        return GraphNode(name=name, path=path, depth=depth)
    path, _, binding = node.partition("#")
    return GraphNode(name=binding, path=path, depth=depth)


# ------------------------------------------------------------------------------ index_status
async def index_status(
    ctx: Context,
    detail: Annotated[
        Flag, Field(description="true: also the files left out and why, stale files, pid, index dir, log")
    ] = False,
    root: Root = None,
) -> Annotated[CallToolResult, StatusOutput]:
    """The ``index_status`` tool (description: :data:`mcp_bridge.descriptions.INDEX_STATUS`)."""
    b = _bridge(ctx)
    links = [b.pick(root)] if root else b.links
    roots = await asyncio.gather(*(_root_status(b, link, detail=detail) for link in links))
    return answer(StatusOutput(roots=list(roots)))


async def _root_status(b: Bridge, link: RootLink, *, detail: bool) -> RootStatus:
    """One root's status: the daemon's, or why there is none (starting, failed)."""
    try:
        res = await link.status(wait=b.connect_wait, fresh=True)
    except Starting:
        info = answers.starting_info(link)
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
    return answers.root_status(link, res, detail=detail)


#: Every tool, in the order ``tools/list`` gives them.
TOOLS = (
    search,
    find_symbol,
    get_method,
    read_module,
    read_document,
    describe_object,
    find_references,
    call_graph,
    platform_help,
    index_status,
)
