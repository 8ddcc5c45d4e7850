"""The cues of one query, read once per search and handed to every step of the ranking.

:class:`QueryCues` says what kind of query it is: a name (an identifier query), a question
written in the other script than the code (cross-script), a metadata question (and the object
types it names), a how-to question about code, or none of these (uncued). The metadata cues are
the platform's own type and field names in Russian and English (the words a developer uses for
them), matched on word prefixes after case and ``ё`` folding, so inflected forms match
(``регистре``, ``справочника``, ``перечислением``). A question with an infinitive ("провести
пачку документов", "где хранить пароль") or an English how-to opening is a how-to question about
code, even when it names a metadata type; so is one that names a platform event's handler
("перед удалением справочника") unless it names an event subscription. All functions here are
pure and O(len(query)).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import msgspec

from ..index.metanames import spelled_name
from ..index.names_words import is_acronym, is_identifier_query
from ..text.folding import fold
from ..text.lexicon import default_lexicon

# (regex over the folded query, Russian singular object types it names)
_TYPE_CUES: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(p), types)
    for p, types in (
        (r"\bрегистр(?!ац|ир)\w* сведен", ("РегистрСведений",)),
        (r"\bрегистр(?!ац|ир)\w* накоплен", ("РегистрНакопления",)),
        (r"\bрегистр(?!ац|ир)\w* бухгалтер", ("РегистрБухгалтерии",)),
        (r"\bрегистр(?!ац|ир)\w* расчет", ("РегистрРасчета",)),
        (r"\bрегистр(?!ац|ир)", ("РегистрСведений", "РегистрНакопления", "РегистрБухгалтерии", "РегистрРасчета")),
        (r"\binformation register|\bregister", ("РегистрСведений", "РегистрНакопления")),
        (r"\bсправочник|\bcatalog", ("Справочник",)),
        (r"\bжурнал\w* документ|\bdocument journal", ("ЖурналДокументов",)),
        (r"\bдокумент|\bdocument", ("Документ",)),
        # "перечислены" (listed) is a participle, not the type: the noun's stem only
        (r"\bперечислени|\benum", ("Перечисление",)),
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

# The platform's other types whose names are not everyday words (multi-word names and their
# English names), read whatever the cues above found; "отчет", "обработка", "общий модуль",
# "роль" and "подсистема" are left out: questions about code say them too ("обработка
# проведения", "модуль необязательной подсистемы").
_MORE_TYPE_CUES: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(p), types)
    for p, types in (
        (r"\bобщ\w* макет|\bcommon template", ("ОбщийМакет",)),
        (r"\bобщ\w* реквизит|\bcommon attribute", ("ОбщийРеквизит",)),
        (r"\bобщ\w* картинк|\bcommon picture", ("ОбщаяКартинка",)),
        (r"\bобщ\w* форм|\bcommon form", ("ОбщаяФорма",)),
        (r"\bобщ\w* команд|\bcommon command", ("ОбщаяКоманда",)),
        (r"\bплан\w* счетов|\bchart of accounts", ("ПланСчетов",)),
        (r"\bплан\w* видов расчет|\bcalculation types", ("ПланВидовРасчета",)),
        (r"\bкритери\w* отбора|\bfilter criteri", ("КритерийОтбора",)),
        (r"\bхранилищ\w* настроек|\bsettings storage", ("ХранилищеНастроек",)),
        (r"\bэлемент\w* стиля|\bstyle item", ("ЭлементСтиля",)),
        (r"\bпакет\w* xdto|\bxdto package", ("ПакетXDTO",)),
        (r"\bгрупп\w* команд|\bcommand group", ("ГруппаКоманд",)),
        (r"\bпараметр\w* функциональн\w* опци|\bfunctional option parameter", ("ПараметрФункциональныхОпций",)),
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


# The English counterpart: a how-to question starts with "how to / how do I" or with a verb in
# the imperative. The verbs are the generic operations a developer asks how to do (the English
# names of BSL's own verbs: Получить/Get, Записать/Write, ...), not words of any gold query.
_EN_HOWTO = re.compile(
    r"^(?:how (?:to|do i|can i|do you)\b"
    r"|(?:get|set|write|read|send|receive|create|make|add|remove|delete|check|find|search|convert|calculate|compute"
    r"|run|execute|load|save|store|fill|print|show|display|open|close|post|generate|copy|move|update|change|clear"
    r"|call|start|stop|lock|unlock|sign|encrypt|decrypt|export|import|attach|upload|download|let|put|pick|select"
    r"|list|count|compare|merge|split|format|parse|validate|verify|register|notify|schedule|translate|replace)\b)"
)


# A question about where or how something happens in the code: an interrogative word. Without
# an infinitive it asks for the code that does it ("где упаковываются ...", "как движок
# понимает, что ..."), not for an API to call.
_WHERE_HOW = re.compile(
    r"\b(?:где|куда|откуда|как|почему|зачем|когда|каким образом|в каком месте|по какому"
    r"|where|why|when|how (?:does|is|are|do))\b"
)


def _has_infinitive(folded: str) -> bool:
    if _EN_HOWTO.match(folded):
        return True
    return any(m.group(0) not in _NOT_VERBS for m in _INFINITIVE.finditer(folded))


# The platform's event handlers of object, manager, record set, form, session and application
# modules, by the words a developer says for them: (regex over the folded question, the Russian
# and the English handler name). Where two overlap the more specific comes first in this list
# and wins ("перед записью на сервере" is not also "перед записью").
_EVENTS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(p), ru, en)
    for p, ru, en in (
        (
            r"\bотмен\w* проведени|\bудалени\w* проведени|\bundo posting|\bunpost",
            "ОбработкаУдаленияПроведения",
            "UndoPosting",
        ),
        (r"\bпроведени|\bposting\b|\bpost(?:ed|ing)? (?:of )?(?:a |the )?document", "ОбработкаПроведения", "Posting"),
        (r"\bпроверк\w* заполнени|\bfill(?:ing)? check", "ОбработкаПроверкиЗаполнения", "FillCheckProcessing"),
        (r"\bобработк\w* заполнени|\bввод\w* на основани|\bfilling processing", "ОбработкаЗаполнения", "Filling"),
        (r"\bперед записью на сервере|\bbefore write at server", "ПередЗаписьюНаСервере", "BeforeWriteAtServer"),
        (r"\bпри записи на сервере|\bon write at server", "ПриЗаписиНаСервере", "OnWriteAtServer"),
        (r"\bпосле записи на сервере|\bafter write at server", "ПослеЗаписиНаСервере", "AfterWriteAtServer"),
        (r"\bперед запис|\bbefore writ", "ПередЗаписью", "BeforeWrite"),
        (r"\bпри запис|\bon writ|\bwhen writ", "ПриЗаписи", "OnWrite"),
        (r"\bпосле запис|\bafter writ", "ПослеЗаписи", "AfterWrite"),
        (r"\bперед удалени|\bbefore delet", "ПередУдалением", "BeforeDelete"),
        (r"\bпри копировани|\bon copy", "ПриКопировании", "OnCopy"),
        (r"\bпри установке нового номера|\bset(?:ting)? (?:a )?new number", "ПриУстановкеНовогоНомера", "SetNewNumber"),
        (r"\bпри установке нового кода|\bset(?:ting)? (?:a )?new code", "ПриУстановкеНовогоКода", "SetNewCode"),
        (
            r"\bпри создании на сервере|\bon create at server|\bform is created",
            "ПриСозданииНаСервере",
            "OnCreateAtServer",
        ),
        (r"\bпри чтении на сервере|\bon read at server", "ПриЧтенииНаСервере", "OnReadAtServer"),
        (r"\bпри открытии|\bon open", "ПриОткрытии", "OnOpen"),
        (r"\bперед закрытием|\bbefore clos", "ПередЗакрытием", "BeforeClose"),
        (r"\bпри закрытии|\bon clos", "ПриЗакрытии", "OnClose"),
        (r"\bобработк\w* оповещени|\bnotification processing", "ОбработкаОповещения", "NotificationProcessing"),
        (r"\bобработк\w* выбора|\bchoice processing", "ОбработкаВыбора", "ChoiceProcessing"),
        (r"\bполучени\w* данных выбора|\bchoice data get", "ОбработкаПолученияДанныхВыбора", "ChoiceDataGetProcessing"),
        (r"\bполучени\w* формы|\bform get processing", "ОбработкаПолученияФормы", "FormGetProcessing"),
        (
            r"\bполучени\w* представлени|\bpresentation get processing",
            "ОбработкаПолученияПредставления",
            "PresentationGetProcessing",
        ),
        (
            r"\bустановк\w* параметров сеанса|\bsession parameters? setting",
            "УстановкаПараметровСеанса",
            "SessionParametersSetting",
        ),
        (
            r"\bперед началом работы системы|\bbefore (?:the )?(?:system )?start",
            "ПередНачаломРаботыСистемы",
            "BeforeStart",
        ),
        (r"\bпри начале работы системы|\bon (?:system )?start", "ПриНачалеРаботыСистемы", "OnStart"),
        (r"\bперед завершением работы системы|\bbefore exit", "ПередЗавершениемРаботыСистемы", "BeforeExit"),
        (r"\bпри завершении работы системы|\bon exit", "ПриЗавершенииРаботыСистемы", "OnExit"),
    )
]


# An event subscription is a metadata object named by an event's words too ("подписка на
# событие перед записью"): such a question stays a metadata question.
_SUBSCRIPTION = re.compile(r"\bподписк\w* на событ|\bevent subscription")


def _names_handler(folded: str, events: tuple[str, ...]) -> bool:
    """True when the question names a platform event's handler (code), not an event subscription."""
    return bool(events) and _SUBSCRIPTION.search(folded) is None


