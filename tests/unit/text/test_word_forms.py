"""The Russian word forms Snowball stems apart from the forms 1C names use."""

from __future__ import annotations

import pytest

from daemon.text.tokenize import tokenize
from daemon.text.word_forms import extra_stems


@pytest.mark.parametrize(
    ("word", "name", "extra"),
    [
        ("блокировок", "УстановитьБлокировку", "блокировк"),  # fleeting vowel of the genitive plural
        ("настроек", "ПрочитатьНастройки", "настройк"),  # ... after a vowel: й
        ("перехватывает", "ВыполнитьСПерехватомОшибки", "перехват"),  # imperfective -ыва-
        ("проверяет", "ПроверитьЗаполнение", "провер"),  # stem in -я
        ("добавляет", "ДобавитьТест", "добав"),  # inserted л after a labial
        ("получает", "ПолучитьДанные", "получ"),  # stem in -а
        ("формирует", "СформироватьОтчет", None),  # -овать verb: a different prefix, no match
        ("формирует", "ФормироватьОтчет", "формирова"),
        ("используются", "ИспользоватьКэш", "использова"),
    ],
)
def test_an_extra_stem_meets_the_names_stem(word, name, extra):
    stems = extra_stems(word)
    name_tokens = set(tokenize(name, stem=True))
    assert not set(tokenize(word, stem=True)) & name_tokens  # Snowball alone misses the pair
    if extra is None:
        assert not set(stems) & name_tokens
    else:
        assert extra in stems and extra in name_tokens


@pytest.mark.parametrize("word", ["поток", "теста", "данных", "строк", "ИНН", "report", "бл0к", "ошибка"])
def test_no_extra_stem_for_short_non_cyrillic_or_ordinary_words(word):
    assert extra_stems(word.casefold()) == []
