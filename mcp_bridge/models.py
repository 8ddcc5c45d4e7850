"""Output models of the MCP tools (pydantic): what a client receives as ``structuredContent``.

The SDK publishes each model's JSON schema as the tool's ``outputSchema``; the field descriptions
are written for the model that reads the results, and only where a name does not say enough.
An answer leaves out every field that has its default (``""``, ``0``, ``false``, ``[]``, null),
so a field that is missing means exactly that; fields marked *detail* are filled only when the
tool is called with ``detail: true``.

Conventions (the daemon's, :mod:`daemon.contract`): ``path`` is relative to the export root with
forward slashes; lines are 1-based and inclusive; ``owner`` is the owning object in Russian 1C
notation (``ОбщийМодуль.ОбщегоНазначения``, ``Справочник.Пользователи``); ``root`` is the name of
the export root that answered (see ``index_status``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


def detail(default: Any = None, description: str = "", *, factory: Any = None) -> Any:
    """A field filled only with ``detail: true`` (``factory``: a list or dict default); the published
    output schema leaves it out."""
    extra = {"json_schema_extra": {"detail": True}, "description": description or None}
    return Field(default_factory=factory, **extra) if factory else Field(default, **extra)


def compact_schema(schema: dict[str, Any], _cls: type | None = None, *, output: bool = True) -> None:
    """Trim a model's JSON schema to what a client needs (``tools/list`` goes to the model with
    every session): no pydantic ``title``, ``X | None`` as ``X``, no null default. An output schema
    keeps the names and types of the compact answer's fields only: no descriptions (the tool's
    description says what the answer means), defaults, detail fields or ``additionalProperties``."""
    schema.pop("title", None)
    if output:
        for key in ("additionalProperties", "description"):
            schema.pop(key, None)
    props = schema.get("properties", {})
    for name, prop in list(props.items()):
        if output and prop.pop("detail", False):
            del props[name]
            continue
        prop.pop("title", None)
        variants = prop.get("anyOf")
        if variants and {"type": "null"} in variants and len(variants) == 2:
            prop.update(next(v for v in variants if v != {"type": "null"}))
            del prop["anyOf"]
        if output or prop.get("default", 0) is None:
            prop.pop("default", None)
        if output:
            prop.pop("description", None)


#: The freshness fields the answers share, worded once.
StalePaths = Annotated[list[str], Field(default_factory=list, description="The first 20 (a folder ends with /)")]
StaleReason = Annotated[str, Field(description="File watching is off or degraded: changes may go unnoticed")]
LookupStale = Annotated[
    bool,
    Field(
        description="Files changed on disk are not indexed yet (stale_paths): the answer may be out of date; "
        "ask again with wait_fresh=1"
    ),
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=compact_schema)


# ------------------------------------------------------------------------------ index state
class IndexInfo(_Out):
    """How complete the index was when the answer was computed (present while it is being built)."""

    state: str = Field(description="starting (nothing searchable yet), loading, indexing, ready, stopping")
    progress: str = Field("", description='e.g. "indexing: chunk 1200/5000; dense chunks embedded 300/38570"')
    dense_done: int = Field(0, description="Chunks with an embedding: semantic search covers only these")
    dense_total: int = Field(0, description="Chunks in all (0: semantic search is off for this root)")


class DocMention(_Out):
    """A documentation section that names a method."""

    link: str = Field(description="path#anchor of the section: read it with read_document")
    heading_path: str = ""
    line: int = Field(description="The heading's line")


# ------------------------------------------------------------------------------ search
class SearchHit(_Out):
    """One result: a method (or module-level code), a metadata object or field, or a docs section."""

    path: str
    line: int = Field(description="The method's header or the object's name: cite as path:line")
    kind: str = Field(
        description="procedure, function, module (module-level code); object, attribute, tabular_section, "
        "dimension, resource, enum_value, form, command, template (metadata); section (docs); platform_* "
        "(platform help, scope platform or all: see platform_help)"
    )
    qualified_name: str = Field(
        description="Модуль.Метод (pass it to get_method), Тип.Имя (describe_object), Тип.Имя.Поле"
    )
    export: bool = Field(False, description="Declared Экспорт")
    match: str = Field(
        "",
        description="How the name matched: exact (the whole name), name (the method's name, in another module), "
        "prefix, camelhump, substring, translated; missing: found by words or meaning",
    )
    summary: str = Field("", description="What the doc comment or the object's description says it is, cut short")
    heading_path: str = Field("", description="Docs sections: H1 > H2 > H3")
    link: str = Field("", description="Docs sections: path#anchor; read it with read_document")
    stale: bool = Field(False, description="Changed on disk and not re-indexed yet: re-check with read_module")
    page_problem: str = Field(
        "", description="Docs sections: what is wrong with the page (an unclosed code fence hides later headings)"
    )
    test: bool = Field(False, description="Test or fixture code (ranked below production code that matches as well)")
    name: str = detail("")
    owner: str = detail("")
    object_type: str = detail("", "the owner's type, ОбщийМодуль, Справочник, ...")
    module_kind: str = detail("", "common, object, manager, form, command, recordset, ...")
    start_line: int = detail(0, "first line, the doc comment included")
    end_line: int = detail(0)
    signature: str = detail("", "the method's header as written")
    snippet: str = detail("", "doc comment and signature (methods), description (metadata)")
    score: float = detail(0.0, "fused score, comparable within one answer only")
    ranks: dict[str, int] = detail(description="rank in each retrieval channel that found it", factory=dict)


class SearchOutput(_Out):
    """Ranked results of ``search``, best first."""

    root: str
    total: int = Field(description="Candidates found before the top_k cut")
    shown: int
    truncated: bool = Field(description="More candidates than shown: raise top_k or narrow the filters")
    stale: bool = Field(
        description="Files changed on disk are not indexed yet (stale_paths): the answer may miss what they now "
        "contain; ask again with wait_fresh=1"
    )
    warming: bool = Field(description="The index is still being built or brought up to date: see note and index")
    note: str = Field("", description="What to know about this answer (warming, semantic coverage, stale files)")
    stale_paths: StalePaths
    stale_count: int = 0
    stale_reason: StaleReason = ""
    index: IndexInfo | None = detail(None, "how complete the index is (index_status tells more)")
    mode: str = detail("")
    hits: list[SearchHit]


# ------------------------------------------------------------------------------ symbols
class SymbolDef(_Out):
    """A definition found by name: a method, or a metadata object or field."""

    qualified_name: str = Field(
        description="ОбщегоНазначения.СообщитьПользователю, Справочник.Пользователи, Справочник.Пользователи.Имя"
    )
    kind: str
    path: str
    line: int = Field(description="The header or the name: cite as path:line")
    end_line: int
    match: str = Field(
        "", description="exact, name (the method's name, in another module), prefix, camelhump, substring, translated"
    )
    signature: str = Field("", description="Methods: the header as written (parameters, Экспорт)")
    summary: str = Field("", description="What the doc comment says it does, cut short (detail: the whole comment)")
    export: bool = False
    is_async: bool = Field(False, description="Declared Асинх")
    directives: list[str] = Field(default_factory=list, description="&НаСервере, &НаКлиенте, ...")
    annotations: list[str] = Field(default_factory=list, description='Extension annotations: &Вместо("...")')
    synonym: dict[str, str] = Field(default_factory=dict, description="Metadata: language -> user-visible name")
    types: list[str] = Field(default_factory=list, description="Metadata fields: value types as written")
    docs: list[DocMention] = Field(default_factory=list, description="Docs sections that mention it (first 3)")
    docs_total: int = Field(0, description="How many docs sections mention it")
    name: str = detail("")
    owner: str = detail("")
    object_type: str = detail("")
    module_kind: str = detail("")
    start_line: int = detail(0, "first line, the doc comment included")
    region: list[str] = detail(description="#Область nesting, outermost first", factory=list)
    doc: str = detail("", "the // comment block above the method, as written")
    stale: bool = Field(False, description="Changed on disk and not re-indexed yet: re-check with read_module")


class FindSymbolOutput(_Out):
    """Definitions matching a name, best first."""

    root: str
    total: int
    shown: int
    truncated: bool
    stale: bool = Field(
        description="Files changed on disk are not indexed yet: a definition just added or renamed may be "
        "missing; ask again with wait_fresh=1"
    )
    warming: bool
    note: str = ""
    stale_paths: StalePaths
    stale_count: int = 0
    stale_reason: StaleReason = ""
    index: IndexInfo | None = detail(None, "how complete the index is (index_status tells more)")
    symbols: list[SymbolDef]


# ------------------------------------------------------------------------------ method, module, document
class MethodOutput(_Out):
    """The full text of one method (its doc comment, directives and header included)."""

    root: str
    path: str
    qualified_name: str = Field(description="Модуль.Метод")
    kind: str = Field(description="procedure or function")
    owner: str
    module_kind: str
    export: bool = False
    is_async: bool = False
    directives: list[str] = Field(default_factory=list)
    annotations: list[str] = Field(default_factory=list)
    region: list[str] = Field(default_factory=list, description="#Область path, outermost first")
    signature: str = ""
    line: int = Field(description="The header (Процедура/Функция ...): cite as path:line")
    start_line: int = Field(description="First line of text: the doc comment above the header")
    end_line: int
    text: str = Field(description="The source: doc comment, directives, header, body, КонецПроцедуры/КонецФункции")
    truncated: bool = Field(False, description="The text was cut (a very long method): see note")
    note: str = ""
    warming: bool = False
    docs: list[DocMention] = Field(
        default_factory=list, description="Docs sections that mention it (read them with read_document)"
    )
    docs_total: int = Field(0, description="How many docs sections mention it")
    docs_truncated: bool = Field(False, description="docs lists only some of them")
    stale: LookupStale = False
    stale_paths: StalePaths
    stale_count: int = 0
    stale_reason: StaleReason = ""
    path_stale: bool = Field(
        False, description="Its module changed on disk and is not re-indexed yet: text and lines may be old"
    )


class ModuleOutput(_Out):
    """A line range of a file under the export root."""

    root: str
    path: str
    start_line: int
    end_line: int = Field(description="Last line returned")
    total_lines: int = Field(description="Lines in the whole file")
    text: str
    truncated: bool = Field(False, description="Fewer lines than asked for: see note for how to continue")
    note: str = ""


class DocumentOutput(_Out):
    """A documentation page or one section of it (with its sub-sections)."""

    root: str
    path: str
    heading: str | None = Field(None, description="The section returned; missing: the whole page")
    heading_path: str = ""
    link: str = Field(description="path#anchor (path alone for the whole page)")
    lang: str = ""
    start_line: int
    end_line: int = Field(description="Last line returned")
    total_lines: int
    text: str = Field(description="The markdown as written")
    truncated: bool = Field(False, description="The text was cut: see note for how to read on")
    note: str = ""
    headings: list[str] = Field(default_factory=list, description="Every heading of the page, to read another")
    mentions: list[str] = Field(
        default_factory=list, description="Methods of the code the section names (Модуль.Метод): see get_method"
    )


# ------------------------------------------------------------------------------ find usages
class RefLine(_Out):
    """One reference to the method, in the module it is listed under."""

    line: int = Field(description="1-based: cite as path:line")
    kind: str = Field(
        "call",
        description="call, member, manager, this, proceed: a call; notify, idle, background, long_operation, "
        "by_name, handler: a string or handler naming it; subscription, scheduled_job, form_event, form_item_event, "
        "form_command, http_handler, web_operation, platform_event, extension: metadata",
    )
    caller: str = Field("", description="The calling method; missing: module-level code, metadata or the platform")
    text: str = Field("", description="The line of code or metadata, cut")
    callee: str = detail("", "the callee as written")
    event: str = detail("", "the event, command, helper or annotation")
    reason: str = detail("", "possible callers: why unresolved")


class RefModule(_Out):
    """The references in one file (a module, a form layout, a descriptor)."""

    path: str
    refs: list[RefLine]


class RefCountsInfo(_Out):
    """Counted apart, over all references (not only those listed)."""

    resolved: int = Field(0, description="Calls written in code")
    string: int = Field(0, description="Strings or handler references naming it")
    metadata: int = Field(0, description="Metadata bindings, platform events, extension annotations")
    possible: int = Field(0, description="Unresolved calls with the same name (through variables): maybe callers")
    dynamic: int = Field(0, description="Выполнить/Вычислить sites in the configuration: any may call it")


class FindReferencesOutput(_Out):
    """Who references a method (find usages), grouped by file."""

    root: str
    targets: list[str] = Field(description="The methods the name stands for: Модуль.Метод path:line")
    more_targets: int = Field(0, description="Further methods the name stands for (detail=true lists them)")
    total: int = Field(description="References in all (resolved, string and metadata)")
    shown: int
    truncated: bool = Field(description="More references than shown: raise limit")
    counts: RefCountsInfo
    lower_bound: bool = Field(False, description="Code run from strings exists (counts.dynamic): total is a minimum")
    warming: bool = False
    stale: bool = False
    note: str = ""
    stale_paths: StalePaths
    modules: list[RefModule]
    possible: list[RefModule] = Field(default_factory=list, description="With possible=true: the possible callers")


class GraphNode(_Out):
    """A method (or a binding, module-level code) reached by the walk."""

    name: str = Field(description="Модуль.Метод; a binding: its kind and event")
    path: str
    line: int = Field(0, description="The method's header")
    depth: int = Field(0, description="Calls away from the start (0: the start)")
    id: str = detail("", "the method id (path::Name), for find_references")
    module_kind: str = detail("")


class GraphEdgeInfo(_Out):
    """``src`` calls ``dst`` (indexes into nodes)."""

    src: int
    dst: int
    kind: str = "call"
    count: int = Field(1, description="Sites")


class CallGraphOutput(_Out):
    """Callers or callees of a method, to a bounded depth."""

    root: str
    direction: str
    nodes: list[GraphNode]
    edges: list[GraphEdgeInfo]
    truncated: bool = Field(False, description="The depth or fan_out cut something")
    revisited: int = Field(0, description="Edges back to a node already reached (recursion, mutual calls)")
    lower_bound: bool = Field(False, description="Code run from strings may add callers")
    possible: int = Field(
        0, description="Unresolved calls with the start's name (chained, through variables): maybe callers, not walked"
    )
    other_starts: list[str] = Field(default_factory=list, description="Other methods of that name: qualify it")
    warming: bool = False
    stale: bool = False
    note: str = ""


# ------------------------------------------------------------------------------ metadata
class MetaField(_Out):
    """A field of a metadata object (attribute, tabular section, dimension, resource, enum value, form, ...)."""

    kind: str
    name: str
    synonym: dict[str, str] = Field(default_factory=dict)
    types: list[str] = Field(default_factory=list, description="As written: CatalogRef.Пользователи, String(150)")
    comment: str = ""
    fields: list[MetaField] = Field(default_factory=list, description="Attributes of a tabular section")


class ModuleRef(_Out):
    """A BSL module of a metadata object."""

    path: str
    module_kind: str = Field(description="object, manager, form, command, recordset, value_manager, ...")
    stale: bool = Field(False, description="Changed on disk and not re-indexed yet")


class ObjectOutput(_Out):
    """A metadata object with its fields and modules."""

    root: str
    owner: str = Field(description="Справочник.Пользователи")
    object_type: str = Field(description="Russian singular type: Справочник")
    object_type_en: str = Field("", description="English type: Catalog")
    name: str
    path: str = Field(description="The object's descriptor (XML / .mdo)")
    synonym: dict[str, str] = Field(default_factory=dict)
    comment: str = ""
    properties: dict[str, str] = Field(default_factory=dict, description="Hierarchy, code length, posting, ...")
    attributes: list[MetaField] = Field(default_factory=list, description="Реквизиты")
    tabular_sections: list[MetaField] = Field(default_factory=list, description="Табличные части with attributes")
    dimensions: list[MetaField] = Field(default_factory=list, description="Измерения (registers)")
    resources: list[MetaField] = Field(default_factory=list, description="Ресурсы (registers)")
    enum_values: list[MetaField] = Field(default_factory=list)
    forms: list[MetaField] = Field(default_factory=list)
    commands: list[MetaField] = Field(default_factory=list)
    templates: list[MetaField] = Field(default_factory=list)
    other_fields: list[MetaField] = Field(default_factory=list)
    modules: list[ModuleRef] = Field(default_factory=list, description="Its modules and its forms' and commands'")
    warming: bool = False
    note: str = Field("", description="What to know about this answer (stale files)")
    stale: LookupStale = False
    stale_paths: StalePaths
    stale_count: int = 0
    stale_reason: StaleReason = ""
    path_stale: bool = Field(
        False, description="Its descriptor changed on disk and is not re-indexed yet: the fields may be old"
    )
    also_in: list[str] = Field(
        default_factory=list,
        description="Other descriptors defining the object (an extension's adopted copy); path is its own one",
    )


# ------------------------------------------------------------------------------ platform help
class PlatformParamOut(_Out):
    """A parameter of a platform method or function."""

    name: str
    types: list[str] = Field(default_factory=list)
    optional: bool = False
    description: str = Field("", description="Its default value and first sentence (detail: all of it)")


class PlatformSignatureOut(_Out):
    """One way to call it (a variant of a constructor or a method)."""

    syntax: str = Field(description="Name(Param: Type, Optional?: Type): Result")
    variant: str = Field("", description="The help's name of the variant when there are several")
    params: list[PlatformParamOut] = Field(default_factory=list, description="Names: every parameter")


class PlatformEntryOut(_Out):
    """A platform help entry: a global function or property, type, constructor, method, property,
    system enumeration or its value, event or keyword of 1C:Enterprise."""

    qualified_name: str = Field(description="СтрНайти, ТаблицаЗначений.Свернуть, Новый HTTPЗапрос")
    name_en: str = Field("", description="The English twin: StrFind, ValueTable.GroupBy")
    kind: str = Field(
        description="function (global), global_property, type, constructor, method, property, enum (system "
        "enumeration), enum_value, event, keyword"
    )
    signatures: list[PlatformSignatureOut] = Field(
        default_factory=list, description="A name: every variant with its parameters; a question: the first"
    )
    returns: str = Field("", description="Result type(s) and what the result is")
    value_type: str = Field("", description="Properties: the value's type (read only when so)")
    summary: str = Field("", description="What it does: the description's first sentence")
    availability: list[str] = Field(default_factory=list, description="server, thin_client, web_client, ...")
    since: str = Field("", description="The platform version it appeared in; when it was deprecated")
    description: str = detail("", "the whole description")
    description_en: str = detail("", "the English help's description")
    example: str = detail("")
    see_also: list[str] = detail(factory=list)
    note: str = detail("")
    category: str = detail("", "the help's group")
    score: float = detail(0.0, "fused score of a question's answer")
    ranks: dict[str, int] = detail(description="rank in each retrieval channel that found it", factory=dict)


class PlatformOutput(_Out):
    """The platform help's answer: the entries a name names, or the best entries for a question."""

    root: str
    platform: str = Field(description="The help that answered: 1C:Enterprise <version>, or the bundled data set")
    exact: bool = Field(description="The query named these entries; false: they answer it as a question")
    total: int = Field(0, description="Candidates found before the top_k cut")
    note: str = Field("", description="Why this help answers when it is not the one chosen, or still indexing")
    entries: list[PlatformEntryOut]
    why: str = detail("", "how the version was chosen")