def named_events(query: str) -> tuple[str, ...]:
    """The platform event handlers a question names in words, as Russian and English handler
    names (``"обработка проведения документа анкета"`` -> ``("ОбработкаПроведения",
    "Posting")``); the more specific phrase wins where two overlap. Pure, O(len(query)).

    >>> named_events("перед записью справочника пользователи")
    ('ПередЗаписью', 'BeforeWrite')
    """
    return _events(fold(query))


def _events(q: str) -> tuple[str, ...]:
    out: list[str] = []
    taken: list[tuple[int, int]] = []
    for rx, ru, en in _EVENTS:
        m = rx.search(q)
        if m and not any(a <= m.start() < b for a, b in taken):
            taken.append(m.span())
            out += [ru, en]
    return tuple(out)


def named_types(query: str) -> tuple[str, ...]:
    """The metadata object types a query names (the type cues of :func:`metadata_intent`),
    whatever else the query is (a how-to question too); ``()`` for none. Pure."""
    return _types(fold(query))


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
    if _has_infinitive(q) or _names_handler(q, _events(q)):
        return MetadataIntent()
    return _intent(q)


def _types(q: str) -> tuple[str, ...]:
    """The object types the folded query ``q`` names, in the order of the cues."""
    types: list[str] = []
    for rx, names in _TYPE_CUES:
        if rx.search(q):
            for t in names:
                if t not in types:
                    types.append(t)
            if rx.pattern.startswith(r"\bрегистр(?!ац|ир)\w* "):  # a specific register kind wins
                break
    for rx, names in _MORE_TYPE_CUES:
        if rx.search(q):
            types += [t for t in names if t not in types]
    return tuple(types)


