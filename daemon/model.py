"""Shared data model of the bsl-lens engine.

Every producer (the BSL chunker, the metadata chunker) emits :class:`Chunk` records; every
index (BM25, symbol-name channel, dense) is keyed by ``Chunk.id``. The structs are
``msgspec.Struct`` so they persist compactly (msgpack) and cross the daemon socket as JSON.

Conventions (fixed; every module relies on them):

* ``path``: the file path relative to the export root, forward slashes, Unicode NFC,
  exactly as on disk (``CommonModules/ОбщегоНазначения/Ext/Module.bsl``,
  ``Catalogs/Пользователи.xml``, ``src/Catalogs/Контрагенты/Контрагенты.mdo``).
* ``owner``: the owner object in Russian 1C notation, ``<ТипОбъекта>.<Имя>`` plus, for forms
  and commands, ``.Форма.<Имя>`` / ``.Команда.<Имя>`` (``ОбщийМодуль.ОбщегоНазначения``,
  ``Справочник.Пользователи``, ``Документ.X.Форма.ФормаДокумента``,
  ``Конфигурация`` for application/session modules). The object type is always the Russian
  singular name (see :data:`daemon.scan.OBJECT_TYPES`), also for the English corpus.
* lines are 1-based and inclusive; ``name_range`` is an LSP range: 0-based line, columns in
  UTF-16 code units, a BOM is not a column.
* ``symbol`` follows the gold-set convention of ``shared/eval/README.md``: the method name
  for code, ``None`` for a whole metadata object, ``"<Вид>:<Имя>"`` for a field
  (``Реквизит:ФормулаРасчетаКурса``, ``Реквизит:Роли.Роль``, ``Измерение:НомерВерсии``).
"""

from __future__ import annotations

import msgspec

#: Chunk kinds produced by the BSL chunker.
CODE_KINDS = ("procedure", "function", "module")
#: Chunk kinds produced by the metadata chunker (one per object, one per field).
METADATA_KINDS = (
    "object",
    "attribute",
    "tabular_section",
    "dimension",
    "resource",
    "enum_value",
    "addressing_attribute",
    "command",
    "form",
    "template",
)

#: Module kinds (``Chunk.module_kind`` of code chunks).
MODULE_KINDS = (
    "common",  # CommonModules/X/Ext/Module.bsl
    "object",  # ObjectModule.bsl
    "manager",  # ManagerModule.bsl
    "recordset",  # RecordSetModule.bsl
    "value_manager",  # ValueManagerModule.bsl
    "form",  # Forms/F/Ext/Form/Module.bsl, CommonForms/F/Ext/Form/Module.bsl
    "command",  # Commands/C/Ext/CommandModule.bsl, CommonCommands/C/Ext/CommandModule.bsl
    "session",  # Ext/SessionModule.bsl
    "managed_application",  # Ext/ManagedApplicationModule.bsl
    "ordinary_application",  # Ext/OrdinaryApplicationModule.bsl
    "external_connection",  # Ext/ExternalConnectionModule.bsl
    "http_service",  # HTTPServices/X/Ext/Module.bsl
    "web_service",  # WebServices/X/Ext/Module.bsl
    "other",  # any other .bsl (e.g. an unknown layout); still indexed
)


class Chunk(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One searchable unit: a BSL method (or a part of a long one), a module's header code,
    a metadata object, or one field of a metadata object.

    ``id`` is unique within one export root and stable across re-indexing while the thing
    it names keeps its path and name:

    * method: ``"<path>::<Name>"``; a second method with the same name in the same module
      (``#Если`` branches) gets ``"<path>::<Name>@2"``; parts of a long method add
      ``"#<part>"`` (``"<path>::<Name>#2"``).
    * module-level code and variables: ``"<path>::<module>"``.
    * metadata object: ``"<path>::"``; field: ``"<path>::<symbol>"``.
    """

    id: str
    path: str
    kind: str  # one of CODE_KINDS or METADATA_KINDS
    name: str  # method name / object name / field name (for "Реквизит:Роли.Роль": "Роль")
    owner: str = ""  # "ОбщийМодуль.ОбщегоНазначения", "Справочник.Пользователи"
    object_type: str = ""  # Russian singular type of the owner: "ОбщийМодуль", "Справочник"
    module_kind: str = ""  # one of MODULE_KINDS for code chunks; "" for metadata
    symbol: str | None = None  # gold-set convention, see module docstring
    # --- code chunks -------------------------------------------------------------------
    export: bool = False
    is_async: bool = False
    params: str = ""  # the parameter list as written, without parentheses
    directives: list[str] = []  # compilation directives: ["&НаСервере"]
    annotations: list[str] = []  # extension annotations: ['&Вместо("ОбработкаПроведения")']
    region: list[str] = []  # #Область nesting, outermost first
    doc: str = ""  # the // comment block directly above the method, comment markers kept
    signature: str = ""  # header as written, from the keyword to ")" and "Экспорт"
    part: int = 0  # 0 = whole method; 1..n = parts of a long method (each keeps the header)
    # --- metadata chunks ---------------------------------------------------------------
    synonym: dict[str, str] = {}  # language code -> synonym
    comment: str = ""
    types: list[str] = []  # field value types as written ("CatalogRef.Пользователи", "String(50)")
    properties: dict[str, str] = {}  # key properties of the object / field
    # --- location ------------------------------------------------------------------------
    start_line: int = 1  # 1-based, inclusive
    end_line: int = 1  # 1-based, inclusive
    name_range: tuple[int, int, int, int] = (0, 0, 0, 0)  # LSP: line0, utf16 col, line0, col
    # --- content -------------------------------------------------------------------------
    text: str = ""  # the method text incl. doc comment, as written; BM25 indexes daemon.bsl.live_code(text)

    @property
    def is_code(self) -> bool:
        """True for BSL chunks (methods and module-level code)."""
        return self.kind in CODE_KINDS

    @property
    def qualified_name(self) -> str:
        """``<owner short name>.<name>`` for methods (``ОбщегоНазначения.СообщитьПользователю``),
        ``<owner>`` for objects, ``<owner>.<name>`` for fields."""
        if self.kind == "object":
            return self.owner
        if self.is_code:
            short = self.owner.split(".")[1] if "." in self.owner else self.owner
            return f"{short}.{self.name}" if short else self.name
        return f"{self.owner}.{self.name}"


class Skip(msgspec.Struct, frozen=True):
    """A file (or metadata object) the scanner or a chunker did not index, and why.

    ``reason`` is a short stable code (``binary``, ``too_large``, ``undecodable``,
    ``unreadable``, ``symlink``, ``not_regular``, ``edt_template``, ``invalid_xml``,
    ``not_metadata``, ``missing_on_disk``, ``parse_failed``);
    ``detail`` is a human sentence for logs and ``status``.
    """

    path: str
    reason: str
    detail: str = ""


class Filters(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Search filters. ``object_type`` accepts Russian, English or folder names
    (``Справочник``, ``Catalog``, ``Catalogs``); ``path_prefix`` is relative to the root.
    (Here rather than in :mod:`daemon.engine`, which re-exports it, so that the protocol and
    the clients load without numpy or the parsers.)"""

    scope: str = "all"
    object_type: str | None = None
    module_kind: str | None = None
    path_prefix: str | None = None
    export_only: bool = False