# ------------------------------------------------------------------------------ status
class SharedCacheInfo(_Out):
    """The team's shared embedding cache (PostgreSQL + pgvector) as the daemon sees it."""

    url: str = Field(description="The DSN, password masked")
    mode: str = Field(description="rw (looks up and writes back) or ro")
    state: str = Field(description="not connected, ok, down, incompatible")
    hits: int = 0
    misses: int = 0
    written: int = 0
    unreached: int = Field(0, description="Not looked up while it was unusable (embedded locally)")
    unsent: int = Field(0, description="Embedded while it could not take them: written once it can")
    last_error: str | None = None
    retry_in_s: float | None = None


class DenseInfo(_Out):
    """Semantic side of the index: chunks embedded of all chunks."""

    enabled: bool
    done: int = 0
    total: int = 0
    rate_per_s: float = Field(0.0, description="Chunks per second over the last minute")
    eta_s: float | None = None
    shared_cache: SharedCacheInfo | None = Field(None, description="With --shared-cache")
    embedder: str | None = detail(None)
    model: str | None = detail(None)


class PlatformInfo(_Out):
    """Platform help as the daemon has it: the source that answers and every source found."""

    answers: str = Field(description="1C:Enterprise <version>, or the bundled data set; (indexing) meanwhile")
    sources: dict[str, str] = Field(
        default_factory=dict, description="source -> state, entries and vectors: 8.3.24.1467, bundled"
    )
    why: str = detail("", "how the version was chosen (the configuration's CompatibilityMode)")


