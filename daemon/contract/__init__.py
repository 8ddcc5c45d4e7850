"""The contract between the daemon and its clients: wire structs, vocabularies, bounds, defaults.

Everything a front end (CLI, ``lsp``, ``mcp_bridge``) needs to talk to the daemon and read
its answers lives in this package, and the engine, the service and :mod:`daemon.server.protocol`
import the same definitions, so a mode, a kind or a bound is spelled once. The package imports
nothing but ``msgspec`` and ``unicodedata`` (no numpy, tree-sitter or lxml;
``tests/unit/test_contract.py`` checks that the front ends load none of the engine).

This ``__init__`` is the contract's one public face: it re-exports every public name of its
submodules, and importers use ``from daemon.contract import X``. The submodules hold the
definitions by job: :mod:`~daemon.contract.vocabulary` (modes, scopes, kinds, bounds, defaults),
:mod:`~daemon.contract.object_types` (the metadata object types and their spellings),
:mod:`~daemon.contract.records` (chunks and skips), :mod:`~daemon.contract.search` (filters, hits,
the search and platform help answers), :mod:`~daemon.contract.platform` (platform help entries and
sources), :mod:`~daemon.contract.lookups`, :mod:`~daemon.contract.usages` (find usages) and
:mod:`~daemon.contract.status`.

* vocabularies: :data:`SEARCH_MODES`, :data:`SCOPES`, :data:`WATCH_MODES`,
  :data:`CODE_KINDS`, :data:`METHOD_KINDS`, :data:`METADATA_KINDS`, :data:`PLATFORM_KINDS`,
  :data:`MODULE_KINDS`,
  the metadata object types (:data:`OBJECT_TYPES` and every spelling of them:
  :func:`normalize_object_type`, :func:`english_type`, :func:`type_folder`);
* bounds and defaults: :data:`MAX_QUERY_CHARS`, :data:`MAX_NAME_CHARS`, :data:`MAX_PATH_CHARS`
  (the longest query, name and path a front end passes on), :data:`MAX_TOP_K` (one bound for ``search``'s ``top_k`` and
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
* error messages: :func:`shown`, :func:`clip_echoes` (:mod:`~daemon.contract.messages`: a user
  value is echoed only up to :data:`ECHO_CHARS` characters);
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

from .lookups import (
    DocRef,
    DocumentText,
    Field,
    MethodInfo,
    ModuleText,
    ObjectDescription,
)
from .messages import (
    ECHO_CHARS,
    ECHO_PREFIX,
    clip_echoes,
    shown,
)
from .object_types import (
    CONFIGURATION,
    OBJECT_TYPES,
    SUB_FOLDERS,
    english_type,
    normalize_object_type,
    object_type_aliases,
    object_type_list,
    type_folder,
)
from .platform import (
    PlatformEntry,
    PlatformParam,
    PlatformSignature,
    PlatformSource,
    PlatformStatus,
    PlatformUsed,
)
from .records import (
    Chunk,
    Skip,
)
from .search import (
    Filters,
    Hit,
    PlatformAnswer,
    SearchResult,
)
from .status import (
    DenseStatus,
    Latency,
    RecentHit,
    RecentQuery,
    RefsStatus,
    SharedCacheStatus,
    Status,
    WatchStatus,
)
from .usages import (
    CallGraph,
    Callees,
    DEFAULT_REF_LIMIT,
    Definition,
    GRAPH_DIRECTIONS,
    GraphEdge,
    MAX_GRAPH_DEPTH,
    MAX_GRAPH_FAN_OUT,
    MAX_REF_LIMIT,
    MAX_REF_TARGETS,
    MethodRef,
    REASONS,
    REF_GROUPS,
    REF_KINDS,
    RefAnswer,
    RefCounts,
    Reference,
    References,
)
from .vocabulary import (
    CODE_KINDS,
    DEFAULT_EMBEDDER,
    DEFAULT_MODE,
    DEFAULT_RECONCILE_INTERVAL,
    DEFAULT_SCOPE,
    DEFAULT_SYMBOL_LIMIT,
    DEFAULT_TOP_K,
    DEFAULT_WATCH,
    DOCS_KINDS,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    MAX_TOP_K,
    METADATA_KINDS,
    METHOD_KINDS,
    MODULE_KINDS,
    NO_EMBEDDER,
    PLATFORM_KINDS,
    SCOPES,
    SEARCH_MODES,
    WATCH_MODES,
)

__all__ = [
    "CODE_KINDS",
    "CONFIGURATION",
    "CallGraph",
    "Callees",
    "Chunk",
    "DEFAULT_EMBEDDER",
    "DEFAULT_MODE",
    "DEFAULT_RECONCILE_INTERVAL",
    "DEFAULT_REF_LIMIT",
    "DEFAULT_SCOPE",
    "DEFAULT_SYMBOL_LIMIT",
    "DEFAULT_TOP_K",
    "DEFAULT_WATCH",
    "DOCS_KINDS",
    "Definition",
    "DenseStatus",
    "DocRef",
    "DocumentText",
    "ECHO_CHARS",
    "ECHO_PREFIX",
    "Field",
    "Filters",
    "GRAPH_DIRECTIONS",
    "GraphEdge",
    "Hit",
    "Latency",
    "MAX_GRAPH_DEPTH",
    "MAX_GRAPH_FAN_OUT",
    "MAX_REF_LIMIT",
    "MAX_REF_TARGETS",
    "MAX_NAME_CHARS",
    "MAX_PATH_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TOP_K",
    "METADATA_KINDS",
    "METHOD_KINDS",
    "MODULE_KINDS",
    "MethodInfo",
    "MethodRef",
    "ModuleText",
    "NO_EMBEDDER",
    "OBJECT_TYPES",
    "ObjectDescription",
    "PLATFORM_KINDS",
    "PlatformAnswer",
    "PlatformEntry",
    "PlatformParam",
    "PlatformSignature",
    "PlatformSource",
    "PlatformStatus",
    "PlatformUsed",
    "REASONS",
    "REF_GROUPS",
    "REF_KINDS",
    "RecentHit",
    "RecentQuery",
    "RefAnswer",
    "RefCounts",
    "Reference",
    "References",
    "RefsStatus",
    "SCOPES",
    "SEARCH_MODES",
    "SUB_FOLDERS",
    "SearchResult",
    "SharedCacheStatus",
    "Skip",
    "Status",
    "WATCH_MODES",
    "WatchStatus",
    "clip_echoes",
    "english_type",
    "normalize_object_type",
    "object_type_aliases",
    "object_type_list",
    "shown",
    "type_folder",
]
