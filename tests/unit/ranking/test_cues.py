"""The query cues of issue 28 as pure functions: the platform's multi-word type names, where/how
questions, platform events, acronyms and a question that spells a method's name."""

from __future__ import annotations

from daemon.ranking.cues import MetadataIntent, metadata_intent, named_events, read_cues


def test_listed_is_not_the_enum_type_word_and_multi_word_types_are_cues():
    assert metadata_intent("где в профиле групп доступа перечислены роли").object_types == ()
    assert metadata_intent("перечисление со статусами доставки смс").object_types == ("Перечисление",)
    assert metadata_intent("общий макет с внешней компонентой").object_types == ("ОбщийМакет",)
    assert metadata_intent("план счетов хозрасчетный").object_types == ("ПланСчетов",)
    # a specific register kind still wins over the generic register word
    assert metadata_intent("в каком регистре сведений хранятся курсы").object_types == ("РегистрСведений",)
    # an infinitive keeps a how-to question off the metadata channels
    assert not metadata_intent("как заполнить общий макет").metadata


def test_where_how_questions_are_read_by_an_interrogative_word_without_an_infinitive():
    def wh(q: str, share: float = 0.99) -> bool:
        return read_cues(q, corpus_cyrillic=share, docs=False).where_how

    assert wh("где упаковываются результаты тестов")
    assert wh("как движок понимает, что тест упал")
    assert not wh("как отправить письмо из кода")  # an infinitive: a how-to question, the API prior stays
    assert not wh("сумма прописью для счета на оплату")  # a noun phrase
    assert not wh("where are the test results packed")  # the other script than the code: the prior stays
    assert wh("where are the test results packed", 0.0)
    assert not wh("ОбщегоНазначения.ЗначениеРеквизитаОбъекта")


def test_named_events_read_the_handlers_words_in_both_languages():
    assert named_events("обработка проведения документа анкета")[:1] == ("ОбработкаПроведения",)
    assert named_events("какие движения делает реализация при проведении")[:1] == ("ОбработкаПроведения",)
    assert named_events("проверка заполнения документа встреча")[:1] == ("ОбработкаПроверкиЗаполнения",)
    assert "BeforeWrite" in named_events("before writing the catalog item")
    # the more specific phrase wins where two overlap
    assert named_events("перед записью на сервере") == ("ПередЗаписьюНаСервере", "BeforeWriteAtServer")
    assert named_events("провести пачку документов") == ()
    cues = read_cues("обработка проведения документа анкета", corpus_cyrillic=0.99, docs=False)
    assert cues.named_events[0] == "ОбработкаПроведения" and cues.named_types == ("Документ",)
    # a how-to question still names its types (not a metadata question)
    howto = read_cues("как провести документ анкета", corpus_cyrillic=0.99, docs=False)
    assert howto.named_types == ("Документ",) and not howto.metadata


def test_latin_acronyms_spelled_in_cyrillic():
    from daemon.text.lexicon import latin_acronym

    assert latin_acronym("смс") == "sms" and latin_acronym("пдф") == "pdf" and latin_acronym("фтп") == "ftp"
    assert latin_acronym("эцп") is None  # a vowel: a Russian word or acronym
    assert latin_acronym("с") is None and latin_acronym("клиент") is None


def test_registration_is_not_the_register_type_word():
    # "журнал регистрации" is the event log, "регистрация изменений" an exchange's change registration
    assert metadata_intent("где записываются события в журнал регистрации") == MetadataIntent()
    assert not metadata_intent("регистрация изменений для обмена").metadata
    assert metadata_intent("регистры накопления остатков").object_types == ("РегистрНакопления",)
    assert "РегистрСведений" in metadata_intent("в каком регистре хранятся курсы валют").object_types


def test_a_question_naming_an_event_handler_is_about_code_unless_it_names_a_subscription():
    assert not metadata_intent("обработчик перед удалением справочника").metadata
    assert not metadata_intent("обработка проведения документов").metadata
    assert metadata_intent("подписка на событие перед записью").object_types == ("ПодпискаНаСобытие",)
    cues = read_cues("обработчик перед удалением справочника", corpus_cyrillic=1.0, docs=False)
    assert not cues.intent.metadata and cues.named_events == ("ПередУдалением", "BeforeDelete")
    assert cues.named_types == ("Справочник",)  # the type is still known to the handler rules