def _intent(q: str, types: tuple[str, ...] | None = None) -> MetadataIntent:
    """The metadata cues of the folded query ``q`` that has no infinitive (``types``: its
    :func:`_types`, when the caller has them)."""
    types = _types(q) if types is None else types
    if types or _FIELD_CUES.search(q):
        return MetadataIntent(True, tuple(types))
    return MetadataIntent()


_CYR = re.compile(r"[а-яёА-ЯЁ]")
_LAT = re.compile(r"[a-zA-Z]")

#: The kinds of query, as the gold set's intents are defined (read from the query alone).
QUERY_KINDS = ("name", "cross_script", "metadata", "semantic")


def script_counts(text: str) -> tuple[int, int]:
    """(Cyrillic letters, Latin letters) in ``text``."""
    return len(_CYR.findall(text)), len(_LAT.findall(text))


def query_kind(*, identifier: bool, cross_script: bool, metadata: bool) -> str:
    """The kind of a query (one of :data:`QUERY_KINDS`): ``name`` > ``cross_script`` >
    ``metadata`` > ``semantic``, the first that holds."""
    if identifier:
        return "name"
    if cross_script:
        return "cross_script"
    if metadata:
        return "metadata"
    return "semantic"


@dataclass(frozen=True)
class QueryCues:
    """What one query is, read once per search (:func:`read_cues`) and handed down.

    ``text``: the query as searched (stripped; ``""`` when it has no letter or digit).
    ``identifier``: a name, not natural language (:func:`daemon.index.names_words.is_identifier_query`).
    ``cross_script``: written in the other script than the code's names (its share of Cyrillic
    letters differs from theirs by more than a half). ``to``: the language of the code's names,
    ``ru`` or ``en`` (where a cross-script query's words are carried). ``intent``: the metadata
    cues (None for a name). ``howto``: a how-to question about code. ``docs``: a documentation
    search. ``translated``: the question's words carried into ``to`` for the *dense_tr* channel
    (``""`` when there is none or it was not asked for, :func:`with_translation`).
    ``where_how``: a question in the code's script about where or how something happens (an
    interrogative word, no infinitive): it asks for the code that does it, API or not.
    ``acronym``: a name of 2 to 8 capitals (``НДС``): first a word of names and texts, then a
    CamelHump abbreviation. For natural language: ``named_types``, the object types it names
    (a how-to question too); ``named_events``, the platform event handlers it names in words
    (:func:`named_events`); ``spelled``, the identifier its words spell when they are 2 to 6
    words of letters (:func:`daemon.index.metanames.spelled_name`; ``""`` otherwise).
    """

    text: str
    identifier: bool = False
    cross_script: bool = False
    to: str = "ru"
    intent: MetadataIntent | None = None
    howto: bool = False
    docs: bool = False
    translated: str = ""
    where_how: bool = False
    acronym: bool = False
    named_types: tuple[str, ...] = ()
    named_events: tuple[str, ...] = ()
    spelled: str = ""

    @property
    def metadata(self) -> bool:
        """A natural-language metadata question."""
        return self.intent is not None and self.intent.metadata

    @property
    def object_types(self) -> tuple[str, ...]:
        """The metadata object types the question names (Russian singular; empty: any)."""
        return self.intent.object_types if self.intent is not None else ()

    @property
    def uncued(self) -> bool:
        """A code-side question in the code's script with neither a metadata cue nor a how-to
        verb: it may still be about metadata."""
        return (
            not self.docs and self.intent is not None and not self.metadata and not self.howto and not self.cross_script
        )

    @property
    def kind(self) -> str:
        """The query's kind (:func:`query_kind`)."""
        return query_kind(identifier=self.identifier, cross_script=self.cross_script, metadata=self.metadata)