class SkippedFile(_Out):
    """A file the index leaves out, and why."""

    path: str
    reason: str = Field(
        description="binary, too_large, undecodable, unreadable, symlink, not_regular, edt_template, invalid_xml, "
        "not_metadata, missing_on_disk, parse_failed"
    )
    detail: str = ""


class RootStatus(_Out):
    """One export root and its daemon, as ``bsl-lens status`` shows it."""

    name: str = Field(description="The value to pass as root= to the other tools")
    root: str = Field(description="Absolute path of the export root")
    running: bool = Field(description="The daemon answers")
    state: str = Field(description="starting, loading, indexing, ready, stopping, or failed (see error)")
    warming: bool = Field(description="The lexical index is being built, or embeddings are being computed")
    progress: str = ""
    error: str = Field("", description="Why the daemon is not available, or its last background error")
    format: str = Field("", description="designer, edt, docs (markdown pages only) or unknown")
    files: int = 0
    modules: int = 0
    methods: int = 0
    metadata_chunks: int = 0
    docs_pages: int = 0
    docs_sections: int = Field(0, description="Searched with scope='docs'")
    chunks: int = 0
    dense: DenseInfo | None = None
    platform: PlatformInfo | None = Field(None, description="The platform help that answers platform_help")
    watcher: str = Field("", description="native, polling or off")
    stale_count: int = Field(0, description="Files changed on disk and not re-indexed yet")
    skipped_count: int = Field(0, description="Files left out of the index (detail lists them)")
    skipped: dict[str, int] = Field(default_factory=dict, description="Those, counted by reason")
    docs_problem_count: int = Field(0, description="Docs pages read with a problem (detail says which and what)")
    docs_problems: dict[str, str] = detail(description="page -> what is wrong, the first 50", factory=dict)
    stale_files: list[str] = detail(description="the first 50", factory=list)
    skipped_files: list[SkippedFile] = detail(description="at most 50, every reason represented", factory=list)
    pid: int | None = detail(None)
    uptime_s: float | None = detail(None)
    index_dir: str = detail("")
    log: str = detail("", "the daemon's log file")
    summary: str = detail("", "the text `bsl-lens status` prints")


class StatusOutput(_Out):
    """Every export root this server serves."""

    roots: list[RootStatus]
