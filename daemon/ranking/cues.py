"""Query cues of a 1C developer: does a natural-language query ask about metadata?

Questions such as "в каком регистре хранятся курсы валют" or "какие реквизиты у справочника
Пользователи" ask for a metadata object or field, yet BM25 over everything ranks the code
that mentions the same words (``КурсыВалют`` appears in hundreds of methods) above the one
object descriptor. When a query names a metadata type, a field kind, or asks where data is
*stored*, the engine adds a channel restricted to metadata chunks (of the named types, when
it names any). A query with an infinitive ("провести пачку документов", "где хранить пароль")
is a how-to question about code and gets no such channel. A question with neither a cue nor an
infinitive gets the metadata channels at a small share of their weight
(:data:`daemon.ranking.ranker.UNCUED_META_WEIGHT`). The cue lists are the platform's own type and field names in Russian and
English (the words a developer uses for them), matched on word prefixes after case and ``ё``
folding, so inflected forms match (``регистре``, ``справочника``, ``перечислением``).
"""

from __future__ import annotations

import re

import msgspec

from ..text.folding import fold

# (regex over the folded query, Russian singular object types it names)
_TYPE_CUES: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(p), types)
    for p, types in (
        (r"\bрегистр\w* сведен", ("РегистрСведений",)),
        (r"\bрегистр\w* накоплен", ("РегистрНакопления",)),
        (r"\bрегистр\w* бухгалтер", ("РегистрБухгалтерии",)),
        (r"\bрегистр\w* расчет", ("РегистрРасчета",)),
        (r"\bрегистр", ("РегистрСведений", "РегистрНакопления", "РегистрБухгалтерии", "РегистрРасчета")),
        (r"\binformation register|\bregister", ("РегистрСведений", "РегистрНакопления")),
        (r"\bсправочник|\bcatalog", ("Справочник",)),
        (r"\bжурнал\w* документ|\bdocument journal", ("ЖурналДокументов",)),
        (r"\bдокумент|\bdocument", ("Документ",)),
        (r"\bперечислен|\benum", ("Перечисление",)),
        (r"\bконстант|\bconstant", ("Константа",)),
        (r"\bопределяем\w* тип|\bdefined type", ("ОпределяемыйТип",)),
        (r"\bфункциональн\w* опци|\bfunctional option", ("ФункциональнаяОпция",)),
        (r"\bпараметр\w* сеанс|\bsession parameter", ("ПараметрСеанса",)),
        (r"\bрегламентн\w* задан|\bscheduled job", ("РегламентноеЗадание",)),
        (r"\bподписк\w* на событ|\bevent subscription", ("ПодпискаНаСобытие",)),
        (r"\bбизнес-?процесс|\bbusiness process", ("БизнесПроцесс",)),
        (r"\bзадач\w* исполнител|\btask", ("Задача",)),
        (r"\bплан\w* обмен|\bexchange plan", ("ПланОбмена",)),
        (r"\bплан\w* видов характеристик|\bcharacteristic type", ("ПланВидовХарактеристик",)),
        (r"\bhttp-?сервис|\bhttp service", ("HTTPСервис",)),
        (r"\bweb-?сервис|\bвеб-?сервис|\bweb service", ("WebСервис",)),
    )
]

# Field kinds and storage questions: metadata, of any type.
_FIELD_CUES = re.compile(
    r"\bреквизит|\bтабличн\w* част|\bизмерени|\bресурс\w* регистр|\bзначени\w* перечислен"
    r"|\bгде\b.*\b(?:хран|лежат|лежит)|\bхран[яи]тся\b|\bв каком\b.*\b(?:регистр|справочник|документ)"
    r"|\bкакие бывают\b"
    r"|\battribute|\btabular section|\bdimension|\bwhere\b.*\bstored|\bstores?\b"
)


# An infinitive (прочитать, провести, получить, хранить, вызвать) makes it a how-to question
# about code even when it names a metadata type ("провести пачку документов").
_INFINITIVE = re.compile(r"\b\w{2,}(?:ать|ять|еть|ить|уть|ыть|оть|ти|чь)(?:ся)?\b")
_NOT_VERBS = frozenset(("память", "памяти", "пути", "сети", "части", "области"))


# The English counterpart (issue 15): a how-to question starts with "how to / how do I" or
# with a verb in the imperative. The verbs are the generic operations a developer asks how to
# do (the English names of BSL's own verbs: Получить/Get, Записать/Write, ...), not words of
# any gold query; without it "write the invoice total in words in the document currency"
# asked for documents named like the words (measured: ssl31-en dev semantic, README).
_EN_HOWTO = re.compile(
    r"^(?:how (?:to|do i|can i|do you)\b"
    r"|(?:get|set|write|read|send|receive|create|make|add|remove|delete|check|find|search|convert|calculate|compute"
    r"|run|execute|load|save|store|fill|print|show|display|open|close|post|generate|copy|move|update|change|clear"
    r"|call|start|stop|lock|unlock|sign|encrypt|decrypt|export|import|attach|upload|download|let|put|pick|select"
    r"|list|count|compare|merge|split|format|parse|validate|verify|register|notify|schedule|translate|replace)\b)"
)


def _has_infinitive(folded: str) -> bool:
    if _EN_HOWTO.match(folded):
        return True
    return any(m.group(0) not in _NOT_VERBS for m in _INFINITIVE.finditer(folded))


def howto_question(query: str) -> bool:
    """True for a how-to question about code: it has a Russian infinitive ("провести пачку
    документов") or starts like an English how-to ("how to ...", an imperative verb); the
    same cue that keeps :func:`metadata_intent` off. Pure, O(len(query))."""
    return _has_infinitive(fold(query))


class MetadataIntent(msgspec.Struct, frozen=True):
    """``metadata``: the query asks about metadata; ``object_types``: the Russian singular
    types it names (empty: any type)."""

    metadata: bool = False
    object_types: tuple[str, ...] = ()


def metadata_intent(query: str) -> MetadataIntent:
    """Detect a metadata question (see the module docstring). Pure, O(len(query)).

    >>> metadata_intent("в каком регистре хранятся курсы валют").object_types[0]
    'РегистрСведений'
    >>> metadata_intent("как отправить письмо").metadata
    False
    """
    q = fold(query)
    if _has_infinitive(q):
        return MetadataIntent()
    types: list[str] = []
    for rx, names in _TYPE_CUES:
        if rx.search(q):
            for t in names:
                if t not in types:
                    types.append(t)
            if rx.pattern.startswith(r"\bрегистр\w* "):  # a specific register kind wins
                break
    if types or _FIELD_CUES.search(q):
        return MetadataIntent(True, tuple(types))
    return MetadataIntent()
