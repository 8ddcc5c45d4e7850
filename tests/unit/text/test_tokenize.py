"""Tokenizer rules (daemon/text/tokenize.py) and name folding, on literal snippets."""

from __future__ import annotations

import random
import sys
import unicodedata

from daemon.text import tokenize as tok
from daemon.text.folding import fold
from daemon.text.tokenize import FUNCTION_WORDS, KEYWORDS, clear_caches, tokenize, tokenize_query


def test_camelcase_parts_and_whole_identifier():
    assert tokenize("ЗначениеРеквизитаОбъекта") == [
        "значениереквизитаобъекта",
        "значение",
        "реквизита",
        "объекта",
    ]
    # acronyms and digits are words of their own (names.split_words)
    assert tokenize("ИННСоответствуетТребованиям HTTPЗапрос2") == [
        "иннсоответствуеттребованиям",
        "инн",
        "соответствует",
        "требованиям",
        "httpзапрос2",
        "http",
        "запрос",
        "2",
    ]


def test_single_word_identifier_gives_one_token():
    # no duplicate of the whole word as its own part: tf must not double
    assert tokenize("Пользователи") == ["пользователи"]


def test_case_and_yo_are_folded():
    assert tokenize("ОтчётПоВерсииОбъекта") == tokenize("ОтчетПоВерсииОбъекта")
    assert tokenize("ОтчётПоВерсииОбъекта")[0] == "отчетповерсииобъекта"
    assert tokenize_query("ОТЧЁТ") == ["отчет"]


def _fold_reference(text: str) -> str:
    """``fold`` as defined: NFC, ``ё``→``е``, casefold (the implementation reorders it)."""
    return unicodedata.normalize("NFC", text).translate(str.maketrans({"ё": "е", "Ё": "Е"})).casefold()


def test_fold_matches_its_definition_for_every_code_point():
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        assert fold(c) == _fold_reference(c), hex(cp)
    rng = random.Random(3)
    pool = [chr(c) for c in [*range(32, 128), *range(0x400, 0x460), 0x308, 0x306, 0x301, 0x130, 0x3A3, 0xDF, 0x1E9E]]
    for _ in range(20000):
        s = "".join(rng.choice(pool) for _ in range(rng.randrange(8)))
        assert fold(s) == _fold_reference(s), repr(s)


def test_dotted_names_give_parts_and_adjacent_pairs():
    toks = tokenize("Результат = ОбщегоНазначения.ЗначениеРеквизитаОбъекта(Ссылка);")
    assert toks == [
        "результат",
        "общегоназначения",
        "общего",
        "назначения",
        "значениереквизитаобъекта",
        "значение",
        "реквизита",
        "объекта",
        "общегоназначения.значениереквизитаобъекта",
        "ссылка",
    ]
    chain = tokenize("Справочники.Пользователи.ПустаяСсылка()")
    assert "справочники.пользователи" in chain
    assert "пользователи.пустаяссылка" in chain
    assert "справочники.пользователи.пустаяссылка" not in chain  # pairs, not the whole chain


def test_numbers_and_one_letter_segments_give_no_pairs():
    assert tokenize('Версия = "3.1.12"') == ["версия", "3", "1", "12"]
    assert tokenize("Т.Ссылка") == ["ссылка"]  # table alias: no "т", no "т.ссылка"


def test_codes_kept_whole_plus_parts():
    assert tokenize('Код = "НФ-001";') == ["код", "нф-001", "нф", "001"]
    assert tokenize("UTF-8") == ["utf-8", "utf", "8"]
    # a subtraction written without spaces is not a code in documents ...
    assert tokenize("Количество-1") == ["количество", "1"]
    # ... but a query keeps any hyphenated word whole (and lowercase codes still match)
    assert tokenize_query("нф-001") == ["нф-001", "нф", "001"]


