"""The text each chunk is embedded as: :func:`embed_text` (one per chunk) and :func:`embed_texts`
(every vector a chunk has: the first text plus the extra ones its kind asks for).

The texts are deterministic and byte-stable on purpose: the embedding cache is keyed by the
hash of the text (:func:`daemon.index.embed_cache.text_hash`), so any change to what a chunk
embeds re-embeds the whole corpus. ``tests/unit/index/test_embed.py`` pins them. Why each
form is what it is (the measurements) is in ``docs/internals.md``, "Embedded texts".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import msgspec

from ..contract import CODE_KINDS, DOCS_KINDS, METHOD_KINDS, Chunk
from ..sources.bsl import live_code
from ..sources.metadata import FIELD_KINDS, TEXT_LABELS
from ..text.folding import split_words

__all__ = [
    "CONTEXT_MAX_CHARS",
    "DEFAULT_MAX_CHARS",
    "MAX_TEXTS",
    "doc_description",
    "embed_text",
    "embed_texts",
    "has_context_text",
    "method_context_text",
]

#: Longest embedded text of a chunk, in characters: the head of a method, which embedded
#: better and faster than a longer cut.
DEFAULT_MAX_CHARS = 400
#: Most texts (so vectors) one chunk may have in the dense index (:func:`embed_texts`); a
#: kind asking for more is cut here. Removing a chunk removes keys 0..MAX_TEXTS-1.
MAX_TEXTS = 4

_WS_RE = re.compile(r"\s+")
_METHOD_KW_RE = re.compile(r"^\s*(?:Асинх\s+|Async\s+)?(Процедура|Функция|Procedure|Function)\b", re.IGNORECASE)
_METHOD_END_RE = re.compile(r"^\s*(КонецПроцедуры|КонецФункции|EndProcedure|EndFunction)\b", re.IGNORECASE)

#: Module kind -> the words a module's texts name it by (part of the texts: keep byte-stable).
_MODULE_LABELS = {
    "common": "модуль",
    "object": "модуль объекта",
    "manager": "модуль менеджера",
    "recordset": "модуль набора записей",
    "value_manager": "модуль менеджера значения",
    "form": "модуль формы",
    "command": "модуль команды",
    "session": "модуль сеанса",
    "managed_application": "модуль управляемого приложения",
    "ordinary_application": "модуль обычного приложения",
    "external_connection": "модуль внешнего соединения",
    "http_service": "модуль HTTP-сервиса",
    "web_service": "модуль веб-сервиса",
    "other": "модуль",
}
#: Chunk kind of a field -> its Russian symbol prefix (``Реквизит``), the words a field's text
#: starts with when its symbol gives none.
_FIELD_LABELS = {kind: prefix for kind, prefix in FIELD_KINDS.values()}


def _phrase(identifier: str) -> str:
    """``ЗначениеРеквизитаОбъекта`` -> ``Значение реквизита объекта``; acronyms keep their case
    (``ИННСоответствуетТребованиям`` -> ``ИНН соответствует требованиям``)."""
    words = split_words(identifier)
    if not words:
        return identifier
    out = [words[0]]
    for w in words[1:]:
        out.append(w if (len(w) > 1 and w.isupper()) else w.lower())
    return " ".join(out)


def _collapse(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def _cut_words(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` chars, at a word boundary when one is not too far back."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    cut = text[:limit]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-")


def _doc_lines(doc: str) -> list[str]:
    """Lines of a ``//`` doc comment: markers stripped, whitespace collapsed, empty lines
    (and ``////`` rulers) dropped. All sections are kept (see :func:`embed_text`)."""
    out = []
    for raw in doc.splitlines():
        line = raw.strip()
        if not line.startswith("//"):
            continue
        line = _collapse(line.lstrip("/"))
        if line:
            out.append(line)
    return out


def _split_header(chunk: Chunk) -> tuple[str, str]:
    """(signature, body text) of a method chunk. Uses ``chunk.signature`` when it is found in
    the text; otherwise the header is taken from the first ``Процедура``/``Функция`` line to
    the line where its parentheses balance."""
    text = chunk.text
    if chunk.signature and chunk.signature in text:
        return chunk.signature, text[text.index(chunk.signature) + len(chunk.signature) :]
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _METHOD_KW_RE.match(line):
            depth, opened = 0, False
            for j in range(i, len(lines)):
                depth += lines[j].count("(") - lines[j].count(")")
                opened = opened or "(" in lines[j]
                if opened and depth <= 0:
                    return "\n".join(lines[i : j + 1]), "\n".join(lines[j + 1 :])
            return "\n".join(lines[i:]), ""
    return chunk.signature, ""


def _method_body_lines(body: str) -> list[str]:
    """Code lines of a method body, stripped; blank lines and the closing
    ``КонецПроцедуры``/``КонецФункции`` dropped."""
    out = []
    for line in body.splitlines():
        s = line.strip()
        if not s or _METHOD_END_RE.match(s):
            continue
        out.append(_collapse(s))
    return out


def _module_code_lines(text: str) -> list[str]:
    """Module-level code: no blank lines, no ``//`` comment lines (the copyright header), no
    preprocessor/region lines."""
    out = []
    for line in text.splitlines():
        s = line.strip().lstrip("\ufeff")
        if not s or s.startswith("//") or s.startswith("#"):
            continue
        out.append(_collapse(s))
    return out


def _assemble(head: list[str], tail: Iterable[str], max_chars: int) -> str:
    """Join ``head`` lines (already sized) and then whole ``tail`` lines while the total stays
    within ``max_chars`` (if the first tail line alone is too long, its word-cut head is
    kept); the result never exceeds ``max_chars``."""
    parts = [h for h in head if h]
    total = sum(len(p) for p in parts) + max(len(parts) - 1, 0)
    first = True
    for line in tail:
        extra = len(line) + (1 if parts else 0)
        if total + extra > max_chars:
            room = max_chars - total - (1 if parts else 0)
            if first and room >= max_chars // 4:
                # Not even the first tail line fits: keep its head rather than nothing.
                cut = _cut_words(line, room)
                if cut:
                    parts.append(cut)
            break
        parts.append(line)
        total += extra
        first = False
    text = "\n".join(parts)
    return text if len(text) <= max_chars else _cut_words(text, max_chars)


def _code_text(chunk: Chunk, max_chars: int) -> str:
    title = _cut_words(_phrase(chunk.name), max_chars)
    signature, body = _split_header(chunk)
    signature = _collapse(signature)
    doc = _doc_lines(chunk.doc) if chunk.part <= 1 else []
    tail = [*doc, signature] if signature else doc
    return _assemble([title], [*tail, *_method_body_lines(body)], max_chars)


#: A line of a doc comment that opens one of its sections (1C's commenting standard, ru and en
#: forms): the description is what comes before the first such line.
_DOC_SECTION_RE = re.compile(
    r"^(Параметры|Возвращаемое значение|Пример|Примеры|См\. также"
    r"|Parameters|Returns|Return value|Example|Examples|See also)\s*:?",
    re.IGNORECASE,
)
#: Longest context text of a method (:func:`method_context_text`), in characters: it only cuts
#: long descriptions.
CONTEXT_MAX_CHARS = 300


def doc_description(doc: str) -> list[str]:
    """The description of a ``//`` doc comment: its lines (:func:`_doc_lines`) up to the first
    section line (``Параметры:``, ``Возвращаемое значение:``, ``Пример:``, ``Parameters:``,
    ``Returns:`` ...); ``[]`` for no comment or one that starts with a section."""
    out = []
    for line in _doc_lines(doc):
        if _DOC_SECTION_RE.match(line):
            break
        out.append(line)
    return out


def has_context_text(kind: str, part: int, export: bool) -> bool:
    """True if a chunk of ``kind``, ``part`` and ``export`` has a context text
    (:func:`method_context_text`), i.e. a second dense vector: an exported method, whole or
    the first part of a long one. Lets the snapshot tell which dense keys a chunk has from
    the chunk store's columns, without building the texts."""
    return kind in METHOD_KINDS and part <= 1 and export


def method_context_text(chunk: Chunk, max_chars: int = CONTEXT_MAX_CHARS) -> str:
    """The second dense text of an exported method: where it lives and what its comment says
    it does, without the parameters and the code, at most ``max_chars`` (default 300)
    characters::

        модуль Работа с почтовыми сообщениями       (the module label and the owner's name as words)
        Программный интерфейс                        (the #Область path, as words)
        Отправить письмо                             (the name as words)
        Выполняет отправку одного письма.            (the doc comment's description, :func:`doc_description`)

    The owner's name is given for a module of a top-level object (``ОбщийМодуль.X``,
    ``Справочник.X``: its manager, object, record set or value manager module) and left out
    for the module of a form or command (the label alone), so the text depends on the chunk
    alone. ``""`` for a method without ``Экспорт``, module-level code and parts ``>= 2`` of a
    long method: the exported methods are a module's public surface, what a question by
    meaning looks for. Measured gain and the variants not kept: ``docs/internals.md``,
    "Embedded texts"."""
    if not has_context_text(chunk.kind, chunk.part, chunk.export):
        return ""
    label = _MODULE_LABELS.get(chunk.module_kind, "модуль")
    _, _, name = chunk.owner.partition(".")
    head = f"{label} {_phrase(name)}" if name and "." not in name else label
    region = " / ".join(_phrase(r) for r in chunk.region)
    lines = [head, region, _phrase(chunk.name)] if region else [head, _phrase(chunk.name)]
    return _assemble(lines, doc_description(chunk.doc), max_chars)


def _module_text(chunk: Chunk, max_chars: int) -> str:
    label = _MODULE_LABELS.get(chunk.module_kind, "модуль")
    title = _cut_words(f"{chunk.owner}: {label}" if chunk.owner else label, max_chars)
    return _assemble([title], _module_code_lines(chunk.text), max_chars)


#: Labels of the object text's field-list lines that the dense text of an object keeps (what
#: the object *holds*), in every language :mod:`daemon.sources.metadata` writes them in: forms,
#: commands, templates, properties and handlers are left out.
_FIELD_GROUPS = tuple(
    L[k]
    for L in TEXT_LABELS.values()
    for k in (
        "Attribute",
        "Dimension",
        "Resource",
        "EnumValue",
        "AddressingAttribute",
        "Column",
        "AccountingFlag",
        "ExtDimensionAccountingFlag",
    )
)
_TS_PREFIXES = tuple(L["tabular_section"] + " " for L in TEXT_LABELS.values())
_EXPLANATION = tuple(L["explanation"] + ": " for L in TEXT_LABELS.values())
_TOOLTIP = tuple(L["tooltip"] + ": " for L in TEXT_LABELS.values())


def _split_items(text: str) -> list[str]:
    """``"А, Б (синоним, с запятой), В"`` -> ``["А", "Б (синоним, с запятой)", "В"]``: the
    items of a field-list line, split at commas outside parentheses (a synonym with an
    unbalanced ``(`` makes the line split at every comma instead)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    if depth:
        out = [x.strip() for x in text.split(",")]
    return [x for x in out if x]


def _label_split(line: str) -> tuple[str, str, str]:
    """``line.partition(": ")`` at the first ``": "`` outside parentheses (a tabular section's
    synonym may hold one: ``Табличная часть Состав (Состав: комплектующие): Номенклатура``)."""
    depth = 0
    for i, ch in enumerate(line):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == ":" and depth == 0 and line.startswith(": ", i):
            return line[:i], ": ", line[i + 2 :]
    return line, "", ""


def _script(text: str) -> str:
    """``"cyr"`` or ``"lat"``: the script most of the letters of ``text`` are in (``"cyr"``
    for ``HTMLТекст``: 5 of 9), ``""`` without letters."""
    cyr = sum(1 for ch in text if "\u0400" <= ch <= "\u04ff")
    lat = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "" if cyr + lat == 0 else "cyr" if cyr >= lat else "lat"


def _item_phrase(item: str) -> str:
    """A field-list item ``Name`` or ``Name (synonym; other)`` as words: the first synonym
    written in the name's script when there is one, else the name as a phrase
    (:func:`_phrase`). (``daemon.sources.metadata`` leaves out a synonym that only spells the name:
    ``Курс (Rate)`` keeps ``Курс``, not the English word.)"""
    name, sep, rest = item.partition(" (")
    name = name.strip()
    if sep and rest.endswith(")"):
        want = _script(name)
        for syn in rest[:-1].split(";"):
            syn = syn.strip()
            if syn and _script(syn) == want:
                return syn
    return _phrase(name)


def _budgeted(head: str, tail: list[str], max_chars: int) -> str:
    """``head`` then the ``tail`` lines while they fit in ``max_chars``; a line that does not
    fit is word-cut into the room left (when that is at least 40 chars) and ends the text."""
    parts = [_cut_words(head, max_chars)]
    total = len(parts[0])
    for line in tail:
        if not line:
            continue
        room = max_chars - total - 1
        if len(line) <= room:
            parts.append(line)
            total += len(line) + 1
            continue
        if room >= 40:
            cut = _cut_words(line, room)
            if cut:
                parts.append(cut)
        break
    return "\n".join(parts)


def _synonym_values(chunk: Chunk, seen: set[str]) -> list[str]:
    """The chunk's synonyms (ru first, then the other languages in code order), without the
    ones in ``seen`` (casefolded; the seen set is extended)."""
    out = []
    for lang in sorted(chunk.synonym, key=lambda k: (k != "ru", k)):
        value = _collapse(chunk.synonym[lang])
        if value and value.casefold() not in seen:
            seen.add(value.casefold())
            out.append(value)
    return out


def _metadata_object_text(chunk: Chunk, max_chars: int) -> str:
    """Dense text of a metadata object: ``<type words> <name phrase>`` (``Регистр сведений
    Курсы валют``), its synonyms, comment and explanation, the value types of a typed object,
    then what it holds: the field-list lines of the object text (attributes, tabular sections
    with their attributes, dimensions, resources, enumeration values ...) with each field as
    words (:func:`_item_phrase`), as many as fit."""
    phrase = _phrase(chunk.name)
    title = f"{_phrase(chunk.object_type)} {phrase}" if chunk.object_type else phrase
    seen = {phrase.casefold()}
    tail = ["; ".join(_synonym_values(chunk, seen))]
    tail.append(_collapse(chunk.comment))
    groups = []
    for line in chunk.text.splitlines()[1:]:
        if line.startswith(_EXPLANATION):
            tail.append(_collapse(line.split(": ", 1)[1]))
            continue
        label, sep, items = _label_split(line)
        if label in _FIELD_GROUPS and sep:
            groups.append(f"{label}: " + ", ".join(_item_phrase(x) for x in _split_items(items)))
        elif label.startswith(_TS_PREFIXES) and sep or (line.startswith(_TS_PREFIXES) and not sep):
            prefix = next(p for p in _TS_PREFIXES if line.startswith(p))
            ts = _item_phrase(label[len(prefix) :])
            groups.append(
                f"{prefix}{ts}" + (": " + ", ".join(_item_phrase(x) for x in _split_items(items)) if sep else "")
            )
    if chunk.types:
        tail.append("Тип: " + ", ".join(chunk.types))
    return _budgeted(title, tail + groups, max_chars)


def _metadata_field_text(chunk: Chunk, max_chars: int) -> str:
    """Dense text of a field of a metadata object: ``<kind words> <name phrase>``
    (``Реквизит Формула расчета курса``), the owner as ``<type words> <owner synonym>`` (the
    object's head line in the field text), the field's synonyms, tooltip and comment, the
    tabular section it belongs to, and ``Тип: <types>``."""
    phrase = _phrase(chunk.name)
    kind = (chunk.symbol or "").partition(":")[0] or _FIELD_LABELS.get(chunk.kind, chunk.kind)
    title = f"{_phrase(kind)} {phrase}"
    lines = chunk.text.splitlines()
    tail = []
    owner_head = lines[-1] if len(lines) > 1 else ""
    if chunk.object_type and owner_head.startswith(chunk.object_type + " "):
        oname, sep, osyn = owner_head[len(chunk.object_type) + 1 :].partition(": ")
        owner_words = osyn.split(";")[0].strip() if sep else _phrase(oname)
        tail.append(f"{_phrase(chunk.object_type)} {owner_words or _phrase(oname)}")
    seen = {phrase.casefold()}
    tail.append("; ".join(_synonym_values(chunk, seen)))
    for line in lines[1:-1]:
        if line.startswith(_TOOLTIP):
            tail.append(_collapse(line.split(": ", 1)[1]))
        elif line.startswith(_TS_PREFIXES):
            prefix = next(p for p in _TS_PREFIXES if line.startswith(p))
            name, sep, syn = line[len(prefix) :].partition(": ")
            tail.append(f"{prefix}{syn.split(';')[0].strip() if sep else _phrase(name)}")
    tail.append(_collapse(chunk.comment))
    if chunk.types:
        tail.append("Тип: " + ", ".join(chunk.types))
    return _budgeted(title, tail, max_chars)


def embed_text(chunk: Chunk, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The text embedded for ``chunk`` (at most ``max_chars`` characters, default 400).

    Deterministic: the same chunk always gives the same string (it is also the embedding-cache
    key). Identifiers are turned into phrases with :func:`daemon.text.folding.split_words`
    (``ЗначениеРеквизитаОбъекта`` -> ``Значение реквизита объекта``).

    * Methods (``procedure`` / ``function``)::

          Значение реквизита объекта                                   (name as a phrase)
          Возвращает значения реквизита, прочитанного из ...            (doc comment lines)
          Параметры:
          Функция ЗначениеРеквизитаОбъекта(Ссылка, ИмяРеквизита, ...) Экспорт   (signature)
          Если Не ЗначениеЗаполнено(Ссылка) Тогда                       (body lines)

      Doc lines have the ``//`` markers stripped and whitespace collapsed; all sections are
      kept. Directives are left out, body lines are stripped, blank lines dropped, and only
      whole lines are added after the title (if the first one alone is too long, its
      word-cut head is kept). Parts ``part >= 2`` of a long method carry no doc, so their
      budget goes to their own body. The owner is *not* in a method's text: shared by every
      method of a module, it pulls their vectors together.
    * Module-level code (``module``): ``<owner>: <module label>`` then the code lines (comment,
      blank and ``#`` preprocessor lines dropped, so the copyright header is not embedded).
    * Metadata objects (:func:`_metadata_object_text`)::

          Регистр сведений Курсы валют        (type and name as words)
          <synonyms, ru first>; <comment>; <explanation>
          Ресурсы: Курс, Кратность            (what it holds: fields by synonym or as words)
          Измерения: Валюта

      Fields (:func:`_metadata_field_text`): ``Ресурс Курс``, the owner ``Регистр сведений
      Курсы валют`` (by its synonym), the field's synonyms, tooltip, comment, its tabular
      section and ``Тип: <types>``.
    * Docs sections: the heading path and the section text
      (:func:`daemon.sources.docs.docs_embed_text`).

    Why each form (the variants measured against it): ``docs/internals.md``, "Embedded texts".
    ``ValueError`` for ``max_chars < 1``.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be >= 1")
    if chunk.kind in CODE_KINDS:
        live = live_code(chunk.text)  # an extension's #Удаление lines are not embedded
        if live is not chunk.text:
            chunk = msgspec.structs.replace(chunk, text=live)
    if chunk.kind in DOCS_KINDS:  # docs: heading path + section text (daemon.sources.docs)
        from ..sources.docs import docs_embed_text

        return docs_embed_text(chunk, max_chars)
    if chunk.kind == "module":
        return _module_text(chunk, max_chars)
    if chunk.kind in CODE_KINDS:
        return _code_text(chunk, max_chars)
    if chunk.kind == "object":
        return _metadata_object_text(chunk, max_chars)
    return _metadata_field_text(chunk, max_chars)


def embed_texts(chunk: Chunk, max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """Every text embedded for ``chunk``, 1 to :data:`MAX_TEXTS` strings: first
    :func:`embed_text`, then the extra texts its kind asks for (an exported method:
    :func:`method_context_text`; docs sections: :func:`daemon.sources.docs.docs_extra_texts`;
    module-level code and metadata chunks: none). Each text is a vector of its own in the
    dense index; a search counts the chunk once, by its best vector
    (:meth:`daemon.index.dense.DenseIndex.search_grouped`). An extra text equal to an earlier
    one is dropped. Deterministic, like :func:`embed_text`."""
    first = embed_text(chunk, max_chars)
    if chunk.kind in METHOD_KINDS:
        context = method_context_text(chunk)
        return [first, context] if context and context != first else [first]
    if chunk.kind not in DOCS_KINDS:
        return [first]
    from ..sources.docs import docs_extra_texts

    out = [first]
    for t in docs_extra_texts(chunk, max_chars):
        if t and t not in out:
            out.append(t)
    return out[:MAX_TEXTS]
