"""The platform help entry: one global function, global property, event, type, constructor,
method, property, system enumeration, enumeration value or language keyword of 1C:Enterprise.

Every source of platform help (the bundled ``bslGlobals.json``, :mod:`.globals_json`; the
installed platform's ``*.hbk`` help books, :mod:`.book`) produces :class:`Entry` records, so
the index, the ranker and the front ends see one shape whatever the source. Names are kept
as the help writes them (Russian ``name``, English ``name_en``); the owner of a member is its
type (``ТаблицаЗначений`` of ``ТаблицаЗначений.Вставить``) or its enumeration, and is empty
for the global context. :func:`to_chunk` turns an entry into a :class:`daemon.contract.Chunk`
of kind ``platform_<kind>`` for the index (see its docstring for which field carries what).
"""

from __future__ import annotations

import re

import msgspec

from daemon.contract import PLATFORM_KINDS, Chunk, PlatformEntry, PlatformParam, PlatformSignature

__all__ = [
    "AVAILABILITY",
    "CHUNK_PREFIX",
    "ENTRY_KINDS",
    "PLATFORM_KINDS",
    "Entry",
    "Param",
    "Signature",
    "availability_codes",
    "entry_text",
    "merge_languages",
    "render_signature",
    "split_top",
    "to_chunk",
]

#: Entry kinds. ``function``, ``global_property`` and ``event`` without an owner belong to the
#: global context (``event`` with an owner is a type's event); ``constructor`` is one entry per
#: type holding every ``Новый <Тип>(...)`` form as a signature variant; ``keyword`` is a
#: statement or literal of the language (``Если``, ``Неопределено``).
ENTRY_KINDS = (
    "function",
    "global_property",
    "event",
    "type",
    "constructor",
    "method",
    "property",
    "enum",
    "enum_value",
    "keyword",
)
#: Chunk kinds of platform entries are the entry kinds with this prefix (``platform_method``):
#: :data:`daemon.contract.PLATFORM_KINDS`, in :data:`ENTRY_KINDS` order.
CHUNK_PREFIX = "platform_"

#: Where an entry can run, as the help's "Доступность" names it -> a stable code.
AVAILABILITY: dict[str, str] = {
    "тонкий клиент": "thin_client",
    "thin client": "thin_client",
    "веб-клиент": "web_client",
    "web client": "web_client",
    "мобильный клиент": "mobile_client",
    "mobile client": "mobile_client",
    "сервер": "server",
    "server": "server",
    "толстый клиент": "thick_client",
    "thick client": "thick_client",
    "внешнее соединение": "external_connection",
    "external connection": "external_connection",
    "мобильное приложение (клиент)": "mobile_app_client",
    "mobile application (client)": "mobile_app_client",
    "мобильное приложение (сервер)": "mobile_app_server",
    "mobile application (server)": "mobile_app_server",
    "мобильный автономный сервер": "mobile_standalone_server",
    "mobile standalone server": "mobile_standalone_server",
    "сервер интеграции": "integration_server",
    "integration server": "integration_server",
}

#: Words of the entry text naming the kind (so that "метод таблицы значений" meets methods).
_KIND_WORDS = {
    "function": "Функция глобального контекста (global function)",
    "global_property": "Свойство глобального контекста (global property)",
    "event": "Событие (event)",
    "type": "Тип (type)",
    "constructor": "Конструктор (constructor)",
    "method": "Метод (method)",
    "property": "Свойство (property)",
    "enum": "Системное перечисление (system enumeration)",
    "enum_value": "Значение системного перечисления (enumeration value)",
    "keyword": "Ключевое слово (keyword)",
}


