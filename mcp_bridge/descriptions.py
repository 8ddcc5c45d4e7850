"""What the model reads about the tools: the server's instructions and each tool's description.

Kept short on purpose: ``tools/list`` goes to the model with every session and its size is
budgeted (:data:`mcp_bridge.server.SIZE_BUDGETS`). The descriptions say what an answer's less
obvious fields mean, since the published output schemas carry names and types only.
"""

from __future__ import annotations


def instructions(roots: str) -> str:
    """The ``instructions`` of ``initialize``; ``roots``: ``name = path`` of each served root."""
    return (
        "bsl-lens: search over 1C:Enterprise (BSL) configuration exports, kept fresh by a local daemon. "
        f"Roots served: {roots}. Before writing or changing 1C code, look things up here instead of "
        "guessing: find_symbol for a name you know (ОбщегоНазначения.СообщитьПользователю, СообщПольз), "
        'search for a question in words ("как отправить письмо"), get_method to read a method, '
        "describe_object for a metadata object's attributes and types, read_module for surrounding lines, "
        "find_references before changing a method (who calls it, also through strings and metadata), "
        "search with scope docs and read_document for documentation pages served with the code, "
        "platform_help for the 1C platform's own functions, types and methods (never invent them). "
        "Cite results as path:line. Answers are compact (fields with empty or default values left out); "
        "detail=true gives every field. If an answer says warming, the index is still being built; "
        "stale: files changed on disk are not indexed yet."
    )


SEARCH = (
    "Search the 1C configuration's code, metadata and docs by name or by meaning: where something is done "
    '("где считается НДС", "как отправить письмо"; English works too), or a method or object whose exact name '
    "you do not know (for a known name use find_symbol). Hits, best first: path:line, kind, qualified_name "
    "(for get_method or describe_object), summary of the doc comment, match (exact: the whole name), "
    "test (test or fixture code, ranked below production code). "
    "scope docs: documentation sections (read_document). After editing files pass wait_fresh=1. "
    'Example: {"query": "реквизит ИНН", "scope": "metadata", "object_type": "Справочник"}.'
)

FIND_SYMBOL = (
    'Find definitions by name, like an IDE\'s "go to symbol": exact names, prefixes, CamelHump abbreviations '
    "(СообщПольз) and Модуль.Метод. Each gives path:line, the signature (parameters, Экспорт), directives "
    "(&НаСервере) and a summary of the doc comment (detail=true: the whole comment, #Область path); match "
    "exact: the whole name, name: the method's name in another module. Metadata objects and fields count too. "
    "After adding or renaming a method pass wait_fresh=1."
)

GET_METHOD = (
    "The full source of one BSL method (doc comment, directives, header, body) with its lines, #Область path "
    "and the docs sections that mention it (docs_total counts them). Give Модуль.Метод, or a method name and "
    "the module path from a hit. Read the code before calling or imitating a method."
)

READ_MODULE = (
    "Read lines of a file under the export root (a .bsl module or a metadata XML): around a hit, or the rest "
    "of a long method. Lines are 1-based, inclusive; at most 500 lines and 60000 characters per call (the note "
    "says where to continue). Paths as in hits (CommonModules/ОбщегоНазначения/Ext/Module.bsl)."
)

READ_DOCUMENT = (
    "Read a documentation page served with the code (markdown) or one section of it: the path from a search "
    'hit with scope docs, optionally a heading ("Проверка типа значения", its anchor, or "H1 > H2"). At most '
    "20000 characters per call (the note says how to read on); lists the page's headings and the methods the "
    "section names."
)

DESCRIBE_OBJECT = (
    "Describe a metadata object: synonym, attributes and their types, tabular sections, register dimensions "
    "and resources, enum values, forms, commands, templates and its modules. Name it Тип.Имя "
    '("Справочник.Пользователи", "Catalog.Пользователи"). Use it before code that reads or writes an '
    "object's attributes, so the names and types are real."
)

FIND_REFERENCES = (
    "Who calls or names a method (find usages), before changing it: calls, strings naming it (notification, idle "
    "handlers, long operations), metadata (subscriptions, scheduled jobs, form events and commands, services, "
    "platform events, extensions). Grouped by file: line, kind, caller, code. counts apart; possible: calls of "
    "that name through variables (possible=true lists them); lower_bound: Выполнить/Вычислить may call it too."
)

CALL_GRAPH = (
    "Callers (what a change affects) or callees of a method to a bounded depth, at most fan_out per method. "
    "nodes: Модуль.Метод, path:line, depth; edges: src calls dst (node indexes) in count sites; truncated: a cap "
    "cut it; recursion is walked once (revisited); possible: unresolved calls of the start's name, not walked."
)

PLATFORM_HELP = (
    "The 1C:Enterprise platform's reference (syntax assistant) for the version the configuration targets. A name "
    "(СтрНайти, StrFind, ТаблицаЗначений.Свернуть, Новый HTTPЗапрос) gives its entry: every signature, the "
    "parameters, the result; a question gives the best entries, one line each. Check platform methods here "
    "instead of guessing; platform says whose help answered."
)

INDEX_STATUS = (
    "Each served export root and its daemon: state (starting, indexing, ready), warming, progress, what is "
    "indexed, semantic (dense) coverage, stale files, file watching, errors, files left out of the index by "
    "reason. Call it when an answer says warming. detail=true adds the files left out and why, the stale files, "
    "pid, index dir, log and the `bsl-lens status` text."
)