def read_cues(text: str, *, corpus_cyrillic: float, docs: bool) -> QueryCues:
    """The cues of the query ``text`` (already stripped) over a code base whose names are
    ``corpus_cyrillic`` Cyrillic (a share of their letters, 0..1); ``docs``: a documentation
    search. Pure, O(len(text))."""
    identifier = is_identifier_query(text)
    cyr, lat = script_counts(text)
    cross = cyr + lat > 0 and abs(cyr / (cyr + lat) - corpus_cyrillic) > 0.5
    intent = howto = None
    where_how = False
    types: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    spelled = ""
    if not identifier:
        folded = fold(text)
        howto = _has_infinitive(folded)
        types = _types(folded)
        events = _events(folded)
        intent = MetadataIntent() if howto or _names_handler(folded, events) else _intent(folded, types)
        where_how = not howto and not cross and _WHERE_HOW.search(folded) is not None
        spelled = spelled_name(text) or ""
    return QueryCues(
        text=text,
        identifier=identifier,
        cross_script=cross,
        to="ru" if corpus_cyrillic > 0.5 else "en",
        intent=intent,
        howto=bool(howto),
        docs=docs,
        where_how=where_how,
        acronym=identifier and is_acronym(text),
        named_types=types,
        named_events=events,
        spelled=spelled,
    )


def with_translation(cues: QueryCues) -> QueryCues:
    """``cues`` with :attr:`QueryCues.translated` filled for a code-side cross-script question
    (:meth:`daemon.text.lexicon.Lexicon.translate_text`); unchanged for a name, a question in
    the code's script or a documentation search."""
    if cues.identifier or cues.docs or not cues.cross_script:
        return cues
    return replace(cues, translated=default_lexicon().translate_text(cues.text, cues.to))