#: The entry model is the contract's (the daemon sends entries to its clients as they are):
#: :class:`daemon.contract.PlatformEntry`, its signatures and their parameters.
Param = PlatformParam
Signature = PlatformSignature
Entry = PlatformEntry


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` at ``sep`` outside ``()``, ``<>`` and ``[]``, stripping each part; empty
    parts are dropped. ``"А: Строка, Б?: Массив<Число, Строка>"`` gives two parts."""
    out: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch in "(<[":
            depth += 1
        elif ch in ")>]" and depth:
            depth -= 1
        elif ch == sep and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [p for p in out if p]


def availability_codes(text: str) -> list[str]:
    """Codes of :data:`AVAILABILITY` for a "Доступность" sentence (``Тонкий клиент, сервер,
    мобильное приложение (клиент).``), in the order written, each once; an unknown label is
    kept lowercased as written."""
    first = text.strip().split("\n", 1)[0].strip().rstrip(".").strip()
    out: list[str] = []
    for label in split_top(first):
        label = re.sub(r"\s+", " ", label).strip().rstrip(".").lower()
        code = AVAILABILITY.get(label, label)
        if code and code not in out:
            out.append(code)
    return out


def render_signature(entry: Entry, sig: Signature) -> str:
    """One line for a signature, the same for every source: ``СтрНайти(Строка: Строка,
    НачальнаяПозиция?: Число): Число`` (``?`` marks an optional parameter, ``|`` joins
    types); ``Новый HTTPЗапрос(АдресРесурса: Строка)`` for a constructor."""
    params = ", ".join(
        p.name + ("?" if p.optional else "") + (": " + "|".join(p.types) if p.types else "") for p in sig.params
    )
    head = f"Новый {entry.owner or entry.name}" if entry.kind == "constructor" else entry.name
    ret = ": " + "|".join(entry.return_types) if entry.return_types and entry.kind != "constructor" else ""
    return f"{head}({params}){ret}"


def entry_text(entry: Entry) -> str:
    """The text BM25 and the embedder read for an entry: both qualified names, the kind in
    words, the signatures, the description, parameter and result descriptions, the value
    type, the category. Plain lines, no markup; the example is left out (code, mostly noise
    for a question)."""
    names = entry.qualified + (f" ({entry.qualified_en})" if entry.qualified_en else "")
    lines = [names, _KIND_WORDS.get(entry.kind, entry.kind)]
    if entry.category:
        lines.append(entry.category)
    for sig in entry.signatures:
        lines.append((sig.name + ": " if sig.name else "") + render_signature(entry, sig))
        if sig.description:
            lines.append(sig.description)
    if entry.description:
        lines.append(entry.description)
    if entry.description_en:
        lines.append(entry.description_en)
    seen: set[str] = set()
    for sig in entry.signatures:
        for p in sig.params:
            if p.description and p.name not in seen:
                seen.add(p.name)
                lines.append(f"{p.name}: {p.description}")
    if entry.return_types or entry.returns:
        lines.append("Возвращает: " + ". ".join(x for x in (", ".join(entry.return_types), entry.returns) if x))
    if entry.value_types:
        lines.append("Тип: " + ", ".join(entry.value_types))
    if entry.note:
        lines.append(entry.note)
    return "\n".join(lines)


def to_chunk(entry: Entry, *, version: str = "", path: str = "") -> Chunk:
    """The entry as an index record (kind ``platform_<kind>``), for one source and version.

    Field by field: ``id`` ``<path>::<kind>:<qualified>`` (unique within one version's
    index); ``path`` the caller's (default ``platform/<version>/<source>``: what a hit shows
    as its location); ``name`` the Russian name (the names channel also needs ``name_en``,
    in ``properties``); ``owner`` the owner type or enumeration (empty: global context);
    ``symbol`` the qualified Russian name (the gold-set key); ``signature`` the first
    signature as :func:`render_signature` writes it; ``params`` its parameters; ``doc`` the
    description; ``synonym`` ``{"ru": qualified, "en": qualified_en}``; ``types`` the result or
    value types; ``properties`` the rest as strings: ``version``, ``source``, ``name_en``,
    ``owner_en``, ``since``, ``deprecated_since``, ``availability`` (codes joined by ``,``),
    ``category``, ``page``, ``variants`` (signature count when more than one); ``text``
    :func:`entry_text`. Lines are 1..1 (a help entry has no lines)."""
    path = path or f"platform/{version or 'unknown'}/{entry.source}"
    first = entry.signatures[0] if entry.signatures else None
    props = {
        "version": version,
        "source": entry.source,
        "name_en": entry.name_en,
        "owner_en": entry.owner_en,
        "since": entry.since,
        "deprecated_since": entry.deprecated_since,
        "availability": ",".join(entry.availability),
        "category": entry.category,
        "page": entry.page,
        "variants": str(len(entry.signatures)) if len(entry.signatures) > 1 else "",
    }
    return Chunk(
        id=f"{path}::{entry.key}",
        path=path,
        kind=CHUNK_PREFIX + entry.kind,
        name=entry.name,
        owner=entry.owner,
        symbol=entry.qualified,
        signature=render_signature(entry, first) if first is not None else "",
        params=", ".join(p.name + ("?" if p.optional else "") for p in first.params) if first is not None else "",
        doc=entry.description,
        synonym={k: v for k, v in (("ru", entry.qualified), ("en", entry.qualified_en)) if v},
        types=list(entry.return_types or entry.value_types),
        properties={k: v for k, v in props.items() if v},
        text=entry_text(entry),
    )


def merge_languages(primary: list[Entry], other: list[Entry]) -> list[Entry]:
    """One list from a Russian and an English book of the same version: an entry of both
    (same :attr:`Entry.key`) keeps ``primary``'s fields and gains ``other``'s description as
    ``description_en`` (and its English names where ``primary`` has none); an entry of
    ``other`` alone is added. ``primary`` order, then the additions."""
    by_key = {e.key: e for e in other}
    out: list[Entry] = []
    for e in primary:
        twin = by_key.pop(e.key, None)
        if twin is not None:
            e = msgspec.structs.replace(
                e,
                name_en=e.name_en or twin.name_en,
                owner_en=e.owner_en or twin.owner_en,
                description_en=twin.description if twin.description != e.description else "",
            )
        out.append(e)
    out.extend(by_key.values())
    return out