def test_words_inside_string_literals_are_tokenized_like_code():
    text = (
        'Запрос.Текст = "ВЫБРАТЬ\r\n'
        "\t|\tПользователи.Ссылка КАК Ссылка\r\n"
        "\t|ИЗ\r\n"
        '\t|\tСправочник.Пользователи КАК Пользователи";'
    )
    toks = tokenize(text)
    assert "справочник.пользователи" in toks
    assert "выбрать" in toks and "из" in toks
    assert toks.count("пользователи") == 3  # two dotted names + one alias


def test_latin_cyrillic_mix():
    assert tokenize("ОтправитьSMS") == ["отправитьsms", "отправить", "sms"]
    assert tokenize("ЮТOnStart") == ["ютonstart", "ют", "on", "start"]
    assert tokenize("my_var") == ["my_var", "my", "var"]


def test_one_letter_tokens_dropped_digits_kept():
    assert tokenize("Для й = 0 По 9 Цикл") == ["для", "0", "по", "9", "цикл"]
    assert tokenize("ВыгрузитьВExcel") == ["выгрузитьвexcel", "выгрузить", "excel"]


def test_stopwords_flag():
    code = "Если Не Отказ Тогда ВозвратТоваров = Новый Структура; КонецЕсли;"
    assert tokenize(code) == [
        "если",
        "не",
        "отказ",
        "тогда",
        "возвраттоваров",
        "возврат",
        "товаров",
        "новый",
        "структура",
        "конецесли",
        "конец",
        "если",
    ]
    # keywords go as whole words only; function words also as identifier parts
    assert tokenize(code, stopwords=True) == [
        "отказ",
        "возвраттоваров",
        "возврат",
        "товаров",
        "структура",
    ]
    assert tokenize("ЗначениеИзСтроки", stopwords=True) == [
        "значениеизстроки",
        "значение",
        "строки",
    ]
    assert tokenize_query("как отправить письмо из кода", stopwords=True) == [
        "отправить",
        "письмо",
        "кода",
    ]
    assert tokenize_query("Если", stopwords=True) == []
    assert "если" in KEYWORDS and "из" in FUNCTION_WORDS
    # words that also name things in SSL are not stopwords
    assert not {"область", "удаление", "перед", "после", "выполнить", "есть"} & (KEYWORDS | FUNCTION_WORDS)


def test_stemming_applies_to_parts_not_whole_identifiers():
    assert tokenize("ОтправитьПисьмо", stem=True) == ["отправитьписьмо", "отправ", "письм"]
    assert tokenize("Пользователи", stem=True) == ["пользователи", "пользовател"]
    assert tokenize("SendMessages", stem=True) == ["sendmessages", "send", "messag"]
    assert tokenize("Справочник.Пользователи", stem=True)[-1] == "справочник.пользователи"
    # query and document meet on the stem
    assert set(tokenize_query("письма", stem=True)) & set(tokenize("ОтправитьПисьмо", stem=True))


def test_query_tokens_are_unique_in_first_occurrence_order():
    assert tokenize_query("письмо Письмо ПИСЬМО отправить") == ["письмо", "отправить"]
    assert tokenize("письмо Письмо") == ["письмо", "письмо"]


def test_empty_and_punctuation_only():
    assert tokenize("") == []
    assert tokenize_query("  ;;; // () ") == []
    assert tokenize("\ufeff") == []


def test_caches_can_be_dropped_and_results_stay_equal():
    before = tokenize("ОбщегоНазначения.ЗначениеРеквизитаОбъекта")
    clear_caches()
    assert tokenize("ОбщегоНазначения.ЗначениеРеквизитаОбъекта") == before


def test_cache_overflow_clears_and_stays_correct(monkeypatch):
    monkeypatch.setattr(tok, "_CACHE_MAX", 4)
    clear_caches()
    words = [f"Слово{i}Часть" for i in range(20)]
    for w in words:
        assert tokenize(w) == [w.casefold(), "слово", str(int(w[5:-5])), "часть"]
    assert all(len(c) <= 4 for c in tok._compound_caches.values())
    clear_caches()
