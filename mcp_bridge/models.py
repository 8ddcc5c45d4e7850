"""Output models of the MCP tools (pydantic): what a client receives as ``structuredContent``.

Every tool returns one of these; the SDK publishes the model's JSON schema as the tool's
``outputSchema`` and validates each result against it. The field descriptions below are
part of that schema, so they are written for the model that reads the results.

Conventions (the same as the daemon's, :mod:`daemon.contract`):

* ``path`` is relative to the export root, forward slashes (``CommonModules/ОбщегоНазначения/Ext/Module.bsl``).
* Lines are 1-based and inclusive.
* ``owner`` is the owning object in Russian 1C notation (``ОбщийМодуль.ОбщегоНазначения``,
  ``Справочник.Пользователи``, ``Документ.X.Форма.ФормаДокумента``).
* ``root`` is the name of the export root that answered (see ``index_status``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------ index state
class IndexInfo(_Out):
    """How complete the index was when an answer was computed."""

    state: str = Field(
        description="starting (the daemon is not answering yet: nothing is searchable), loading, "
        "indexing (first pass over the files: results may miss files not reached yet), ready, stopping"
    )
    progress: str = Field(
        "",
        description='Human-readable progress while warming, e.g. "chunk 1200/5000; dense chunks embedded 300/38570"; "" when ready',
    )
    files: int = Field(0, description="Files (modules and metadata descriptors) indexed so far")
    methods: int = Field(0, description="Methods indexed so far")
    dense_enabled: bool = Field(False, description="Whether semantic (vector) search is available for this root")
    dense_done: int = Field(0, description="Chunks with an embedding (semantic search covers only these)")
    dense_total: int = Field(0, description="Chunks that should have one")
    stale_count: int = Field(0, description="Files known to have changed on disk and not re-indexed yet")


# ------------------------------------------------------------------------------ search
class SearchHit(_Out):
    """One search result: a method (or module-level code), a metadata object or one of its fields."""

    rank: int = Field(description="1-based position in this answer")
    path: str = Field(description="File relative to the export root")
    line: int = Field(description="Line of the method's header or the object's / field's name: cite as path:line")
    start_line: int = Field(description="First line (1-based, inclusive; a method's doc comment included)")
    end_line: int = Field(description="Last line (inclusive)")
    kind: str = Field(
        description="procedure, function, module (module-level code) for code; object, attribute, "
        "tabular_section, dimension, resource, enum_value, form, command, template for metadata"
    )
    name: str = Field(description="Method name, or object / field name")
    qualified_name: str = Field(description="Модуль.Метод for methods, Тип.Имя for objects, Тип.Имя.Поле for fields")
    owner: str = Field(description="Owning object: ОбщийМодуль.ОбщегоНазначения, Справочник.Пользователи")
    object_type: str = Field("", description="Russian singular type of the owner: ОбщийМодуль, Справочник, Документ")
    module_kind: str = Field(
        "", description="For code: common, object, manager, form, command, recordset, ... ('' for metadata)"
    )
    export: bool = Field(False, description="The method is declared Экспорт (callable from other modules)")
    signature: str = Field("", description="Method header as written, from Процедура/Функция to ) and Экспорт")
    score: float = Field(description="Fused score (weighted reciprocal rank fusion); only comparable within one answer")
    ranks: dict[str, int] = Field(
        default_factory=dict,
        description="1-based rank in each retrieval channel that found it: names (symbol names), bm25 "
        "(words), meta (metadata words), metanames (metadata names), api (public-API order of a code question's "
        "candidates), dense / meta_dense (meaning)",
    )
    match: str = Field(
        "",
        description="How the names channel matched: exact, prefix, camelhump, substring, translated (a name in the other language; '' if not by name)",
    )
    snippet: str = Field(
        "", description="Doc comment and signature for methods, the description for metadata (at most 300 chars)"
    )
    stale: bool = Field(
        False, description="The file changed on disk and is not re-indexed yet: re-check with read_module"
    )
    heading_path: str = Field("", description="Docs sections (kind section): the heading chain H1 > H2 > H3")
    link: str = Field(
        "",
        description="Docs sections: path#anchor, the section's link on the documentation site; read it with read_document",
    )


class DocMention(_Out):
    """A documentation section that names a method."""

    link: str = Field(description="path#anchor of the section")
    heading_path: str = Field("", description="Its heading chain H1 > H2 > H3")
    path: str
    line: int = Field(description="Line of the section's heading")


class DocumentOutput(_Out):
    """A documentation page or one section of it (with its sub-sections)."""

    root: str
    path: str
    heading: str | None = Field(None, description="The section returned; null: the whole page")
    heading_path: str = ""
    link: str = Field(description="path#anchor (path alone for the whole page)")
    lang: str = Field("", description="ru or en")
    start_line: int
    end_line: int = Field(description="Last line returned (inclusive)")
    total_lines: int
    text: str = Field(description="The markdown as written (tables, admonitions and code blocks kept)")
    truncated: bool = Field(False, description="The text was cut: see note for how to read the rest")
    note: str = ""
    headings: list[str] = Field(
        default_factory=list, description="Every heading of the page ('## Title'), to read another section"
    )
    mentions: list[str] = Field(
        default_factory=list,
        description="Methods of the served code the section names (Модуль.Метод): read them with get_method",
    )


class SearchOutput(_Out):
    """Ranked results of ``search``."""

    root: str = Field(description="Export root that answered")
    query: str
    mode: str = Field(description="hybrid, lexical or vector")
    total: int = Field(description="Candidates found before the top_k cut")
    shown: int = Field(description="Hits in this answer")
    truncated: bool = Field(description="More candidates exist than shown: raise top_k or narrow the filters")
    stale: bool = Field(
        description="Files changed on disk are not indexed yet (see stale_paths), so this answer may miss or misplace "
        "what they now contain; ask again with wait_fresh=1 to wait for them"
    )
    stale_paths: list[str] = Field(
        default_factory=list,
        description="Those files (first 20; a folder ends with /): changed and not re-indexed yet, or not parseable",
    )
    stale_count: int = Field(0, description="How many there are in all")
    warming: bool = Field(
        description="The index is still being built, or a saved index is being brought up to date with the disk: results cover only what is indexed so far (see note and index)"
    )
    note: str = Field(
        "", description="Anything the caller should know about this answer (warming, dense coverage, stale files)"
    )
    index: IndexInfo
    hits: list[SearchHit]


# ------------------------------------------------------------------------------ symbols
class SymbolDef(_Out):
    """A definition found by name: a method, or a metadata object / field."""

    qualified_name: str = Field(
        description="ОбщегоНазначения.СообщитьПользователю, Справочник.Пользователи, Справочник.Пользователи.Недействителен"
    )
    name: str
    kind: str = Field(
        description="procedure, function, module, object, attribute, tabular_section, dimension, resource, enum_value, form, ..."
    )
    owner: str
    object_type: str = ""
    module_kind: str = ""
    path: str
    line: int = Field(description="Line of the header / name: cite as path:line")
    start_line: int = Field(description="First line, doc comment included")
    end_line: int
    match: str = Field(
        "",
        description="exact, prefix, camelhump, substring, translated (names channel; translated: the name typed in the other language), '' when found by words only",
    )
    signature: str = Field("", description="Header as written (methods)")
    params: str = Field("", description="Parameter list as written, without parentheses (methods)")
    directives: list[str] = Field(
        default_factory=list, description="Compilation directives: &НаСервере, &НаКлиенте, ..."
    )
    annotations: list[str] = Field(default_factory=list, description='Extension annotations: &Вместо("...")')
    export: bool = False
    is_async: bool = Field(False, description="Declared Асинх")
    region: list[str] = Field(default_factory=list, description="#Область nesting, outermost first")
    doc: str = Field("", description="The // comment block above the method, as written")
    synonym: dict[str, str] = Field(
        default_factory=dict, description="Metadata: language code -> synonym (the user-visible name)"
    )
    types: list[str] = Field(default_factory=list, description="Metadata fields: value types as written")
    docs: list[DocMention] = Field(default_factory=list, description="Methods: documentation sections that mention it")


class FindSymbolOutput(_Out):
    """Definitions matching a name, best first."""

    root: str
    query: str
    total: int
    shown: int
    truncated: bool
    warming: bool
    stale: bool = Field(
        False,
        description="Files changed on disk are not indexed yet (see stale_paths): a definition just added or renamed may be missing; ask again with wait_fresh=1",
    )
    stale_paths: list[str] = Field(default_factory=list, description="Those files (first 20; a folder ends with /)")
    stale_count: int = 0
    note: str = ""
    index: IndexInfo
    symbols: list[SymbolDef]


# ------------------------------------------------------------------------------ method, module
class MethodOutput(_Out):
    """The full text of one method."""

    root: str
    path: str
    name: str
    qualified_name: str = Field(description="Модуль.Метод")
    kind: str = Field(description="procedure or function")
    owner: str
    module_kind: str
    export: bool = False
    is_async: bool = False
    params: str = ""
    directives: list[str] = Field(default_factory=list)
    annotations: list[str] = Field(default_factory=list)
    region: list[str] = Field(default_factory=list, description="#Область path, outermost first")
    doc: str = ""
    signature: str = ""
    line: int = Field(description="Line of the header (Процедура/Функция ...): cite as path:line")
    start_line: int = Field(
        description="First line of text: the doc comment and directives above the header are included"
    )
    end_line: int = Field(description="Line of КонецПроцедуры/КонецФункции")
    text: str = Field(
        description="The method's source: doc comment, directives, header, body, КонецПроцедуры/КонецФункции"
    )
    truncated: bool = Field(False, description="The text was cut (very long method): see note")
    note: str = ""
    warming: bool = False
    docs: list[DocMention] = Field(
        default_factory=list,
        description="Documentation sections that mention this method (read them with read_document)",
    )


class ModuleOutput(_Out):
    """A line range of a file under the export root."""

    root: str
    path: str
    start_line: int
    end_line: int = Field(description="Last line returned (inclusive)")
    total_lines: int = Field(description="Lines in the whole file")
    text: str
    truncated: bool = Field(description="Fewer lines than asked for were returned: see note for how to continue")
    note: str = ""


# ------------------------------------------------------------------------------ metadata
class MetaField(_Out):
    """A field of a metadata object (attribute, tabular section, dimension, resource, enum value, form, ...)."""

    kind: str
    name: str
    synonym: dict[str, str] = Field(default_factory=dict)
    types: list[str] = Field(
        default_factory=list, description="Value types as written: CatalogRef.Пользователи, String(150), Boolean"
    )
    comment: str = ""
    fields: list[MetaField] = Field(default_factory=list, description="Attributes of a tabular section")


class ModuleRef(_Out):
    """A BSL module of a metadata object."""

    path: str
    module_kind: str = Field(description="object, manager, form, command, recordset, value_manager, common, ...")


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
    properties: dict[str, str] = Field(
        default_factory=dict, description="Key properties of the object (hierarchy, code length, posting, ...)"
    )
    attributes: list[MetaField] = Field(default_factory=list, description="Реквизиты (and addressing attributes)")
    tabular_sections: list[MetaField] = Field(default_factory=list, description="Табличные части with their attributes")
    dimensions: list[MetaField] = Field(default_factory=list, description="Измерения (registers)")
    resources: list[MetaField] = Field(default_factory=list, description="Ресурсы (registers)")
    enum_values: list[MetaField] = Field(default_factory=list, description="Значения перечисления")
    forms: list[MetaField] = Field(default_factory=list)
    commands: list[MetaField] = Field(default_factory=list)
    templates: list[MetaField] = Field(default_factory=list)
    other_fields: list[MetaField] = Field(default_factory=list)
    modules: list[ModuleRef] = Field(
        default_factory=list, description="Modules of the object and of its forms and commands"
    )
    warming: bool = False


# ------------------------------------------------------------------------------ status
class SharedCacheInfo(_Out):
    """The team's shared embedding cache (PostgreSQL + pgvector) as the daemon sees it."""

    url: str = Field(description="The DSN, password masked")
    mode: str = Field(description="rw (looks up and writes back) or ro (looks up only)")
    state: str = Field(description="not connected, ok, down, incompatible")
    reachable: bool = False
    hits: int = Field(0, description="Text hashes found there since the daemon started")
    misses: int = Field(0, description="Text hashes not found there (embedded locally)")
    written: int = Field(0, description="Vectors written back")
    unreached: int = Field(0, description="Text hashes not looked up while it was unusable (embedded locally)")
    last_error: str | None = None
    retry_in_s: float | None = Field(None, description="Seconds to the next try after a fault")


