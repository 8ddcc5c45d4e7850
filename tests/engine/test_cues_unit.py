"""The query cues of issue 28 as pure functions: the platform's multi-word type names, where/how
questions, platform events, acronyms and a question that spells a method's name."""

from __future__ import annotations

from daemon.ranking.cues import metadata_intent


def test_listed_is_not_the_enum_type_word_and_multi_word_types_are_cues():
    assert metadata_intent("где в профиле групп доступа перечислены роли").object_types == ()
    assert metadata_intent("перечисление со статусами доставки смс").object_types == ("Перечисление",)
    assert metadata_intent("общий макет с внешней компонентой").object_types == ("ОбщийМакет",)
    assert metadata_intent("план счетов хозрасчетный").object_types == ("ПланСчетов",)
    # a specific register kind still wins over the generic register word
    assert metadata_intent("в каком регистре сведений хранятся курсы").object_types == ("РегистрСведений",)
    # an infinitive keeps a how-to question off the metadata channels
    assert not metadata_intent("как заполнить общий макет").metadata