class DenseInfo(_Out):
    """Semantic side of the index."""

    enabled: bool
    embedder: str | None = None
    model: str | None = None
    done: int = 0
    total: int = 0
    rate_per_s: float = Field(0.0, description="Chunks embedded per second over the last minute")
    eta_s: float | None = Field(None, description="Seconds until every chunk is embedded at that rate")
    shared_cache: SharedCacheInfo | None = Field(
        None, description="The shared embedding cache; null without --shared-cache"
    )


class SkippedFile(_Out):
    """A file the index leaves out, and why."""

    path: str = Field(description="Relative to the export root")
    reason: str = Field(
        description="binary, too_large, undecodable, unreadable, symlink, not_regular, edt_template, invalid_xml, not_metadata, missing_on_disk, parse_failed"
    )
    detail: str = Field("", description="The reason in words (sizes, the XML error)")


class RootStatus(_Out):
    """One export root and its daemon, as ``bsl-lens status`` shows it."""

    name: str = Field(description="The value to pass as root= to the other tools")
    root: str = Field(description="Absolute path of the export root")
    running: bool = Field(description="The daemon answers")
    state: str = Field(description="starting, loading, indexing, ready, stopping (or failed: see error)")
    warming: bool = Field(description="The lexical index is still being built, or embeddings are still being computed")
    progress: str = ""
    error: str = Field("", description="Why the daemon is not available (host problem), or its last background error")
    format: str = Field("", description="designer, edt, docs (a folder of markdown pages only) or unknown")
    files: int = 0
    modules: int = 0
    methods: int = 0
    metadata_chunks: int = 0
    docs_pages: int = Field(0, description="Markdown documentation pages indexed (a docs root, or --docs folders)")
    docs_sections: int = Field(
        0, description="Their sections (heading chunks, parts of long sections included): search them with scope='docs'"
    )
    chunks: int = 0
    dense: DenseInfo | None = None
    watcher: str = Field("", description="native, polling or off")
    stale_count: int = 0
    stale_files: list[str] = Field(default_factory=list, description="Changed on disk, not re-indexed yet (first 50)")
    skipped: dict[str, int] = Field(
        default_factory=dict,
        description="Files not indexed, by reason: binary, too_large, undecodable, invalid_xml, missing_on_disk, ...",
    )
    skipped_count: int = 0
    skipped_files: list[SkippedFile] = Field(
        default_factory=list, description="The skipped files themselves (at most 50, every reason represented)"
    )
    pid: int | None = None
    uptime_s: float | None = None
    index_dir: str = ""
    log: str = ""
    summary: str = Field("", description="The text `bsl-lens status` prints")


class StatusOutput(_Out):
    """Every export root this server serves."""

    roots: list[RootStatus]
